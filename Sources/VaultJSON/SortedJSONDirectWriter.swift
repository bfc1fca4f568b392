import Foundation

/// A value that writes its own JSON with ``SortedJSONDirectWriter``: byte for byte what its
/// `encode(to:)` gives through ``SortedJSONEncoder``, without the `Encoder` protocol's boxes,
/// key strings and per-object sorts. ``SortedJSONEncoder/encode(_:)`` takes this path for such a
/// value and falls back to `encode(to:)` when the writer reports ``SortedJSONDirectWriter/failed``.
///
/// The store encodes a cipher at every offline save: through `Encoder` that was about half of a
/// save's own CPU time. A differential test compares the two paths on generated values.
public protocol SortedJSONDirectEncodable: Encodable {
    /// Writes the value; on anything it cannot write the same way as `encode(to:)`, calls
    /// ``SortedJSONDirectWriter/fail()`` (what was written is then dropped).
    func writeSortedJSON(to writer: inout SortedJSONDirectWriter)
}

/// Writes compact JSON in ``SortedJSONEncoder``'s form, for values that know their members: each
/// object's members must be written in ascending key order (UTF-8 bytes); carried unknown
/// members (an `extra` dictionary) are merged in at their places.
///
/// ```swift
/// var object = writer.beginObject(extra: extra, known: Self.knownKeys)
/// writer.key("id", &object); writer.string(id)
/// writer.key("name", &object); writer.utf8String(name?.jsonStringUTF8)
/// writer.end(&object)
/// ```
public struct SortedJSONDirectWriter {
    var base: SortedJSONWriter
    /// Set by ``fail()``: the output is not what `encode(to:)` writes and must not be used.
    public private(set) var failed = false

    /// A writer; `escapesSlashes` as ``SortedJSONEncoder/escapesSlashes``.
    public init(escapesSlashes: Bool) {
        base = SortedJSONWriter(escapesSlashes: escapesSlashes)
        base.out.reserveCapacity(1024)
    }

    /// The JSON written so far.
    public var bytes: [UInt8] { base.out }

    /// Gives up: the caller falls back to `encode(to:)`.
    public mutating func fail() { failed = true }

    /// An object being written (from ``beginObject(extra:known:)``).
    public struct Object {
        var first = true
        /// The unknown members still to write, in key order.
        var pending: [(key: String, value: JSONValue)]
        var next = 0
    }

    /// Opens an object. `extra`: unknown members carried through, written except where `known`
    /// holds their key (as `putUnknown` does).
    public mutating func beginObject(extra: [String: JSONValue] = [:], known: Set<String> = []) -> Object {
        base.out.append(UInt8(ascii: "{"))
        guard !extra.isEmpty else { return Object(pending: []) }
        let pending = extra.filter { !known.contains($0.key) }
            .sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            .map { (key: $0.key, value: $0.value) }
        return Object(pending: pending)
    }

    /// An object of `members` only (keys that are data, not code), in key order.
    public mutating func object(_ members: [String: JSONValue]) {
        var object = beginObject(extra: members)
        end(&object)
    }

    /// Starts the member `key` (after any unknown members whose keys sort before it); its
    /// value is written next.
    public mutating func key(_ key: StaticString, _ object: inout Object) {
        let bytes = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        while object.next < object.pending.count, object.pending[object.next].key.utf8.lexicographicallyPrecedes(bytes) {
            writePending(&object)
        }
        separate(&object)
        base.writeString(utf8: bytes)
        base.out.append(UInt8(ascii: ":"))
    }

    /// Closes the object, after the unknown members left.
    public mutating func end(_ object: inout Object) {
        while object.next < object.pending.count { writePending(&object) }
        base.out.append(UInt8(ascii: "}"))
    }

    private mutating func separate(_ object: inout Object) {
        if !object.first { base.out.append(UInt8(ascii: ",")) }
        object.first = false
    }

    private mutating func writePending(_ object: inout Object) {
        let member = object.pending[object.next]
        object.next += 1
        separate(&object)
        base.writeString(member.key)
        base.out.append(UInt8(ascii: ":"))
        value(member.value)
    }

    /// `null`.
    public mutating func null() { base.out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }

    /// A string, or `null`.
    public mutating func string(_ value: String?) {
        guard let value else { return null() }
        base.writeString(value)
    }

    /// A string from its UTF-8 bytes (a ``JSONStringEncodable``'s), or `null`.
    public mutating func utf8String(_ value: [UInt8]?) {
        guard let value else { return null() }
        value.withUnsafeBufferPointer { base.writeString(utf8: $0) }
    }

    /// An integer, or `null`.
    public mutating func int(_ value: Int?) {
        guard let value else { return null() }
        if value < 0 { base.out.append(UInt8(ascii: "-")) }
        base.writeDigits(UInt64(value.magnitude))
    }

    /// `true`, `false` or `null`.
    public mutating func bool(_ value: Bool?) {
        guard let value else { return null() }
        value ? base.out.append(contentsOf: [0x74, 0x72, 0x75, 0x65]) : base.out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
    }

    /// Opens an array; ``nextElement()`` before every element but the first, then ``endArray()``.
    public mutating func beginArray() { base.out.append(UInt8(ascii: "[")) }

    /// The separator before an array's second and later elements.
    public mutating func nextElement() { base.out.append(UInt8(ascii: ",")) }

    /// Closes an array.
    public mutating func endArray() { base.out.append(UInt8(ascii: "]")) }

    /// JSON already written in this form (a value encoded before), as it is.
    public mutating func json(_ bytes: [UInt8]) { base.out.append(contentsOf: bytes) }

    /// Any JSON value as `JSONValue.encode(to:)` writes it through ``SortedJSONEncoder`` (an
    /// object's keys sorted); a number that is not finite fails (`JSONEncoder` decides).
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let bool): self.bool(bool)
        case .integer(let integer):
            if integer < 0 { base.out.append(UInt8(ascii: "-")) }
            base.writeDigits(integer.magnitude)
        case .double(let double):
            guard double.isFinite else { return fail() }
            base.writeFloat(double.description)
        case .string(let string): base.writeString(string)
        case .array(let elements):
            beginArray()
            for (offset, element) in elements.enumerated() {
                if offset > 0 { nextElement() }
                self.value(element)
            }
            endArray()
        case .object(let object): self.object(object.dictionary)
        }
    }
}

extension SortedJSONEncoder {
    /// ``SortedJSONDirectEncodable``'s path, or nil when the value is not one or gave up.
    func directEncode<T: Encodable>(_ value: T) -> [UInt8]? {
        guard let direct = value as? any SortedJSONDirectEncodable else { return nil }
        var writer = SortedJSONDirectWriter(escapesSlashes: escapesSlashes)
        direct.writeSortedJSON(to: &writer)
        return writer.failed ? nil : writer.bytes
    }
}
