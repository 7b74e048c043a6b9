import CCrypto
import Foundation

/// SHA-256 from OpenSSL's libcrypto, fed chunk by chunk, so that a file of any size is hashed
/// while it streams to disk.
struct SHA256: ~Copyable {
    private let context: OpaquePointer

    init() {
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            fatalError("libcrypto cannot start a SHA-256 digest")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    mutating func update(_ data: Data) {
        data.withUnsafeBytes { bytes in _ = EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) }
    }

    /// The digest's 32 bytes.
    consuming func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return Array(digest[..<Int(length)])
    }

    /// The digest as Expo Updates spells a hash: base64url (RFC 4648 §5) without padding.
    consuming func finalizeBase64URL() -> String {
        Data(finalize()).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
