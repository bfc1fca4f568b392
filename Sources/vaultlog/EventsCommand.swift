import ArgumentParser
import EventLog
import Foundation
@_spi(Tools) import OfflineSync

/// `vaultlog events DIR`: the log, one event per line, filtered.
struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the events of a store: sequence, time, user, item, type, and with a key the decrypted body.",
        discussion: """
        Without a key only headers are shown (sequence, time, user, item, type). With a key the \
        body of that user's events is decrypted: operations show the item as a redacted summary \
        (name shown, password masked unless --reveal), outcomes show what the resolver did.

        Event types: \(VaultEventType.allCases.map(\.description).joined(separator: ", ")).

        Examples:
          vaultlog events store --cipher 4f1c… --from 100
          vaultlog events store --email me@example.com --password-file pw.txt --type updated --type backupCreated
          vaultlog events store --json | jq -c 'select(.type == "resolutionFailed")'
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Option(help: ArgumentHelp("Only events of this item (cipher id).", valueName: "cipher-id"))
    var cipher: String?

    @Option(help: ArgumentHelp("Only events with this sequence or later.", valueName: "seq"))
    var from: UInt64?

    @Option(help: ArgumentHelp("Only events with this sequence or earlier.", valueName: "seq"))
    var to: UInt64?

    @Option(name: .customLong("type"), help: ArgumentHelp("Only events of this type (repeatable), e.g. updated.", valueName: "type"))
    var types: [String] = []

    @Flag(help: "Show passwords in clear instead of masked.")
    var reveal = false

    @Flag(help: "Print one JSON object per line (JSON Lines) instead of text.")
    var json = false

    @OptionGroup(title: "Key (optional; --user also filters the listing)")
    var key: KeyOptions

    func validate() throws {
        if let from, let to, from > to {
            throw ValidationError("--from \(from) is after --to \(to): nothing could match")
        }
        for name in types where VaultEventType(name: name) == nil {
            throw ValidationError("unknown event type '\(name)'; known types: \(VaultEventType.allCases.map(\.description).joined(separator: ", "))")
        }
    }

    func run() throws {
        try reportingErrors(storePath: directory) {
            let store = try StoreAccess.openForReading(directory)
            defer { store.close() }
            let (unlocked, _) = try key.unlockForReading(store)
            let wanted = Set(types.compactMap { VaultEventType(name: $0)?.rawValue })
            let user = key.user
            var shown = 0
            var unreadable: [UInt64] = []
            // A compacted user's events before the horizon are gone: say so, so a log that starts
            // late is not mistaken for a damaged one.
            for userId in try StoreAccess.userIds(store) where user == nil || user == userId {
                if let snapshot = try store.snapshotInfo(userId: userId), (from ?? 1) <= snapshot.horizon {
                    Console.note("user \(userId)'s log is compacted before sequence \(snapshot.horizon) (\(snapshot.removedEvents) events removed by a retention policy; 'vaultlog history' shows the versions kept)")
                }
            }
            try store.log.forEachEnvelope(from: from ?? 1, to: to ?? .max) { envelope in
                let header = envelope.header
                if let user, header.userId != user { return true }
                if let cipher, header.cipherId != cipher { return true }
                if !wanted.isEmpty, !wanted.contains(header.eventType) { return true }
                let record = EventRecord(envelope: envelope, key: unlocked, reveal: reveal)
                shown += 1
                if record.bodyError != nil { unreadable.append(header.sequence) }
                if json {
                    try Console.json(record)
                } else {
                    // One line per event: the explanation, then who and what it concerns.
                    let context = ["user \(record.userId)"] + (record.cipherId.isEmpty ? [] : ["item \(record.cipherId)"])
                        + ["type \(record.type)"] + (record.bodyError.map { ["body not readable: \($0)"] } ?? [])
                    Console.out("\(record.line) [\(context.joined(separator: ", "))]")
                }
                return true
            }
            if shown == 0 && !json { Console.note("no events match") }
            if let first = unreadable.first {
                throw CLIError(.problemsFound, EventRecord.unreadableSummary(count: unreadable.count, first: first, directory: directory))
            }
        }
    }
}
