import ArgumentParser
import EventLog
import Foundation
import VaultCrypto
@_spi(Tools) import OfflineSync

/// `vaultlog export DIR [--out FILE]`: the sealed log as JSON Lines.
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every sealed envelope as JSON Lines (for archiving, bug reports, or 'vaultlog import').",
        discussion: """
        Line 1 is metadata: {"format":"vaultlog-export","version":1,"eventCount":N,"lastSequence":S,\
        "accounts":[…],…}. Every following line is one event in sequence order: its header fields \
        (sequence, userId, cipherId, eventType, type, recordedAtMillis, formatVersion) and \
        "envelope", the stored bytes in base64. Envelopes stay sealed: the export holds no \
        plaintext and needs no key. Stored accounts (email, KDF settings, the encrypted user key) \
        are included so an imported copy can be unlocked with --email.
        The export reads one consistent snapshot. Progress is shown on stderr when it is a terminal. \
        Ctrl-C stops it and removes the unfinished FILE.partial (exit 130).

        Examples:
          vaultlog export store --out device.vaultlog.jsonl
          vaultlog export store | gzip > device.vaultlog.jsonl.gz
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Option(help: ArgumentHelp("Write to this file instead of stdout (it must not exist, unless --force).", valueName: "file"))
    var out: String?

    @Flag(help: "Replace the --out file if it exists.")
    var force = false

    func validate() throws {
        if force && out == nil { throw ValidationError("--force only applies with --out") }
    }

    func run() throws {
        try reportingErrors(storePath: directory) {
            let store = try StoreAccess.openForReading(directory)
            defer { store.close() }
            let interruption = Interruption()   // Ctrl-C: the sink's FILE.partial is removed, exit 130
            let sink = try ExportSink(path: out, force: force)
            let progress = ProgressLine("exporting")
            defer { progress.finish() }
            let written = try store.writeExport({ try interruption.check(); try sink.write($0) },
                                                progress: { try interruption.check(); progress.update($0, of: $1) })
            try sink.finish()
            if let out { Console.note("exported \(written) event(s) to \(out)") }
        }
    }
}

/// Where an export goes: stdout, or a file written beside its final name and moved into
/// place only when complete, so a failed export never leaves a truncated file behind.
final class ExportSink {
    private let handle: FileHandle
    private let path: String?
    private let partialPath: String?

    init(path: String?, force: Bool) throws {
        self.path = path
        guard let path else {
            handle = FileHandle.standardOutput
            partialPath = nil
            return
        }
        if FileManager.default.fileExists(atPath: path) && !force {
            throw CLIError.usage("\(path) already exists; choose another --out file or add --force")
        }
        let partial = path + ".partial"
        guard FileManager.default.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]),
              let handle = FileHandle(forWritingAtPath: partial) else {
            throw CLIError.storage("cannot create \(partial): check the directory exists and is writable")
        }
        self.handle = handle
        partialPath = partial
    }

    deinit {
        if let partialPath, path != nil { try? FileManager.default.removeItem(atPath: partialPath) }
    }

    func write(_ chunk: UnsafeRawBufferPointer) throws {
        do {
            try handle.write(contentsOf: chunk)
        } catch {
            throw CLIError.storage("cannot write \(partialPath ?? "stdout"): \(error.localizedDescription)")
        }
    }

    func finish() throws {
        guard let path, let partialPath else { return }
        do {
            try handle.synchronize()
            try handle.close()
            if FileManager.default.fileExists(atPath: path) { try FileManager.default.removeItem(atPath: path) }
            try FileManager.default.moveItem(atPath: partialPath, toPath: path)
        } catch {
            throw CLIError.storage("cannot finish \(path): \(error.localizedDescription)")
        }
    }
}
