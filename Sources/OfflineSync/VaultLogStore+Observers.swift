import Dispatch
import EventLog
import Foundation
import Synchronization

extension VaultLogStore {
    // MARK: Pending count stream

    /// A stream of the user's pending count (for a UI badge): the current count first, then
    /// the new count whenever a commit changes it, made by this process or by another process
    /// that has the store open (an app and its extension).
    ///
    /// Never the same value twice in a row, and never an older state after a newer one: a
    /// consumer slower than the changes gets the newest count, not a backlog. This process's
    /// own saves show at once; another process's commits within about 250 ms (while a stream
    /// is in use, the store's commit id is read every 250 ms: a read transaction of a few
    /// microseconds; the count is folded again only after a commit).
    /// No watching happens while no stream is in use. Reading never writes: the counts are
    /// folded from the headers in read transactions (no pending checkpoint is saved).
    ///
    /// The stream ends when its task is cancelled or the store is closed.
    public func pendingCountUpdates(userId: String) -> AsyncStream<Int> {
        let subscription = observers.subscribe(userId: userId, watching: .pendingCount) { [weak self] in self?.refreshObservers(force: false) }
        refreshObservers(force: true)
        return AsyncStream(unfolding: { await subscription.next() }, onCancel: { subscription.finish() })
    }

    /// A stream that yields the store's commit id now and after every later commit, made by
    /// this process or by another process that has the store open: the signal to read state
    /// again (a sync status, new resolution records). Same watching and delivery rules as
    /// ``pendingCountUpdates(userId:)``: within about 250 ms for another process's commits,
    /// never the same commit twice, the newest one to a slow consumer. `userId` names the
    /// account the consumer reads (commits of other accounts may wake it too).
    ///
    /// The stream ends when its task is cancelled or the store is closed.
    public func commitUpdates(userId: String) -> AsyncStream<UInt64> {
        let subscription = observers.subscribe(userId: userId, watching: .commit) { [weak self] in self?.refreshObservers(force: false) }
        refreshObservers(force: true)
        return AsyncStream(unfolding: { await subscription.next().map { UInt64(bitPattern: Int64($0)) } },
                           onCancel: { subscription.finish() })
    }

    /// After a commit of this process that may change a pending count: refreshes every stream
    /// (the `userId` of the change does not matter; the other users' counts are read at the
    /// same commit).
    func notifyObservers(userId: String) {
        refreshObservers(force: false)
    }

    /// Reads every subscribed user's pending count at the newest commit, unless that commit was
    /// read already (`force`: read anyway, for a new stream), and offers the counts to the
    /// streams. Serialised, so the commits read only grow.
    func refreshObservers(force: Bool) {
        observers.refresh(force: force) { users in
            try log.read { reader -> (UInt64, [String: Int]) in
                var counts: [String: Int] = [:]
                for user in users { counts[user] = try headerProjection(reader, userId: user).projection.count }
                return (reader.commitID, counts)
            }
        } failed: { error in
            logger.warning("could not read the pending count for its stream", metadata: ["error": "\(error)"])
        }
    }
}

/// The pending-count streams of one store and the watcher that finds commits made by other
/// processes: while at least one stream is in use, a timer every ``pollInterval`` reads the
/// store's newest commit id (one short read transaction) and refolds the counts when it
/// changed. LMDB has no change notification across processes, and a file watch would see the
/// data file's writes before the commit that makes them visible; a commit id is exact.
final class PendingCountObservers: Sendable {
    /// How often the watcher looks for other processes' commits while a stream is in use.
    static let pollInterval: DispatchTimeInterval = .milliseconds(250)

    private struct Registry {
        var subscriptions: [UUID: WeakSubscription] = [:]
        var timer: TimerBox?
    }

    private struct WeakSubscription {
        weak var subscription: PendingCountSubscription?
    }

    /// The refresh state: the commit read last; closed when the store closed.
    private struct Refresh {
        var commit: UInt64?
        var closed = false
    }

    private let registry = Mutex(Registry())
    private let refreshState = Mutex(Refresh())
    private let queue = DispatchQueue(label: "vaultlog.pending-count-watcher")

    /// Registers a stream of `userId`'s count and starts the watcher if it is the first;
    /// `poll` is what the watcher runs.
    func subscribe(userId: String, watching: PendingCountSubscription.Watched,
                   poll: @escaping @Sendable () -> Void) -> PendingCountSubscription {
        let subscription = PendingCountSubscription(userId: userId, watching: watching) { [weak self] token in self?.unsubscribe(token) }
        let closed = refreshState.withLock { $0.closed }
        guard !closed else {
            subscription.finish()
            return subscription
        }
        let timer = registry.withLock { registry -> TimerBox? in
            registry.subscriptions[subscription.token] = WeakSubscription(subscription: subscription)
            guard registry.timer == nil else { return nil }
            let timer = TimerBox(queue: queue, interval: Self.pollInterval, handler: poll)
            registry.timer = timer
            return timer
        }
        timer?.start()
        return subscription
    }

