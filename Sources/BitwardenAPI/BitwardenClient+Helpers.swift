import Foundation
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultJSON
import VaultModel

extension BitwardenClient {
    // MARK: Helpers

    func tokenSet(_ reply: LooseJSON) -> TokenSet? {
        guard let access = reply.string("access_token") else { return nil }
        let lifetime = reply.int("expires_in") ?? 3600
        let now = state.withLock { $0.configuration.now() }
        return TokenSet(accessToken: access, refreshToken: reply.string("refresh_token") ?? "",
                        expiresAt: now.addingTimeInterval(TimeInterval(lifetime)))
    }

    func requestBody(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?, route: String) throws -> Data {
        do {
            return try cipher.requestBody(lastKnownRevisionDate: lastKnownRevisionDate)
        } catch {
            throw BitwardenAPIError(kind: .rejected, status: nil, message: "cannot encode the cipher: \(error)", route: route)
        }
    }

    func decode<T: Decodable>(_ type: T.Type, _ data: Data, route: String) throws -> T {
        do {
            return try JSONTapeDecoder().decode(T.self, from: data)
        } catch {
            throw malformed(route, "cannot decode \(T.self): \(error)")
        }
    }

    func malformed(_ route: String, _ detail: String) -> BitwardenAPIError {
        BitwardenAPIError(kind: .unavailable, status: nil, message: "malformed reply: \(detail)", route: route)
    }

    static func formEncode(_ pairs: [(String, String)]) -> Data {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let text = pairs.map { key, value in
            (key.addingPercentEncoding(withAllowedCharacters: allowed) ?? key) + "="
                + (value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value)
        }.joined(separator: "&")
        return Data(text.utf8)
    }

    /// The `sub` claim of a JWT (clients read the user id from the access token).
    static func subject(ofJWT token: String) -> String? {
        let parts = token.split(separator: ".")
        guard parts.count >= 2 else { return nil }
        var payload = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        guard let data = Data(base64Encoded: payload),
              let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        return object["sub"] as? String
    }
}
