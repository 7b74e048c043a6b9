import Foundation

/// An RSA key and a self-signed certificate for it, made at test time with Debian's `openssl`,
/// for the update server to sign with and the deploy client to trust.
public struct SigningKeyPair: Sendable {
    /// The PEM private key (unencrypted).
    public let key: String
    /// The PEM certificate of its public key.
    public let certificate: String

    /// When the certificate is valid.
    public enum Validity: Sendable {
        /// From now, for two days.
        case current
        /// Only in 2020.
        case expired
        /// Only from 2099.
        case notYetValid
    }

    /// Makes `NAME.key.pem` and `NAME.pem` in `directory`.
    public init(in directory: String, name: String, validity: Validity = .current) throws {
        key = directory + "/" + name + ".key.pem"
        certificate = directory + "/" + name + ".pem"
        switch validity {
        case .current:
            try Self.openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate,
                              "-subj", "/CN=\(name)", "-days", "2"], in: directory)
        case .expired, .notYetValid:
            // `openssl ca` sets both dates, which `req -x509` (OpenSSL 3.0) cannot.
            let (start, end) = validity == .expired ? ("20200101000000Z", "20200102000000Z") : ("20990101000000Z", "20990102000000Z")
            let ca = directory + "/" + name + ".ca"
            try FileManager.default.createDirectory(atPath: ca, withIntermediateDirectories: true)
            try Data().write(to: URL(fileURLWithPath: ca + "/index.txt"))
            try Data("01\n".utf8).write(to: URL(fileURLWithPath: ca + "/serial"))
            try Data("""
                [ca]
                default_ca = signing
                [signing]
                database = \(ca)/index.txt
                new_certs_dir = \(ca)
                serial = \(ca)/serial
                default_md = sha256
                policy = anything
                [anything]
                commonName = supplied

                """.utf8).write(to: URL(fileURLWithPath: ca + "/ca.cnf"))
            try Self.openssl(["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", ca + "/request.csr", "-subj", "/CN=\(name)"],
                             in: directory)
            try Self.openssl(["ca", "-batch", "-config", ca + "/ca.cnf", "-selfsign", "-keyfile", key, "-in", ca + "/request.csr",
                              "-startdate", start, "-enddate", end, "-notext", "-out", certificate], in: directory)
        }
    }

    /// The base64 RSA-SHA256 signature of `bytes` by the key, as `openssl dgst -sha256 -sign` makes it.
    public func sign(_ bytes: [UInt8]) throws -> String {
        let file = key + ".input-" + UUID().uuidString
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        return try Self.openssl(["dgst", "-sha256", "-sign", key, file], in: (key as NSString).deletingLastPathComponent).base64EncodedString()
    }

    /// Runs `openssl arguments…` and returns what it printed; throws when it fails.
    @discardableResult
    static func openssl(_ arguments: [String], in directory: String) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("openssl-" + UUID().uuidString)
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("openssl-" + UUID().uuidString)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errors) }
        // Files, not pipes: neither can fill up while the process runs.
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw LoopbackServerError(message: "openssl \(arguments.first ?? "") failed: \(String(decoding: try Data(contentsOf: errors), as: UTF8.self))")
        }
        return try Data(contentsOf: output)
    }
}

extension LoopbackServer {
    /// The proxy that applies `replacements` (a Python regular expression and its replacement,
    /// over the bytes) to every manifest answer of `upstream` (see `tampering_proxy.py`).
    public static func tamperingProxy(to upstream: URL, replacing replacements: [(pattern: String, with: String)]) throws -> LoopbackServer {
        try LoopbackServer(script: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("tampering_proxy.py"),
                           arguments: ["--upstream", upstream.absoluteString] + replacements.flatMap { ["--replace", $0.pattern, $0.with] })
    }
}
