import BitwardenAPI
import Foundation
import Synchronization

/// Where an app keeps the server session's tokens between launches (on Apple platforms: the
/// keychain). ``OfflineVault`` reads them when the vault is unlocked offline, so a relaunched
/// app syncs without asking for the master password online, and writes them after a login,
/// after every token refresh, and (nil) when the server ends the session or the user logs out.
///
/// ```swift
/// struct KeychainTokens: TokenStore {
///     func tokens(userId: String) async throws -> TokenSet? {
///         try keychain.data(for: "vault.tokens.\(userId)").map { try JSONDecoder().decode(TokenSet.self, from: $0) }
///     }
///     func setTokens(_ tokens: TokenSet?, userId: String) async throws {
///         try keychain.set(tokens.map { try JSONEncoder().encode($0) }, for: "vault.tokens.\(userId)")
///     }
/// }
/// ```
///
/// Calls may come from several tasks at once (a refresh during a sync, a login); an
/// implementation must be safe for that. The tokens are secrets: never write them to a file
/// other apps or backups can read.
public protocol TokenStore: Sendable {
    /// The tokens saved for `userId`, or nil when there are none.
    func tokens(userId: String) async throws -> TokenSet?
    /// Saves the tokens of `userId`, or forgets them (nil).
    func setTokens(_ tokens: TokenSet?, userId: String) async throws
}

/// A ``TokenStore`` that keeps the tokens in memory only (tests, examples, a command-line
/// tool): a relaunch starts without a session.
///
/// ```swift
/// let vault = try OfflineVault(directory: dir, server: .selfHosted(url), tokenStore: InMemoryTokenStore())
/// ```
public final class InMemoryTokenStore: TokenStore {
    private let saved = Mutex<[String: TokenSet]>([:])

    /// An empty store.
    public init() {}

    /// The tokens saved for `userId`.
    public func tokens(userId: String) async throws -> TokenSet? { saved.withLock { $0[userId] } }

    /// Saves or forgets the tokens of `userId`.
    public func setTokens(_ tokens: TokenSet?, userId: String) async throws { saved.withLock { $0[userId] = tokens } }
}
