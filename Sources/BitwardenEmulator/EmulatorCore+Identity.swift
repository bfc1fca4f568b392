import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultJSON
import VaultModel

extension EmulatorCore {
    // MARK: Auth

    func authenticate(_ request: EmulatorRequest) -> Result<String, EmulatorResponse> {
        guard let header = request.header("Authorization") else {
            return .failure(ErrorBodies.unauthorized(flavor, reason: "No access token provided"))
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .failure(ErrorBodies.unauthorized(flavor, reason: "Authorization is not a bearer token"))
        }
        let seconds = Int64(configuration.now().timeIntervalSince1970.rounded(.down))
        return withLock { state in
            switch AccessTokens.verify(String(parts[1]), signingKey: state.signingKey, now: seconds) {
            case .failure(let failure):
                return .failure(ErrorBodies.unauthorized(flavor, reason: failure.description))
            case .success(let claims):
                guard let account = state.accounts[claims.userId] else {
                    return .failure(ErrorBodies.unauthorized(flavor, reason: "Invalid claim"))
                }
                guard account.securityStamp == claims.securityStamp else {
                    return .failure(ErrorBodies.unauthorized(flavor, reason: "Invalid security stamp"))
                }
                return .success(claims.userId)
            }
        }
    }

    func prelogin(_ request: EmulatorRequest) -> EmulatorResponse {
        guard case .object(let body)? = try? JSONValue(parsing: request.body),
              case .string(let email)? = body["email"] ?? body["Email"] else {
            var errors = ValidationErrors()
            errors.add("Email", "The Email field is required.")
            return ErrorBodies.invalidModel(flavor, errors)
        }
        // An unknown email gets the default KDF, so prelogin does not reveal who has an account.
        let kdf = withLock { $0.account(email: email)?.kdf } ?? .default
        var out: JSONObject = ["kdf": .integer(Int64(kdf.kdfType))]
        switch kdf {
        case .pbkdf2(let iterations):
            out["kdfIterations"] = .integer(Int64(iterations))
            out["kdfMemory"] = .null
            out["kdfParallelism"] = .null
        case .argon2id(let iterations, let memory, let parallelism):
            out["kdfIterations"] = .integer(Int64(iterations))
            out["kdfMemory"] = .integer(Int64(memory))
            out["kdfParallelism"] = .integer(Int64(parallelism))
        }
        return .json(200, out)
    }

    func token(_ request: EmulatorRequest) -> EmulatorResponse {
        let form = FormEncoding.parse(request.body)
        let clientId = form["client_id"] ?? ""
        let validClients: Set<String> = ["web", "browser", "desktop", "mobile", "cli", "connector"]
        guard validClients.contains(clientId) else {
            return ErrorBodies.oauth("invalid_client", description: "Unknown client_id '\(clientId)'.", message: nil)
        }
        switch form["grant_type"] {
        case "password":
            guard let email = form["username"], let hash = form["password"], !email.isEmpty, !hash.isEmpty else {
                return ErrorBodies.oauth("invalid_request", description: "username and password are required.", message: nil)
            }
            let scope = form["scope"] ?? ""
            if flavor == .vaultwarden {
                guard scope == "api offline_access" else {
                    return ErrorBodies.oauth("invalid_scope", description: "Scope not supported", message: "Scope not supported")
                }
                for field in ["deviceIdentifier", "deviceName", "deviceType"] where (form[field] ?? "").isEmpty {
                    let message = "\(field) cannot be blank"
                    return ErrorBodies.oauth("invalid_request", description: message, message: message)
                }
            } else if !scope.split(separator: " ").contains("api") {
                return ErrorBodies.oauth("invalid_scope", description: "The scope must include 'api'.", message: nil)
            }
            return withLock { state in
                guard let account = state.account(email: email),
                      constantTimeEquals(Array(account.masterPasswordHash.utf8), Array(hash.utf8)) else {
                    logger.debug("emulator: rejected password grant", metadata: ["email": "\(email)"])
                    return ErrorBodies.oauth("invalid_grant", description: "invalid_username_or_password",
                                             message: "Username or password is incorrect. Try again.")
                }
                let refresh = configuration.random.tokenString()
                state.refreshTokens[refresh] = StoredRefreshToken(
                    userId: account.id, clientId: clientId, expiresTicks: refreshExpiry())
                return tokenResponse(account: account, clientId: clientId, deviceId: form["deviceIdentifier"],
                                     refreshToken: refresh, state: state)
            }
        case "refresh_token":
            guard let refresh = form["refresh_token"], !refresh.isEmpty else {
                return ErrorBodies.oauth("invalid_request", description: "refresh_token is required.", message: nil)
            }
            return withLock { state in
                let now = nowTicks()
                guard var stored = state.refreshTokens[refresh], stored.expiresTicks > now,
                      let account = state.accounts[stored.userId] else {
                    state.refreshTokens[refresh] = nil
                    return ErrorBodies.oauth("invalid_grant", description: "invalid_grant", message: nil)
                }
                stored.expiresTicks = refreshExpiry()   // sliding window
                state.refreshTokens[refresh] = stored
                return tokenResponse(account: account, clientId: stored.clientId, deviceId: nil, refreshToken: refresh, state: state)
            }
        default:
            return ErrorBodies.oauth("unsupported_grant_type", description: "grant_type must be password or refresh_token.", message: nil)
        }
    }

