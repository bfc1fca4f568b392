import Foundation
import VaultModel

/// Text forms of times and sizes (Foundation's format styles), all UTC so output does not
/// depend on the machine.
enum Format {
    /// `2026-01-01 10:00:00Z`: UTC, labelled, to the second, for people.
    static func time(millis: Int64) -> String { time(date(millis)) }

    /// `2026-01-01T10:00:00.000Z` (RFC 3339, UTC, milliseconds), for machines.
    static func iso(millis: Int64) -> String {
        date(millis).formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// `time(millis:)` of a Bitwarden date text (`2026-01-01T10:00:00.0000000Z`); the text
    /// itself if it does not parse.
    static func time(bitwardenText text: String) -> String {
        guard let date = try? BitwardenDate(text) else { return text }
        return time(date.date)
    }

    /// `time(millis:)` of a `Date`.
    static func time(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(dateTimeSeparator: .space))
    }

    /// The middle of the millisecond: the styles truncate, and a `Double` near 1.7e9 s is off
    /// by far less than half a millisecond, so the printed millisecond is always `millis`'s.
    private static func date(_ millis: Int64) -> Date {
        Date(timeIntervalSince1970: (Double(millis) + 0.5) / 1000)
    }

    /// `1.6 MB`: decimal units, as file sizes are shown.
    static func bytes(_ count: Int) -> String {
        Int64(count).formatted(.byteCount(style: .file))
    }

    /// `12.3`: one decimal.
    static func decimal(_ value: Double) -> String {
        value.formatted(.number.precision(.fractionLength(1)))
    }

    /// Lays out rows as left-aligned columns separated by two spaces.
    static func table(_ rows: [[String]]) -> [String] {
        guard let columns = rows.map(\.count).max() else { return [] }
        var widths = Array(repeating: 0, count: columns)
        for row in rows {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        return rows.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
    }
}
