import Crypto
import Foundation
import LMDB
import Synchronization
import Logging
import VaultCrypto

/// An `AsyncSequence` of envelopes read in bounded batches; see ``EventLogStore/stream(from:to:batchSize:)``.
public struct EnvelopeStream: AsyncSequence, Sendable {
    /// The stream yields envelopes in sequence order.
    public typealias Element = Envelope
    let store: EventLogStore
    let from: UInt64
    let to: UInt64
    let batchSize: Int

    /// An iterator that starts at the stream's first sequence; nothing is read until the first `next()`.
    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, next: from, to: to, batchSize: batchSize)
    }

    /// Reads the next batch when the current one is used up.
    public struct Iterator: AsyncIteratorProtocol {
        let store: EventLogStore
        var next: UInt64
        let to: UInt64
        let batchSize: Int
        var buffer: [Envelope] = []
        var position = 0
        var finished = false

        init(store: EventLogStore, next: UInt64, to: UInt64, batchSize: Int) {
            self.store = store
            self.next = next
            self.to = to
            self.batchSize = Swift.max(1, batchSize)
        }

        /// The next envelope, reading a new batch in one read transaction when the buffered one is
        /// used up; nil after the last envelope in range. Rethrows the store's read errors.
        public mutating func next() async throws -> Envelope? {
            if position == buffer.count {
                guard !finished, next <= to else { return nil }
                buffer.removeAll(keepingCapacity: true)
                position = 0
                let (from, to, size) = (next, self.to, batchSize)
                var batch = buffer
                try store.read { reader in
                    try reader.forEachEnvelope(from: from, to: to) { envelope in
                        batch.append(envelope)
                        return batch.count < size
                    }
                }
                buffer = batch
                guard let last = buffer.last else { finished = true; return nil }
                if last.header.sequence == .max { finished = true } else { next = last.header.sequence + 1 }
            }
            defer { position += 1 }
            return buffer[position]
        }
    }
}
