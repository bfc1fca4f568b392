import ArgumentParser
import EventLog
import Foundation
@_spi(Tools) import OfflineSync

/// `vaultlog history DIR CIPHER`: one item's story, in words.
struct History: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Explain every event and outcome of one item, in order, in words.",
        discussion: """
        Each line is one event: "seq 12, 2026-01-01 10:00:00Z: edited offline, password changed \
        (based on server revision …)", "seq 20, …: backup of the server copy created as <id> \
        (conflict: …)". With a key the explanation uses the event's body (names, revisions, \
        errors, retry times); an item created offline is followed under its temporary id and its \
        server id alike. Without a key only the kind of each event is known.

        In a compacted store the events before the user's horizon are gone; with a key, the \
        versions of the item kept in the snapshot are shown first, marked [kept in the snapshot].

        The item may be named by its full id, the start of its id, or (with a key) its \
        name; when several items match, they are listed and the command exits with 2.

        Examples:
          vaultlog history store 4f1c2a3b-9d0e-4c1f-8a2b-3c4d5e6f7a8b --user-key-file user.key
          vaultlog history store 4f1c
          vaultlog history store "Bank" --user-key-file user.key
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Argument(help: ArgumentHelp("The item: its cipher id (a temporary id or the server id), the start of one, or its name (with a key); 'vaultlog items' lists them.", valueName: "item"))
    var cipher: String

    @Flag(help: "Show passwords in clear instead of masked.")
    var reveal = false

    @Flag(help: "Print one JSON object per event (JSON Lines) instead of text.")
    var json = false

    @OptionGroup(title: "Key (optional)")
    var key: KeyOptions

    func validate() throws {
        if cipher.isEmpty { throw ValidationError("give the item's cipher id") }
    }

    func run() throws {
        try reportingErrors(storePath: directory) {
            let store = try StoreAccess.openForReading(directory)
            defer { store.close() }
            let (unlocked, users) = try key.unlockForReading(store)
            let cipher = try Self.resolve(self.cipher, store: store, users: users, unlocked: unlocked)

            var records: [EventRecord] = []
            var aliases: Set<String> = [cipher]
            var horizons: [String: UInt64] = [:]
            for user in users {
                let key = unlocked?.userId == user ? unlocked : nil
                if let key { aliases.formUnion(try Self.linkedIds(of: cipher, user: user, store: store, key: key)) }
                let horizon = try store.horizon(userId: user)
                if horizon > 0 {
                    horizons[user] = horizon
                    if let key {
                        records += try aliases.flatMap { try store.keptVersions(userId: user, cipherId: $0) }
                            .map { EventRecord(kept: $0, key: key, reveal: reveal) }
                    }
                }
                let envelopes = try store.log.read { reader in
                    try aliases.flatMap { try reader.sequences(userId: user, cipherId: $0) }.sorted()
                        .compactMap { try reader.envelope(at: $0) }
                }
                records += envelopes.map { EventRecord(envelope: $0, key: key, reveal: reveal) }
            }
            records.sort { $0.sequence < $1.sequence }
            let compactedNote = horizons.sorted { $0.key < $1.key }.map { user, horizon in
                "user \(user)'s log is compacted before sequence \(horizon): older events are gone"
                    + (unlocked?.userId == user ? "; the versions kept in the snapshot are shown" : " (the versions kept in the snapshot need the key)")
            }
            guard !records.isEmpty else {
                for note in compactedNote { Console.note(note) }
                throw CLIError(.problemsFound, "no events for item \(cipher) in \(directory)"
                               + (unlocked == nil ? "" : " for user \(unlocked!.userId)")
                               + "; list the items with 'vaultlog items \(directory)'")
            }
            if json {
                for record in records { try Console.json(record) }
            } else {
                let others = aliases.subtracting([cipher]).sorted()
                Console.out("history of item \(cipher)" + (others.isEmpty ? "" : " (also known as \(others.joined(separator: ", ")))")
                            + ", user \(Set(records.map(\.userId)).sorted().joined(separator: ", ")): \(records.count) event(s)")
                for note in compactedNote { Console.out(note) }
                for record in records { Console.out(record.line) }
            }
            let unreadable = records.filter { $0.bodyError != nil }
            if let first = unreadable.first {
                throw CLIError(.problemsFound, EventRecord.unreadableSummary(count: unreadable.count, first: first.sequence,
                                                                            directory: directory))
            }
        }
    }

    /// The id the user means: `query` itself when events carry it, else the one item of the
    /// store it names (``ItemIndex/find(_:)``: a name, an id prefix). Several matches are a
    /// usage error listing them.
    static func resolve(_ query: String, store: VaultLogStore, users: [String], unlocked: UnlockedUser?) throws -> String {
        let known = try store.log.read { reader in
            try users.contains { try !reader.sequences(userId: $0, cipherId: query).isEmpty }
        }
        if known { return query }
        let found = try ItemIndex(store: store, users: users, unlocked: unlocked).find(query)
        if found.count > 1 {
            let list = found.prefix(20).map { "  " + ItemIndex.line($0, showUser: users.count > 1) }.joined(separator: "\n")
            throw CLIError.usage("'\(query)' matches \(found.count) items; give more of the id (or the full name):\n\(list)"
                                 + (found.count > 20 ? "\n  … and \(found.count - 20) more" : ""))
        }
        guard let only = found.first else { return query }
        Console.note("'\(query)' is item \(only.id)" + (only.name.map { " \"\($0)\"" } ?? ""))
        return only.id
    }

    /// The other ids of the same item: the server id a temporary id was mapped to, or the
    /// temporary ids mapped to a server id (from `idMapped` and `recreated` bodies).
    static func linkedIds(of cipher: String, user: String, store: VaultLogStore, key: UnlockedUser) throws -> Set<String> {
        var linked: Set<String> = []
        let sealing = key.sealingKey
        let mappingTypes: Set<UInt16> = [VaultEventType.idMapped.rawValue, VaultEventType.recreated.rawValue]
        // Only the mapping events are kept, so memory does not grow with the log.
        let mappings = try store.log.read { reader in
            try reader.sequences(userId: user, cipherId: nil).compactMap { sequence -> Envelope? in
                guard let envelope = try reader.envelope(at: sequence), mappingTypes.contains(envelope.header.eventType) else { return nil }
                return envelope
            }
        }
        var pairs: [(temporary: String, serverId: String)] = []
        for envelope in mappings {
            guard let serverId = try? VaultEvent(envelope: envelope, key: sealing).outcome?.serverId else { continue }
            pairs.append((envelope.header.cipherId, serverId))
        }
        // Mappings older than a compaction's horizon live in the snapshot's id map.
        if try store.horizon(userId: user) > 0, let snapshot = try? store.projection(userId: user, at: store.horizon(userId: user)) {
            pairs += snapshot.idMap.map { ($0.key, $0.value) }
        }
        for (temporary, serverId) in pairs {
            if temporary == cipher { linked.insert(serverId) }
            if serverId == cipher { linked.insert(temporary) }
        }
        return linked.subtracting([cipher])
    }
}
