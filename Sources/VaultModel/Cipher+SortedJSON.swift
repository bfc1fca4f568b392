import Foundation
import VaultCrypto
import VaultJSON

// A cipher's JSON written directly, members in key order: what each type's `encode(to:)` gives
// through `SortedJSONEncoder`, byte for byte (`CipherSortedJSONTests` compares the two on
// generated ciphers). Every member below is written in ascending UTF-8 order of its key; the
// carried unknown members are merged in by the writer.

extension SortedJSONDirectWriter {
    mutating func encString(_ value: EncString?) { utf8String(value?.jsonStringUTF8) }
    mutating func date(_ value: BitwardenDate?) { string(value?.text) }
    mutating func integer<T: OpenIntegerEnum>(_ value: T?) { int(value?.rawValue) }

    /// `value` written by `write`, or `null`. (Generic helpers live here, in the module that
    /// calls them, so that they are specialised.)
    mutating func nullable<Value>(_ value: Value?, _ write: (inout Self, Value) -> Void) {
        guard let value else { return null() }
        write(&self, value)
    }

    /// The array of `elements`, each written by `element`, or `null`.
    mutating func array<Element>(_ elements: [Element]?, _ element: (inout Self, Element) -> Void) {
        guard let elements else { return null() }
        beginArray()
        for (offset, item) in elements.enumerated() {
            if offset > 0 { nextElement() }
            element(&self, item)
        }
        endArray()
    }
}

extension Cipher: SortedJSONDirectEncodable {
    public func writeSortedJSON(to w: inout SortedJSONDirectWriter) {
        var o = w.beginObject(extra: extra, known: Self.knownKeys)
        w.key("archivedDate", &o); w.date(archivedDate)
        w.key("attachments", &o); w.array(attachments) { $1.write(to: &$0) }
        if let bankAccount { w.key("bankAccount", &o); bankAccount.write(to: &w) }
        w.key("card", &o); w.nullable(card) { $1.writeRecord(to: &$0) }
        w.key("collectionIds", &o); w.array(collectionIds) { $0.string($1) }
        w.key("creationDate", &o); w.date(creationDate)
        w.key("deletedDate", &o); w.date(deletedDate)
        if let driversLicense { w.key("driversLicense", &o); driversLicense.write(to: &w) }
        w.key("edit", &o); w.bool(edit)
        w.key("favorite", &o); w.bool(favorite)
        w.key("fields", &o); w.array(fields) { $1.write(to: &$0) }
        w.key("folderId", &o); w.string(folderId)
        w.key("id", &o); w.string(id)
        w.key("identity", &o); w.nullable(identity) { $1.writeRecord(to: &$0) }
        w.key("key", &o); w.encString(key)
        w.key("login", &o); w.nullable(login) { $1.write(to: &$0) }
        w.key("name", &o); w.encString(name)
        w.key("notes", &o); w.encString(notes)
        w.key("object", &o); w.string(object)
        w.key("organizationId", &o); w.string(organizationId)
        w.key("organizationUseTotp", &o); w.bool(organizationUseTotp)
        if let passport { w.key("passport", &o); passport.write(to: &w) }
        w.key("passwordHistory", &o); w.array(passwordHistory) { $1.write(to: &$0) }
        w.key("permissions", &o); w.nullable(permissions) { $1.write(to: &$0) }
        w.key("reprompt", &o); w.integer(reprompt)
        w.key("revisionDate", &o); w.date(revisionDate)
        w.key("secureNote", &o); w.nullable(secureNote) { $1.write(to: &$0) }
        w.key("sshKey", &o); w.nullable(sshKey) { $1.writeRecord(to: &$0) }
        w.key("type", &o); w.int(type.rawValue)
        w.key("viewPassword", &o); w.bool(viewPassword)
        w.end(&o)
    }
}

extension CipherLogin {
    func write(to w: inout SortedJSONDirectWriter) {
        var o = w.beginObject(extra: extra, known: Self.knownKeys)
        w.key("autofillOnPageLoad", &o); w.bool(autofillOnPageLoad)
        w.key("fido2Credentials", &o); w.array(fido2Credentials) { $1.write(to: &$0) }
        w.key("password", &o); w.encString(password)
        w.key("passwordRevisionDate", &o); w.date(passwordRevisionDate)
        w.key("totp", &o); w.encString(totp)
        if let uri { w.key("uri", &o); w.encString(uri) }
        w.key("uris", &o); w.array(uris) { $1.write(to: &$0) }
        w.key("username", &o); w.encString(username)
        w.end(&o)
    }
}

extension CipherLoginUri {
    func write(to w: inout SortedJSONDirectWriter) {
        var o = w.beginObject(extra: extra, known: Self.knownKeys)
        w.key("match", &o); w.integer(match)
        w.key("uri", &o); w.encString(uri)
        w.key("uriChecksum", &o); w.encString(uriChecksum)
        w.end(&o)
    }
}

extension CipherFido2Credential {
    func write(to w: inout SortedJSONDirectWriter) {
        writeRecord(to: &w, also: ["creationDate": creationDate.map { .string($0.text) } ?? .null])
    }
}

extension EncryptedTextRecord {
    /// The record's members, known and unknown, in one sorted object (its keys are data, not
    /// code); `also` as unknown members that replace carried ones of the same name.
    func writeRecord(to w: inout SortedJSONDirectWriter, also: [String: JSONValue] = [:]) {
        var members = extra
        for field in Self.encryptedFields {
            members[field.name] = self[keyPath: field.path].map { .string(String(decoding: $0.jsonStringUTF8, as: UTF8.self)) } ?? .null
        }
        members.merge(also) { _, new in new }
        w.object(members)
    }
}

extension CipherTextFields {
    func write(to w: inout SortedJSONDirectWriter) {
        var members = extra
        for (name, value) in values { members[name] = .string(String(decoding: value.jsonStringUTF8, as: UTF8.self)) }
        w.object(members)
    }
}

extension CipherField {
    func write(to w: inout SortedJSONDirectWriter) {
        var o = w.beginObject(extra: extra, known: Self.knownKeys)
        w.key("linkedId", &o); w.int(linkedId)
        w.key("name", &o); w.encString(name)
        w.key("type", &o); w.integer(type)
        w.key("value", &o); w.encString(value)
        w.end(&o)
    }
}

extension CipherPasswordHistory {
    func write(to w: inout SortedJSONDirectWriter) {
        var o = w.beginObject(extra: extra, known: Self.knownKeys)
        w.key("lastUsedDate", &o); w.date(lastUsedDate)
        w.key("password", &o); w.encString(password)
        w.end(&o)
    }
}

extension CipherAttachment {
    func write(to w: inout SortedJSONDirectWriter) {
        var o = w.beginObject(extra: extra, known: Self.knownKeys)
        w.key("fileName", &o); w.encString(fileName)
        w.key("id", &o); w.string(id)
        w.key("key", &o); w.encString(key)
        w.key("size", &o); w.string(size)
        w.key("sizeName", &o); w.string(sizeName)
        w.key("url", &o); w.string(url)
        w.end(&o)
    }
}

extension CipherPermissions {
    func write(to w: inout SortedJSONDirectWriter) {
        var o = w.beginObject(extra: extra, known: ["delete", "restore"])
        w.key("delete", &o); w.bool(delete)
        w.key("restore", &o); w.bool(restore)
        w.end(&o)
    }
}

extension CipherSecureNote {
    func write(to w: inout SortedJSONDirectWriter) {
        var o = w.beginObject(extra: extra, known: ["type"])
        w.key("type", &o); w.integer(type)
        w.end(&o)
    }
}
