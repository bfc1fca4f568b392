import BitwardenAPI
import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting

/// Folders over loopback HTTP: rename, delete, and what each server does with an item that
/// names a folder another device deleted.
@Suite struct FolderRouteTests {
    @Test(arguments: EmulatorFlavor.allCases)
    func renameAndDelete_folder_roundTrip(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let folder = try await h.client.createFolder(encryptedName: EncString.encrypt("Work", key: h.account.userKey, random: h.random))
            let newName = EncString.encrypt("Office", key: h.account.userKey, random: h.random)
            let renamed = try await h.client.renameFolder(id: folder.id, encryptedName: newName)
            #expect(renamed.id == folder.id)
            #expect(try await h.client.listFolders().map(\.name) == [newName])
            try await h.client.deleteFolder(id: folder.id)
            #expect(try await h.client.listFolders().isEmpty)
            // Gone: both servers' answers classify as "not found".
            let again = await apiError { try await h.client.deleteFolder(id: folder.id) }
            #expect(again?.serverErrorKind == .notFound)
            let rename = await apiError { _ = try await h.client.renameFolder(id: folder.id, encryptedName: newName) }
            #expect(rename?.serverErrorKind == .notFound)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func deleteFolder_movesItsItemsToNoFolder(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let folder = try await h.client.createFolder(encryptedName: EncString.encrypt("Work", key: h.account.userKey, random: h.random))
            var item = h.loginCipher()
            item.folderId = folder.id
            let created = try await h.client.createCipher(item)
            #expect(created.folderId == folder.id)
            try await h.client.deleteFolder(id: folder.id)
            #expect(try await h.client.getCipher(id: created.id!).folderId == nil)
        }
    }

    /// Vaultwarden refuses a create or update that names a folder the user does not have (400
    /// "Invalid folder"); Bitwarden stores the id as given and lists it in `/sync`.
    @Test(arguments: EmulatorFlavor.allCases)
    func itemIntoDeletedFolder_vaultwardenRefuses_bitwardenStoresTheDanglingId(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let folder = try await h.client.createFolder(encryptedName: EncString.encrypt("Work", key: h.account.userKey, random: h.random))
            let existing = try await h.client.createCipher(h.loginCipher(name: "Existing"))
            try await h.client.deleteFolder(id: folder.id)
            var fresh = h.loginCipher(name: "Fresh")
            fresh.folderId = folder.id
            var moved = existing
            moved.folderId = folder.id
            switch flavor {
            case .vaultwarden:
                let create = await apiError { _ = try await h.client.createCipher(fresh) }
                #expect(create?.status == 400)
                #expect(create?.message == "Invalid folder")
                let update = await apiError { _ = try await h.client.updateCipher(moved, lastKnownRevisionDate: existing.revisionDate) }
                #expect(update?.message == "Invalid folder")
                #expect(h.emulator.cipher(id: existing.id!)?.folderId == nil)
            case .bitwarden:
                let created = try await h.client.createCipher(fresh)
                #expect(created.folderId == folder.id)
                let updated = try await h.client.updateCipher(moved, lastKnownRevisionDate: existing.revisionDate)
                #expect(updated.folderId == folder.id)
                let synced = try await h.client.sync()
                #expect(synced.folderIds.isEmpty)
                #expect(synced.ciphers.filter { $0.folderId == folder.id }.count == 2)
            }
        }
    }
}
