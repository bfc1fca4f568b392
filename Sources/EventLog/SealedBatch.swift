import Crypto
import VaultCrypto

/// A batch of events sealed into one buffer, envelope `i` at `offsets[i]..<offsets[i + 1]`,
/// each exactly the bytes ``Envelope/seal(header:body:key:iv:)`` makes for it.
///
/// Sealing one event at a time allocated its header, its ciphertext and the joined envelope:
/// three heap blocks per event, and at 10,000 events a batch the allocator's fresh pages (page
/// faults, zeroing) cost more than the AES. Here a batch is one allocation: the layout comes
/// first (every length is known before anything is encrypted), then each event's header, IV and
/// ciphertext are written into its own range on all cores, then the MACs run in order, because
/// each of a user's events names the MAC before it.
final class SealedBatch {
    /// The envelopes, back to back.
    let buffer: UnsafeMutableRawBufferPointer
    /// Where each envelope starts, and the end of the last.
    let offsets: [Int]
    /// The MAC of each user's last event in the batch (the chain the next append continues).
    private(set) var chains: [String: [UInt8]] = [:]

    /// Envelope `i`'s bytes (valid while the batch lives).
    func envelope(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: buffer[offsets[i]..<offsets[i + 1]])
    }

    /// Seals `events` with consecutive sequences from `firstSequence`, each user's first event
    /// chained onto `previousMACs[user]` (the chain start when absent), the IV of event `i` being
    /// `ivs[16 i ..< 16 i + 16]`. Throws before anything is written for an id too long for a
    /// header.
    init(_ events: [NewEvent], firstSequence: UInt64, key: SealingKey, ivs: [UInt8], previousMACs: [String: [UInt8]],
         parallelThreshold: Int) throws {
        precondition(ivs.count == 16 * events.count, "one 16-byte IV per event")
        let ivBytes = Envelope.ivBytes, macBytes = Envelope.macBytes
        @Sendable func header(_ i: Int) -> EventHeader {
            let event = events[i]
            return EventHeader(sequence: firstSequence + UInt64(i), userId: event.userId, cipherId: event.cipherId,
                               eventType: event.eventType, recordedAtMillis: event.recordedAtMillis)
        }
        // Layout: header ‖ IV ‖ MAC ‖ ciphertext per event.
        var offsets = [Int]()
        offsets.reserveCapacity(events.count + 1)
        var headerLengths = [Int]()
        headerLengths.reserveCapacity(events.count)
        var total = 0
        for i in events.indices {
            let length = try Envelope.headerLength(header(i))
            offsets.append(total)
            headerLengths.append(length)
            total += length + ivBytes + macBytes + AESCBC.ciphertextCount(plaintextCount: events[i].body.count)
        }
        offsets.append(total)
        // New events are written in the current format, which chains each to the one before.
        precondition(Envelope.currentFormatVersion >= Envelope.chainedFormatVersion, "sealing writes chained headers")
        self.offsets = offsets
        buffer = .allocate(byteCount: max(total, 1), alignment: 16)

        // Headers (chain start as the previous MAC for now), IVs and ciphertexts, each into its
        // own range.
        nonisolated(unsafe) let out = buffer
        let encryptionKey = key.events.key.encryptionKey
        let lengths = headerLengths, ends = offsets
        parallelForEach(count: events.count, threshold: parallelThreshold) { i in
            let start = ends[i], headerLength = lengths[i]
            let ivStart = start + headerLength, ctStart = ivStart + ivBytes + macBytes
            Envelope.writeHeader(header(i), length: headerLength, to: UnsafeMutableRawBufferPointer(rebasing: out[start..<ivStart]))
            ivs.withUnsafeBytes { all in
                let iv = UnsafeRawBufferPointer(rebasing: all[16 * i..<16 * i + 16])
                UnsafeMutableRawBufferPointer(rebasing: out[ivStart..<ivStart + ivBytes]).copyMemory(from: iv)
                events[i].body.withUnsafeBytes { body in
                    _ = AESCBC.encrypt(body, key: encryptionKey, iv: iv, into: UnsafeMutableRawBufferPointer(rebasing: out[ctStart..<ends[i + 1]]))
                }
            }
        }

        // The MACs, in order: each of a user's events carries the MAC of the one before it.
        var lastMAC: [String: Int] = [:]   // user → offset of the MAC of its latest event here
        var currentUser: String?
        var currentMAC = 0
        for i in events.indices {
            let start = offsets[i], headerLength = headerLengths[i]
            let ivStart = start + headerLength, macStart = ivStart + ivBytes
            let user = events[i].userId
            let previousSlot = UnsafeMutableRawBufferPointer(rebasing: out[ivStart - macBytes..<ivStart])
            if user == currentUser {
                previousSlot.copyMemory(from: UnsafeRawBufferPointer(rebasing: out[currentMAC..<currentMAC + macBytes]))
            } else {
                if let currentUser { lastMAC[currentUser] = currentMAC }
                if let offset = lastMAC[user] {
                    previousSlot.copyMemory(from: UnsafeRawBufferPointer(rebasing: out[offset..<offset + macBytes]))
                } else {
                    (previousMACs[user] ?? Envelope.chainStart).withUnsafeBytes { previousSlot.copyMemory(from: $0) }
                }
                currentUser = user
            }
            currentMAC = macStart
            var hmac = key.events.hmac
            hmac.update(data: UnsafeRawBufferPointer(rebasing: out[start..<macStart]))
            hmac.update(data: UnsafeRawBufferPointer(rebasing: out[(macStart + macBytes)..<offsets[i + 1]]))
            hmac.finalize(into: UnsafeMutableRawBufferPointer(rebasing: out[macStart..<macStart + macBytes]))
        }
        if let currentUser { lastMAC[currentUser] = currentMAC }
        for (user, offset) in lastMAC { chains[user] = Array(UnsafeRawBufferPointer(rebasing: out[offset..<offset + macBytes])) }
    }

    deinit { buffer.deallocate() }
}
