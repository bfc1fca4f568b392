import EventLog

/// The part of the projection computable from headers alone (while the vault is locked):
/// which items are pending and with what change type.
public struct HeaderProjection: Sendable, Equatable {
    /// The last sequence folded.
    public var lastSequence: UInt64 = 0
    /// Pending change type by cipher id.
    public var pending: [String: PendingChangeType] = [:]
    /// Pending creates that may have reached the server (a `createPlanned` or `idMapped` was
    /// recorded): a delete keeps them pending, as in ``Projection``. Only `createPlanned` events
    /// of creates count; the header does not say the purpose, so a backup's plan also marks the
    /// item (harmless: a create has no backups).
    public var uncertainCreates: Set<String> = []

    /// The empty header projection.
    public init() {}

    /// Folds one header.
    public mutating func apply(_ header: EventHeader) {
        lastSequence = header.sequence
        guard let type = VaultEventType(rawValue: header.eventType), !header.cipherId.isEmpty else { return }
        let id = header.cipherId
        if type.isOperation {
            var merged = PendingChangeType.merge(pending[id], type)
            if merged == .discard, uncertainCreates.contains(id) {
                merged = .pending(type == .hardDeleted ? .hardDelete : .softDelete)
            }
            switch merged {
            case .discard:
                pending[id] = nil
                uncertainCreates.remove(id)
            case .pending(let type): pending[id] = type
            }
        } else if type == .resolved || type == .clearedAfterOnlineSuccess {
            pending[id] = nil
            uncertainCreates.remove(id)
        } else if (type == .createPlanned || type == .idMapped), pending[id] == .create {
            uncertainCreates.insert(id)
        }
    }

    /// The number of pending items (the badge a locked vault shows).
    public var count: Int { pending.count }
}
