import Dispatch
import Foundation

/// `(0..<count).map(transform)`, spread over the cores when `count` reaches `threshold`
/// (results in index order). Used to seal a batch of events before its commit and to open a
/// batch of envelopes for a fold: both are pure per-element work on independent inputs.
///
/// Each result is initialised in place in the returned array's storage: no optional per
/// element, no second array, no copy of large values (a fold's results are enums with big
/// payloads, and moving them through value witnesses was a fifth of the fold's time).
package func parallelMap<T: Sendable>(count: Int, threshold: Int,
                                      _ transform: @Sendable (Int) -> T) -> [T] {
    parallelMap(count: count, threshold: threshold, state: {}) { i, _ in transform(i) }
}

/// ``parallelMap(count:threshold:_:)`` with state of each chunk's own: `state` makes it (on the
/// thread that runs the chunk), and `transform` gets it for every element of the chunk (e.g. a
/// cipher context kept for thousands of elements rather than taken from a shared pool for each).
package func parallelMap<T: Sendable, State>(count: Int, threshold: Int, state: @Sendable () -> State,
                                             _ transform: @Sendable (Int, inout State) -> T) -> [T] {
    guard count >= threshold, processorCount > 1 else {
        var local = state()
        return (0..<count).map { transform($0, &local) }
    }
    return [T](unsafeUninitializedCapacity: count) { buffer, initialized in
        // Each chunk initialises only its own disjoint range; `transform` does not throw, so
        // every element is initialised when `concurrentPerform` returns.
        nonisolated(unsafe) let base = buffer.baseAddress!
        inChunksOnAllCores(count) { range in
            var local = state()
            for i in range { (base + i).initialize(to: transform(i, &local)) }
        }
        initialized = count
    }
}

/// The active processor count, read once: Foundation reads it from `/proc` and the cgroup
/// files on every call, which cost about 6% of a durable save's time when every append asked.
private let processorCount = ProcessInfo.processInfo.activeProcessorCount

/// ``parallelMap(count:threshold:_:)`` for a throwing transform: every element is attempted,
/// and the first error in index order is thrown.
package func parallelMap<T: Sendable>(count: Int, threshold: Int,
                                      _ transform: @Sendable (Int) throws -> T) throws -> [T] {
    try parallelMap(count: count, threshold: threshold) { i in Result { try transform(i) } }
        .map { try $0.get() }
}

/// `for i in 0..<count { body(i) }`, spread over the cores when `count` reaches `threshold`.
/// `body` must touch only what belongs to its own index (sealing a batch writes each event into
/// its own range of one buffer).
package func parallelForEach(count: Int, threshold: Int, _ body: @Sendable (Int) -> Void) {
    guard count >= threshold, processorCount > 1 else {
        for i in 0..<count { body(i) }
        return
    }
    inChunksOnAllCores(count) { range in
        for i in range { body(i) }
    }
}

/// Runs `body` for contiguous chunks of `0..<count` (four per core) spread over the cores;
/// returns when all have run.
private func inChunksOnAllCores(_ count: Int, _ body: @Sendable (Range<Int>) -> Void) {
    let chunks = min(count, processorCount * 4)
    DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
        body((count * chunk / chunks)..<(count * (chunk + 1) / chunks))
    }
}

/// Work started on another thread now and collected later: ``result()`` waits until it has run
/// and gives its value or error (every call the same). Used to overlap two parts of one job: a
/// bulk append seals the next batch while the current one commits, a fold reads its next batch
/// while it applies the current one.
package final class BackgroundWork<T: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    // Written once by the working thread before `done` is signalled, read only after waiting.
    private var outcome: Result<T, any Error>?
    private var waited = false

    package init(_ work: @escaping @Sendable () throws -> T) {
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            outcome = Result { try work() }
            done.signal()
        }
    }

    /// Waits for the work to finish (once; later calls return at once). Call from one thread.
    package func wait() {
        guard !waited else { return }
        done.wait()
        waited = true
    }

    /// The work's value, or its error, once it has finished.
    package func result() throws -> T {
        wait()
        return try outcome!.get()
    }
}
