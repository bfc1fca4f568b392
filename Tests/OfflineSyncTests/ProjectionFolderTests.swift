import Testing
import Foundation
import EventLog
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync

/// The fold of folder events (`Docs/Projection.md`, "Folders"): a user's pending folders,
/// collapsing like items do, kept apart from items.
@Suite struct ProjectionFolderTests {
    static let at = BitwardenDate(Date(timeIntervalSince1970: 1_767_225_600))

    static func event(_ sequence: UInt64, _ folder: String, _ type: VaultEventType, name: String? = nil, serverId: String? = nil,
                      marker: String? = nil) -> VaultEvent {
        var body = OutcomeBody(at: at, serverId: serverId, marker: marker)
        body.folderName = name
        return VaultEvent(header: EventHeader(sequence: sequence, userId: "u", cipherId: folder, eventType: type.rawValue,
                                              recordedAtMillis: 0),
                          type: type, body: .outcome(body))
    }

    static func fold(_ events: [VaultEvent]) -> Projection { Projection.fold(userId: "u", events) }

    @Test func createThenRename_isOneCreateWithTheNewName() {
        let p = Self.fold([Self.event(1, "tmp", .folderCreated, name: "2.a"), Self.event(2, "tmp", .folderRenamed, name: "2.b")])
        #expect(p.folders?["tmp"]?.change == .create)
        #expect(p.folders?["tmp"]?.name == "2.b")
        #expect(p.pending.isEmpty)
        #expect(p.pendingCount == 0)
    }

    @Test func createThenDelete_neverSent_leavesNothing() {
        let p = Self.fold([Self.event(1, "tmp", .folderCreated, name: "2.a"), Self.event(2, "tmp", .folderDeleted)])
        #expect(p.folders == nil)
    }

    @Test func createAnnouncedThenDelete_staysADelete() {
        let p = Self.fold([Self.event(1, "tmp", .folderCreated, name: "2.a"), Self.event(2, "tmp", .folderCreatePlanned, marker: "2.a"),
                           Self.event(3, "tmp", .folderDeleted)])
        #expect(p.folders?["tmp"]?.change == .delete)
        #expect(p.folders?["tmp"]?.mayBeOnServer == true)
    }

    @Test func renameThenDelete_isADelete_andADeleteIsFinal() {
        let p = Self.fold([Self.event(1, "f", .folderRenamed, name: "2.a"), Self.event(2, "f", .folderDeleted),
                           Self.event(3, "f", .folderRenamed, name: "2.b")])
        #expect(p.folders?["f"]?.change == .delete)
        #expect(p.folders?["f"]?.name == nil)
    }

    @Test func mapped_thenResolved_keepsTheIdMap() {
        let p = Self.fold([Self.event(1, "tmp", .folderCreated, name: "2.a"), Self.event(2, "tmp", .folderMapped, name: "2.a", serverId: "srv"),
                           Self.event(3, "tmp", .folderResolved, serverId: "srv")])
        #expect(p.folders == nil)
        #expect(p.folderIdMap == ["tmp": "srv"])
        #expect(p.serverFolderId("tmp") == "srv")
        #expect(p.serverFolderId("other") == "other")
    }

    @Test func discarded_endsThePendingFolder_andAMappedCreateKeepsItsId_whileALaterRenameStaysPending() {
        let p = Self.fold([Self.event(1, "tmp", .folderCreated, name: "2.a"), Self.event(2, "tmp", .folderMapped, name: "2.a", serverId: "srv"),
                           Self.event(3, "tmp", .folderChangeDiscarded, serverId: "srv"), Self.event(4, "tmp", .folderResolved, serverId: "srv"),
                           Self.event(5, "f", .folderDeleted), Self.event(6, "f", .folderChangeDiscarded), Self.event(7, "f", .folderResolved),
                           Self.event(8, "f", .folderRenamed, name: "2.b")])
        #expect(p.folders?.keys.sorted() == ["f"])
        #expect(p.folders?["f"]?.change == .rename)
        #expect(p.folders?["f"]?.versionSequences == [8])
        #expect(p.folderIdMap == ["tmp": "srv"])
    }

    @Test func overlay_showsPendingFoldersOverTheServersList() throws {
        let key = SymmetricCryptoKey.generate(using: SystemRandomSource())
        let work = EncString.encrypt("Work", key: key), old = EncString.encrypt("Old", key: key)
        let office = EncString.encrypt("Office", key: key), new = EncString.encrypt("New", key: key)
        let p = Self.fold([Self.event(1, "tmp", .folderCreated, name: new.serialized), Self.event(2, "w", .folderRenamed, name: office.serialized),
                           Self.event(3, "o", .folderDeleted)])
        let shown = VaultRepository.overlay([ServerFolder(id: "w", name: work), ServerFolder(id: "o", name: old)], projection: p)
        #expect(shown.map(\.id) == ["w", "tmp"])
        #expect(try shown.map { try $0.name.decryptString(key: key) } == ["Office", "New"])
    }
}
