import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VaultCrypto
import VaultModel
import _CryptoExtras
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension BitwardenEmulator {
    // MARK: State file

    /// Writes the state (accounts with their keys, ciphers, folders, live refresh tokens) as
    /// JSON, in a file only its owner can read (0600). The file holds key material: it is for
    /// test and demo vaults only. Expired refresh tokens are not written.
    public func save(to path: String) throws {
        let now = core.nowTicks()
        var snapshot = core.state.withLock { $0 }
        snapshot.refreshTokens = snapshot.refreshTokens.filter { $0.value.expiresTicks > now }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            try SecretFile.write(Array(try encoder.encode(snapshot)), to: path)
        } catch {
            throw EmulatorError.stateFile(path, "cannot write: \(error)")
        }
    }

    /// Replaces the state with the one saved in `path`.
    public func load(from path: String) throws {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw EmulatorError.stateFile(path, "cannot read: \(error.localizedDescription)")
        }
        let loaded: EmulatorState
        do {
            loaded = try JSONDecoder().decode(EmulatorState.self, from: data)
        } catch {
            throw EmulatorError.stateFile(path, "not an emulator state file (\(error))")
        }
        guard loaded.formatVersion == 1 else {
            throw EmulatorError.stateFile(path, "format version \(loaded.formatVersion) is not supported (expected 1)")
        }
        guard let signingKey = Base64.decode(loaded.signingKey), signingKey.count >= 32 else {
            throw EmulatorError.stateFile(path, "signingKey must be the base64 of at least 32 random bytes (a shorter key makes access tokens forgeable)")
        }
        for account in loaded.accounts.values {
            do {
                try KdfConfig(kdfType: account.kdfType, iterations: account.kdfIterations,
                              memoryMiB: account.kdfMemory, parallelism: account.kdfParallelism).validate()
            } catch {
                throw EmulatorError.stateFile(path, "account \(account.email): \(error)")
            }
        }
        core.state.withLock { $0 = loaded }
    }
}
