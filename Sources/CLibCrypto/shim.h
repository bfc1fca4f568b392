#ifndef VAULTLOG_CLIBCRYPTO_SHIM_H
#define VAULTLOG_CLIBCRYPTO_SHIM_H
// Only the EVP cipher interface (AES-256-CBC); everything else VaultCrypto does goes through
// swift-crypto.
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#endif
