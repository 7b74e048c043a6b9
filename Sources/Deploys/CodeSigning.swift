import CCrypto
import Foundation

/// Expo's code signing (`rsa-v1_5-sha256`): the certificates a client trusts, by key id, and
/// the check of an `expo-signature` header against the exact bytes of the part it signs. Every
/// libcrypto call of the deploys module's signing lives here, each pointer freed before return.
public struct TrustedCertificates: Sendable {
    /// The one algorithm Expo defines, and the only one accepted.
    public static let algorithm = "rsa-v1_5-sha256"
    /// Expo's default key id, for a certificate or a signing key given without one.
    public static let defaultKeyID = "main"
    /// Where an app ships the certificates it trusts: `APP_DIR/certificates/KEYID.pem`.
    public static let directoryName = "certificates"

    /// The trusted certificates' PEM text, by key id.
    private var byKeyID: [String: Data] = [:]
    /// The key ids in the order they were trusted.
    public private(set) var keyIDs: [String] = []

    /// None: the client neither asks for nor checks signatures.
    public init() {}

    /// Whether no certificate is trusted.
    public var isEmpty: Bool { keyIDs.isEmpty }

    /// Trusts the PEM certificate in `file` for signatures under `keyID`, replacing one
    /// trusted before under that id.
    /// - Throws: `DeployError.usage` for a key id `isValidKeyID` refuses, a file that is
    ///   missing, unreadable or larger than 1 MiB, or one that holds no PEM X.509
    ///   certificate with an RSA public key.
    public mutating func trust(_ file: String, keyID: String) throws(DeployError) {
        guard Self.isValidKeyID(keyID) else { throw .usage(Self.keyIDRule(keyID)) }
        let pem: Data?
        do { pem = try Files.readSmall(file, limit: 1 << 20) } catch { throw .usage("\(file): \(error)") }
        guard let pem else { throw .usage("\(file): no such certificate file") }
        if let problem = Self.withPublicKey(of: pem, { _, _ in nil }) { throw .usage("\(file): \(problem)") }
        if byKeyID.updateValue(pem, forKey: keyID) == nil { keyIDs.append(keyID) }
    }

    /// Trusts every `KEYID.pem` in `APP_DIR/certificates/` (none when the folder is absent),
    /// in the order of their names, but for key ids already trusted: those given before take
    /// precedence. The folder is only read.
    /// - Throws: What `trust(_:keyID:)` throws for a file there; `DeployError.usage` for a
    ///   `.pem` file whose name is no valid key id, `.filesystem` for a folder that cannot be read.
    public mutating func trustShipped(in directory: AppDirectory) throws(DeployError) {
        let folder = directory.path + "/" + Self.directoryName
        guard FileManager.default.fileExists(atPath: folder) else { return }
        let names = try Files.names(in: folder).map { String(decoding: $0, as: UTF8.self) }.filter { $0.hasSuffix(".pem") }.sorted()
        for name in names {
            let keyID = String(name.dropLast(".pem".count))
            guard Self.isValidKeyID(keyID) else { throw .usage("\(folder)/\(name): the name is no key id: " + Self.keyIDRule(keyID)) }
            if byKeyID[keyID] == nil { try trust(folder + "/" + name, keyID: keyID) }
        }
    }

    /// A key id names a file and travels in a header: 1 to 64 ASCII letters, digits, `-`, `_`
    /// or `.`, not first.
    public static func isValidKeyID(_ keyID: String) -> Bool {
        keyID.utf8.count <= 64 && AppDirectory.isSafeUpdateID(keyID)
    }

    static func keyIDRule(_ keyID: String) -> String {
        "a key id is 1 to 64 letters, digits, '-', '_' or '.', not first, not \"\(keyID)\""
    }

    /// The `expo-expect-signature` request header, as Expo's client sends it: the key id is
    /// the first trusted one's.
    var expectSignatureHeader: String? {
        keyIDs.first.map { "sig, keyid=\"\($0)\", alg=\"\(Self.algorithm)\"" }
    }

