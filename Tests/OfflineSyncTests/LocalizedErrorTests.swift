import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel

/// An app shows `error.localizedDescription`; it must be the library's own message (what
/// failed and what to do), not Foundation's generic "The operation could not be completed".
@Suite struct LocalizedErrorTests {
    static let errors: [any Error & CustomStringConvertible] = [
        OfflineSyncError.vaultLocked(userId: "u1"),
        OfflineSyncError.corruptEvent(sequence: 7, reason: "bad MAC"),
        ServerFailure(.unavailable, "connection refused"),
        EventLogError.newerStoreFormat(found: 9, supported: 2),
        VaultCryptoError.invalidKeyLength(expected: 64, actual: 3),
        VaultModelError.malformedDate("yesterday", reason: "not ISO 8601"),
    ]

    @Test(arguments: errors.indices)
    func localizedDescription_isTheLibrarysMessage(index: Int) {
        let error = Self.errors[index]
        #expect(error.localizedDescription == error.description)
        #expect(!error.localizedDescription.contains("could not be completed"))
    }
}
