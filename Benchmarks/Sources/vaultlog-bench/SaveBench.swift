import EventLog
import Foundation
import GRDB
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// Group 1, durable offline save: one offline edit of an existing item made durable, three ways,
/// with the same encrypted payloads (login ciphers encrypted before the clock starts):
/// - `vaultlog`: the local cipher and the sealed `updated` event in one synced LMDB transaction
///   (`VaultLogStore.append(…localChanges:)`, what `VaultRepository` does after encrypting);
/// - `sqlite_seed`: the seed design on SQLite through GRDB (WAL, `synchronous=FULL`): the
///   local-storage upsert of `CipherData`, then the pending-change upsert of
///   `PendingCipherChangeData` (fetch by cipher and user, update keeping `originalRevisionDate`,
///   or insert), two saves as in the seed;
/// - `two_flush_floor`: LMDB's own floor for one durable commit: a 4 KiB data page written and
///   `fdatasync`ed, then one 4 KiB meta page written through an `O_DSYNC` descriptor (the two
///   device flushes every durable LMDB commit makes, in that order);
/// - `fdatasync`: one flush, the same bytes VaultLog writes (cipher JSON + envelope) appended
///   to a file and `fdatasync`ed (what a single-flush design would pay);
/// - `lmdb_commit_same_shape`: the same records a save commits, in one LMDB transaction through
///   the `LMDB` module, with no crypto and no encoding (``CommitShapeFloor``): the engine's floor.
/// Then the save's parts, each timed alone over the same versions: the cipher's encryption (which
/// the repository does before the append, outside `durable_save`), the body's encoding, the
/// event's sealing; the rest of a save's p50 beyond the commit and those two is the engine's own.
func runSaveBench(quick: Bool, results: Results) throws {
    let opsPerRound = quick ? 150 : 500
    let rounds = quick ? 3 : 7
    let items = 100
    progress("durable save: \(rounds) rounds × \(opsPerRound) saves per contender, interleaved")

    let key = SymmetricCryptoKey.generate()
    let userId = "5e1f0c3a-7d42-4b8e-9f10-aa0000000001"
    let versions: [[Cipher]] = try (0..<items).map { n in try loginVersions(name: "Bank account \(n)", n: n, key: key) }

    return try withScratchDirectory("save") { dir in
        // VaultLog.
        let store = try VaultLogStore(path: dir + "/vaultlog")
        store.unlock(userId: userId, userKey: key)
        var vaultlogLatencies: [Double] = []
        var vaultlogOp = 0
        // SQLite, the seed design.
        let sqlite = try SeedSQLiteStore(path: dir + "/seed.sqlite")
        var sqliteLatencies: [Double] = []
        var sqliteOp = 0
        // The floor.
        let floor = try FsyncFile(path: dir + "/floor.bin")
        var floorLatencies: [Double] = []
        let floorBytes = try versions.flatMap { try $0.map { cipher in
            Array(try JSONEncoder().encode(cipher)) + [UInt8](repeating: 0x5A, count: try sealedSize(of: cipher))
        } }
        var floorOp = 0
        let twoFlush = try TwoFlushFloor(directory: dir)
        var twoFlushLatencies: [Double] = []
        let shape = try CommitShapeFloor(directory: dir + "/shape", userId: userId,
                                         eventSizes: try versions.flatMap { try $0.map(sealedSize(of:)) },
                                         items: try versions.map { ($0[0].id!, Array(try JSONEncoder().encode($0[0]))) })
        var shapeLatencies: [Double] = []
        var shapeOp = 0

        let stats = try interleave(rounds: rounds, [
            ("vaultlog", {
                try rate(ops: opsPerRound, latencies: &vaultlogLatencies) {
                    let cipher = versions[vaultlogOp % items][(vaultlogOp / items) % 2]
                    vaultlogOp += 1
                    try store.append(userId: userId, cipherId: cipher.id!, type: .updated,
                                     body: .operation(OperationBody(cipher: cipher, passwordChanged: true,
                                                                    baseRevisionDate: cipher.revisionDate, at: BitwardenDate(Date()))),
                                     localChanges: [.upsert(cipher)])
                }
            }),
            ("sqlite_seed", {
                try rate(ops: opsPerRound, latencies: &sqliteLatencies) {
                    let cipher = versions[sqliteOp % items][(sqliteOp / items) % 2]
                    sqliteOp += 1
                    try sqlite.saveOffline(cipher, userId: userId, passwordChanged: true)
                }
            }),
            ("fdatasync", {
                try rate(ops: opsPerRound, latencies: &floorLatencies) {
                    try floor.appendDurably(floorBytes[floorOp % floorBytes.count])
                    floorOp += 1
                }
            }),
            ("two_flush_floor", {
                try rate(ops: opsPerRound, latencies: &twoFlushLatencies) { try twoFlush.commit() }
            }),
            ("lmdb_commit_same_shape", {
                try rate(ops: opsPerRound, latencies: &shapeLatencies) {
                    try shape.commit(shapeOp)
                    shapeOp += 1
                }
            }),
        ])
        let sealingKey = try store.sealingKey(userId: userId)
        store.close()
        shape.close()
        let parts = try saveParts(versions: versions, key: key, sealingKey: sealingKey, userId: userId, count: quick ? 600 : 2000)

        let v = stats["vaultlog"]!, s = stats["sqlite_seed"]!, f = stats["fdatasync"]!, t = stats["two_flush_floor"]!
        func ms(_ values: [Double], _ p: Double) -> Double { percentile(values, p) * 1000 }
        let p50 = ms(vaultlogLatencies, 0.5), p99 = ms(vaultlogLatencies, 0.99)
        let extra = ["ops_per_round": "\(opsPerRound)", "items": "\(items)"]
        results.add(Figure(group: "save", bench: "durable_save", metric: "throughput", unit: "ops/s", value: v,
                           baseline: "sqlite_seed", baselineValue: s, ratio: v.median / s.median, target: .ratioAtLeast(1.5), extra: extra))
        results.add(Figure(group: "save", bench: "durable_save_vs_two_flush_floor", metric: "throughput", unit: "ops/s", value: v,
                           baseline: "two_flush_floor", baselineValue: t, ratio: v.median / t.median,
                           extra: extra.merging(["one_fdatasync_ops_s": json(f.median)]) { a, _ in a }))
        // Latency ratios read "lower is better": VaultLog over the floor.
        let floorP50 = ms(twoFlushLatencies, 0.5)
        results.add(Figure(group: "save", bench: "durable_save_p50", metric: "latency_p50", unit: "ms", value: Stats(values: [p50]),
                           baseline: "two_flush_floor", baselineValue: Stats(values: [floorP50]), ratio: p50 / floorP50,
                           target: .ratioAtMost(1.15),
                           extra: ["sqlite_seed_p50_ms": json(ms(sqliteLatencies, 0.5)), "one_fdatasync_p50_ms": json(ms(floorLatencies, 0.5)),
                                   "saves": "\(vaultlogLatencies.count)"]))
        let shapeP50 = ms(shapeLatencies, 0.5)
        let other = p50 - shapeP50 - parts.encode - parts.seal
        results.add(Figure(group: "save", bench: "durable_save_p50_vs_lmdb_commit_same_shape", metric: "latency_p50", unit: "ms",
                           value: Stats(values: [p50]), baseline: "lmdb_commit_same_shape_p50", baselineValue: Stats(values: [shapeP50]),
                           ratio: p50 / shapeP50, target: .ratioAtMost(1.5),
                           extra: ["lmdb_commit_same_shape_ops_s": json(stats["lmdb_commit_same_shape"]!.median),
                                   "lmdb_commit_same_shape_p99_ms": json(ms(shapeLatencies, 0.99)),
                                   "part_encrypt_ms": json(parts.encrypt), "part_encode_ms": json(parts.encode),
                                   "part_seal_ms": json(parts.seal), "part_commit_ms": json(shapeP50),
                                   "part_rest_ms": json(other)]))
        results.add(Figure(group: "save", bench: "durable_save_p99", metric: "latency_p99", unit: "ms", value: Stats(values: [p99]),
                           baseline: "vaultlog_p50", baselineValue: Stats(values: [p50]), ratio: p99 / p50, target: .ratioAtMost(2.5),
                           extra: ["two_flush_floor_p99_ms": json(ms(twoFlushLatencies, 0.99)),
                                   "two_flush_floor_p99_over_p50": json(ms(twoFlushLatencies, 0.99) / floorP50),
                                   "sqlite_seed_p99_ms": json(ms(sqliteLatencies, 0.99)), "p999_ms": json(ms(vaultlogLatencies, 0.999)),
                                   "max_ms": json(ms(vaultlogLatencies, 1))]))
    }
}

