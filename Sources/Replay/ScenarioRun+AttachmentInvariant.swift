import BitwardenAPI
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

extension Run {
    // MARK: Invariant 14: no attachment lost by a copy

    /// Invariant 14: every attachment of a version the resolver preserved as a copy is on that
    /// copy on the server, with the same contents: a conflict backup of the local version holds
    /// the attachments of that version (read from the log), a backup of the server's copy the
    /// attachments another device had added to the item by that copy's revision (the journal),
    /// and a re-created item the attachments of the version it re-creates, unless the log names
    /// the attachment as not copied (`attachmentUnavailable`: its file was gone with the item).
    /// Attachments of an item another device or the user deleted afterwards are not followed
    /// (their files may be gone). Copies of items still pending are checked later (their copy
    /// may be half made); the check runs before every compaction (which removes the record of
    /// the copies) and at the end. Appends to ``runViolations``. The check reads the server as an
    /// observer, not as the scenario's device: the emulator's injected faults are set aside while
    /// it runs (and left as they were, scripted failures still to come), so an injected 5xx is
    /// neither reported as a missing copy nor used up by the check.
    func checkAttachmentsOfCopies(when: String) async {
        let attaches = journal.filter { $0.action == .anotherDeviceAttach && $0.applied == true && $0.attachment != nil }
        guard !attaches.isEmpty else { return }
        for user in users where store.isUnlocked(userId: user.userId) {
            do {
                runViolations += try await withFaultsSetAside {
                    try await attachmentViolations(user: user, attaches: attaches.filter { $0.user == user.ref }, when: when)
                }
            } catch {
                runViolations.append("invariant 14: user \(user.ref) \(when): the check could not run: \(error)")
            }
        }
    }

    private func attachmentViolations(user: User, attaches: [ScenarioJournalEntry], when: String) async throws -> [String] {
        guard !attaches.isEmpty else { return [] }
        let projection = try store.projection(userId: user.userId)
        // Each log id of an item to its ref (following the id map, as the observation does).
        var refOf: [String: String] = [:]
        for (ref, entry) in refs where entry.user == user.ref {
            var current = entry.id
            refOf[current] = ref
            for _ in 0..<8 { guard let next = projection.idMap[current], next != current else { break }; refOf[next] = ref; current = next }
        }
        // Followed only while no delete came after the attachment.
        func followed(_ entry: ScenarioJournalEntry) -> Bool {
            !journal.contains { $0.ref == entry.ref && $0.step > entry.step && [.delete, .anotherDeviceDelete].contains($0.action) }
        }
        // Deletes of an item (the user's permanent ones and other devices'), in the journal.
        func deletes(of ref: String) -> Int {
            journal.filter { $0.ref == ref && $0.user == user.ref && [.delete, .anotherDeviceDelete].contains($0.action) }.count
        }
        let contents = Dictionary(attaches.map { ($0.attachment!.fileName, $0.attachment!.contents) }, uniquingKeysWith: { a, _ in a })
        let events = try store.events(userId: user.userId)
        var violations: [String] = []
        for event in events {
            guard let body = event.outcome, projection.pending[event.cipherId] == nil, let ref = refOf[event.cipherId] else { continue }
            var expected: [ScenarioAttachment] = []
            var copyId: String?
            var excused = Set<String>()
            var what = ""
            if event.type == .backupCreated, body.purpose == .backup, let backupId = body.backupId {
                copyId = backupId
                if body.backupOf == .local, let source = body.sourceSequence,
                   let version = try store.event(at: source, userId: user.userId)?.operation?.cipher {
                    what = "the backup of the local version of seq \(source)"
                    let key = try version.fieldKey(userKey: user.userKey)
                    for attachment in version.attachments ?? [] {
                        guard let name = try? attachment.fileName?.decryptString(key: key), let text = contents[name],
                              let entry = attaches.first(where: { $0.attachment?.fileName == name }), followed(entry) else { continue }
                        expected.append(ScenarioAttachment(fileName: name, contents: text))
                    }
                } else if body.backupOf == .server, let revision = body.sourceRevisionDate {
                    what = "the backup of the server copy of revision \(revision)"
                    expected = attaches.filter { $0.ref == ref && followed($0) && ($0.attachedRevision.map { $0 <= revision } ?? false) }
                        .map(\.attachment!)
                }
            } else if event.type == .recreated, let newId = body.serverId,
                      let version = events.last(where: { $0.cipherId == event.cipherId && $0.sequence < event.sequence && $0.type.isOperation })?
                        .operation?.cipher {
                copyId = newId
                what = "the re-created item"
                let key = try version.fieldKey(userKey: user.userKey)
                for attachment in version.attachments ?? [] {
                    guard let name = try? attachment.fileName?.decryptString(key: key), let text = contents[name] else { continue }
                    expected.append(ScenarioAttachment(fileName: name, contents: text))
                    let named = events.contains { $0.cipherId == event.cipherId && $0.type == .attachmentUnavailable
                        && $0.outcome?.attachment?.sourceAttachmentId == attachment.id }
                    if named { excused.insert(name) }
                }
            }
            guard let copyId, !expected.isEmpty else { continue }
            let copy: Cipher
            do {
                copy = try await user.onOtherDevice { try await $0.getCipher(id: copyId) }
            } catch let error as BitwardenAPIError where error.serverErrorKind == .notFound && what == "the re-created item"
                        && deletes(of: ref) > events.filter({ refOf[$0.cipherId] == ref && $0.type == .recreated && $0.sequence <= event.sequence }).count {
                // More deletes of the item than re-creates up to this one: a delete came after
                // this re-create (another device's or the user's), which took the copy and its files.
                continue
            } catch {
                violations.append("invariant 14: \(ref) \(when): \(what) (\(copyId)) is not on the server: \(error)")
                continue
            }
            var held = try await serverAttachments(of: copy, user: user) ?? []
            for want in expected.sorted() {
                if let index = held.firstIndex(of: want) { held.remove(at: index); continue }
                if excused.contains(want.fileName) { continue }
                violations.append("invariant 14: \(ref) \(when): \(what) (\(copyId)) lacks the attachment \(want) (log seq \(event.sequence))")
            }
        }
        return violations
    }
}
