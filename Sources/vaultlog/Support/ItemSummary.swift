import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// What the CLI shows of an encrypted item: its name and kind, never a secret unless asked
/// (`--reveal`). Built from `Cipher.decrypt(userKey:)`.
struct ItemSummary: Encodable {
    /// The mask shown instead of a secret.
    static let mask = "********"

    var type: String
    var name: String?
    var username: String?
    /// The password: the mask unless revealed; nil when the item has none.
    var password: String?
    var uris: [String]?
    var folderId: String?
    var organizationId: String?
    var favorite: Bool?
    /// In the trash.
    var deleted: Bool
    var revisionDate: String?
    var passwordHistoryCount: Int?
    /// Why it could not be decrypted (the other fields are then empty).
    var decryptError: String?

    init(_ cipher: Cipher, userKey: SymmetricCryptoKey, reveal: Bool) {
        type = cipher.type.description
        folderId = cipher.folderId
        organizationId = cipher.organizationId
        favorite = cipher.favorite
        deleted = cipher.deletedDate != nil
        revisionDate = cipher.revisionDate?.text
        do {
            let view = try cipher.decrypt(userKey: userKey)
            name = view.name
            username = view.login?.username
            if let secret = view.login?.password {
                password = reveal ? secret : Self.mask
            }
            uris = view.login?.uris?.compactMap(\.uri)
            passwordHistoryCount = view.passwordHistory?.count
        } catch {
            decryptError = "\(error)"
        }
    }

    /// One line: `"Bank" (login, user alice@example.com, password ********)`.
    var text: String {
        if let decryptError { return "\(type) item that does not decrypt (\(decryptError))" }
        var details = [type]
        if let username { details.append("user \(username)") }
        if let password { details.append("password \(password)") }
        if deleted { details.append("in the trash") }
        if let passwordHistoryCount, passwordHistoryCount > 0 { details.append("\(passwordHistoryCount) old password(s) in history") }
        return "\"\(name ?? "")\" (\(details.joined(separator: ", ")))"
    }
}
