import BitwardenAPI
import BitwardenAPINIO
import BitwardenEmulator
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel

/// A loopback port nothing listens on: the device's "offline" transport. The socket stays bound
/// (never listening) until `close()`, so connections are refused and no other server — another
/// scenario's emulator started meanwhile — can be given the port.
final class ClosedPort: Sendable {
    let url: URL
    private let socket: Mutex<Int32?>

    init() throws {
        #if canImport(Glibc)
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw ReplayError.badStep(index: -1, reason: "cannot open a socket to find a closed port") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            closeDescriptor(fd)
            throw ReplayError.badStep(index: -1, reason: "cannot bind a loopback socket to find a closed port")
        }
        url = URL(string: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")!
        socket = Mutex(fd)
    }

    /// Releases the port (idempotent).
    func close() {
        socket.withLock { fd in
            if let open = fd { closeDescriptor(open) }
            fd = nil
        }
    }

    deinit { close() }
}

private func closeDescriptor(_ fd: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(fd)
    #else
    _ = Darwin.close(fd)
    #endif
}
