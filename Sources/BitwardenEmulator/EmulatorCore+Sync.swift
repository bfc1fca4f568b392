import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultJSON
import VaultModel

extension EmulatorCore {
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

    func sync(userId: String, excludeDomains: Bool) -> EmulatorResponse {
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

    func revisionDate(userId: String) -> EmulatorResponse {
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
}
