import BitwardenAPI
import Foundation
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel

/// The front door for an app: one object over the device's store, the server and the app's
/// token store. It saves every change (online when the server answers, durably on the device
/// when it does not), syncs without ever overwriting a change still waiting, and tells the app
/// what happened: a ``SyncStatus`` stream for the vault screen, conflict reports read from the
/// log, and decisions for items the server keeps refusing.
///
/// ```swift
/// let vault = try OfflineVault(directory: storeURL, server: .selfHosted(serverURL), tokenStore: keychainTokens)
/// try await vault.logIn(email: email, masterPassword: password)   // later launches: unlock(email:masterPassword:)
/// let saved = try await vault.save(CipherView(type: .login, name: "Bank", login: LoginView(username: "alice", password: "s3cret")))
/// let result = try await vault.sync()
/// for report in try vault.conflictReports() { print(report.summary) }
/// ```
///
/// One vault per store directory and process; it makes the one resolver the store's saves and
/// syncs share. Every call may run beside any other, from any task, and beside another process
/// (an app extension) that opens the same directory: saves are durable when they return, one
/// resolution per account runs at a time across processes, and a sync never overwrites a save
/// made while it runs. Calls that derive keys or wait for the disk are `async` and run off the
/// caller's thread. Errors are ``VaultError``s (or `CancellationError`).
///
/// The parts stay available for advanced use (``store``, ``client``, ``resolver``); build
/// other parts from these, never a second resolver.
public final class OfflineVault: Sendable {
    /// The device's store.
    public let store: VaultLogStore
    /// The server client (its session tokens are kept in the token store).
    public let client: BitwardenClient
    /// The store's one resolver, shared by saves and syncs.
    public let resolver: OfflineSyncResolver
    /// Where the session tokens are kept between launches.
    public let tokenStore: any TokenStore
    /// Where the log's position is kept outside the store, to notice a rolled-back store file
    /// (nil: not kept; see ``LogAnchorStore``).
    public let anchorStore: (any LogAnchorStore)?
    let logger: Logger
    let state = Mutex(VaultState())
    let statusHub = StatusHub()
    /// False once closed; background reads (status, reports) run under it, so a close never
    /// pulls the store from under one.
    let open = Mutex(true)

    /// What the vault knows beyond the store: the unlocked account and the last sync's trouble.
    struct VaultState {
        var userId: String?
        var email: String?
        var syncStep: SyncStatus.SyncStep?
        var trouble: SyncStatus.Phase?
    }

    /// Opens (or creates) the store in `directory` and prepares a client for `server`. Nothing
    /// is sent until the first call that needs the server. With an `anchorStore` the vault keeps
    /// the log's position there and refuses to unlock a store older than it.
    public init(directory: URL, server: BitwardenClientConfiguration, tokenStore: any TokenStore,
                anchorStore: (any LogAnchorStore)? = nil, storeOptions: VaultLogStoreOptions = VaultLogStoreOptions(), resolverOptions: ResolverOptions = ResolverOptions(),
                logger: Logger = Logger(label: "vaultlog.vault")) throws {
        do {
            store = try VaultLogStore(directory: directory, options: storeOptions)
        } catch {
            throw VaultError.wrapping(error)
        }
        client = BitwardenClient(configuration: server)
        resolver = OfflineSyncResolver(store: store, server: client, options: resolverOptions, logger: logger)
        self.tokenStore = tokenStore
        self.anchorStore = anchorStore
        self.logger = logger
        client.observeTokens { [weak self] tokens in self?.tokensChanged(tokens) }
    }

    /// Closes the store; later calls fail. Streams end.
    public func close() {
        statusHub.finishAll()
        open.withLock { open in
            open = false
            store.close()
        }
    }

    /// Runs `read` unless the vault is closed (then nil), never beside ``close()``.
    func whileOpen<T>(_ read: () throws -> T) rethrows -> T? {
        try open.withLock { open in open ? try read() : nil }
    }

    // MARK: Account

    /// The unlocked account's user id, or nil while locked.
    public var userId: String? { state.withLock { $0.userId } }

