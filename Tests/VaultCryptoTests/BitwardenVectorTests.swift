import Testing
import Foundation
@testable import VaultCrypto

/// Public test vectors of the Bitwarden SDK and clients.
@Suite struct BitwardenVectorTests {
    static let t1Key: [UInt8] = Array(0..<64)
    static let t1IV: [UInt8] = [216, 218, 36, 0, 196, 186, 150, 85, 49, 147, 110, 168, 185, 227, 42, 172]
    static let t1Mac: [UInt8] = [60, 78, 44, 111, 72, 233, 3, 6, 86, 250, 217, 242, 62, 229, 184, 221, 231, 150, 189, 44,
                                 99, 189, 220, 55, 196, 194, 101, 60, 102, 195, 149, 130]
    static let t1Data: [UInt8] = [234, 77, 16, 15, 189, 82, 36, 188, 182, 88, 64, 67, 145, 94, 30, 178, 36, 235, 130, 67,
                                  255, 207, 183, 168, 73, 231, 82, 122, 193, 139, 25, 129]

    @Test func t1_rawAesCbcHmac_decryptsToSdkPlaintext() throws {
        let key = try SymmetricCryptoKey(bytes: Self.t1Key)
        let enc = try EncString(iv: Self.t1IV, ciphertext: Self.t1Data, mac: Self.t1Mac)
        #expect(try enc.decryptString(key: key) == "Bitwarden SDK test vector")
        #expect(enc.serialized == "2.2NokAMS6llUxk26oueMqrA==|6k0QD71SJLy2WEBDkV4esiTrgkP/z7eoSedSesGLGYE=|PE4sb0jpAwZW+tnyPuW43eeWvSxjvdw3xMJlPGbDlYI=")
    }

    @Test func t1_encryptWithSameIV_reproducesCiphertextAndMac() throws {
        let key = try SymmetricCryptoKey(bytes: Self.t1Key)
        let enc = EncString.encrypt(Array("Bitwarden SDK test vector".utf8), key: key, iv: Self.t1IV)
        #expect(enc.ciphertext == Self.t1Data)
        #expect(enc.mac == Self.t1Mac)
    }

    @Test(arguments: [
        ("2.kTtIypq9OLzd5iMMbU11pQ==|J4i3hTtGVdg7EZ+AQv/ujg==|QJpSpotQVpIW8j8dR/8l015WJzAIxBaOmrz4Uj/V1JA=", [UInt8]([1, 2, 3, 4, 5])),
        ("2.fkvl0+sL1lwtiOn1eewsvQ==|dT0TynLl8YERZ8x7dxC+DQ==|cWhiRSYHOi/AA2LiV/JBJWbO9C7pbUpOM6TMAcV47hE=", Array("Hello, World!".utf8)),
    ])
    func t2_encStringsDecryptWithSdkKey(encString: String, expected: [UInt8]) throws {
        let key = try SymmetricCryptoKey(base64: "sJnO8rVi0dTwND43n0T9x7665s8mVUYNAaJ4nm7gx1iia1I7947URL60nwfIHaf9QJePO4VkNN0oT9jh4iC6aA==")
        let enc = try EncString(encString)
        #expect(try enc.decrypt(key: key) == expected)
        #expect(enc.serialized == encString, "serialisation must round-trip byte for byte")
    }

    @Test func t7_pbkdf2MasterKeyAndStretch() throws {
        let master = try MasterKey.derive(password: "67t9b5g67$%Dh89n", email: "test_key", kdf: .pbkdf2(iterations: 10_000))
        #expect(Base64.encode(master.exportBytes()) == "H09o4pZHsVrCUKzREYGEUYqnRaf+lQIbJ8VAKhbDVks=")
        #expect(master.stretched().exportBase64() == "bx+yLe6YJXKP13xTh63DF46GePk9hKO2ccW9zLwV7WDdf87qZRvKJlY0IhxOHLkQMD1/ptH3wlfoGjBVwfmzmw==")
    }

