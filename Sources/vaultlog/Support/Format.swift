import Foundation
import VaultModel

/// Text forms of times and sizes, all UTC so output does not depend on the machine.
enum Format {
    /// `2026-01-01 10:00:00Z`: UTC, labelled, to the second, for people.
    static func time(millis: Int64) -> String { plain(millis: millis) + "Z" }

    /// `2026-01-01 10:00:00`, the UTC digits without the label.
    private static func plain(millis: Int64) -> String {
        let (seconds, _) = split(millis)
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }

    /// `2026-01-01T10:00:00.000Z` (RFC 3339, UTC, milliseconds), for machines.
    static func iso(millis: Int64) -> String {
        let (_, fraction) = split(millis)
        return plain(millis: millis).replacingOccurrences(of: " ", with: "T") + String(format: ".%03dZ", fraction)
    }

    /// `time(millis:)` of a Bitwarden date text (`2026-01-01T10:00:00.0000000Z`); the text
    /// itself if it does not parse.
    static func time(bitwardenText text: String) -> String {
        guard let date = try? BitwardenDate(text) else { return text }
        return time(date.date)
    }

    /// `time(millis:)` of a `Date`.
    static func time(_ date: Date) -> String {
        time(millis: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
    }

    private static func split(_ millis: Int64) -> (seconds: Int64, fraction: Int) {
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        return (seconds, Int(millis - seconds * 1000))
    }

    /// `1.5 MiB`.
    static func bytes(_ count: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
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
