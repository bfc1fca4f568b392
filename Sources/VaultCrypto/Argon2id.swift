import CArgon2

/// Argon2id (RFC 9106, version 0x13) through the reference implementation in libargon2.
enum Argon2id {
    /// Hashes `password` with `salt`. The caller checks the parameters' ranges first
    /// (``KdfConfig/validate()``); libargon2 still refuses anything it cannot do, with an error.
    static func hash(password: [UInt8], salt: [UInt8], iterations: Int, memoryKiB: Int, parallelism: Int,
                     outputByteCount: Int) throws -> [UInt8] {
        guard let tCost = UInt32(exactly: iterations), let mCost = UInt32(exactly: memoryKiB),
              let lanes = UInt32(exactly: parallelism), let outLength = UInt32(exactly: outputByteCount),
              let passwordLength = UInt32(exactly: password.count), let saltLength = UInt32(exactly: salt.count) else {
            throw VaultCryptoError.invalidKdfParameters("Argon2id parameters do not fit in 32 bits")
        }
        var output = [UInt8](repeating: 0, count: outputByteCount)
        var password = password
        var salt = salt
        let status = output.withUnsafeMutableBufferPointer { out in
            password.withUnsafeMutableBufferPointer { pwd in
                salt.withUnsafeMutableBufferPointer { saltBytes in
                    var context = argon2_context(
                        out: out.baseAddress, outlen: outLength,
                        pwd: pwd.baseAddress, pwdlen: passwordLength,
                        salt: saltBytes.baseAddress, saltlen: saltLength,
                        secret: nil, secretlen: 0, ad: nil, adlen: 0,
                        t_cost: tCost, m_cost: mCost, lanes: lanes, threads: lanes,
                        version: UInt32(ARGON2_VERSION_13.rawValue),
                        allocate_cbk: nil, free_cbk: nil, flags: 0)
                    return argon2_ctx(&context, Argon2_id)
                }
            }
        }
        // Wipe the copy of the password this function made.
        for index in password.indices { password[index] = 0 }
        guard status == ARGON2_OK.rawValue else {
            let message = argon2_error_message(status).map { String(cString: $0) } ?? "code \(status)"
            throw VaultCryptoError.primitiveFailure("Argon2id: \(message)")
        }
        return output
    }
}