    /// Logs in online: checks the master password with the server, keeps the account on the
    /// device (so later launches unlock offline), unlocks the vault and saves the session's
    /// tokens in the token store.
    @discardableResult
    public func logIn(email: String, masterPassword: String) async throws -> String {
        try await vaultCall {
            let login = try await client.login(email: email, password: masterPassword)
            try store.saveAccount(StoredAccount(userId: login.userId, email: login.email, kdf: login.kdf,
                                                protectedUserKey: login.protectedUserKey, salt: login.salt))
            store.unlock(userId: login.userId, userKey: login.userKey)
            try await checkAnchor(userId: login.userId)
            try await tokenStore.setTokens(login.tokens, userId: login.userId)
            becomeUnlocked(userId: login.userId, email: login.email)
            return login.userId
        }
    }

    /// Unlocks the vault offline with the master password (the key derivation runs off the
    /// caller's thread) and restores the session tokens from the token store, so a sync works
    /// without logging in again while the session lasts. With an anchor store, a store older
    /// than the position kept there fails with ``VaultError/Kind/corruptStore`` and the vault
    /// stays locked.
    @discardableResult
    public func unlock(email: String, masterPassword: String) async throws -> String {
        try await vaultCall {
            let userId = try await store.unlock(email: email, masterPassword: masterPassword)
            try await checkAnchor(userId: userId)
            client.setTokens(try await tokenStore.tokens(userId: userId))
            becomeUnlocked(userId: userId, email: email)
            return userId
        }
    }

    /// Locks the vault: the keys leave memory; the session tokens stay in the token store.
    public func lock() {
        let userId = state.withLock { state -> String? in
            defer { state = VaultState() }
            return state.userId
        }
        if let userId { store.lock(userId: userId) }
        client.setTokens(nil)
        publishStatus()
    }

    /// Logs out: forgets the session and removes the account's data from this device. Refused
    /// (``VaultError/Kind/notPossible``) while changes (of items or folders) are still waiting
    /// for the server, unless `discardingPendingChanges`: they would be lost.
    public func logOut(discardingPendingChanges: Bool = false) async throws {
        try await vaultCall {
            let userId = try unlockedUser()
            let pending = try store.pendingCount(userId: userId)
            let folders = try store.projection(userId: userId).folders?.count ?? 0
            guard pending + folders == 0 || discardingPendingChanges else {
                let waiting = [pending > 0 ? "\(pending) item change\(pending == 1 ? " is" : "s are")" : nil,
                               folders > 0 ? "\(folders) folder change\(folders == 1 ? " is" : "s are")" : nil].compactMap { $0 }
                throw VaultError(.notPossible, detail: "\(waiting.joined(separator: " and ")) still waiting for the server; sync first, or log out discarding them")
            }
            client.logout()
            try await tokenStore.setTokens(nil, userId: userId)
            try store.logout(userId: userId)
            try await anchorStore?.setAnchor(nil, userId: userId)
            lock()
        }
    }

    func becomeUnlocked(userId: String, email: String) {
        state.withLock {
            $0.userId = userId
            $0.email = email
            $0.trouble = nil
        }
        statusHub.watch(store: store, userId: userId) { [weak self] in
            self?.publishStatus()
            do {
                try await self?.rememberPosition(userId: userId)
            } catch {
                self?.logger.warning("could not save the log's position in the anchor store", metadata: ["error": "\(error)"])
            }
        }
        publishStatus()
    }

    /// The unlocked user, or ``VaultError/Kind/locked``.
    func unlockedUser() throws -> String {
        guard let userId = state.withLock({ $0.userId }), store.isUnlocked(userId: userId) else {
            throw VaultError(.locked, detail: "no account is unlocked in this vault")
        }
        return userId
    }

    /// Saves refreshed (or dropped) tokens in the token store, off the refreshing task.
    private func tokensChanged(_ tokens: TokenSet?) {
        guard let userId = state.withLock({ $0.userId }) else { return }
        let tokenStore = self.tokenStore
        let logger = self.logger
        Task {
            do {
                try await tokenStore.setTokens(tokens, userId: userId)
            } catch {
                logger.warning("could not save the session tokens", metadata: ["error": "\(error)"])
            }
        }
    }
}
