import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// The server's logic without HTTP: routes a request against the in-memory state. The
/// Hummingbird layer (``BitwardenEmulator``) adds sockets, faults and admin routes.
final class EmulatorCore: Sendable {
    let configuration: EmulatorConfiguration
    let state: Mutex<EmulatorState>

    var flavor: EmulatorFlavor { configuration.flavor }
    var logger: Logger { configuration.logger }

    init(configuration: EmulatorConfiguration, state: EmulatorState? = nil) {
        self.configuration = configuration
        self.state = Mutex(state ?? EmulatorState(signingKey: Base64.encode(configuration.random.bytes(32))))
    }

    // MARK: Ids and time

    func newID() -> String { configuration.makeID?() ?? configuration.random.uuidString() }

    func nowTicks() -> Int64 { flavor.ticks(configuration.now()) }

    /// A new revision date: now, but strictly after `previous` even if the injected clock is frozen.
    func bumped(after previous: Int64?) -> Int64 {
        let now = nowTicks()
        guard let previous, now <= previous else { return now }
        return previous + flavor.tickUnit
    }

    // MARK: Routing

    /// Strips the self-hosted prefixes and dispatches.
    func handle(_ request: EmulatorRequest) -> EmulatorResponse {
        let segments = request.path.split(separator: "/").map(String.init)
        guard let area = segments.first else { return alive() }
        let rest = Array(segments.dropFirst())
        let method = request.method.uppercased()
        switch area {
        case "identity":
            let route = RoutePath(method: method, segments: rest)
            if route.matches("POST", "accounts/prelogin") || route.matches("POST", "accounts/prelogin/password") {
                return prelogin(request)
            }
            if route.matches("POST", "connect/token") { return token(request) }
            return ErrorBodies.noRoute(flavor, path: request.path)
        case "api":
            if method == "POST", rest == ["accounts", "prelogin"] { return prelogin(request) }
            if rest == ["alive"] || rest == ["now"] { return alive() }
            let userId: String
            switch authenticate(request) {
            case .success(let id): userId = id
            case .failure(let response): return response
            }
            return api(method: method, rest, request: request, userId: userId)
        case "alive":
            return alive()
        default:
            return ErrorBodies.noRoute(flavor, path: request.path)
        }
    }

    private func api(method: String, _ rest: [String], request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let r = RoutePath(method: method, segments: rest)
        if r.matches("GET", "sync") { return sync(userId: userId, excludeDomains: request.query["excludeDomains"] == "true") }
        if r.matches("GET", "accounts/revision-date") { return revisionDate(userId: userId) }
        if r.matches("GET", "accounts/profile") { return .json(200, withLock { profile($0.accounts[userId]!) }) }
        if r.matches("GET", "folders") { return listFolders(userId: userId) }
        if r.matches("POST", "folders") { return createFolder(request, userId: userId) }
        if let p = r.match("GET", "folders/:") { return getFolder(p[0], userId: userId) }
        if let p = r.match("PUT", "folders/:") ?? r.match("POST", "folders/:") { return updateFolder(p[0], request, userId: userId) }
        if let p = r.match("DELETE", "folders/:") { return deleteFolder(p[0], userId: userId) }
        if r.matches("GET", "ciphers") { return listCiphers(userId: userId) }
        if r.matches("POST", "ciphers") { return createCipher(request, userId: userId, wrapped: false) }
        if r.matches("POST", "ciphers/create") { return createCipher(request, userId: userId, wrapped: true) }
        if let p = r.match("GET", "ciphers/:") { return getCipher(p[0], userId: userId, details: false) }
        if let p = r.match("GET", "ciphers/:/details") ?? r.match("GET", "ciphers/:/full-details") {
            return getCipher(p[0], userId: userId, details: true)
        }
        if let p = r.match("PUT", "ciphers/:") ?? r.match("POST", "ciphers/:") { return updateCipher(p[0], request, userId: userId) }
        if let p = r.match("PUT", "ciphers/:/delete") { return softDelete(p[0], userId: userId) }
        // `POST ciphers/{id}/delete` is an obsolete alias of the permanent delete on both servers.
        if let p = r.match("DELETE", "ciphers/:") ?? r.match("POST", "ciphers/:/delete") { return permanentDelete(p[0], userId: userId) }
        if let p = r.match("PUT", "ciphers/:/restore") { return restore(p[0], userId: userId) }
        return ErrorBodies.noRoute(flavor, path: request.path)
    }

