import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where IVs, keys and ids get their randomness. Injected so that a replay can be made
/// byte-for-byte deterministic; production code uses ``SystemRandomSource``.
public protocol RandomSource: Sendable {
    /// Returns `count` random bytes.
    func bytes(_ count: Int) -> [UInt8]
}

extension RandomSource {
    /// A version-4 UUID string from 16 bytes of this source, lowercase as both Bitwarden
    /// servers write ids (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`).
    public func uuidString() -> String {
        var b = bytes(16)
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        let digits = Array("0123456789abcdef")
        var out = ""
        out.reserveCapacity(36)
        for (i, byte) in b.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append("-") }
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return out
    }
}

/// The operating system's cryptographically secure generator (`/dev/urandom` on Linux,
/// `arc4random_buf` on Apple platforms).
public struct SystemRandomSource: RandomSource {
    /// The system's generator (stateless; any number of copies draw from the same source).
    public init() {}

    /// Returns `count` bytes from the system generator (an empty array when `count` is not positive).
    public func bytes(_ count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        var output = [UInt8](repeating: 0, count: count)
        output.withUnsafeMutableBytes { Self.fill($0) }
        return output
    }

    #if canImport(Glibc)
    /// `/dev/urandom` is the kernel CSPRNG `getrandom` reads; one `read` serves a whole batch
    /// of IVs, where `SystemRandomNumberGenerator` makes one system call per 8 bytes.
    private static let urandom: Int32 = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
    #endif

    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        #if canImport(Darwin)
        arc4random_buf(buffer.baseAddress!, buffer.count)
        return
        #else
        #if canImport(Glibc)
        var filled = 0
        if urandom >= 0 {
            while filled < buffer.count {
                let n = read(urandom, buffer.baseAddress! + filled, buffer.count - filled)
                if n > 0 { filled += n } else if n < 0 && errno == EINTR { continue } else { break }
            }
        }
        if filled == buffer.count { return }
        #endif
        var generator = SystemRandomNumberGenerator()
        for i in 0..<buffer.count { buffer[i] = UInt8.random(in: .min ... .max, using: &generator) }
        #endif
    }
}