    /// Why `signature` (an `expo-signature` header, `nil` when absent) does not sign `body`
    /// with a trusted certificate valid now, or `nil` when it does. A missing `keyid` is
    /// `main` and a missing `alg` is `rsa-v1_5-sha256`, as Expo's client reads them.
    func problem(with signature: String?, over body: [UInt8], of what: String) -> String? {
        guard let signature else { return "the \(what) carries no expo-signature" }
        guard let members = StructuredFields.dictionary(signature) else { return "the \(what)'s expo-signature is not a structured-field dictionary" }
        let fields = Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { _, last in last })
        guard let sig = fields["sig"]?.stringValue else { return "the \(what)'s expo-signature has no sig string" }
        let keyID = fields["keyid"].map { $0.stringValue ?? "" } ?? Self.defaultKeyID
        let algorithm = fields["alg"].map { $0.stringValue ?? "" } ?? Self.algorithm
        guard algorithm == Self.algorithm else { return "the \(what)'s expo-signature uses alg \"\(algorithm)\"; only \(Self.algorithm) is accepted" }
        guard let signatureBytes = Data(base64Encoded: sig), !signatureBytes.isEmpty else {
            return "the \(what)'s expo-signature sig is not base64"
        }
        guard let pem = byKeyID[keyID] else {
            return "the \(what) is signed with key id \"\(keyID)\", which no trusted certificate has (trusted: \(keyIDs.joined(separator: ", ")))"
        }
        return Self.withPublicKey(of: pem) { certificate, key in
            let notBefore = X509_cmp_current_time(X509_get0_notBefore(certificate))
            let notAfter = X509_cmp_current_time(X509_get0_notAfter(certificate))
            guard notBefore < 0 else { return "the certificate of key id \"\(keyID)\" is not valid yet" }
            guard notAfter > 0 else { return "the certificate of key id \"\(keyID)\" has expired" }
            guard Self.verify(signatureBytes, over: body, with: key) else {
                return "the \(what)'s signature does not verify with the certificate of key id \"\(keyID)\""
            }
            return nil
        }
    }

    /// Runs `body` with the certificate in `pem` and its public key; a problem when `pem` holds
    /// no certificate or its key is not RSA.
    private static func withPublicKey(of pem: Data, _ body: (OpaquePointer, OpaquePointer) -> String?) -> String? {
        defer { ERR_clear_error() }
        return pem.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> String? in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return "libcrypto cannot read memory" }
            defer { BIO_free(bio) }
            guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else { return "not a PEM X.509 certificate" }
            defer { X509_free(certificate) }
            guard let key = X509_get_pubkey(certificate) else { return "the certificate's public key cannot be read" }
            defer { EVP_PKEY_free(key) }
            guard EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else { return "the certificate's key is not RSA, which \(algorithm) needs" }
            return body(certificate, key)
        }
    }

    /// Whether `signature` is an RSA PKCS #1 v1.5 signature of the SHA-256 of `body` by `key`.
    private static func verify(_ signature: Data, over body: [UInt8], with key: OpaquePointer) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1,
              EVP_DigestVerifyUpdate(context, body, body.count) == 1 else { return false }
        return signature.withUnsafeBytes { bytes in
            EVP_DigestVerifyFinal(context, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count) == 1
        }
    }
}

/// The server side's one check: a signing key is an unencrypted PEM RSA private key.
enum SigningKey {
    /// Why `file` is no key `openssl dgst -sign` can sign with unattended, or `nil`.
    static func problem(_ file: String) -> String? {
        let pem: Data?
        do { pem = try Files.readSmall(file, limit: 1 << 20) } catch { return "\(error)" }
        guard let pem else { return "no such key file" }
        defer { ERR_clear_error() }
        return pem.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> String? in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return "libcrypto cannot read memory" }
            defer { BIO_free(bio) }
            // No passphrase is ever asked: an encrypted key fails to read, as the server could not use it.
            guard let key = PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil) else {
                return "not an unencrypted PEM private key"
            }
            defer { EVP_PKEY_free(key) }
            guard EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else { return "not an RSA key, which \(TrustedCertificates.algorithm) needs" }
            return nil
        }
    }
}
