import Foundation
@_spi(Tools) import OfflineSync
import Synchronization

/// The status streams of one vault: each gets a value only when it differs from the last one
/// it was given (newest first to a slow consumer), and a watcher task turns the store's commits
/// (this process's and other processes') into fresh statuses.
final class StatusHub: Sendable {
    private struct Subscriber {
        let continuation: AsyncStream<SyncStatus>.Continuation
        var last: SyncStatus?
    }

    private struct State {
        var subscribers: [UUID: Subscriber] = [:]
        var watcher: Task<Void, Never>?
        var closed = false
    }

    private let state = Mutex(State())

    /// A new stream that starts with `initial`.
    func subscribe(initial: SyncStatus) -> AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: SyncStatus.self, bufferingPolicy: .bufferingNewest(1))
        let token = UUID()
        let open = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.subscribers[token] = Subscriber(continuation: continuation, last: initial)
            return true
        }
        continuation.yield(initial)
        guard open else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: token) }
        }
        return stream
    }

    /// Offers `status` to every stream whose last value differs.
    func publish(_ status: SyncStatus) {
        let targets = state.withLock { state -> [AsyncStream<SyncStatus>.Continuation] in
            var targets: [AsyncStream<SyncStatus>.Continuation] = []
            for (token, subscriber) in state.subscribers where subscriber.last != status {
                state.subscribers[token]?.last = status
                targets.append(subscriber.continuation)
            }
            return targets
        }
        for continuation in targets { continuation.yield(status) }
    }

    /// Refreshes the streams after every commit to `store` (replacing an earlier watcher).
    /// One refresh at a time, in commit order.
    func watch(store: VaultLogStore, userId: String, refresh: @escaping @Sendable () async -> Void) {
        let task = Task.detached {
            for await _ in store.commitUpdates(userId: userId) { await refresh() }
        }
        let previous = state.withLock { state -> Task<Void, Never>? in
            defer { state.watcher = task }
            return state.watcher
        }
        previous?.cancel()
    }

    /// Ends every stream and the watcher.
    func finishAll() {
        let (subscribers, watcher) = state.withLock { state -> ([Subscriber], Task<Void, Never>?) in
            state.closed = true
            defer {
                state.subscribers = [:]
                state.watcher = nil
            }
            return (Array(state.subscribers.values), state.watcher)
        }
        watcher?.cancel()
        for subscriber in subscribers { subscriber.continuation.finish() }
    }
}