/// LMDB's floor for one durable commit, without LMDB: a data page written and `fdatasync`ed,
/// then a meta page written through an `O_DSYNC` descriptor, the two meta pages alternating
/// as LMDB's do. Data pages rotate over 64 slots so each commit writes a page not yet flushed.
final class TwoFlushFloor {
    let data: Int32
    let meta: Int32
    private var commits = 0
    private let page = [UInt8](repeating: 0xA5, count: 4096)

    init(directory: String) throws {
        data = open(directory + "/floor-data.bin", O_RDWR | O_CREAT, 0o600)
        meta = open(directory + "/floor-meta.bin", O_RDWR | O_CREAT | O_DSYNC, 0o600)
        guard data >= 0, meta >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    deinit {
        close(data)
        close(meta)
    }

    func commit() throws {
        commits += 1
        let ok = page.withUnsafeBytes { p -> Bool in
            pwrite(data, p.baseAddress, 4096, off_t((commits % 64) * 4096)) == 4096 && fdatasync(data) == 0
                && pwrite(meta, p.baseAddress, 4096, off_t((commits % 2) * 4096)) == 4096
        }
        guard ok else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }
}

/// Two encrypted versions of one login item `n` (same id; the password changes between them):
/// what a save bench writes, alternating.
func loginVersions(name: String, n: Int, key: SymmetricCryptoKey) throws -> [Cipher] {
    let id = UUID().uuidString.lowercased()
    return try (0..<2).map { v in
        var view = CipherView(type: .login, name: name, notes: "Security questions: first pet Rex, street Elm",
                              login: LoginView(username: "user\(n)@example.com", password: "correct horse battery \(name)-\(v)",
                                               uris: [LoginUriView(uri: "https://site\(n).example.com/login")]))
        view.id = id
        view.revisionDate = BitwardenDate(Date(timeIntervalSince1970: 1_767_225_600))
        return try view.encrypt(userKey: key)
    }
}

/// The size of the envelope VaultLog stores for an `updated` event of `cipher`.
private func sealedSize(of cipher: Cipher) throws -> Int {
    let body = try JSONEncoder().encode(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: cipher.revisionDate,
                                                      at: BitwardenDate(Date())))
    return 20 + 2 + 72 + 16 + 32 + (body.count / 16 + 1) * 16
}

