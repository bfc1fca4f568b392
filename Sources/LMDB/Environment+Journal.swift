import CLMDB
import Foundation
import Synchronization

/// The journal's part in a write transaction (see ``Journal``). Every step runs inside a write
/// transaction, so LMDB's writer lock keeps every other writer, in any process, out of it.
extension Environment {
    /// Called right after a write transaction `txn` began: reads the journal's header, finds
    /// where the records end, and marks a checkpoint due when the records cannot take this
    /// commit's (there are none yet, a commit was made without one, the pin is gone, the
    /// journal is full); ``journalCommit(_:)`` makes it before the record. A writer that does
    /// not journal makes one here when records are pending. Returns the recorder for this
    /// transaction's changes (nil: this environment does not journal).
    func journalBegin(_ txn: OpaquePointer) throws -> JournalRecorder? {
        guard let journal else { return nil }
        journal.checkpointDue = false
        let id = UInt64(mdb_txn_id(txn))
        let (_, inode, pageSize) = try dataFileIdentity()
        guard let header = journal.currentHeader(), header.dataInode == inode, header.pageSize == pageSize else {
            // No records of this file: a writer that does not journal has nothing to do.
            guard journals else { return nil }
            journal.records = 0
            journal.checkpointDue = true
            return JournalRecorder(limit: Journal.largestRecord)
        }
        if header.generation != journal.generation || journal.lastTxn != id &- 1 {
            let known = header.generation == journal.generation && journal.lastTxn < id &- 1
            let scanned = try Journal.scan(fd: journal.fd, header: header, from: known ? journal.end : Journal.recordsStart,
                                       previous: known ? journal.lastTxn : nil, before: id)
            journal.records = (known ? journal.records : 0) + scanned.count
            journal.generation = header.generation
            journal.end = scanned.end
            journal.lastTxn = scanned.last
        }
        if !journals {
            // Records pending: flushed and ended first, so that a recovery never replays
            // them across this writer's commits, which have none.
            if journal.records > 0 { try checkpoint(journal, pinned: false) }
            return nil
        }
        // A commit made without a record, a lost pin, a full journal: the commit's record
        // needs a checkpoint first (made at commit, where a bulk write may turn out not to).
        journal.checkpointDue = journal.lastTxn != id &- 1 || !pinProtects(journal, header)
            || journal.records >= max(1, options.journalCheckpointInterval) || journal.end >= Journal.capacity
        return JournalRecorder(limit: Journal.largestRecord)
    }

    /// Makes transaction `txn`'s changes durable before LMDB commits them without a flush:
    /// appends and flushes their record, after a checkpoint when one is due. A transaction too
    /// large for a record gets a checkpoint only if records are pending (so that a recovery
    /// never replays them over it), and is committed by LMDB with its own two flushes
    /// (``commitFlushedByLMDB(_:)``).
    func journalCommit(_ txn: Transaction) throws {
        guard let journal, let recorder = txn.recorder, !recorder.isEmpty else { return }
        if recorder.overflowed {
            if journal.records > 0 { try checkpoint(journal, pinned: true) }
            return
        }
        if journal.checkpointDue
            || journal.end + Int64(recorder.bytes.count + Journal.recordHeaderSize + 4) > Journal.capacity {
            try checkpoint(journal, pinned: true)
        }
        try journal.append(txn: UInt64(mdb_txn_id(txn.raw)), body: recorder.bytes)
        if failNextJournaledCommit.exchange(false, ordering: .relaxed) {
            journal.generation = 0  // the record stays, as after a process killed here
            throw LMDBError(code: EIO, operation: "mdb_txn_commit (test: the commit after the journal record fails)")
        }
    }

