import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// An event of the lazy fold, opened where LMDB maps it: its header and what its body gave.
struct OpenedEvent: FoldedEvent {
    enum Opened {
        /// A canonical operation's small fields (its cipher left in the log).
        case fields(VaultEventType, VaultEvent.OperationFields)
        /// Any other event, decoded (boxed: the rare case keeps every result small to move).
        indirect case event(VaultEvent)
        /// Why the event cannot be read: its item is quarantined.
        case failed(any Error)
        /// Why the stored bytes are not the event their index entry names (what reading them
        /// as an envelope throws): the fold stops with this error.
        case notAnEvent(any Error)
    }

    let header: EventHeader
    let opened: Opened
    /// Its stored MAC (the chain value the user's next event names), and whether it matched.
    let chainValue: ChainMAC?
    let authenticated: Bool
    /// ``opened`` is ``Opened/notAnEvent(_:)`` (read without copying the payload).
    let isNotAnEvent: Bool

    /// Opens `event`, lent by ``EventLog/LogReader/mapEventsInPlace(userId:after:limit:key:parallelThreshold:_:)``,
    /// as an event of `userId`. Not throwing (a batch is opened on all cores into one array):
    /// what reading it as an envelope would throw is ``Opened/notAnEvent(_:)``, with a header
    /// that names only its sequence.
    ///
    /// An operation's small fields sit at the two ends of its canonical body (the date and base
    /// revision before the cipher's JSON, the password flag after it), so only those ends are
    /// decrypted (``VaultEvent/headBlocks`` and ``VaultEvent/tailBlocks`` AES blocks) once the
    /// event MAC has matched (from format 3 it covers those ends, not the cipher between them:
    /// the body MAC authenticates that part when it is read); a body of any other shape, or
    /// too short, is decrypted whole (its body MAC checked) and read as before.
    ///
    /// `decryptor`: the block context for the ends, kept for the next event of this thread.
    init(_ event: borrowing EventInPlace, userId: String, decryptor: inout KeyedAESCBC.BlockDecryptor?) {
        chainValue = event.chainValue
        authenticated = event.isAuthenticated
        switch event.header {
        case .success(let header):
            self.header = header
            isNotAnEvent = false
        case .failure(let error):
            header = EventHeader(sequence: event.sequence, userId: userId, cipherId: "", eventType: 0, recordedAtMillis: 0)
            opened = .notAnEvent(error)
            isNotAnEvent = true
            return
        }
        do {
            let type = VaultEventType(rawValue: header.eventType)
            if let type, type.isOperation, let fields = try VaultEvent.operationFields(event, decryptor: &decryptor) {
                opened = .fields(type, fields)
                return
            }
            let plaintext = try event.plaintext().get()
            if let type, type.isOperation, let fields = VaultEvent.operationFields(plaintext) {
                opened = .fields(type, fields)
            } else {
                opened = .event(try VaultEvent(header: header, plaintext: plaintext))
            }
        } catch {
            opened = .failed(error)
        }
    }
}