    private func alive() -> EmulatorResponse {
        .json(200, .string(flavor.dateText(nowTicks())))
    }

    private func withLock<T>(_ body: (inout EmulatorState) -> T) -> T {
        state.withLock { body(&$0) }
    }

    // MARK: Auth

    private func authenticate(_ request: EmulatorRequest) -> Result<String, EmulatorResponse> {
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

    private func prelogin(_ request: EmulatorRequest) -> EmulatorResponse {
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

    private func token(_ request: EmulatorRequest) -> EmulatorResponse {
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

    private func refreshExpiry() -> Int64 {
        nowTicks() + Int64(configuration.refreshTokenLifetime * 10_000_000)
    }

    private func tokenResponse(account: StoredAccount, clientId: String, deviceId: String?, refreshToken: String,
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

    private func kdfIterations(_ kdf: KdfConfig) -> Int {
        switch kdf {
        case .pbkdf2(let i): i
        case .argon2id(let i, _, _): i
        }
    }

    // MARK: Sync, profile, revision date

    func profile(_ account: StoredAccount) -> JSONObject {
        [
            "object": .string("profile"),
            "id": .string(account.id),
            "name": account.name.map(JSONValue.string) ?? .null,
            "email": .string(account.email),
            "emailVerified": .bool(true),
            "premium": .bool(false),
            "premiumFromOrganization": .bool(false),
            "culture": .string("en-US"),
            "twoFactorEnabled": .bool(false),
            "key": .string(account.protectedUserKey),
            "privateKey": account.privateKey.map(JSONValue.string) ?? .null,
            "securityStamp": .string(account.securityStamp),
            "forcePasswordReset": .bool(false),
            "usesKeyConnector": .bool(false),
            "avatarColor": .null,
            "creationDate": flavor.date(account.creationTicks),
            "verifyDevices": .bool(false),
            "organizations": .array([]),
            "providers": .array([]),
            "providerOrganizations": .array([]),
        ]
    }

    private func sync(userId: String, excludeDomains: Bool) -> EmulatorResponse {
        withLock { state in
            let account = state.accounts[userId]!
            let kdf = account.kdf
            let body: JSONObject = [
                "object": .string("sync"),
                "profile": .object(profile(account)),
                "folders": .array(state.folders(of: userId).map { .object(folderJSON($0)) }),
                "collections": .array([]),
                "ciphers": .array(state.ciphers(of: userId).map { .object(cipherJSON($0, object: "cipherDetails")) }),
                "domains": excludeDomains ? .null : .object([
                    "equivalentDomains": .array([]), "globalEquivalentDomains": .array([]), "object": .string("domains"),
                ]),
                "policies": .array([]),
                "sends": .array([]),
                "userDecryption": .object(["masterPasswordUnlock": .object([
                    "kdf": .object(["kdfType": .integer(Int64(kdf.kdfType)), "iterations": .integer(Int64(kdfIterations(kdf))),
                                    "memory": .null, "parallelism": .null]),
                    "masterKeyEncryptedUserKey": .string(account.protectedUserKey),
                    "salt": .string(account.email.lowercased()),
                ])]),
            ]
            return .json(200, body)
        }
    }

    private func revisionDate(userId: String) -> EmulatorResponse {
        withLock { state in
            let ticks = state.accounts[userId]!.revisionTicks
            return .json(200, .integer(ticks / 10_000))   // epoch milliseconds
        }
    }

    /// Bumps the account revision (every write on the real servers does).
    func touchAccount(_ userId: String, in state: inout EmulatorState) {
        guard var account = state.accounts[userId] else { return }
        account.revisionTicks = bumped(after: account.revisionTicks)
        state.accounts[userId] = account
    }

    // MARK: Folders

    func folderJSON(_ folder: StoredFolder) -> JSONObject {
        ["object": .string("folder"), "id": .string(folder.id), "name": .string(folder.name), "revisionDate": flavor.date(folder.revisionTicks)]
    }

    private func listFolders(userId: String) -> EmulatorResponse {
        withLock { state in
            .json(200, ["object": .string("list"), "data": .array(state.folders(of: userId).map { .object(folderJSON($0)) }),
                        "continuationToken": .null])
        }
    }

    private func folderName(_ request: EmulatorRequest) -> Result<String, EmulatorResponse> {
        var errors = ValidationErrors()
        guard case .object(let body)? = try? JSONValue(parsing: request.body) else {
            errors.add("", request.body.isEmpty ? "Body is empty." : "The request body is not a JSON object.")
            return .failure(ErrorBodies.invalidModel(flavor, errors))
        }
        guard case .string(let name)? = body["name"], !name.isEmpty else {
            errors.add("Name", "The Name field is required.")
            return .failure(ErrorBodies.invalidModel(flavor, errors))
        }
        if flavor == .bitwarden {
            if !EncStringRules.isValid(name) {
                errors.add("Name", "Name is not a valid encrypted string.")
            } else if name.utf8.count > 1000 {
                errors.add("Name", "The field Name exceeds the maximum encrypted value length of 1000 characters.")
            }
            if !errors.isEmpty { return .failure(ErrorBodies.invalidModel(flavor, errors)) }
        }
        return .success(name)
    }

    private func createFolder(_ request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let name: String
        switch folderName(request) {
        case .success(let n): name = n
        case .failure(let response): return response
        }
        return withLock { state in
            let folder = StoredFolder(id: newID(), userId: userId, sequence: state.takeSequence(), name: name, revisionTicks: nowTicks())
            state.folders[folder.id] = folder
            touchAccount(userId, in: &state)
            return .json(200, folderJSON(folder))
        }
    }

    private func getFolder(_ id: String, userId: String) -> EmulatorResponse {
        withLock { state in
            guard let folder = state.folders[id.lowercased()], folder.userId == userId else { return missing("Invalid folder") }
            return .json(200, folderJSON(folder))
        }
    }

    private func updateFolder(_ id: String, _ request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let name: String
        switch folderName(request) {
        case .success(let n): name = n
        case .failure(let response): return response
        }
        return withLock { state in
            guard var folder = state.folders[id.lowercased()], folder.userId == userId else { return missing("Invalid folder") }
            folder.name = name
            folder.revisionTicks = bumped(after: folder.revisionTicks)
            state.folders[folder.id] = folder
            touchAccount(userId, in: &state)
            return .json(200, folderJSON(folder))
        }
    }

    private func deleteFolder(_ id: String, userId: String) -> EmulatorResponse {
        withLock { state in
            guard let folder = state.folders[id.lowercased()], folder.userId == userId else { return missing("Invalid folder") }
            state.folders[folder.id] = nil
            for (cipherId, var cipher) in state.ciphers where cipher.userId == userId && cipher.data["folderId"] == .string(folder.id) {
                cipher.data["folderId"] = .null
                state.ciphers[cipherId] = cipher
            }
            touchAccount(userId, in: &state)
            return .empty()
        }
    }

    /// Not found: Bitwarden's 404, or Vaultwarden's 400 with its message.
    private func missing(_ vaultwardenMessage: String) -> EmulatorResponse {
        switch flavor {
        case .bitwarden: ErrorBodies.notFound(flavor)
        case .vaultwarden: ErrorBodies.error(flavor, status: 400, message: vaultwardenMessage)
        }
    }

    // MARK: Ciphers

    /// Response keys the server owns; a request cannot set them.
    static let serverOwnedKeys: Set<String> = [
        "object", "id", "type", "revisionDate", "creationDate", "deletedDate", "edit", "viewPassword", "permissions",
        "organizationUseTotp", "collectionIds", "attachments",
    ]
    /// Request-only keys that are never stored.
    static let requestOnlyKeys: Set<String> = ["lastKnownRevisionDate", "attachments2", "encryptedFor", "encryptedByKeyId"]
    /// Keys every cipher response carries (null when absent), in the server's order.
    static let standardDataKeys = [
        "organizationId", "folderId", "favorite", "reprompt", "key", "name", "notes", "login", "card", "identity",
        "secureNote", "sshKey", "fields", "passwordHistory", "archivedDate",
    ]

    func cipherJSON(_ cipher: StoredCipher, object: String) -> JSONObject {
        var out: JSONObject = ["object": .string(object), "id": .string(cipher.id), "type": .integer(Int64(cipher.type))]
        for key in Self.standardDataKeys {
            out[key] = cipher.data[key] ?? (key == "favorite" ? .bool(false) : key == "reprompt" ? .integer(0) : .null)
        }
        for (key, value) in cipher.data where !Self.serverOwnedKeys.contains(key) && out[key] == nil {
            out[key] = value
        }
        out["attachments"] = cipher.attachments ?? .null
        out["organizationUseTotp"] = .bool(false)
        out["edit"] = .bool(true)
        out["viewPassword"] = .bool(true)
        out["permissions"] = .object(["delete": .bool(true), "restore": .bool(true)])
        out["revisionDate"] = flavor.date(cipher.revisionTicks)
        out["creationDate"] = flavor.date(cipher.creationTicks)
        out["deletedDate"] = flavor.date(cipher.deletedTicks)
        if object == "cipherDetails" { out["collectionIds"] = .array([]) }
        return out
    }

    /// `"cipher"` on Bitwarden's single-item routes; Vaultwarden always answers `"cipherDetails"`.
    private var singleObject: String { flavor == .bitwarden ? "cipher" : "cipherDetails" }

    private func listCiphers(userId: String) -> EmulatorResponse {
        withLock { state in
            .json(200, ["object": .string("list"),
                        "data": .array(state.ciphers(of: userId).map { .object(cipherJSON($0, object: "cipherDetails")) }),
                        "continuationToken": .null])
        }
    }

    /// Looks a cipher up for `userId`: nil and the flavour's error if unknown or foreign.
    private func lookup(_ id: String, userId: String, state: EmulatorState, foreignMessage: String) -> Result<StoredCipher, EmulatorResponse> {
        guard let cipher = state.ciphers[id.lowercased()] else { return .failure(missing("Cipher doesn't exist")) }
        guard cipher.userId == userId else { return .failure(missing(foreignMessage)) }
        return .success(cipher)
    }

    private func getCipher(_ id: String, userId: String, details: Bool) -> EmulatorResponse {
        withLock { state in
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher is not owned by user") {
            case .failure(let response): return response
            case .success(let cipher): return .json(200, cipherJSON(cipher, object: details ? "cipherDetails" : singleObject))
            }
        }
    }

    /// Parses and validates a create or update body; returns the storable data fields.
    private func cipherBody(_ request: EmulatorRequest, isCreate: Bool, wrapped: Bool) -> Result<ParsedCipherBody, EmulatorResponse> {
        var errors = ValidationErrors()
        guard !request.body.isEmpty else {
            errors.add("", "Body is empty.")
            return .failure(ErrorBodies.invalidModel(flavor, errors))
        }
        let parsed: JSONValue
        do {
            parsed = try JSONValue(parsing: request.body)
        } catch {
            errors.add("$", "The request body is not valid JSON: \(error)")
            return .failure(flavor == .bitwarden ? ErrorBodies.invalidModel(flavor, errors)
                            : ErrorBodies.error(flavor, status: 422, message: "The request body is not valid JSON: \(error)"))
        }
        guard case .object(var body) = parsed else {
            errors.add("$", "The request body must be a JSON object.")
            return .failure(ErrorBodies.invalidModel(flavor, errors))
        }
        if wrapped {
            // `POST ciphers/create`: {cipher, collectionIds}.
            guard case .object(let inner)? = body["cipher"] else {
                errors.add("Cipher", "The Cipher field is required.")
                return .failure(ErrorBodies.invalidModel(flavor, errors))
            }
            body = inner
        }
        switch flavor {
        case .bitwarden:
            var validation = CipherValidation.validateBitwarden(body, isCreate: isCreate)
            if wrapped {
                var prefixed = ValidationErrors()
                for entry in validation.entries { for m in entry.messages { prefixed.add("Cipher." + entry.key, m) } }
                validation = prefixed
            }
            if case .string(let text)? = body["lastKnownRevisionDate"], CipherValidation.parseDate(text) == nil {
                validation.add("LastKnownRevisionDate",
                               "The JSON value could not be converted to System.Nullable`1[System.DateTime]. Path: $.lastKnownRevisionDate")
            }
            if !validation.isEmpty { return .failure(ErrorBodies.invalidModel(flavor, validation)) }
        case .vaultwarden:
            if let message = CipherValidation.validateVaultwarden(body, isCreate: isCreate) {
                return .failure(ErrorBodies.error(flavor, status: 400, message: message))
            }
        }
        var lastKnown: String?
        if case .string(let text)? = body["lastKnownRevisionDate"] { lastKnown = text }
        var data = JSONObject()
        for (key, value) in body where !Self.serverOwnedKeys.contains(key) && !Self.requestOnlyKeys.contains(key) {
            data[key] = value
        }
        var encryptedFor: String?
        if flavor == .bitwarden, case .string(let target)? = body["encryptedFor"] { encryptedFor = target }
        var type: Int?
        if case .integer(let t)? = body["type"] { type = Int(t) }
        return .success(ParsedCipherBody(type: type, data: data, lastKnown: lastKnown, encryptedFor: encryptedFor))
    }

    private func createCipher(_ request: EmulatorRequest, userId: String, wrapped: Bool) -> EmulatorResponse {
        let parsed: ParsedCipherBody
        switch cipherBody(request, isCreate: true, wrapped: wrapped) {
        case .success(let p): parsed = p
        case .failure(let response): return response
        }
        if let check = encryptedForCheck(parsed, userId: userId) { return check }
        let data = parsed.data
        if let org = data["organizationId"], org != .null {
            // The emulator has no organizations: the caller is never a member.
            return flavor == .bitwarden ? ErrorBodies.notFound(flavor)
                : ErrorBodies.error(flavor, status: 400, message: "You don't have permission to add item to organization")
        }
        guard let type = parsed.type else { return ErrorBodies.error(flavor, status: 400, message: "Invalid type") }
        return withLock { state in
            let now = nowTicks()
            let cipher = StoredCipher(id: newID(), userId: userId, sequence: state.takeSequence(), type: type,
                                      data: data, attachments: nil, creationTicks: now, revisionTicks: now, deletedTicks: nil)
            state.ciphers[cipher.id] = cipher
            touchAccount(userId, in: &state)
            logger.debug("emulator: created cipher", metadata: ["id": "\(cipher.id)"])
            return .json(200, cipherJSON(cipher, object: singleObject))
        }
    }

    struct ParsedCipherBody {
        var type: Int?
        var data: JSONObject
        var lastKnown: String?
        var encryptedFor: String?
    }

    private func encryptedForCheck(_ parsed: ParsedCipherBody, userId: String) -> EmulatorResponse? {
        if let target = parsed.encryptedFor, target.lowercased() != userId {
            return ErrorBodies.error(flavor, status: 400, message: "Cipher was not encrypted for the current user. Please try again.")
        }
        return nil
    }

    private func updateCipher(_ id: String, _ request: EmulatorRequest, userId: String) -> EmulatorResponse {
        // Existence first, as both servers load the cipher before reading the body.
        if case .failure(let response) = withLock({ lookup(id, userId: userId, state: $0, foreignMessage: "Cipher is not write accessible") }) {
            return response
        }
        let parsed: ParsedCipherBody
        switch cipherBody(request, isCreate: false, wrapped: false) {
        case .success(let p): parsed = p
        case .failure(let response): return response
        }
        if let check = encryptedForCheck(parsed, userId: userId) { return check }
        return withLock { state in
            var cipher: StoredCipher
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher is not write accessible") {
            case .failure(let response): return response
            case .success(let c): cipher = c
            }
            let storedOrg = cipher.data["organizationId"] ?? .null
            let bodyOrg = parsed.data["organizationId"] ?? .null
            if storedOrg != bodyOrg {
                return ErrorBodies.error(flavor, status: 400, message: flavor == .bitwarden
                    ? "Organization mismatch. Re-sync if you recently moved this item, then try again."
                    : "Organization mismatch. Please resync the client before updating the cipher")
            }
            if let lastKnown = parsed.lastKnown, let stale = staleCheck(server: cipher.revisionTicks, lastKnown: lastKnown) {
                logger.debug("emulator: rejected stale update", metadata: ["id": "\(cipher.id)", "lastKnown": "\(lastKnown)"])
                return stale
            }
            cipher.data = parsed.data   // `type` is not in it: an existing item's type never changes
            cipher.revisionTicks = bumped(after: cipher.revisionTicks)
            state.ciphers[cipher.id] = cipher
            touchAccount(userId, in: &state)
            return .json(200, cipherJSON(cipher, object: singleObject))
        }
    }

    /// The `lastKnownRevisionDate` check (1-second absolute tolerance; `Docs/Emulator.md`).
    private func staleCheck(server: Int64, lastKnown: String) -> EmulatorResponse? {
        switch flavor {
        case .bitwarden:
            guard let date = CipherValidation.parseDate(lastKnown) else { return nil }   // rejected earlier as invalid model
            guard abs(server - date.ticksSince1970) > BitwardenDate.ticksPerSecond else { return nil }
            return ErrorBodies.error(flavor, status: 400, message:
                "The item cannot be saved because it is out of date. To edit this item, first sync your vault, or log out and back in.")
        case .vaultwarden:
            // Unparseable dates are ignored; the difference is truncated to whole seconds and must exceed 1.
            guard let date = CipherValidation.parseDate(lastKnown) else { return nil }
            guard (server - date.ticksSince1970) / BitwardenDate.ticksPerSecond > 1 else { return nil }
            return ErrorBodies.error(flavor, status: 400, message:
                "The client copy of this cipher is out of date. Resync the client and try again.")
        }
    }

    private func softDelete(_ id: String, userId: String) -> EmulatorResponse {
        withLock { state in
            var cipher: StoredCipher
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher can't be deleted by user") {
            case .failure(let response): return response
            case .success(let c): cipher = c
            }
            if flavor == .bitwarden && cipher.deletedTicks != nil { return .empty() }   // idempotent, no bump
            let now = bumped(after: cipher.revisionTicks)
            cipher.deletedTicks = now
            cipher.revisionTicks = now
            state.ciphers[cipher.id] = cipher
            touchAccount(userId, in: &state)
            return .empty()
        }
    }

    private func restore(_ id: String, userId: String) -> EmulatorResponse {
        withLock { state in
            var cipher: StoredCipher
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher can't be restored by user") {
            case .failure(let response): return response
            case .success(let c): cipher = c
            }
            if flavor == .bitwarden && cipher.deletedTicks == nil {
                return .json(200, cipherJSON(cipher, object: singleObject))   // idempotent
            }
            cipher.deletedTicks = nil
            cipher.revisionTicks = bumped(after: cipher.revisionTicks)
            state.ciphers[cipher.id] = cipher
            touchAccount(userId, in: &state)
            return .json(200, cipherJSON(cipher, object: singleObject))
        }
    }

    private func permanentDelete(_ id: String, userId: String) -> EmulatorResponse {
        withLock { state in
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher can't be deleted by user") {
            case .failure(let response): return response
            case .success(let cipher):
                state.ciphers[cipher.id] = nil
                touchAccount(userId, in: &state)
                return .empty()
            }
        }
    }
}
