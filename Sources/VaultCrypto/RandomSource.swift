import Synchronization

/// Where IVs, keys and ids get their randomness. Injected so that a replay can be made
/// byte-for-byte deterministic (DESIGN §9.7); production code uses ``SystemRandomSource``.
public protocol RandomSource: Sendable {
    /// Returns `count` random bytes.
    func bytes(_ count: Int) -> [UInt8]
}

/// The operating system's cryptographically secure generator (`getrandom` on Linux,
/// `arc4random` on Apple platforms).
public struct SystemRandomSource: RandomSource {
    public init() {}

    public func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var output = [UInt8](repeating: 0, count: count)
        var index = 0
        while index < count {
            var word = generator.next()
            withUnsafeBytes(of: &word) { raw in
                for byte in raw where index < count {
                    output[index] = byte
                    index += 1
                }
            }
        }
        return output
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
