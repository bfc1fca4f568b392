import Crypto
import Foundation
import VaultCrypto
import VaultJSON
import VaultModel

/// Access tokens are JWTs (HS256, signed with the state's key) carrying the claims Bitwarden
/// clients read (`sub`, `email`, `exp`, `sstamp`, ...). Stateless: expiry is checked against
/// the injected clock, and rotating an account's security stamp invalidates its tokens.
enum AccessTokens {
    struct Claims {
        let userId: String
        let securityStamp: String
        let expires: Int64
    }

    static func issue(account: StoredAccount, clientId: String, deviceId: String?, issuedAt: Int64, lifetime: Int64,
                      jti: String, signingKey: String) -> String {
        let header: JSONObject = ["alg": .string("HS256"), "kid": .string("emulator"), "typ": .string("at+jwt")]
        let payload: JSONObject = [
            "nbf": .integer(issuedAt),
            "exp": .integer(issuedAt + lifetime),
            "iss": .string("http://localhost|emulator"),
            "client_id": .string(clientId),
            "sub": .string(account.id),
            "auth_time": .integer(issuedAt),
            "idp": .string("bitwarden"),
            "premium": .bool(false),
            "email": .string(account.email),
            "email_verified": .bool(true),
            "name": account.name.map(JSONValue.string) ?? .null,
            "sstamp": .string(account.securityStamp),
            "device": deviceId.map(JSONValue.string) ?? .null,
            "jti": .string(jti),
            "iat": .integer(issuedAt),
            "scope": .array([.string("api"), .string("offline_access")]),
            "amr": .array([.string("Application")]),
        ]
        let signingInput = encode(header) + "." + encode(payload)
        return signingInput + "." + sign(signingInput, key: signingKey)
    }

    /// The claims of a valid token, or why it is not valid.
    static func verify(_ token: String, signingKey: String, now: Int64) -> Result<Claims, TokenFailure> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(.malformed) }
        let signingInput = parts[0] + "." + parts[1]
        guard constantTimeEquals(Array(sign(String(signingInput), key: signingKey).utf8), Array(parts[2].utf8)) else {
            return .failure(.badSignature)
        }
        guard let payloadBytes = Base64.decode(base64URLToStandard(String(parts[1]))),
              case .object(let payload)? = try? JSONValue(parsing: payloadBytes),
              case .string(let sub)? = payload["sub"], case .integer(let exp)? = payload["exp"],
              case .string(let stamp)? = payload["sstamp"] else {
            return .failure(.malformed)
        }
        guard exp > now else { return .failure(.expired) }
        return .success(Claims(userId: sub, securityStamp: stamp, expires: exp))
    }

    enum TokenFailure: Error, CustomStringConvertible {
        case malformed, badSignature, expired
        var description: String {
            switch self {
            case .malformed: "The access token is malformed"
            case .badSignature: "The access token signature is invalid"
            case .expired: "The access token expired"
            }
        }
    }

    private static func encode(_ object: JSONObject) -> String {
        let data = (try? JSONValue.object(object).serializedJSON()) ?? Data()
        return Base64.encode(Array(data)).base64URL
    }

    private static func sign(_ input: String, key: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Base64.decode(key) ?? []))
        return Base64.encode(Array(mac)).base64URL
    }

    /// Base64url to padded standard base64, byte by byte (`replacingOccurrences` goes through
    /// NSString on Linux, and every request's token passes here).
    static func base64URLToStandard(_ s: String) -> String {
        var bytes = s.utf8.map { $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0 }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