/// Runs `ops` operations, recording each one's latency; returns operations per second.
private func rate(ops: Int, latencies: inout [Double], _ op: () throws -> Void) throws -> Double {
    let start = ContinuousClock.now
    for _ in 0..<ops {
        let t = ContinuousClock.now
        try op()
        latencies.append(seconds(ContinuousClock.now - t))
    }
    return Double(ops) / seconds(ContinuousClock.now - start)
}

/// The seed's storage on SQLite: `CipherData` (the local vault cache) and
/// `PendingCipherChangeData` (one record per cipher and user), written as the seed writes them.
final class SeedSQLiteStore {
    let queue: DatabaseQueue

    init(path: String) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS CipherData (
                    id TEXT NOT NULL, userId TEXT NOT NULL, modelData BLOB NOT NULL,
                    PRIMARY KEY (userId, id));
                CREATE TABLE IF NOT EXISTS PendingCipherChangeData (
                    id TEXT PRIMARY KEY NOT NULL, cipherId TEXT NOT NULL, userId TEXT NOT NULL,
                    changeTypeRaw INTEGER NOT NULL, cipherData BLOB, originalRevisionDate REAL,
                    createdDate REAL NOT NULL, updatedDate REAL NOT NULL, offlinePasswordChangeCount INTEGER NOT NULL,
                    UNIQUE (userId, cipherId));
                """)
        }
    }

    /// `handleOfflineUpdate`'s writes: the local upsert, then the pending-change upsert.
    func saveOffline(_ cipher: Cipher, userId: String, passwordChanged: Bool) throws {
        let id = cipher.id!
        let model = Array(try JSONEncoder().encode(cipher))
        try queue.write { db in
            try db.execute(sql: "INSERT INTO CipherData (id, userId, modelData) VALUES (?, ?, ?) ON CONFLICT(userId, id) DO UPDATE SET modelData = excluded.modelData",
                           arguments: [id, userId, Data(model)])
        }
        let details = Data(try JSONEncoder().encode(cipher))
        let now = Date().timeIntervalSince1970
        try queue.write { db in
            let existing = try Row.fetchOne(db, sql: "SELECT id, offlinePasswordChangeCount FROM PendingCipherChangeData WHERE cipherId = ? AND userId = ?",
                                            arguments: [id, userId])
            if let existing {
                let count: Int = existing["offlinePasswordChangeCount"]
                try db.execute(sql: "UPDATE PendingCipherChangeData SET cipherData = ?, changeTypeRaw = ?, updatedDate = ?, offlinePasswordChangeCount = ? WHERE id = ?",
                               arguments: [details, 1, now, count + (passwordChanged ? 1 : 0), existing["id"] as String])
            } else {
                try db.execute(sql: """
                    INSERT INTO PendingCipherChangeData (id, cipherId, userId, changeTypeRaw, cipherData, originalRevisionDate, createdDate, updatedDate, offlinePasswordChangeCount)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [UUID().uuidString, id, userId, 1, details, cipher.revisionDate?.date.timeIntervalSince1970, now, now, passwordChanged ? 1 : 0])
            }
        }
    }
}

