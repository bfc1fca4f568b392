import Synchronization
import VaultCrypto

/// SplitMix64: a small, fast, seedable generator, **not cryptographically secure**, for
/// reproducible tests, fixtures, simulations and stress runs. The one copy in the package:
/// ``SeededRandomSource`` draws from it too.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose output depends only on `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A seeded, **not cryptographically secure** generator (``SplitMix64``) for tests, fixtures and
/// simulations: the same seed yields the same IVs, keys and ids. Never use it for real vaults.
public final class SeededRandomSource: RandomSource {
    private let state: Mutex<SplitMix64>

    /// Creates a generator whose output depends only on `seed`.
    public init(seed: UInt64) {
        state = Mutex(SplitMix64(seed: seed))
    }

    /// The next `count` bytes of the seeded stream (little-endian 64-bit words, the last one cut).
    public func bytes(_ count: Int) -> [UInt8] {
        state.withLock { generator in
            var output = [UInt8]()
            output.reserveCapacity(count + 8)
            while output.count < count {
                let z = generator.next()
                withUnsafeBytes(of: z.littleEndian) { output.append(contentsOf: $0) }
            }
            output.removeLast(output.count - count)
            return output
        }
    }
}