    @Test func t7_argon2idMasterKey() throws {
        let master = try MasterKey.derive(password: "67t9b5g67$%Dh89n", email: "test_key",
                                          kdf: .argon2id(iterations: 4, memoryMiB: 32, parallelism: 2))
        #expect(master.exportBytes() == [207, 240, 225, 177, 162, 19, 163, 76, 98, 106, 179, 175, 224, 9, 17, 240, 20, 147,
                                         237, 47, 246, 150, 141, 184, 62, 225, 131, 242, 51, 53, 225, 242])
        #expect(Base64.encode(master.exportBytes()) == "z/DhsaITo0xiarOv4AkR8BST7S/2lo24PuGD8jM14fI=")
    }

    @Test func t9_argon2idPasswordHash() throws {
        let master = try MasterKey.derive(password: "asdfasdf", email: "test_salt",
                                          kdf: .argon2id(iterations: 4, memoryMiB: 32, parallelism: 2))
        #expect(master.passwordHash(password: "asdfasdf", purpose: .serverAuthorization) == "PR6UjYmjmppTYcdyTiNbAhPJuQQOmynKbdEl1oyi/iQ=")
    }

    @Test func argon2id_saltIsTheTrimmedLowercasedEmailHashed() throws {
        let kdf = KdfConfig.argon2id(iterations: 2, memoryMiB: 16, parallelism: 1)
        let a = try MasterKey.derive(password: "pw", email: " Someone@Example.com ", kdf: kdf)
        let b = try MasterKey.derive(password: "pw", salt: Array("someone@example.com".utf8), kdf: kdf)
        let c = try MasterKey.derive(password: "pw", email: "other@example.com", kdf: kdf)
        #expect(a.exportBytes() == b.exportBytes())
        #expect(a.exportBytes() != c.exportBytes())
    }

    @Test func t8_fullAccountChain_passwordToUserKey() throws {
        let master = try MasterKey.derive(password: "asdfasdfasdf", email: "test@bitwarden.com", kdf: .pbkdf2(iterations: 600_000))
        #expect(Base64.encode(master.exportBytes()) == "ySXq1RVLKEaV1eoQE/ui9aFKIvXTl9PAXwp1MljfF50=")
        #expect(master.stretched().exportBase64() == "qt/RXR05/LhS7mQwmsIfwdcQKl+IGxkX9ZnrqgdmjCAZUkt3dja0l0WxaQh+YY5ANY7HcbCXOkQnD9A4XewRlw==")
        let protected = try EncString("2.Q/2PhzcC7GdeiMHhWguYAQ==|GpqzVdr0go0ug5cZh1n+uixeBC3oC90CIe0hd/HWA/pTRDZ8ane4fmsEIcuc8eMKUt55Y2q/fbNzsYu41YTZzzsJUSeqVjT8/iTQtgnNdpo=|dwI+uyvZ1h/iZ03VQ+/wrGEFYVewBUUl/syYgjsNMbE=")
        let userKey = try master.decryptUserKey(protected)
        #expect(userKey.exportBase64() == "bYCsk857hl8QJJtxyRK65tjUrbxKC4aDifJpsml+NIv4W9cVgFvi3qVD+yJTUU2T4UwNKWYtt9pqWf7Q+2WCCg==")
        #expect(master.passwordHash(password: "asdfasdfasdf", purpose: .localAuthorization) == "aOvkBXFhSdgrBWR3hZCMRoML9+h5yRblU3lFphCdkeA=")
        #expect(master.passwordHash(password: "asdfasdfasdf", purpose: .serverAuthorization) == "8HT+qrqqhBaGEIHp9mwuv1ivoW9r6yaauAkOCYbe+SM=")
    }

    @Test(arguments: ["test@bitwarden.com", "TEST@bitwarden.com", " test@bitwarden.com"])
    func t9_masterPasswordHash_normalisesEmail(email: String) throws {
        let master = try MasterKey.derive(password: "asdfasdf", email: email, kdf: .pbkdf2(iterations: 100_000))
        #expect(Base64.encode(master.exportBytes()) == "j6LIxCM7M4VKobykynJczRKr3ji3SCcg3vTuoBgEkmg=")
        #expect(master.passwordHash(password: "asdfasdf", purpose: .serverAuthorization) == "wmyadRMyBZOH7P/a/ucTCbSghKgdzDpPqUnu/DAVtSw=")
    }

    @Test func t11_pbkdf2Primitive() throws {
        let master = try MasterKey.derive(password: "password", salt: Array("user@example.com".utf8), kdf: .pbkdf2(iterations: 5000))
        #expect(Base64.encode(master.exportBytes()) == "pj9prw/OHPleXI6bRdmlaD+saJS4awrMiQsQiDjeu2I=")
    }

    @Test func t11_hkdfExpand32And64() throws {
        let prk = try #require(Base64.decode("F5h4KdYQnIVH4rKH0P9CZb1GrR4n16/sJrS0PsQEn0Y="))
        #expect(Base64.encode(hkdfExpand(prk: prk, info: "info", outputByteCount: 32)) == "BnIqJlfnHm0e/2iB/15cbHyR19ARPIcWRp4oNS22CD8=")
        #expect(Base64.encode(hkdfExpand(prk: prk, info: "info", outputByteCount: 64)) == "BnIqJlfnHm0e/2iB/15cbHyR19ARPIcWRp4oNS22CD9BV+/queOZenPNkDhmlVyL2WZ3OSU5+7ISNF5NhNfvZA==")
    }
}