/// An append-only file made durable with `fdatasync` after every write.
final class FsyncFile {
    let fd: Int32

    init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    deinit { close(fd) }

    func appendDurably(_ bytes: [UInt8]) throws {
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, fdatasync(fd) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }
}

/// Medians (ms) of a save's parts, each timed alone `count` times over `versions`: the cipher's
/// encryption from its view, the operation body's encoding, the event's sealing.
private func saveParts(versions: [[Cipher]], key: SymmetricCryptoKey, sealingKey: SealingKey, userId: String,
                       count: Int) throws -> (encrypt: Double, encode: Double, seal: Double) {
    let ciphers = versions.flatMap { $0 }
    let views = try ciphers.map { try $0.decrypt(userKey: key) }
    let bodies = ciphers.map { cipher in
        VaultEvent.Body.operation(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: cipher.revisionDate,
                                                at: BitwardenDate(Date())))
    }
    let encoded = try bodies.map { try VaultEvent.storedBody($0) }
    let iv = [UInt8](repeating: 7, count: 16)[...]
    func median(_ op: (Int) throws -> Void) rethrows -> Double {
        var times: [Double] = []
        for i in 0..<count {
            let t = ContinuousClock.now
            try op(i % ciphers.count)
            times.append(seconds(ContinuousClock.now - t))
        }
        return percentile(times, 0.5) * 1000
    }
    let encrypt = try median { _ = try views[$0].encrypt(userKey: key) }
    let encode = try median { _ = try VaultEvent.storedBody(bodies[$0]) }
    let seal = try median { i in
        let header = EventHeader(sequence: UInt64(i + 1), userId: userId, cipherId: ciphers[i].id!, eventType: 2,
                                 recordedAtMillis: 1_767_225_600_000)
        _ = try Envelope.seal(header: header, body: encoded[i], key: sealingKey, iv: iv)
    }
    return (encrypt, encode, seal)
}
