import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTesting
import VaultLogTestSupport

/// Envelope format 3: the event MAC covers the header and the ciphertext's two ends, the body
/// MAC the whole ciphertext. A fold's read of the ends relies on the event MAC alone; every
/// other read of the body, and `verify`, on both.
@Suite struct BodyMACTests {
    /// keyA's user key, for MACs computed here from the documented formula.
    static let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 100))
    static let body = (0..<1000).map { UInt8(ascii: "a") + UInt8($0 % 26) }

    static func hmac(_ key: SymmetricCryptoKey, _ parts: [UInt8]...) -> [UInt8] {
        var mac = KeyedHMACSHA256(key: key.macKey)
        for part in parts { mac.update(data: part) }
        return mac.finalize()
    }

    /// The layout and both MACs, recomputed from Docs/EventFormat.md's formula rather than
    /// through the code that seals: a change to either is a change of the format.
    @Test func format3Envelope_isTheDocumentedLayout() throws {
        let previous = (0..<32).map { UInt8($0) }
        let header = EventHeader(sequence: 9, userId: "user-a", cipherId: "item-1", eventType: 2, recordedAtMillis: 77, previousMAC: previous)
        let iv = [UInt8](repeating: 3, count: 16)
        let bytes = try Envelope.seal(header: header, body: Self.body, key: keyA, iv: iv[...])
        let h = try Envelope.encodeHeader(header).count
        #expect(bytes[0] == 3 && Envelope.currentFormatVersion == 3)
        let ciphertext = Array(bytes[(h + 64)...])
        #expect(ciphertext.count == 1008 && bytes.count == h + 16 + 32 + 16 + 1008)
        #expect(Array(bytes[h..<h + 16]) == iv)
        let eventKey = Self.userKey.derive(info: "vaultlog.envelope.v1"), bodyKey = Self.userKey.derive(info: "vaultlog.envelope-body.v3")
        let bodyMAC = Array(Self.hmac(bodyKey, iv, ciphertext).prefix(16))
        #expect(Array(bytes[(h + 48)..<(h + 64)]) == bodyMAC, "HMAC-SHA256 truncated to 16 bytes")
        let length = withUnsafeBytes(of: UInt64(ciphertext.count).bigEndian) { Array($0) }
        let eventMAC = Self.hmac(eventKey, Array(bytes[0..<h]), iv, length, bodyMAC, Array(ciphertext.prefix(128)), Array(ciphertext.suffix(64)))
        #expect(Array(bytes[(h + 16)..<(h + 48)]) == eventMAC)
        let envelope = try Envelope(bytes: bytes)
        #expect(Array(envelope.mac) == eventMAC, "the event MAC is the chain value")
        #expect(try envelope.open(key: keyA) == Self.body)
        // A short body is covered whole, each byte once.
        let short = try Envelope.seal(header: header, body: Array(Self.body.prefix(170)), key: keyA, iv: iv[...])
        let shortCiphertext = Array(short[(h + 64)...])
        #expect(shortCiphertext.count == 176)
        let shortBodyMAC = Array(Self.hmac(bodyKey, iv, shortCiphertext).prefix(16))
        let shortLength = withUnsafeBytes(of: UInt64(176).bigEndian) { Array($0) }
        #expect(Array(short[(h + 16)..<(h + 48)]) == Self.hmac(eventKey, Array(short[0..<h]), iv, shortLength, shortBodyMAC, shortCiphertext))
    }

    /// A store whose event 2 (body of 1,000 bytes) has had `change` applied to its stored bytes.
    func storeWithChangedEvent(_ dir: TemporaryDirectory, _ change: (inout [UInt8], _ ciphertextStart: Int) -> Void) throws -> EventLogStore {
        let store = try openStore(dir)
        try store.append([event(1), NewEvent(userId: "user-a", cipherId: "item", eventType: 2, recordedAtMillis: 5, body: Self.body), event(3)],
                         key: keyA)
        try store.environment.write { txn in
            var bytes = try #require(try txn.get(store.events, key: sequenceKey(2)))
            let h = try Envelope.parseHeader(bytes).length
            change(&bytes, h + 64)
            try txn.put(store.events, key: sequenceKey(2), value: bytes)
        }
        return store
    }

    /// What a read of event 2 in place sees: authenticated or not, its ends (8 blocks and 3),
    /// wider ends (9 and 3), the whole plaintext.
    struct InPlaceRead: Sendable {
        var authenticated: Bool
        var ends: [UInt8]?
        var wider: Result<Bool, EnvelopeError>
        var whole: Result<[UInt8], EnvelopeError>
    }

    static func envelopeError(_ error: any Error) -> EnvelopeError {
        error as? EnvelopeError ?? .malformed(sequence: nil, reason: "\(error)")
    }

    func readInPlace(_ store: EventLogStore) throws -> InPlaceRead {
        try store.read { reader in
            try reader.mapEventsInPlace(userId: "user-a", after: 1, limit: 1, key: keyA, parallelThreshold: 256) { event, decryptor in
                let ends = try? event.withDecryptedEnds(headBlocks: 8, tailBlocks: 3, decryptor: &decryptor) { head, tail, count in
                    Array(head) + Array(tail) + [UInt8(count / 256), UInt8(count % 256)]
                }
                let wider = Result { try event.withDecryptedEnds(headBlocks: 9, tailBlocks: 3, decryptor: &decryptor) { _, _, _ in true } ?? false }
                return InPlaceRead(authenticated: event.isAuthenticated, ends: ends ?? nil, wider: wider.mapError(BodyMACTests.envelopeError),
                                   whole: event.plaintext().mapError(BodyMACTests.envelopeError))
            }
        }[0]
    }

    static var expectedEnds: [UInt8] { Array(body.prefix(128)) + Array(body.suffix(40)) + [UInt8(1000 / 256), UInt8(1000 % 256)] }

    /// A byte changed between the ends: the fold's read of the ends is still authentic (and
    /// right); the whole body, wider ends, `open` and `verify` refuse it.
    @Test func byteChangedBetweenTheEnds_isRefusedByEveryReadOfIt() throws {
        let dir = TemporaryDirectory()
        let store = try storeWithChangedEvent(dir) { bytes, ct in bytes[ct + 500] ^= 0x20 }
        defer { store.environment.close() }
        let read = try readInPlace(store)
        #expect(read.authenticated, "the event MAC does not cover the middle")
        #expect(read.ends == Self.expectedEnds, "the ends read alone are the original ones")
        #expect(throws: EnvelopeError.authenticationFailed(sequence: 2)) { try read.wider.get() }
        #expect(throws: EnvelopeError.authenticationFailed(sequence: 2)) { try read.whole.get() }
        #expect(throws: EnvelopeError.authenticationFailed(sequence: 2)) { try store.envelope(at: 2)?.open(key: keyA) }
        #expect(try store.envelope(at: 2)?.authenticate(key: keyA) == false)
        let report = try store.verify(keys: ["user-a": keyA])
        #expect(report.problemSequences == [2], "\(report.problems)")
        #expect(try store.envelope(at: 3)?.open(key: keyA) == event(3).body)
    }

    /// What the event MAC covers: a changed byte there (start, end, body MAC, IV) or a block
    /// taken out of the middle (the length) fails it, so nothing of the event is read.
    @Test(arguments: ["head", "tail", "bodyMAC", "iv", "length"])
    func changeTheEventMACCovers_failsIt(_ what: String) throws {
        let dir = TemporaryDirectory()
        let store = try storeWithChangedEvent(dir) { bytes, ct in
            switch what {
            case "head": bytes[ct + 100] ^= 1
            case "tail": bytes[bytes.count - 60] ^= 1
            case "bodyMAC": bytes[ct - 10] ^= 1
            case "iv": bytes[ct - 60] ^= 1
            default: bytes.removeSubrange((ct + 480)..<(ct + 496))
            }
        }
        defer { store.environment.close() }
        let read = try readInPlace(store)
        #expect(!read.authenticated && read.ends == nil)
        #expect(throws: EnvelopeError.authenticationFailed(sequence: 2)) { try read.whole.get() }
        #expect(try store.verify(keys: ["user-a": keyA]).problemSequences == [2])
    }

    /// Unchanged: every read gives the body.
    @Test func untouchedEvent_readsWholeAndByItsEnds() throws {
        let dir = TemporaryDirectory()
        let store = try storeWithChangedEvent(dir) { _, _ in }
        defer { store.environment.close() }
        let read = try readInPlace(store)
        #expect(read.authenticated && read.ends == Self.expectedEnds)
        #expect(try read.wider.get() == true)
        #expect(try read.whole.get() == Self.body)
        #expect(try store.verify(keys: ["user-a": keyA]).problems.isEmpty)
    }

    /// A log written in format 2 (as a format 6 store holds it) reads as before beside the
    /// format 3 events appended after it, whose chain starts at its last MAC; `verify` with the
    /// key passes and a changed format 2 byte anywhere is still refused by the fold's read.
    @Test func format2Log_readsBesideFormat3Events_andTheChainCrossesThem() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        defer { store.environment.close() }
        var previous = Envelope.chainStart
        try store.write { txn in
            for n in 1...4 {
                let new = n == 2 ? NewEvent(userId: "user-a", cipherId: "item", eventType: 2, recordedAtMillis: 5, body: Self.body) : event(n)
                let header = EventHeader(formatVersion: 2, sequence: UInt64(n), userId: new.userId, cipherId: new.cipherId,
                                         eventType: new.eventType, recordedAtMillis: new.recordedAtMillis, previousMAC: previous)
                let envelope = try Envelope(bytes: Envelope.seal(header: header, body: new.body, key: keyA,
                                                                 iv: [UInt8](repeating: UInt8(n), count: 16)[...]))
                try txn.appendSealed(envelope)
                previous = Array(envelope.mac)
            }
            try txn.putHead(HeadRecord(userId: "user-a", lastSequence: 4, chain: previous), key: keyA)
        }
        try store.append([event(5), event(6)], key: keyA)
        let envelopes = try store.read { try $0.envelopes(userId: "user-a", after: 0, limit: 10) }
        #expect(envelopes.map(\.header.formatVersion) == [2, 2, 2, 2, 3, 3])
        #expect(envelopes[4].header.previousMAC == previous, "the first format 3 event chains onto the last format 2 one")
        #expect(try envelopes.map { try $0.open(key: keyA) } == [event(1).body, Self.body, event(3).body, event(4).body, event(5).body, event(6).body])
        #expect(try store.verify(keys: ["user-a": keyA]).problems.isEmpty)
        let read = try readInPlace(store)
        #expect(try read.authenticated && read.ends == Self.expectedEnds && read.whole.get() == Self.body)
        // Format 2 has one MAC over everything: a changed middle byte fails the fold's read too.
        try store.environment.write { txn in
            var bytes = try #require(try txn.get(store.events, key: sequenceKey(2)))
            bytes[bytes.count - 500] ^= 1
            try txn.put(store.events, key: sequenceKey(2), value: bytes)
        }
        #expect(try readInPlace(store).authenticated == false)
    }
}
