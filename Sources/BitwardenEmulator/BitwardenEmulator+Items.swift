import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VaultCrypto
import VaultJSON
import VaultModel
import _CryptoExtras
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension BitwardenEmulator {
    // MARK: Ciphers and folders

    /// The user's ciphers as the server stores them, trashed ones included, in creation order
    /// (`cipherDetails` shape). Items that are not valid `Cipher`s (Vaultwarden accepts
    /// plaintext) are left out; see ``rawCiphers(userId:)``.
    public func ciphers(userId: String) -> [Cipher] {
        rawCiphers(userId: userId).compactMap { Self.decode($0) }
    }

    /// The user's ciphers as the JSON the server would send, unknown fields included.
    public func rawCiphers(userId: String) -> [JSONObject] {
        core.state.withLock { state in state.ciphers(of: userId).map { core.cipherJSON($0, object: "cipherDetails") } }
    }

    /// One cipher by id, whoever owns it, or nil.
    public func cipher(id: String) -> Cipher? {
        core.state.withLock { state in state.ciphers[id.lowercased()].map { core.cipherJSON($0, object: "cipherDetails") } }
            .flatMap { Self.decode($0) }
    }

    /// Changes a cipher as another device's `PUT` would: `mutate` edits it, the server stores
    /// the data fields and bumps `revisionDate` (and the account revision). The id, type and
    /// dates are server-owned; changes to them are ignored.
    ///
    /// - Throws: ``EmulatorError/unknownCipher(_:)``.
    @discardableResult
    public func editAsAnotherDevice(cipherId: String, _ mutate: (inout Cipher) -> Void) throws -> Cipher {
        let json = try core.state.withLock { state throws -> JSONObject in
            guard var stored = state.ciphers[cipherId.lowercased()] else { throw EmulatorError.unknownCipher(cipherId) }
            guard var cipher = Self.decode(core.cipherJSON(stored, object: "cipherDetails")) else {
                throw EmulatorError.invalidArgument("cipher \(cipherId) is not a valid Cipher and cannot be edited as one")
            }
            mutate(&cipher)
            stored.data = try Self.dataFields(of: cipher)
            stored.revisionTicks = core.bumped(after: stored.revisionTicks)
            state.ciphers[stored.id] = stored
            core.touchAccount(stored.userId, in: &state)
            return core.cipherJSON(stored, object: "cipherDetails")
        }
        configuration.logger.debug("emulator: another device edited a cipher", metadata: ["id": "\(cipherId)"])
        return Self.decode(json)!
    }

    /// Adds a cipher as if another device created it: the server assigns the id and dates
    /// (any in `cipher` are ignored); unknown fields in ``Cipher/extra`` are stored.
    ///
    /// - Precondition: the user exists.
    @discardableResult
    public func insertCipher(userId: String, _ cipher: Cipher) -> Cipher {
        let json: JSONObject = core.state.withLock { state in
            precondition(state.accounts[userId] != nil, "insertCipher: no account with id \(userId)")
            let now = core.nowTicks()
            let data = (try? Self.dataFields(of: cipher)) ?? JSONObject()
            var attachments: JSONValue?
            if let list = cipher.attachments, let encoded = try? JSONEncoder().encode(list) {
                attachments = try? JSONValue(parsing: encoded)
            }
            let stored = StoredCipher(id: core.newID(), userId: userId, sequence: state.takeSequence(), type: cipher.type.rawValue,
                                      data: data, attachments: attachments, creationTicks: now, revisionTicks: now,
                                      deletedTicks: cipher.deletedDate == nil ? nil : now)
            state.ciphers[stored.id] = stored
            core.touchAccount(userId, in: &state)
            return core.cipherJSON(stored, object: "cipherDetails")
        }
        return Self.decode(json)!
    }

    /// The user's folders as `(id, encrypted name)`, in creation order.
    public func folders(userId: String) -> [(id: String, name: String)] {
        core.state.withLock { $0.folders(of: userId).map { ($0.id, $0.name) } }
    }

    static func decode(_ json: JSONObject) -> Cipher? {
        guard let data = try? JSONValue.object(json).serializedJSON() else { return nil }
        return try? JSONDecoder().decode(Cipher.self, from: data)
    }

    static func dataFields(of cipher: Cipher) throws -> JSONObject {
        let encoded = try JSONEncoder().encode(cipher)
        guard case .object(let all) = try JSONValue(parsing: encoded) else { return JSONObject() }
        var data = JSONObject()
        for (key, value) in all where !EmulatorCore.serverOwnedKeys.contains(key) && !EmulatorCore.requestOnlyKeys.contains(key) {
            data[key] = value
        }
        return data
    }
}
