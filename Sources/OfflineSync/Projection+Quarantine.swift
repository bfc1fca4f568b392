import EventLog

extension Projection {
    /// Quarantines the item of an event that cannot be read.
    public mutating func quarantine(_ header: EventHeader, reason: String) {
        precondition(header.sequence > lastSequence, "events fold in sequence order")
        lastSequence = header.sequence
        guard !header.cipherId.isEmpty else { return }
        if quarantined?[header.cipherId] == nil {
            quarantined = (quarantined ?? [:]).merging([header.cipherId: "event \(header.sequence): \(reason)"]) { a, _ in a }
        }
    }

    /// Whether `cipherId` is quarantined.
    public func isQuarantined(_ cipherId: String) -> Bool { quarantined?[cipherId] != nil }
}