    /// Commits `txn` in LMDB: without a flush when its record is in the journal; one that got
    /// no record (too large) with LMDB's own flushes, data pages before the meta page (a flush
    /// of both at once could leave the meta page on disk without its pages), by turning
    /// `MDB_NOSYNC` off for it (LMDB keeps its synchronous descriptor for the meta page open
    /// for this).
    func commitFlushedByLMDB(_ txn: Transaction) -> Int32 {
        if failNextLMDBCommit.exchange(false, ordering: .relaxed) {
            mdb_txn_abort(txn.raw)   // the handle is freed, as after a failed commit
            return EIO
        }
        guard journal != nil, let recorder = txn.recorder, recorder.overflowed else { return mdb_txn_commit(txn.raw) }
        mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 0)
        defer { mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 1) }
        return mdb_txn_commit(txn.raw)
    }

    /// The commit of transaction `id` (`txn`'s, read while its handle was valid: a failed
    /// `mdb_txn_commit` frees it) failed after its record was appended: the record must never
    /// be replayed, so its magic is cleared (best effort), and what this process knows of the
    /// records is read again by the next writer.
    func journalCommitFailed(_ txn: Transaction, id: UInt64) {
        guard let journal, journal.generation != 0, let recorder = txn.recorder, !recorder.isEmpty, !recorder.overflowed,
              journal.lastTxn == id else { return }
        let start = journal.end - Int64(recorder.bytes.count + Journal.recordHeaderSize + 4)
        var zero: UInt32 = 0
        _ = pwrite(journal.fd, &zero, 4, off_t(start))
        _ = fdatasync(journal.fd)
        journal.generation = 0
    }

    /// Makes a checkpoint now (a test takes the file as it is on disk then).
    package func checkpointJournal() throws {
        try writer.withLock {
            guard let journal else { return }
            var raw: OpaquePointer?
            try check(mdb_txn_begin(env, nil, 0, &raw), "mdb_txn_begin (checkpoint)")
            defer { mdb_txn_abort(raw) }
            try checkpoint(journal, pinned: journals)
        }
    }

    /// The journal's header as on disk (nil: none yet, or not a writable environment).
    package var journalHeader: JournalHeader? { journal.flatMap { Journal.readHeader(fd: $0.fd) } }

    /// Flushes `data.mdb` (every commit so far, data and meta pages), records the last commit
    /// as the journal's checkpoint with its meta pages, and (`pinned`) pins it with a read
    /// transaction, released with the previous pin. Called inside a write transaction that
    /// has written nothing yet to the file, so the checkpoint is LMDB's last commit.
    func checkpoint(_ journal: Journal, pinned: Bool) throws {
        try check(mdb_env_sync(env, 1), "mdb_env_sync (journal checkpoint)")
        var info = MDB_envinfo()
        try check(mdb_env_info(env, &info), "mdb_env_info")
        let (fd, inode, pageSize) = try dataFileIdentity()
        // The header as on disk now (another process may have written one since this one last
        // read it): the new one must have the larger sequence to be the one that counts.
        let previous = Journal.readHeader(fd: journal.fd)
        var generation = UInt64.random(in: 1...UInt64.max)
        if generation == previous?.generation { generation &+= 1 }
        let header = JournalHeader(
            sequence: (previous?.sequence ?? 0) &+ 1, generation: generation, checkpointTxn: UInt64(info.me_last_txnid),
            dataInode: inode, pageSize: pageSize, pinPID: pinned ? getpid() : 0, boot: Journal.bootIdentity(of: path),
            meta0: JournalHeader.metaPage(0, of: fd, pageSize: pageSize), meta1: JournalHeader.metaPage(1, of: fd, pageSize: pageSize))
        try journal.writeHeader(header)
        releasePin(journal)
        journal.generation = generation
        journal.end = Journal.recordsStart
        journal.lastTxn = header.checkpointTxn
        journal.records = 0
        guard pinned else { return }
        var raw: OpaquePointer?
        try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &raw), "mdb_txn_begin (journal pin)")
        journal.pin = raw
        journal.pinGeneration = generation
    }

    func releasePin(_ journal: Journal) {
        if let pin = journal.pin { mdb_txn_abort(pin) }
        journal.pin = nil
        journal.pinGeneration = 0
    }

    /// Whether the checkpoint of `header` is pinned: by this process, or by the live process
    /// the header names, whose reader slot still holds the checkpoint's transaction. A pin is
    /// only released inside a write transaction (a checkpoint, a close), so it cannot go away
    /// during this one, unless its process dies.
    private func pinProtects(_ journal: Journal, _ header: JournalHeader) -> Bool {
        if journal.pin != nil && journal.pinGeneration == header.generation { return true }
        releasePin(journal)  // a pin of an older checkpoint protects nothing needed any more
        guard header.pinPID > 0, header.pinPID != getpid() else { return false }
        guard kill(header.pinPID, 0) == 0 || errno == EPERM else { return false }
        return readerSlots().contains { $0.pid == header.pinPID && $0.txn == header.checkpointTxn }
    }

    /// The reader table's active slots (`mdb_reader_list`), as process and transaction id.
    func readerSlots() -> [(pid: Int32, txn: UInt64)] {
        final class Lines { var text = "" }
        let lines = Lines()
        _ = mdb_reader_list(env, { message, context in
            guard let message, let context else { return 0 }
            let box = Unmanaged<AnyObject>.fromOpaque(context).takeUnretainedValue() as! Lines
            box.text += String(cString: message)
            return 0
        }, Unmanaged.passUnretained(lines as AnyObject).toOpaque())
        return lines.text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 3, let pid = Int32(fields[0]), let txn = UInt64(fields[2]) else { return nil }
            return (pid, txn)
        }
    }

    /// `data.mdb`'s descriptor, its inode and the page size.
    func dataFileIdentity() throws -> (fd: Int32, inode: UInt64, pageSize: UInt32) {
        var fd: Int32 = -1
        try check(mdb_env_get_fd(env, &fd), "mdb_env_get_fd")
        var file = stat()
        guard fstat(fd, &file) == 0 else { throw LMDBError(code: errno, operation: "fstat data.mdb in \(path)") }
        var pages = MDB_stat()
        try check(mdb_env_stat(env, &pages), "mdb_env_stat")
        return (fd, UInt64(file.st_ino), UInt32(pages.ms_psize))
    }

    /// At close, inside a write transaction: a store this process pinned is flushed and its
    /// checkpoint left unpinned, so that the next writer makes its own; the pin is released.
    func journalClose() {
        guard let journal, journal.pin != nil else { return }
        var raw: OpaquePointer?
        guard mdb_txn_begin(env, nil, 0, &raw) == 0, let raw else {
            releasePin(journal)
            return
        }
        if let header = Journal.readHeader(fd: journal.fd), header.generation == journal.pinGeneration {
            try? checkpoint(journal, pinned: false)
        }
        releasePin(journal)
        mdb_txn_abort(raw)
    }

    /// Whether this environment's commits go through the journal (``Durability/full``).
    var journals: Bool { journal != nil && options.durability == .full }
}
