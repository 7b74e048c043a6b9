import CCrypto
import Foundation

/// SHA-256 from OpenSSL's libcrypto, fed chunk by chunk, so that data of any size (a file as it
/// streams to disk, the records a compaction drops) is hashed without being held whole.
package struct SHA256: ~Copyable {
    private let context: OpaquePointer

    package init() {
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            fatalError("libcrypto cannot start a SHA-256 digest")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        _ = EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
    }

    package mutating func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The 32 bytes of the digest.
    package consuming func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return Array(digest[..<Int(length)])
    }
}
