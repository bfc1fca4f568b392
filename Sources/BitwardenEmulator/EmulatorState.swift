import Foundation
import VaultCrypto
import VaultJSON
import VaultModel

/// A cipher as the emulator stores it: the client's data fields verbatim (unknown fields
/// included) plus the server-owned metadata.
struct StoredCipher: Codable, Sendable {
    var id: String
    var userId: String
    /// Insertion order, so lists and sync are deterministic.
    var sequence: Int
    var type: Int
    /// Every field of the last create or update body except request-only and server-owned keys.
    var data: JSONObject
    /// Attachment metadata (server-owned; request bodies cannot change it).
    var attachments: JSONValue?
    var creationTicks: Int64
    var revisionTicks: Int64
    var deletedTicks: Int64?
}

/// A folder (`FolderResponseModel`).
struct StoredFolder: Codable, Sendable {
    var id: String
    var userId: String
    var sequence: Int
    var name: String
    var revisionTicks: Int64
}

/// A refresh token and its sliding expiry.
struct StoredRefreshToken: Codable, Sendable {
    var userId: String
    var clientId: String
    var expiresTicks: Int64
}

/// Everything the emulator knows; the state file is this, as JSON.
struct EmulatorState: Codable, Sendable {
    /// Version of the state-file layout.
    var formatVersion = 1
    var accounts: [String: StoredAccount] = [:]
    var ciphers: [String: StoredCipher] = [:]
    var folders: [String: StoredFolder] = [:]
    var refreshTokens: [String: StoredRefreshToken] = [:]
    /// Base64 HMAC-SHA256 key that signs access tokens.
    var signingKey: String
    var nextSequence = 0
    /// The uploaded (encrypted) attachment files by ``attachmentFileKey(cipherId:attachmentId:)``;
    /// base64 in the state file. An announced attachment has no entry until its file arrives.
    var attachmentFiles: [String: Data] = [:]

    init(signingKey: String) {
        self.signingKey = signingKey
    }

    enum CodingKeys: String, CodingKey {
        case formatVersion, accounts, ciphers, folders, refreshTokens, signingKey, nextSequence, attachmentFiles
    }

    /// Reads a state file; one written before attachments existed has no `attachmentFiles`.
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        formatVersion = try c.decode(Int.self, forKey: .formatVersion)
        accounts = try c.decode([String: StoredAccount].self, forKey: .accounts)
        ciphers = try c.decode([String: StoredCipher].self, forKey: .ciphers)
        folders = try c.decode([String: StoredFolder].self, forKey: .folders)
        refreshTokens = try c.decode([String: StoredRefreshToken].self, forKey: .refreshTokens)
        signingKey = try c.decode(String.self, forKey: .signingKey)
        nextSequence = try c.decode(Int.self, forKey: .nextSequence)
        attachmentFiles = try c.decodeIfPresent([String: Data].self, forKey: .attachmentFiles) ?? [:]
    }

    static func attachmentFileKey(cipherId: String, attachmentId: String) -> String {
        cipherId.lowercased() + "/" + attachmentId
    }

    mutating func removeAttachmentFiles(cipherId: String) {
        let prefix = cipherId.lowercased() + "/"
        attachmentFiles = attachmentFiles.filter { !$0.key.hasPrefix(prefix) }
    }

    func account(email: String) -> StoredAccount? {
        let wanted = email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        return accounts.values.first { $0.email.lowercased() == wanted }
    }

    mutating func takeSequence() -> Int {
        nextSequence += 1
        return nextSequence
    }

    func ciphers(of userId: String) -> [StoredCipher] {
        ciphers.values.filter { $0.userId == userId }.sorted { $0.sequence < $1.sequence }
    }

    func folders(of userId: String) -> [StoredFolder] {
        folders.values.filter { $0.userId == userId }.sorted { $0.sequence < $1.sequence }
    }
}

/// How each flavour writes and rounds instants.
extension EmulatorFlavor {
    /// The smallest step of a stored date, in 100-ns ticks (Bitwarden `DATETIME2(7)`; Vaultwarden µs).
    var tickUnit: Int64 { self == .bitwarden ? 1 : 10 }

    /// An instant rounded down to this flavour's precision.
    func ticks(_ date: Date) -> Int64 {
        let raw = Int64((date.timeIntervalSince1970 * 10_000_000).rounded(.down))
        return raw - ((raw % tickUnit) + tickUnit) % tickUnit
    }

    /// The wire text: 7 fractional digits (Bitwarden) or 6 (Vaultwarden), always `Z`.
    func dateText(_ ticks: Int64) -> String {
        let text = BitwardenDate(ticksSince1970: ticks).text   // canonical 7 digits
        guard self == .vaultwarden else { return text }
        var trimmed = text
        trimmed.remove(at: trimmed.index(trimmed.endIndex, offsetBy: -2))   // the 7th digit (0 after rounding)
        return trimmed
    }

    func date(_ ticks: Int64?) -> JSONValue {
        ticks.map { .string(dateText($0)) } ?? .null
    }
}
