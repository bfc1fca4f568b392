import Synchronization
import Crypto

/// Where IVs, keys and ids get their randomness. Injected so that a replay can be made
/// byte-for-byte deterministic (DESIGN §9.7); production code uses ``SystemRandomSource``.
public protocol RandomSource: Sendable {
    /// Returns `count` random bytes.
    func bytes(_ count: Int) -> [UInt8]
}

/// A cryptographically secure generator (BoringSSL's or CommonCrypto's, seeded by the OS).
public struct SystemRandomSource: RandomSource {
    public init() {}

    public func bytes(_ count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        // BoringSSL's RAND_bytes (seeded from getrandom, then a user-space DRBG): one call per
        // request instead of one system call per 8 bytes.
        return SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Array($0) }
    }
}

/// A seeded, **not cryptographically secure** generator (SplitMix64) for tests, fixtures and
/// simulations: the same seed yields the same IVs, keys and ids. Never use it for real vaults.
public final class SeededRandomSource: RandomSource {
    private let state: Mutex<UInt64>

    /// Creates a generator whose output depends only on `seed`.
    public init(seed: UInt64) {
        state = Mutex(seed)
    }

    public func bytes(_ count: Int) -> [UInt8] {
        state.withLock { state in
            var output = [UInt8]()
            output.reserveCapacity(count + 8)
            while output.count < count {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                withUnsafeBytes(of: z.littleEndian) { output.append(contentsOf: $0) }
            }
            output.removeLast(output.count - count)
            return output
        }
    }
}
