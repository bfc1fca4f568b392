import BitwardenAPI
import Foundation
import VaultModel

extension Run {
    // MARK: Reading the server as an observer

    /// Runs `body` with the emulator's injected faults set aside (online, no latency, no random
    /// or scripted failures), then puts them back as they were, scripted failures still to
    /// come: a check that reads the server neither sees an injected failure nor uses one up.
    func withFaultsSetAside<T>(_ body: () async throws -> T) async rethrows -> T {
        guard let faults = emulator?.faults.current else { return try await body() }
        var none = faults
        none.offline = nil; none.latency = 0; none.jitter = 0; none.errorRate = 0; none.scripted = []
        emulator?.faults.apply(none)
        defer { emulator?.faults.apply(faults) }
        return try await body()
    }

    /// Another device's request for item `id` (journal entry `entry`, journaled before it): when
    /// it fails, ``observeApplied(entry:user:id:before:isDelete:)`` marks whether it was applied
    /// all the same, and the error is thrown on.
    func asAnotherDevice<T>(entry: Int, user: User, id: String, before: BitwardenDate?, isDelete: Bool = false,
                            _ request: (BitwardenClient) async throws -> T) async throws -> T {
        do {
            return try await user.onOtherDevice(request)
        } catch {
            await observeApplied(entry: entry, user: user, id: id, before: before, isDelete: isDelete)
            throw error
        }
    }

    /// After another device's request for item `id` failed, whether the server applied it all
    /// the same (an answer lost after the change, or a failure injected in front of it), read
    /// with the faults set aside: a change gave the item a revision other than `before`, a
    /// delete left no item. Marks the journal entry's `applied` (unknown when even that read
    /// fails, or against a remote server, where a retry may yet follow).
    func observeApplied(entry: Int, user: User, id: String, before: BitwardenDate?, isDelete: Bool = false) async {
        guard emulator != nil else { return }
        let read: Result<Cipher, any Error> = await withFaultsSetAside {
            do { return .success(try await user.onOtherDevice { try await $0.getCipher(id: id) }) } catch { return .failure(error) }
        }
        switch read {
        case .success(let copy):
            journal[entry].applied = !isDelete && copy.revisionDate != before
            if journal[entry].applied == true, let after = copy.revisionDate, let before {
                journal[entry].newRevision = outlastsStaleCheck(before: before, after: after)
            }
        case .failure(let error) where error.serverErrorKind == .notFound: journal[entry].applied = isDelete
        case .failure: break
        }
    }

    /// Whether a save based on the copy of revision `before` is refused as out of date once the
    /// item has revision `after`, as the server checks it: Bitwarden tolerates a second either
    /// way; Vaultwarden truncates the difference to whole seconds and refuses only above one.
    func outlastsStaleCheck(before: BitwardenDate, after: BitwardenDate) -> Bool {
        let ticks = after.ticksSince1970 - before.ticksSince1970
        return scenario.flavor == .vaultwarden ? ticks / BitwardenDate.ticksPerSecond > 1 : abs(ticks) > BitwardenDate.ticksPerSecond
    }
}
