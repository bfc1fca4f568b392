#!/usr/bin/env python3
"""Regenerates the VaultModel test fixtures deterministically (IVs derived from labels).

User key (64 bytes) = SHA-512("vaultlog fixture user key"); cipher key = SHA-512("vaultlog
fixture cipher key"). Type-2 EncStrings: AES-256-CBC/PKCS7 + HMAC-SHA256(iv || ct), as in
Bitwarden's cipher JSON format. Run from this directory.
"""
import base64, hashlib, hmac, json
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

USER_KEY = hashlib.sha512(b"vaultlog fixture user key").digest()
CIPHER_KEY = hashlib.sha512(b"vaultlog fixture cipher key").digest()


def enc(plain, key, label):
    data = plain.encode() if isinstance(plain, str) else plain
    iv = hashlib.sha256(label.encode()).digest()[:16]
    padder = padding.PKCS7(128).padder()
    padded = padder.update(data) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key[:32]), modes.CBC(iv)).encryptor()
    ct = encryptor.update(padded) + encryptor.finalize()
    mac = hmac.new(key[32:], iv + ct, hashlib.sha256).digest()
    b = lambda x: base64.b64encode(x).decode()
    return f"2.{b(iv)}|{b(ct)}|{b(mac)}"


def c(plain, label):
    return enc(plain, CIPHER_KEY, label)


uri = "https://bank.example.com/login"
login = {
    "object": "cipherDetails",
    "id": "3f2a6c1e-0b7d-4c8e-9a51-2d4e6f708192",
    "organizationId": None,
    "folderId": None,
    "type": 1,
    "name": c("Example Bank", "name"),
    "notes": c("Security questions are in the safe", "notes"),
    "key": enc(CIPHER_KEY, USER_KEY, "key"),
    "login": {
        "username": c("alice@example.com", "username"),
        "password": c("hunter2", "password"),
        "passwordRevisionDate": "2024-03-01T10:20:30.1234567Z",
        "totp": None,
        "uris": [{
            "uri": c(uri, "uri"),
            "uriChecksum": c(base64.b64encode(hashlib.sha256(uri.encode()).digest()).decode(), "uriChecksum"),
            "match": None,
            "futureUriFlag": {"mode": "strict", "level": 3},
        }],
        "fido2Credentials": None,
        "autofillOnPageLoad": None,
        "futureLoginHint": "prefers-passkey",
    },
    "fields": [
        {"type": 1, "name": c("Secret Key", "f0n"), "value": c("old_secret_value", "f0v"), "linkedId": None,
         "futureFieldColor": "amber"},
        {"type": 0, "name": c("Branch", "f1n"), "value": c("Main Street", "f1v"), "linkedId": None},
    ],
    "passwordHistory": [{"password": c("hunter1", "ph0"), "lastUsedDate": "2023-12-24T08:00:00.0000000Z"}],
    "attachments": None,
    "favorite": False,
    "reprompt": 0,
    "edit": True,
    "viewPassword": True,
    "organizationUseTotp": False,
    "revisionDate": "2024-03-01T10:20:30.1234567Z",
    "creationDate": "2023-01-15T09:00:00.0000000Z",
    "deletedDate": None,
    "archivedDate": None,
    "collectionIds": [],
    "permissions": {"delete": True, "restore": True},
    "futureTopLevel": {"nested": [1, 2.5, True, None, "x"], "big": 9007199254740993},
    "futureEncrypted": c("opaque data under the cipher key", "futureEncrypted"),
}

unknown = {
    "object": "cipherDetails",
    "id": "9b1c0d2e-3f40-4a5b-8c6d-7e8f90a1b2c3",
    "organizationId": None,
    "folderId": None,
    "type": 9,
    "name": enc("Hovercraft registration", USER_KEY, "u-name"),
    "notes": None,
    "key": None,
    "login": None, "card": None, "identity": None, "secureNote": None, "sshKey": None,
    "futureThing": {"registration": enc("HC-4711", USER_KEY, "u-reg"), "eels": 3, "tags": ["a", "b"]},
    "fields": None,
    "passwordHistory": None,
    "attachments": None,
    "favorite": True,
    "reprompt": 1,
    "edit": True,
    "viewPassword": True,
    "organizationUseTotp": False,
    "revisionDate": "2025-06-30T23:59:59.999999+02:00",
    "creationDate": "2025-06-30T21:00:00.123Z",
    "deletedDate": None,
    "archivedDate": None,
    "collectionIds": [],
}

for name, obj in [("cipher_login.json", login), ("cipher_unknown_type.json", unknown)]:
    with open(name, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
print("user key:", base64.b64encode(USER_KEY).decode())
print("cipher key:", base64.b64encode(CIPHER_KEY).decode())