    func refreshExpiry() -> Int64 {
        nowTicks() + Int64(configuration.refreshTokenLifetime * 10_000_000)
    }

    func tokenResponse(account: StoredAccount, clientId: String, deviceId: String?, refreshToken: String,
                               state: EmulatorState) -> EmulatorResponse {
        let issuedAt = Int64(configuration.now().timeIntervalSince1970.rounded(.down))
        let lifetime = Int64(configuration.tokenLifetime)
        let access = AccessTokens.issue(account: account, clientId: clientId, deviceId: deviceId, issuedAt: issuedAt,
                                        lifetime: lifetime, jti: configuration.random.tokenString(byteCount: 16),
                                        signingKey: state.signingKey)
        let kdf = account.kdf
        var kdfMemory: JSONValue = .null, kdfParallelism: JSONValue = .null
        if case .argon2id(_, let m, let p) = kdf {
            kdfMemory = .integer(Int64(m))
            kdfParallelism = .integer(Int64(p))
        }
        let body: JSONObject = [
            "access_token": .string(access),
            "expires_in": .integer(lifetime),
            "token_type": .string("Bearer"),
            "refresh_token": .string(refreshToken),
            "scope": .string("api offline_access"),
            "Key": .string(account.protectedUserKey),
            "PrivateKey": account.privateKey.map(JSONValue.string) ?? .null,
            "AccountKeys": account.privateKey.map { key in
                .object(["publicKeyEncryptionKeyPair": .object([
                    "wrappedPrivateKey": .string(key), "publicKey": account.publicKey.map(JSONValue.string) ?? .null,
                    "Object": .string("publicKeyEncryptionKeyPair"),
                ]), "Object": .string("privateKeys")])
            } ?? .null,
            "Kdf": .integer(Int64(kdf.kdfType)),
            "KdfIterations": .integer(Int64(kdfIterations(kdf))),
            "KdfMemory": kdfMemory,
            "KdfParallelism": kdfParallelism,
            "ResetMasterPassword": .bool(false),
            "ForcePasswordReset": .bool(false),
            "MasterPasswordPolicy": .object(["Object": .string("masterPasswordPolicy")]),
            "UserDecryptionOptions": .object([
                "HasMasterPassword": .bool(true),
                "MasterPasswordUnlock": .object([
                    "Kdf": .object(["KdfType": .integer(Int64(kdf.kdfType)), "Iterations": .integer(Int64(kdfIterations(kdf))),
                                    "Memory": kdfMemory, "Parallelism": kdfParallelism]),
                    "MasterKeyEncryptedUserKey": .string(account.protectedUserKey),
                    "Salt": .string(account.email.lowercased()),
                ]),
                "Object": .string("userDecryptionOptions"),
            ]),
        ]
        logger.debug("emulator: issued tokens", metadata: ["user": "\(account.id)", "client": "\(clientId)"])
        return .json(200, body)
    }

    func kdfIterations(_ kdf: KdfConfig) -> Int {
        switch kdf {
        case .pbkdf2(let i): i
        case .argon2id(let i, _, _): i
        }
    }
}