    private func unsubscribe(_ token: UUID) {
        let timer = registry.withLock { registry -> TimerBox? in
            registry.subscriptions[token] = nil
            registry.subscriptions = registry.subscriptions.filter { $0.value.subscription != nil }
            guard registry.subscriptions.isEmpty else { return nil }
            defer { registry.timer = nil }
            return registry.timer
        }
        timer?.stop()
    }

    /// The live streams.
    private func live() -> [PendingCountSubscription] {
        registry.withLock { $0.subscriptions.values.compactMap(\.subscription) }
    }

    /// See ``VaultLogStore/refreshObservers(force:)``: `read` returns the commit id and the
    /// counts of the users given.
    func refresh(force: Bool, read: ([String]) throws -> (UInt64, [String: Int]), failed: (any Error) -> Void) {
        let streams = live()
        guard !streams.isEmpty else { return }
        refreshState.withLock { state in
            guard !state.closed else { return }
            do {
                let users = Array(Set(streams.map(\.userId)))
                let (commit, counts) = try read(users)
                guard force || commit != state.commit else { return }
                state.commit = commit
                for stream in streams {
                    switch stream.watching {
                    case .pendingCount: if let count = counts[stream.userId] { stream.offer(count) }
                    case .commit: stream.offer(Int(Int64(bitPattern: commit)))
                    }
                }
            } catch {
                failed(error)
            }
        }
    }

    /// Ends every stream and stops the watcher, after any refresh in progress; later
    /// refreshes do nothing. Called before the store closes.
    func close() {
        refreshState.withLock { $0.closed = true }
        for stream in live() { stream.finish() }
        let timer = registry.withLock { registry -> TimerBox? in
            defer { registry.timer = nil }
            return registry.timer
        }
        timer?.stop()
    }
}

/// The watcher's repeating timer (a dispatch source, which is not `Sendable` itself).
private final class TimerBox: @unchecked Sendable {
    private let source: DispatchSourceTimer

    init(queue: DispatchQueue, interval: DispatchTimeInterval, handler: @escaping @Sendable () -> Void) {
        source = DispatchSource.makeTimerSource(queue: queue)
        source.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(20))
        source.setEventHandler(handler: handler)
    }

    deinit { source.cancel() }

    func start() { source.resume() }
    func stop() { source.cancel() }
}

/// One pending-count (or commit) stream: the newest value offered and the last one handed to its
/// consumer. The consumer gets a value only when it differs from the last one it got, and
/// always the newest (a value offered while it was busy replaces the one before).
final class PendingCountSubscription: Sendable {
    /// What the stream delivers.
    enum Watched: Sendable {
        /// The user's pending count.
        case pendingCount
        /// The store's commit id (as bits of an `Int`).
        case commit
    }

    let userId: String
    let watching: Watched
    let token = UUID()

    private struct State {
        var latest: Int?
        var delivered: Int?
        var waiter: CheckedContinuation<Int?, Never>?
        var finished = false
    }

    private let state = Mutex(State())
    private let ended: @Sendable (UUID) -> Void

    init(userId: String, watching: Watched, ended: @escaping @Sendable (UUID) -> Void) {
        self.userId = userId
        self.watching = watching
        self.ended = ended
    }

    deinit { ended(token) }

    /// Offers the current count; wakes a waiting consumer when it is new to it.
    func offer(_ value: Int) {
        let woken = state.withLock { state -> CheckedContinuation<Int?, Never>? in
            guard !state.finished else { return nil }
            state.latest = value
            guard value != state.delivered, let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.delivered = value
            return waiter
        }
        woken?.resume(returning: value)
    }

    /// The next value for the consumer (waiting for one that differs from the last), or nil
    /// once finished.
    func next() async -> Int? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
                let now = state.withLock { state -> Int?? in
                    if state.finished { return .some(nil) }
                    if let latest = state.latest, latest != state.delivered {
                        state.delivered = latest
                        return .some(latest)
                    }
                    // One consumer at a time (as for any AsyncStream): a second waiter ends the first.
                    let previous = state.waiter
                    state.waiter = continuation
                    previous?.resume(returning: nil)
                    return .none
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            finish()
        }
    }

    /// Ends the stream: a waiting consumer gets nil, later calls of ``next()`` too.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<Int?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
        ended(token)
    }
}
