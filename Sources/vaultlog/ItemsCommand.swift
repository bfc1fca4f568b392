import ArgumentParser
import Foundation
@_spi(Tools) import OfflineSync

/// `vaultlog items DIR`: the items in a store, to find the one to look at.
struct Items: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the items in a store: id, name, type, folder and pending state.",
        discussion: """
        One line per item: the local copies (what the app shows) and pending items that no \
        longer have one (a permanent delete waiting for the server). With a key the name is \
        decrypted and the list is sorted by it; without a key only ids, types, folders and \
        pending states are shown (they are stored in clear), for every user. Use an id, an id \
        prefix or a name with 'vaultlog history'.

        Examples:
          vaultlog items store
          vaultlog items store --user-key-file user.key --json
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Flag(help: "Only items with changes waiting for the server.")
    var pending = false

    @Flag(help: "Print one JSON object per item (JSON Lines) instead of text.")
    var json = false

    @OptionGroup(title: "Key (optional)")
    var key: KeyOptions

    func run() throws {
        try reportingErrors(storePath: directory) {
            let store = try StoreAccess.openForReading(directory)
            defer { store.close() }
            let (unlocked, users) = try key.unlockForReading(store)
            var entries = try ItemIndex(store: store, users: users, unlocked: unlocked).entries
            if pending { entries = entries.filter { $0.pending != nil } }
            if json {
                for entry in entries { try Console.json(entry) }
                return
            }
            let pendingCount = entries.filter { $0.pending != nil }.count
            Console.out("\(entries.count) item(s)" + (pending ? " with pending changes" : ", \(pendingCount) pending")
                        + (users.count == 1 ? ", user \(users[0])" : ", \(users.count) users"))
            for entry in entries { Console.out("  " + ItemIndex.line(entry, showUser: users.count > 1)) }
        }
    }
}
