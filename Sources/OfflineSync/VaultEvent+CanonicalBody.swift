import EventLog
import Foundation
import VaultCrypto
import VaultJSON
import VaultModel

// The canonical bytes of stored bodies, in one place: how an operation body and an outcome body
// are encoded, and the readers that take the small fields of a canonical body without the JSON
// decoder (a whole body, or only its two ends decrypted where LMDB maps it).
extension VaultEvent {
    /// What a fold needs of an operation that a later operation on the same item supersedes:
    /// its time, base revision and password flag, with `placeholder` for the snapshot. Read by
    /// scanning the canonical body (`{"at":…,["baseRevisionDate":…,]"cipher":{…},
    /// "passwordChanged":…,"v":1}`, sorted keys as ``encode(_:)`` writes) without decoding the
    /// cipher; nil for any other shape (the caller then decodes it fully). A first edit carries
    /// its `base` (`{"at":…,"base":{…},["baseRevisionDate":…,]"cipher":…`), which is skipped:
    /// read from the whole body only (the ends alone do not hold it).
    static func operationSummary(header: EventHeader, plaintext: [UInt8], placeholder: Cipher) -> VaultEvent? {
        guard let type = VaultEventType(rawValue: header.eventType), type.isOperation,
              let fields = operationFields(plaintext) else { return nil }
        return VaultEvent(header: header, type: type,
                          body: .operation(OperationBody(cipher: placeholder, passwordChanged: fields.passwordChanged,
                                                         baseRevisionDate: fields.baseRevisionDate, at: fields.at)))
    }

