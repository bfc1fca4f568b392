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

    /// Finds the request's route in ``BitwardenEndpoint`` (the list the client builds its
    /// requests from), checks the access token where the route needs one, and dispatches.
    func handle(_ request: EmulatorRequest) -> EmulatorResponse {
        let segments = request.path.split(separator: "/").map(String.init)
        guard let area = segments.first else { return alive() }
        if area == "alive", segments.count == 1 { return alive() }
        // The download URL a metadata reply hands out: outside both services, authorised by its
        // signed query instead of the access token.
        if area == "attachments" {
            guard request.method.uppercased() == "GET", segments.count == 3 else { return ErrorBodies.noRoute(flavor, path: request.path) }
            return attachmentFile(cipherId: segments[1], attachmentId: segments[2], request: request)
        }
        guard let service = BitwardenEndpoint.Service(rawValue: area) else { return ErrorBodies.noRoute(flavor, path: request.path) }
        let found = BitwardenEndpoint.match(method: request.method, service: service, segments: Array(segments.dropFirst()))
        var userId = ""
        if service == .api, found?.0.isAuthorized ?? true {
            // The API checks the token before it looks for the route (an unknown route without
            // a token is a 401, as on both servers).
            switch authenticate(request) {
            case .success(let id): userId = id
            case .failure(let response): return response
            }
        }
        guard let (endpoint, ids) = found else { return ErrorBodies.noRoute(flavor, path: request.path) }
        return dispatch(endpoint, ids: ids, request: request, userId: userId)
    }

    /// One handler per route; adding a case to ``BitwardenEndpoint`` stops the build here.
    func dispatch(_ endpoint: BitwardenEndpoint, ids: [String], request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let id = ids.first ?? ""
        switch endpoint {
        case .prelogin, .preloginPassword, .apiPrelogin: return prelogin(request)
        case .token: return token(request)
        case .alive, .now: return alive()
        case .sync: return sync(userId: userId, excludeDomains: request.query["excludeDomains"] == "true")
        case .revisionDate: return revisionDate(userId: userId)
        case .profile: return .json(200, withLock { profile($0.accounts[userId]!) })
        case .listFolders: return listFolders(userId: userId)
        case .createFolder: return createFolder(request, userId: userId)
        case .getFolder: return getFolder(id, userId: userId)
        case .updateFolder, .updateFolderByPost: return updateFolder(id, request, userId: userId)
        case .deleteFolder: return deleteFolder(id, userId: userId)
        case .listCiphers: return listCiphers(userId: userId)
        case .createCipher: return createCipher(request, userId: userId, wrapped: false)
        case .createCipherWrapped: return createCipher(request, userId: userId, wrapped: true)
        case .getCipher: return getCipher(id, userId: userId, details: false)
        case .getCipherDetails, .getCipherFullDetails: return getCipher(id, userId: userId, details: true)
        case .updateCipher, .updateCipherByPost: return updateCipher(id, request, userId: userId)
        case .softDeleteCipher: return softDelete(id, userId: userId)
        case .deleteCipher, .deleteCipherByPost: return permanentDelete(id, userId: userId)
        case .restoreCipher: return restore(id, userId: userId)
        case .createAttachment: return createAttachment(id, request, userId: userId)
        case .uploadAttachment: return uploadAttachment(id, attachmentId: ids[1], request, userId: userId)
        case .createAttachmentLegacy: return createAttachmentLegacy(id, request, userId: userId)
        case .getAttachment: return attachmentMetadata(id, attachmentId: ids[1], request: request, userId: userId)
        case .deleteAttachment, .deleteAttachmentByPost: return deleteAttachment(id, attachmentId: ids[1], userId: userId)
        }
    }

    func alive() -> EmulatorResponse {
        .json(200, .string(flavor.dateText(nowTicks())))
    }

    func withLock<T>(_ body: (inout EmulatorState) -> T) -> T {
        state.withLock { body(&$0) }
    }

}
