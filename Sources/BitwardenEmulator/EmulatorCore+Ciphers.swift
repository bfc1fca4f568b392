import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultJSON
import VaultModel

extension EmulatorCore {
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
        out["attachments"] = renderedAttachments(cipher)
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
    var singleObject: String { flavor == .bitwarden ? "cipher" : "cipherDetails" }

    func listCiphers(userId: String) -> EmulatorResponse {
        withLock { state in
            .json(200, ["object": .string("list"),
                        "data": .array(state.ciphers(of: userId).map { .object(cipherJSON($0, object: "cipherDetails")) }),
                        "continuationToken": .null])
        }
    }

    /// Looks a cipher up for `userId`: nil and the flavour's error if unknown or foreign.
    func lookup(_ id: String, userId: String, state: EmulatorState, foreignMessage: String) -> Result<StoredCipher, EmulatorResponse> {
        guard let cipher = state.ciphers[id.lowercased()] else { return .failure(missing("Cipher doesn't exist")) }
        guard cipher.userId == userId else { return .failure(missing(foreignMessage)) }
        return .success(cipher)
    }

    func getCipher(_ id: String, userId: String, details: Bool) -> EmulatorResponse {
        withLock { state in
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher is not owned by user") {
            case .failure(let response): return response
            case .success(let cipher): return .json(200, cipherJSON(cipher, object: details ? "cipherDetails" : singleObject))
            }
        }
    }

    /// Parses and validates a create or update body; returns the storable data fields.
    func cipherBody(_ request: EmulatorRequest, isCreate: Bool, wrapped: Bool) -> Result<ParsedCipherBody, EmulatorResponse> {
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

    func createCipher(_ request: EmulatorRequest, userId: String, wrapped: Bool) -> EmulatorResponse {
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
            if let refused = folderCheck(data, userId: userId, state: state) { return refused }
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

    func encryptedForCheck(_ parsed: ParsedCipherBody, userId: String) -> EmulatorResponse? {
        if let target = parsed.encryptedFor, target.lowercased() != userId {
            return ErrorBodies.error(flavor, status: 400, message: "Cipher was not encrypted for the current user. Please try again.")
        }
        return nil
    }

    func updateCipher(_ id: String, _ request: EmulatorRequest, userId: String) -> EmulatorResponse {
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
            if let refused = folderCheck(parsed.data, userId: userId, state: state) { return refused }
            cipher.data = parsed.data   // `type` is not in it: an existing item's type never changes
            cipher.revisionTicks = bumped(after: cipher.revisionTicks)
            state.ciphers[cipher.id] = cipher
            touchAccount(userId, in: &state)
            return .json(200, cipherJSON(cipher, object: singleObject))
        }
    }

    /// The `lastKnownRevisionDate` check (1-second absolute tolerance; `Docs/Emulator.md`).
    func staleCheck(server: Int64, lastKnown: String) -> EmulatorResponse? {
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

    func softDelete(_ id: String, userId: String) -> EmulatorResponse {
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

    func restore(_ id: String, userId: String) -> EmulatorResponse {
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

    func permanentDelete(_ id: String, userId: String) -> EmulatorResponse {
        withLock { state in
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher can't be deleted by user") {
            case .failure(let response): return response
            case .success(let cipher):
                state.ciphers[cipher.id] = nil
                state.removeAttachmentFiles(cipherId: cipher.id)   // a trashed item keeps them; a deleted one does not
                touchAccount(userId, in: &state)
                return .empty()
            }
        }
    }
}
