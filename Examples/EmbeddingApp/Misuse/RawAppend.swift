// What an app must NOT be able to compile: appending a raw event. With it, an app could end an
// item's pending state (`resolved`) without the resolver and lose the user's offline edit.
// `make example` type-checks this file against the modules the example app builds and fails if
// it compiles: the raw writes are behind `@_spi(Tools)`, which only tools import.
import Foundation
import OfflineSync
import VaultModel

func dropPendingEdit(store: VaultLogStore, userId: String, cipherId: String) throws {
    try store.append(userId: userId, cipherId: cipherId, type: .resolved, body: .outcome(OutcomeBody(at: BitwardenDate(Date()))))
}
