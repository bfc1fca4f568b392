import Foundation
import Testing
@testable import VaultModel

@Suite("BitwardenDate")
struct BitwardenDateTests {
    // Expected ticks computed independently with Python's datetime (see commit message).
    @Test(arguments: [
        ("1970-01-01T00:00:00Z", Int64(0)),
        ("2024-03-01T10:20:30.1234567Z", 17_092_884_301_234_567),
        ("2024-03-01T10:20:30.123456Z", 17_092_884_301_234_560),
        ("2024-03-01T10:20:30.123Z", 17_092_884_301_230_000),
        ("2024-03-01T10:20:30.1Z", 17_092_884_301_000_000),
        ("2024-02-29T23:59:59+05:30", 17_092_313_990_000_000),
        ("1969-12-31T23:59:59.9999999Z", -1),
        ("2025-06-30T23:59:59.999999+02:00", 17_513_207_999_999_990),
        ("0001-01-01T00:00:00Z", -621_355_968_000_000_000),
        ("9999-12-31T23:59:59.9999999Z", 2_534_023_007_999_999_999),
    ])
    func parse_fractionalDigitsAndOffsets_giveExactInstant(text: String, ticks: Int64) throws {
        let date = try BitwardenDate(text)
        #expect(date.ticksSince1970 == ticks)
        #expect(date.text == text)
    }

    @Test(arguments: [
        "2024-01-01T00:00:00Z", "2024-01-01T00:00:00.0000000Z", "2024-01-01T01:00:00.000+01:00",
        "2023-12-31T19:00:00.000000-05:00", "2024-01-01t00:00:00z",
    ])
    func equalInstantsWrittenDifferently_compareEqual(text: String) throws {
        let reference = try BitwardenDate("2024-01-01T00:00:00Z")
        let other = try BitwardenDate(text)
        #expect(other == reference)
        #expect(other.hashValue == reference.hashValue)
    }

    @Test func ordering_followsInstantsNotStrings() throws {
        // As strings these sort the other way round.
        let early = try BitwardenDate("2024-01-01T10:00:00+05:00")   // 05:00Z
        let late = try BitwardenDate("2024-01-01T06:00:00Z")
        #expect(early < late)
        let texts = ["2024-01-01T00:00:00.5Z", "2024-01-01T00:00:00.0000001Z", "2024-01-01T00:00:00.05Z", "2023-12-31T23:59:59.9999999Z"]
        let sorted = try texts.map(BitwardenDate.init).sorted().map(\.text)
        #expect(sorted == ["2023-12-31T23:59:59.9999999Z", "2024-01-01T00:00:00.0000001Z", "2024-01-01T00:00:00.05Z", "2024-01-01T00:00:00.5Z"])
    }

