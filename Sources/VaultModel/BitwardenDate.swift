import Foundation

/// An instant as Bitwarden sends it: RFC 3339 text with 0 to 7 fractional digits and `Z` or a
/// `±hh:mm` offset (the Bitwarden server writes 7 digits, Vaultwarden 6, clients 3).
///
/// The instant is kept exactly, as 100-nanosecond ticks since 1970-01-01T00:00:00Z, and the
/// original text is kept so that an unchanged value re-encodes byte for byte. Equality, hashing
/// and ordering use the instant only: `"2024-01-01T00:00:00Z"` equals
/// `"2024-01-01T01:00:00.0000000+01:00"`.
///
/// ```swift
/// let revised = try BitwardenDate("2024-05-01T12:30:45.1234567Z")
/// revised < BitwardenDate(Date())   // true
/// ```
public struct BitwardenDate: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// Ticks (100 ns) per second.
    public static let ticksPerSecond: Int64 = 10_000_000

    /// 100-nanosecond ticks since 1970-01-01T00:00:00Z (negative before).
    public let ticksSince1970: Int64

    /// The text this value was parsed from, or the canonical 7-digit UTC form if it was made
    /// from an instant. This is what `encode(to:)` writes.
    public var text: String { storedText ?? Self.format(ticks: ticksSince1970) }

    /// The text when it is not the canonical form of the instant (nil: written on demand, so a
    /// date made from an instant or read in its canonical form holds no string).
    private let storedText: String?

    /// The instant `ticks` 100-ns ticks after 1970-01-01T00:00:00Z, written canonically.
    public init(ticksSince1970 ticks: Int64) {
        ticksSince1970 = ticks
        storedText = nil
    }

    /// The instant of `date`, rounded to the nearest 100 ns.
    public init(_ date: Date) {
        self.init(ticksSince1970: Int64((date.timeIntervalSince1970 * Double(Self.ticksPerSecond)).rounded()))
    }

    /// Parses RFC 3339 text such as `2024-05-01T12:30:45.1234567Z` or
    /// `2024-05-01T14:30:45.123+02:00`.
    ///
    /// - Throws: ``VaultModelError/malformedDate(_:reason:)`` naming what is wrong.
    public init(_ text: String) throws {
        var copy = text
        ticksSince1970 = try copy.withUTF8 { try Self.parse($0) }
        storedText = text
    }

    /// ``init(_:)`` from UTF-8 bytes; text in the canonical form is not kept as a string (it is
    /// written again on demand, byte for byte the same), so reading one allocates nothing.
    package init(utf8 bytes: UnsafeRawBufferPointer) throws {
        if bytes.count == Self.canonicalLength, let ticks = Self.parseCanonical(bytes.bindMemory(to: UInt8.self).baseAddress!) {
            ticksSince1970 = ticks
            storedText = nil
            return
        }
        ticksSince1970 = try Self.parse(bytes.bindMemory(to: UInt8.self))
        storedText = String(decoding: bytes, as: UTF8.self)
    }

    /// The instant as a Foundation `Date` (sub-microsecond precision may round).
    public var date: Date {
        Date(timeIntervalSince1970: Double(ticksSince1970) / Double(Self.ticksPerSecond))
    }

    /// The canonical form `yyyy-MM-ddTHH:mm:ss.fffffffZ` (UTC, 7 fractional digits).
    public var canonicalText: String { Self.format(ticks: ticksSince1970) }

    /// The same instant, re-written canonically (drops the original text).
    public var canonicalized: BitwardenDate { BitwardenDate(ticksSince1970: ticksSince1970) }

    /// The text as parsed (or the canonical form), as ``text``.
    public var description: String { text }

    /// Whether both are the same instant, however they are written.
    public static func == (lhs: BitwardenDate, rhs: BitwardenDate) -> Bool {
        lhs.ticksSince1970 == rhs.ticksSince1970
    }

    /// Hashes the instant only, consistent with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(ticksSince1970) }

    /// Whether `lhs` is the earlier instant.
    public static func < (lhs: BitwardenDate, rhs: BitwardenDate) -> Bool {
        lhs.ticksSince1970 < rhs.ticksSince1970
    }

    /// Decodes an RFC 3339 string, keeping its text; a malformed date throws a `DecodingError`
    /// that says what is wrong.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        do {
            try self.init(string)
        } catch let error as VaultModelError {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    /// Encodes ``text``, so a parsed date re-encodes byte for byte.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }

    // MARK: Parsing on UTF-8 bytes (DateFormatter is slow on Linux)

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws -> Int64 {
        func fail(_ reason: String) -> VaultModelError { .malformedDate(String(decoding: bytes, as: UTF8.self), reason: reason) }
        var index = 0
        func digits(_ count: Int, _ what: String) throws -> Int64 {
            var value: Int64 = 0
            for _ in 0..<count {
                guard index < bytes.count, let digit = decimal(bytes[index]) else {
                    throw fail("expected \(count) digits for the \(what) at offset \(index)")
                }
                value = value * 10 + digit
                index += 1
            }
            return value
        }
        func expect(_ allowed: [UInt8], _ what: String) throws {
            guard index < bytes.count, allowed.contains(bytes[index]) else {
                throw fail("expected \(what) at offset \(index)")
            }
            index += 1
        }
        let year = try digits(4, "year")
        try expect([UInt8(ascii: "-")], "'-'")
        let month = try digits(2, "month")
        try expect([UInt8(ascii: "-")], "'-'")
        let day = try digits(2, "day")
        try expect([UInt8(ascii: "T"), UInt8(ascii: "t")], "'T'")
        let hour = try digits(2, "hour")
        try expect([UInt8(ascii: ":")], "':'")
        let minute = try digits(2, "minute")
        try expect([UInt8(ascii: ":")], "':'")
        let second = try digits(2, "second")

        var fractionTicks: Int64 = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var count = 0
            while index < bytes.count, let digit = decimal(bytes[index]) {
                count += 1
                guard count <= 7 else { throw fail("more than 7 fractional digits (finer than 100 ns)") }
                fractionTicks = fractionTicks * 10 + digit
                index += 1
            }
            guard count > 0 else { throw fail("'.' must be followed by 1 to 7 digits") }
            for _ in count..<7 { fractionTicks *= 10 }
        }

        var offsetSeconds: Int64 = 0
        guard index < bytes.count else { throw fail("missing the time zone ('Z' or ±hh:mm)") }
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            let offsetHours = try digits(2, "offset hours")
            try expect([UInt8(ascii: ":")], "':' in the offset")
            let offsetMinutes = try digits(2, "offset minutes")
            guard offsetHours <= 23, offsetMinutes <= 59 else { throw fail("offset out of range") }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        default:
            throw fail("expected 'Z' or ±hh:mm at offset \(index)")
        }
        guard index == bytes.count else { throw fail("unexpected text after the time zone") }

        guard (1...12).contains(month) else { throw fail("month \(month) out of range") }
        guard day >= 1, day <= daysInMonth(year: year, month: month) else {
            throw fail("day \(day) out of range for \(year)-\(month)")
        }
        guard hour <= 23 else { throw fail("hour \(hour) out of range") }
        guard minute <= 59 else { throw fail("minute \(minute) out of range") }
        guard second <= 59 else { throw fail("second \(second) out of range (leap seconds are not supported)") }

        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return seconds * ticksPerSecond + fractionTicks
    }

    /// The instant of ``canonicalLength`` bytes in exactly the canonical form, in range (the
    /// text ``formatCanonical(ticks:into:)`` writes for it); nil for anything else, which
    /// ``parse(_:)`` then reads or explains. The fold reads two dates per event: this is
    /// that path, with fixed positions and no string.
    /// The ticks of `yyyy-MM-ddTHH:mm:ss.fffffffZ` at `text` (28 bytes), nil for any other text.
    static func parseCanonical(_ text: UnsafePointer<UInt8>) -> Int64? {
        // yyyy-MM-ddTHH:mm:ss.fffffffZ, read as four little-endian 8-byte words (the last one
        // overlaps the third): bytes 0-7, 8-15, 16-23, 20-27. A fold reads two dates per
        // event; byte by byte this was a tenth of its work outside the cipher.
        let raw = UnsafeRawPointer(text)
        let words = (raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                     raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 20, as: UInt64.self))
        // Per word: which bytes are digits (0xFF lanes), and the separators the others must be.
        let digitLanes: (UInt64, UInt64, UInt64, UInt64) = (0x00FF_FF00_FFFF_FFFF, 0xFFFF_00FF_FF00_FFFF,
                                                            0xFFFF_FFFF_00FF_FF00, 0x00FF_FFFF_FFFF_FFFF)
        // "-" at 4 and 7; "T" at 10, ":" at 13; ":" at 16, "." at 19; "Z" at 27.
        let separators: (UInt64, UInt64, UInt64, UInt64) = (0x2D00_002D_0000_0000, 0x0000_3A00_0054_0000,
                                                            0x0000_0000_2E00_003A, 0x5A00_0000_0000_0000)
        let zeros: UInt64 = 0x3030_3030_3030_3030, highNibbles: UInt64 = 0xF0F0_F0F0_F0F0_F0F0, six: UInt64 = 0x0606_0606_0606_0606
        // A digit lane holds 0x30...0x39: high nibble 3, and still 3 after adding 6 (no carry
        // leaves a lane whose high nibble is 3). Each word's bad lanes, or-ed: zero when valid.
        @inline(__always) func bad(_ word: UInt64, _ lanes: UInt64, _ separator: UInt64) -> UInt64 {
            let d = word & lanes
            return (word & ~lanes ^ separator) | (d & highNibbles ^ zeros & lanes) | ((d &+ six & lanes) & highNibbles ^ zeros & lanes)
        }
        guard bad(words.0, digitLanes.0, separators.0) | bad(words.1, digitLanes.1, separators.1)
                | bad(words.2, digitLanes.2, separators.2) | bad(words.3, digitLanes.3, separators.3) == 0 else { return nil }
        let digits = (words.0 & digitLanes.0 &- zeros & digitLanes.0, words.1 & digitLanes.1 &- zeros & digitLanes.1,
                      words.2 & digitLanes.2 &- zeros & digitLanes.2, words.3 & digitLanes.3 &- zeros & digitLanes.3)
        func digit(_ word: UInt64, _ lane: UInt64) -> Int64 { Int64((word >> (8 * lane)) & 0xFF) }
        func two(_ word: UInt64, _ lane: UInt64) -> Int64 { digit(word, lane) * 10 + digit(word, lane + 1) }
        let year = two(digits.0, 0) * 100 + two(digits.0, 2), month = two(digits.0, 5), day = two(digits.1, 0)
        let hour = two(digits.1, 3), minute = two(digits.1, 6), second = two(digits.2, 1)
        // The seven fraction digits are lanes 0-6 of the last word: shifted up one lane they
        // are eight digits with a leading 0, combined in three multiplies.
        var fraction = digits.3 << 8
        fraction = (fraction &* 10 &+ (fraction >> 8)) & 0x00FF_00FF_00FF_00FF
        fraction = ((fraction &* ((100 << 16) + 1)) >> 16) & 0x0000_FFFF_0000_FFFF
        fraction = (fraction &* ((10_000 << 32) + 1)) >> 32
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
              hour <= 23, minute <= 59, second <= 59 else { return nil }
        let seconds = daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
        return seconds * ticksPerSecond + Int64(fraction)
    }

    private static func decimal(_ byte: UInt8) -> Int64? {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? Int64(byte - UInt8(ascii: "0")) : nil
    }

    private static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2:
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
            return leap ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Length of the canonical form `yyyy-MM-ddTHH:mm:ss.fffffffZ`.
    package static let canonicalLength = 28

    private static func format(ticks: Int64) -> String {
        String(unsafeUninitializedCapacity: canonicalLength) { buffer in
            formatCanonical(ticks: ticks, into: buffer.baseAddress!)
            return canonicalLength
        }
    }

    /// Writes the canonical form of `ticks` (``canonicalLength`` bytes) at `out`.
    private static func formatCanonical(ticks: Int64, into out: UnsafeMutablePointer<UInt8>) {
        // Floor division so instants before 1970 still get a non-negative fraction.
        var seconds = ticks / ticksPerSecond
        var fraction = ticks % ticksPerSecond
        if fraction < 0 {
            fraction += ticksPerSecond
            seconds -= 1
        }
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let (year, month, day) = civilFromDays(days)
        var at = 0
        func append(_ value: Int64, width: Int) {
            var rest = value
            for position in stride(from: at + width - 1, through: at, by: -1) {
                out[position] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            }
            at += width
        }
        func append(_ character: Unicode.Scalar) {
            out[at] = UInt8(ascii: character)
            at += 1
        }
        append(year, width: 4)
        append("-")
        append(month, width: 2)
        append("-")
        append(day, width: 2)
        append("T")
        append(secondOfDay / 3600, width: 2)
        append(":")
        append(secondOfDay % 3600 / 60, width: 2)
        append(":")
        append(secondOfDay % 60, width: 2)
        append(".")
        append(fraction, width: 7)
        append("Z")
    }
}
