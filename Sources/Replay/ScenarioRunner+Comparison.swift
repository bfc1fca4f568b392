import BitwardenAPI
import BitwardenAPINIO
import BitwardenEmulator
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel

extension ScenarioRunner {
    // MARK: Comparison

    /// Readable differences; only the parts `expected` gives are compared.
    public static func compare(_ expected: ScenarioExpectation, _ actual: ScenarioExpectation) -> [String] {
        var lines: [String] = []
        if let outcomes = expected.outcomes {
            for ref in outcomes.keys.sorted() {
                let want = outcomes[ref]!, got = actual.outcomes?[ref] ?? []
                if want != got {
                    lines.append("outcomes.\(ref): expected \(want)")
                    lines.append("outcomes.\(ref):   actual \(got)")
                }
            }
        }
        if let pending = expected.pending {
            for user in pending.keys.sorted() where pending[user] != actual.pending?[user] {
                lines.append("pending.\(user): expected \(pending[user]!), actual \(actual.pending?[user].map(String.init) ?? "nothing")")
            }
        }
        if let deadLetters = expected.deadLetters {
            for user in deadLetters.keys.sorted() {
                let want = deadLetters[user]!.sorted(), got = (actual.deadLetters?[user] ?? []).sorted()
                if want != got { lines.append("deadLetters.\(user): expected \(want), actual \(got)") }
            }
        }
        for (label, wanted, seen) in [("folders", expected.folders, actual.folders), ("deviceFolders", expected.deviceFolders, actual.deviceFolders)] {
            guard let wanted else { continue }
            for user in wanted.keys.sorted() {
                let want = wanted[user]!.sorted(), got = (seen?[user] ?? []).sorted()
                if want != got { lines.append("\(label).\(user): expected \(want), actual \(got)") }
            }
        }
        if let syncResults = expected.syncResults, syncResults != (actual.syncResults ?? []) {
            lines.append("syncResults: expected \(syncResults), actual \(actual.syncResults ?? [])")
        }
        if let server = expected.server {
            for user in server.keys.sorted() {
                var remaining = actual.server?[user] ?? []
                var missing: [ScenarioItemExpectation] = []
                // Most specific expectations first, so a loose one cannot take a precise one's item.
                for want in server[user]!.sorted(by: { specificity($0) > specificity($1) }) {
                    if let index = remaining.firstIndex(where: { matches(want, $0) }) {
                        remaining.remove(at: index)
                    } else {
                        missing.append(want)
                    }
                }
                for item in missing { lines.append("server.\(user): missing    \(item)") }
                for item in remaining { lines.append("server.\(user): unexpected \(item)") }
            }
        }
        return lines
    }

    static func specificity(_ e: ScenarioItemExpectation) -> Int {
        [e.name != nil, e.namePrefix != nil, e.password != nil, e.notes != nil, e.passwordHistory != nil, e.deleted != nil,
         e.folder != nil, e.username != nil, e.favorite != nil, e.attachments != nil].filter { $0 }.count
    }

    static func matches(_ want: ScenarioItemExpectation, _ got: ScenarioItemExpectation) -> Bool {
        if let name = want.name, got.name != name { return false }
        if let prefix = want.namePrefix, !(got.name ?? "").hasPrefix(prefix) { return false }
        if let password = want.password, got.password != password { return false }
        if let notes = want.notes, got.notes != notes { return false }
        if let username = want.username, got.username != username { return false }
        if let history = want.passwordHistory, got.passwordHistory ?? [] != history { return false }
        if let deleted = want.deleted, (got.deleted ?? false) != deleted { return false }
        if let folder = want.folder, (got.folder ?? "") != folder { return false }
        if let favorite = want.favorite, (got.favorite ?? false) != favorite { return false }
        if let attachments = want.attachments, (got.attachments ?? []).sorted() != attachments.sorted() { return false }
        return true
    }
}
