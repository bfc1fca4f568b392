import ArgumentParser
import EventLog
import Foundation

/// `vaultlog upgrade DIR`: upcasts a store written by an older VaultLog to this build's format.
struct Upgrade: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upcast a store written by an older VaultLog to this build's store format, in place.",
        discussion: """
        Reading commands open a store read-only and refuse one of an older format; any open \
        with write access upcasts it, and this command does only that. The upcast is one \
        transaction: a crash during it leaves the old store as it was. Needs no key; events \
        are not rewritten.

        Example:
          vaultlog upgrade ~/Library/VaultLog
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    func run() throws {
        try reportingErrors(storePath: directory) {
            try StoreAccess.requireStore(at: directory)
            var readOnly = EventLogOptions()
            readOnly.environment.readOnly = true
            readOnly.environment.createDirectory = false
            var found: Int?
            do {
                try EventLogStore(path: directory, options: readOnly).close()
            } catch EventLogError.olderStoreFormat(_, let version, _) {
                found = version
            }
            guard let found else {
                print("\(directory): store format v\(EventLogStore.storeFormatVersion) already; nothing to do")
                return
            }
            var options = EventLogOptions()
            options.environment.createDirectory = false
            let store = try EventLogStore(path: directory, options: options)
            defer { store.close() }
            print("\(directory): upcast from store format v\(found) to v\(try store.storedFormatVersion())")
        }
    }
}