    /// An outcome body with nothing but its time, in the canonical form (`{"at":"…","v":1}`, a
    /// date of 28 characters), read without the JSON decoder: what most outcomes are (every
    /// `resolved`), and the decoder's keyed reads of the seventeen optional fields cost a fold
    /// about as much as all the rest of such an event. Nil for any other body (decode it).
    static func bareOutcome(_ plaintext: [UInt8]) -> OutcomeBody? {
        let prefix: StaticString = "{\"at\":", suffix: StaticString = ",\"v\":1}"
        let dateEnd = prefix.utf8CodeUnitCount + BitwardenDate.canonicalLength + 2
        guard plaintext.count == dateEnd + suffix.utf8CodeUnitCount else { return nil }
        return plaintext.withUnsafeBytes { p -> OutcomeBody? in
            guard memcmp(p.baseAddress!, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0,
                  memcmp(p.baseAddress! + dateEnd, suffix.utf8Start, suffix.utf8CodeUnitCount) == 0,
                  let at = canonicalQuotedDate(p, at: prefix.utf8CodeUnitCount) else { return nil }
            return OutcomeBody(at: at)
        }
    }

    /// A date of the canonical length written as a JSON string at `offset` (its opening quote)
    /// in `bytes`, closed by a quote; nil otherwise. No byte of it can be a quote or a backslash
    /// once it reads as a date (the date parsers take only digits and `-+:.TtZz`), so a JSON
    /// decoder reads the same date there and nothing is scanned for escapes.
    static func canonicalQuotedDate(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> BitwardenDate? {
        let end = offset + 1 + BitwardenDate.canonicalLength
        guard end < bytes.count, bytes[offset] == UInt8(ascii: "\""), bytes[end] == UInt8(ascii: "\"") else { return nil }
        return try? BitwardenDate(utf8: UnsafeRawBufferPointer(rebasing: bytes[(offset + 1)..<end]))
    }

    /// The small fields of a canonical operation body and where its cipher's JSON object is,
    /// read without decoding the cipher; nil for any other shape.
    static func operationFields(_ plaintext: [UInt8]) -> OperationFields? {
        plaintext.withUnsafeBytes { operationFields(head: $0, tail: $0, count: $0.count) }
    }

    /// ``operationFields(_:)`` from the two ends of a body only: `head` its first bytes, `tail`
    /// its last bytes, `count` its length (the bytes between are not needed: the small fields
    /// come before the cipher's JSON and after it). Nil as well when a field runs past `head`
    /// (then read the whole body).
    static func operationFields(head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer, count: Int) -> OperationFields? {
        let tailStart = count - tail.count
        /// Whether `literal` is at `offset`, wholly inside one of the two ends.
        func starts(_ literal: StaticString, at offset: Int) -> Bool {
            let n = literal.utf8CodeUnitCount
            if offset >= 0, offset + n <= head.count { return memcmp(head.baseAddress! + offset, literal.utf8Start, n) == 0 }
            if offset >= tailStart, offset + n <= count { return memcmp(tail.baseAddress! + (offset - tailStart), literal.utf8Start, n) == 0 }
            return false
        }
        /// A date written as a JSON string without escapes starting at `offset` (at its opening
        /// quote) inside `head`, and where it ends.
        func date(at offset: Int) -> (BitwardenDate, end: Int)? {
            guard offset < head.count, head[offset] == UInt8(ascii: "\"") else { return nil }
            if let date = canonicalQuotedDate(head, at: offset) { return (date, offset + BitwardenDate.canonicalLength + 2) }
            var i = offset + 1
            while i < head.count, head[i] != UInt8(ascii: "\""), head[i] != UInt8(ascii: "\\") { i += 1 }
            guard i < head.count, head[i] == UInt8(ascii: "\""),
                  let date = try? BitwardenDate(utf8: UnsafeRawBufferPointer(rebasing: head[(offset + 1)..<i])) else { return nil }
            return (date, i + 1)
        }
        /// Where the JSON object starting at `offset` (its `{`) inside `head` ends (after its `}`):
        /// strings skipped with their escapes; nil when it runs past `head`.
        func objectEnd(at offset: Int) -> Int? {
            guard offset < head.count, head[offset] == UInt8(ascii: "{") else { return nil }
            var depth = 0, i = offset, inString = false
            while i < head.count {
                let byte = head[i]
                if inString {
                    if byte == UInt8(ascii: "\\") { i += 1 } else if byte == UInt8(ascii: "\"") { inString = false }
                } else if byte == UInt8(ascii: "\"") {
                    inString = true
                } else if byte == UInt8(ascii: "{") {
                    depth += 1
                } else if byte == UInt8(ascii: "}") {
                    depth -= 1
                    if depth == 0 { return i + 1 }
                }
                i += 1
            }
            return nil
        }
        guard starts("{\"at\":", at: 0), let (at, afterAt) = date(at: 6) else { return nil }
        var offset = afterAt
        // A first edit's base (`Docs/Projection.md`): skipped, read only when the body is decoded.
        if starts(",\"base\":{", at: offset) {
            guard let end = objectEnd(at: offset + 8) else { return nil }
            offset = end
        }
        var base: BitwardenDate?
        if starts(",\"baseRevisionDate\":", at: offset) {
            guard let (date, end) = date(at: offset + 20) else { return nil }
            base = date
            offset = end
        }
        guard starts(",\"cipher\":{", at: offset) else { return nil }
        let passwordChanged: Bool
        let cipherEnd: Int
        if starts("},\"passwordChanged\":true,\"v\":1}", at: count - 31) {
            passwordChanged = true
            cipherEnd = count - 30
        } else if starts("},\"passwordChanged\":false,\"v\":1}", at: count - 32) {
            passwordChanged = false
            cipherEnd = count - 31
        } else {
            return nil
        }
        guard offset + 10 <= cipherEnd else { return nil }
        return OperationFields(at: at, baseRevisionDate: base, passwordChanged: passwordChanged, cipher: (offset + 10)..<cipherEnd)
    }

    /// What ``operationFields(_:)`` reads.
    struct OperationFields: Sendable {
        var at: BitwardenDate
        var baseRevisionDate: BitwardenDate?
        var passwordChanged: Bool
        /// Where the cipher's JSON object is in the body.
        var cipher: Range<Int>
    }

    /// The bytes a save seals for `body` (``encode(_:)``): for the benchmark's parts of a save.
    @_spi(Tools) public static func storedBody(_ body: Body) throws -> [UInt8] { try encode(body) }

    /// Encodes a body for appending.
    static func encode(_ body: Body) throws -> [UInt8] {
        switch body {
        case .operation(let op): return try encodeOperation(op, cipherJSON: encodeCipher(op.cipher))
        case .outcome(let outcome): return try canonicalEncoder().encode(outcome)
        }
    }

    /// The encoder of stored bodies: sorted keys, the canonical shape
    /// ``operationSummary(header:plaintext:placeholder:)`` reads (byte for byte what
    /// `JSONEncoder` with `.sortedKeys` writes).
    static func canonicalEncoder() -> SortedJSONEncoder {
        SortedJSONEncoder()
    }

    /// A cipher's JSON as a stored operation body holds it (and the local item cache, which
    /// then stores the same bytes without encoding the cipher a second time).
    static func encodeCipher(_ cipher: Cipher) throws -> [UInt8] {
        try canonicalEncoder().encode(cipher)
    }

    /// The operation body's JSON with `cipherJSON` (``encodeCipher(_:)`` of `op.cipher`) written
    /// in as it is: byte for byte what encoding `op` whole gives (tested), without encoding the
    /// cipher a second time. The members in key order, absent optionals left out (as the
    /// synthesized `encode(to:)` does).
    static func encodeOperation(_ op: OperationBody, cipherJSON: [UInt8]) throws -> [UInt8] {
        var w = SortedJSONDirectWriter(escapesSlashes: true)
        var o = w.beginObject()
        w.key("at", &o); w.string(op.at.text)
        if let base = op.base { w.key("base", &o); base.writeSortedJSON(to: &w) }
        if let date = op.baseRevisionDate { w.key("baseRevisionDate", &o); w.string(date.text) }
        w.key("cipher", &o); w.json(cipherJSON)
        w.key("passwordChanged", &o); w.bool(op.passwordChanged)
        w.key("v", &o); w.int(op.v)
        w.end(&o)
        // A base the direct path cannot write (a number JSON has no form for): the whole body
        // through the encoder, which gives its error.
        guard !w.failed else { return try canonicalEncoder().encode(op) }
        return w.bytes
    }

    /// The small fields of a canonical operation body, from its ends only (``headBlocks`` and
    /// ``tailBlocks`` AES blocks decrypted where LMDB maps the event); nil when the body is too
    /// short or not of that shape (read it whole). Throws why the body cannot be read.
    static func operationFields(_ event: borrowing EventInPlace, decryptor: inout KeyedAESCBC.BlockDecryptor?) throws -> OperationFields? {
        var fields: OperationFields?
        _ = try event.readDecryptedEnds(headBlocks: headBlocks, tailBlocks: tailBlocks, decryptor: &decryptor) { head, tail, count in
            fields = operationFields(head: head, tail: tail, count: count)
        }
        return fields
    }

    /// AES blocks decrypted at the start of an operation's body: its date and base revision and
    /// the cipher's opening (97 bytes with two canonical dates, 107 with two dates of 33
    /// characters; a longer head is read from the whole body).
    static let headBlocks = 8
    /// AES blocks decrypted at its end: the password flag, the version and up to 16 bytes of padding.
    static let tailBlocks = 3
}