    @Test(arguments: [
        "", "2024-01-01", "2024-01-01T00:00:00", "2024-13-01T00:00:00Z", "2023-02-29T00:00:00Z",
        "2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00.12345678Z",
        "2024-01-01T00:00:00+0100", "2024-01-01 00:00:00Z", "2024-01-01T00:00:00Zjunk", "24-01-01T00:00:00Z",
        "2024-01-01T00:00:00+24:00",
    ])
    func malformedText_throwsMalformedDate(text: String) {
        #expect {
            try BitwardenDate(text)
        } throws: { error in
            guard case .malformedDate(let got, _) = error as? VaultModelError else { return false }
            return got == text
        }
    }

    @Test func malformedDateInJSON_failsDecodingWithReason() {
        let json = Data(#"["2024-02-30T00:00:00Z"]"#.utf8)
        #expect {
            try JSONDecoder().decode([BitwardenDate].self, from: json)
        } throws: { error in
            String(describing: error).contains("day 30 out of range")
        }
    }

    @Test(arguments: ["2024-03-01T10:20:30.123+01:00", "2024-03-01T10:20:30Z", "2024-03-01T10:20:30.1234567Z"])
    func unchangedDate_reencodesByteIdentically(text: String) throws {
        let json = Data("[\"\(text)\"]".utf8)
        let decoded = try JSONDecoder().decode([BitwardenDate].self, from: json)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        #expect(try encoder.encode(decoded) == json)
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.0000000Z"),
        (17_092_884_301_234_567, "2024-03-01T10:20:30.1234567Z"),
        (-1, "1969-12-31T23:59:59.9999999Z"),
        (2_534_023_007_999_999_999, "9999-12-31T23:59:59.9999999Z"),
    ])
    func instant_formatsWithSevenFractionalDigitsUTC(ticks: Int64, text: String) throws {
        let date = BitwardenDate(ticksSince1970: ticks)
        #expect(date.text == text)
        #expect(try BitwardenDate(date.canonicalText).ticksSince1970 == ticks)
    }

    /// A date read from UTF-8 bytes (the fold reads operation bodies that way) keeps no string
    /// when the text is the canonical form, and still gives that text back byte for byte; any
    /// other text is kept as it was; a malformed one fails as the string form does.
    @Test func utf8Bytes_giveTheSameDateAndText() throws {
        var texts = ["2024-03-01T10:20:30.1234567Z", "2024-03-01T10:20:30.123Z", "2024-03-01T10:20:30.123456Z",
                     "2024-03-01T10:20:30Z", "2024-03-01T10:20:30.1234567+01:00", "2024-02-29T23:59:59.9999999Z",
                     "1969-12-31T23:59:59.9999999Z", "0001-01-01T00:00:00.0000000Z", "9999-12-31T23:59:59.9999999Z",
                     "2024-03-01t10:20:30.1234567z"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            texts.append(BitwardenDate(ticksSince1970: Int64.random(in: -20_000_000_000_000_000...250_000_000_000_000_000, using: &generator)).text)
        }
        for text in texts {
            let expected = try BitwardenDate(text)
            let read = try Array(text.utf8).withUnsafeBytes { try BitwardenDate(utf8: $0) }
            #expect(read == expected && read.text == text && read.description == text, "\(text)")
            #expect(try JSONEncoder().encode(read) == JSONEncoder().encode(expected))
        }
        for bad in ["2024-03-01T10:20:30.1234567", "2024-13-01T10:20:30Z", ""] {
            let message = "\(try #require(throws: VaultModelError.self) { try BitwardenDate(bad) })"
            let fromBytes = "\(try #require(throws: VaultModelError.self) { try Array(bad.utf8).withUnsafeBytes { try BitwardenDate(utf8: $0) } })"
            #expect(fromBytes == message)
        }
    }

    /// The bytes path reads canonical-length text by fixed positions: near-misses of the
    /// canonical form (one byte changed, days and times out of range, other letters' cases)
    /// must come out as the string path reads them, date and text or the same error.
    @Test func utf8Bytes_readNearMissesOfTheCanonicalFormAsTextDoes() throws {
        var texts = ["2024-02-30T10:20:30.1234567Z", "2023-02-29T10:20:30.1234567Z", "2024-02-29T10:20:30.1234567Z",
                     "2024-04-31T00:00:00.0000000Z", "2024-01-01T24:00:00.0000000Z", "2024-01-01T23:60:00.0000000Z",
                     "2024-01-01T23:59:60.0000000Z", "2024-00-10T23:59:59.0000000Z", "2024-01-00T23:59:59.0000000Z",
                     "2100-02-29T00:00:00.0000000Z", "2000-02-29T00:00:00.0000000Z", "0000-01-01T00:00:00.0000000Z",
                     "2024-01-01T10:20:30.12+01:00", "2024-01-01 10:20:30.1234567Z", "2024-01-01T10:20:30.123456/Z"]
        var generator = SystemRandomNumberGenerator()
        let replacements = Array("0123456789/:;-+.TtZz ".utf8)
        for _ in 0..<2_000 {
            var bytes = Array(BitwardenDate(ticksSince1970: Int64.random(in: 0...250_000_000_000_000_000, using: &generator)).text.utf8)
            bytes[Int.random(in: 0..<bytes.count, using: &generator)] = replacements.randomElement(using: &generator)!
            texts.append(String(decoding: bytes, as: UTF8.self))
        }
        for text in texts {
            let fromBytes = Result { try Array(text.utf8).withUnsafeBytes { try BitwardenDate(utf8: $0) } }
            switch Result(catching: { try BitwardenDate(text) }) {
            case .success(let expected):
                let read = try fromBytes.get()
                #expect(read.ticksSince1970 == expected.ticksSince1970 && read.text == text, "\(text)")
            case .failure(let error):
                #expect(throws: VaultModelError.self, "\(text)") { try fromBytes.get() }
                if case .failure(let other) = fromBytes { #expect("\(other)" == "\(error)") }
            }
        }
    }

    @Test func foundationDate_roundTripsToTheTick() throws {
        let date = Date(timeIntervalSince1970: 1_709_288_430.25)
        let bitwarden = BitwardenDate(date)
        #expect(bitwarden.ticksSince1970 == 17_092_884_302_500_000)
        #expect(bitwarden.text == "2024-03-01T10:20:30.2500000Z")
        #expect(bitwarden.date == date)
    }
}

/// The canonical form's fast reader (whole words at once) against the general parser, on valid
/// dates and on every one-byte change of them: the same instant, or the same refusal.
@Suite struct CanonicalDateReaderTests {
    @Test func everyOneByteChange_isReadAsTheGeneralParserReadsIt() throws {
        var generator = SystemRandomNumberGenerator()
        var texts = ["2024-03-01T10:20:30.1234567Z", "0000-01-01T00:00:00.0000000Z", "9999-12-31T23:59:59.9999999Z",
                     "2024-02-29T12:00:00.0000001Z", "2023-02-28T23:59:59.9000000Z"]
        for _ in 0..<40 {
            texts.append(BitwardenDate(ticksSince1970: Int64.random(in: -20_000_000_000_000_000...250_000_000_000_000_000, using: &generator)).text)
        }
        let replacements: [UInt8] = Array("0123456789/:;-.TZt z+".utf8) + [0x00, 0x2F, 0x3A, 0x40, 0x80, 0xB0, 0xFF]
        var compared = 0
        for text in texts {
            let bytes = Array(text.utf8)
            #expect(bytes.count == 28)
            for position in bytes.indices {
                for byte in replacements {
                    var changed = bytes
                    changed[position] = byte
                    let general = String(bytes: changed, encoding: .utf8).flatMap { try? BitwardenDate($0).ticksSince1970 }
                    let fast = changed.withUnsafeBytes { BitwardenDate.parseCanonical($0.bindMemory(to: UInt8.self).baseAddress!) }
                    // The fast reader takes exactly the canonical form (upper-case T and Z).
                    let canonical = general != nil && changed[10] == UInt8(ascii: "T") && changed[27] == UInt8(ascii: "Z")
                    #expect(fast == (canonical ? general : nil), "\(String(decoding: changed, as: UTF8.self))")
                    let read = changed.withUnsafeBytes { try? BitwardenDate(utf8: $0).ticksSince1970 }
                    #expect(read == general)
                    compared += 1
                }
            }
        }
        #expect(compared > 35_000)
    }
}
