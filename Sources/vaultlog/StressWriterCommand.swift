import ArgumentParser
import Foundation
@_spi(Tools) import OfflineSync
import Replay
import VaultCrypto
import VaultModel
import VaultLogTesting

/// `vaultlog stress-writer DIR --user-key-file F`: the child process of the kill tests
/// (`Docs/Reliability.md`). Saves random offline edits through `VaultRepository` with an
/// unreachable server and prints `ack SEQ CIPHER TYPE` after each one returned, i.e. after its
/// transaction is durable. A parent kills it with SIGKILL at random moments and checks that
/// every acknowledged edit survived. Hidden from `--help`: a tool for tests, not for users.
struct StressWriter: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stress-writer",
        abstract: "Save random offline edits and acknowledge each durable one (kill-test child).",
        shouldDisplay: false
    )

    @Argument(help: ArgumentHelp("The store directory (created if missing).", valueName: "dir"))
    var directory: String

    @Option(name: .customLong("user-key-file"), help: ArgumentHelp("Base64 of the 64-byte user key.", valueName: "file"))
    var userKeyFile: String

    @Option(help: "The user id.")
    var user = "stress-user"

    @Option(help: "Seed of the random edits.")
    var seed: UInt64 = 1

    @Option(help: "Stop after this many edits (0 = until killed).")
    var operations = 0

    @Flag(help: "Edit only items this process created (for several writers on one user).")
    var ownItems = false

    @Flag(help: "After the last edit, print 'holding' and keep the store open without writing until killed (a process that holds the store, such as an idle extension).")
    var hold = false

    @Option(name: .customLong("reopen-after-ms"),
            help: "Close the store after each edit and open it again this many milliseconds later (an extension that opens the store per action).")
    var reopenAfterMilliseconds: Int?

    func run() async throws {
        try await reportingErrorsAsync(storePath: directory) {
            guard let text = try? String(contentsOfFile: userKeyFile, encoding: .utf8),
                  let key = try? SymmetricCryptoKey(base64: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw CLIError.key("\(userKeyFile) does not hold a user key (base64 of 64 bytes)")
            }
            var options = VaultLogStoreOptions()
            options.eventLog.environment.mapSize = 64 * 1024   // start tiny: kills also land during map growth
            options.logger = Console.logger("vaultlog.stress")
            options.eventLog.logger = Console.logger("vaultlog.stress")
            func open() throws -> (VaultLogStore, VaultRepository) {
                let store = try VaultLogStore(path: directory, options: options)
                store.unlock(userId: user, userKey: key)
                return (store, VaultRepository(store: store, userId: user, server: UnreachableServer(), logger: Console.logger("vaultlog.stress")))
            }
            var (store, repository) = try open()
            var rng = SplitMix64(seed: seed)
            var done = 0
            var created: Set<String> = []
            while operations == 0 || done < operations {
                let locals = try store.localCiphers(userId: user).filter { !ownItems || created.contains($0.id ?? "") }
                let roll = rng.next() % 10
                let result: SaveResult
                let cipherId: String
                if locals.isEmpty || roll < 3 {
                    let view = CipherView(type: .login, name: "item \(seed)-\(done)", notes: String(repeating: "n", count: Int(rng.next() % 400)),
                                          login: LoginView(username: "u", password: "p-\(rng.next() % 1000)"))
                    result = try await repository.addCipher(view)
                    guard case .savedOffline(let cipher?, _) = result else { throw CLIError.storage("create was not saved offline: \(result)") }
                    cipherId = cipher.id!
                    created.insert(cipherId)
                } else {
                    let target = locals[Int(rng.next() % UInt64(locals.count))]
                    cipherId = target.id!
                    var view = try target.decrypt(userKey: key)
                    switch roll {
                    case 3...7:
                        view.login?.password = "p-\(rng.next() % 1000)"
                        result = try await repository.updateCipher(view)
                    case 8:
                        result = try await repository.softDeleteCipher(view)
                    default:
                        result = try await repository.deleteCipher(id: cipherId)
                    }
                }
                let sequence: UInt64
                switch result {
                case .savedOffline(_, let s), .discardedLocally(let s): sequence = s
                case .online, .resolved, .noOp: continue
                }
                let type = try store.log.envelope(at: sequence).flatMap { VaultEventType(rawValue: $0.header.eventType) }?.description ?? "?"
                FileHandle.standardOutput.write(Data("ack \(sequence) \(cipherId) \(type)\n".utf8))
                done += 1
                if let pause = reopenAfterMilliseconds {
                    store.close()
                    try await Task.sleep(for: .milliseconds(max(0, pause)))
                    (store, repository) = try open()
                }
            }
            if hold {
                FileHandle.standardOutput.write(Data("holding\n".utf8))
                while true { try await Task.sleep(for: .seconds(3600)) }
            }
            store.close()
        }
    }
}
