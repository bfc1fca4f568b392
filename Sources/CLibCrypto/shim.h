#ifndef VAULTLOG_CLIBCRYPTO_SHIM_H
#define VAULTLOG_CLIBCRYPTO_SHIM_H
// The EVP cipher interface (AES-256-CBC) and SHA-256's streaming functions (the keyed HMAC
// copies their plain state struct); everything else VaultCrypto does goes through
// swift-crypto. OpenSSL 3 marks SHA256_Init/Update/Final deprecated in favour of EVP_MD, whose
// context is an allocated object: the plain struct is what a cheap copy needs.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/sha.h>
#endif
