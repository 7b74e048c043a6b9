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

    /// Runs `openssl arguments…`, its output discarded; throws when it fails.
    static func openssl(_ arguments: [String], in directory: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw LoopbackServerError(message: "openssl \(arguments.first ?? "") failed: \(String(decoding: message, as: UTF8.self))")
        }
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
