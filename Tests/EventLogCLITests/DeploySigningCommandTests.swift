import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// Expo code signing end to end: `eventlog deploy publish --sign-with`, the real
/// `tools/update-server.py` on loopback signing, and the built `eventlog` verifying with
/// `--certificate` or the app directory's certificates. Every refusal is `signatureInvalid`,
/// exit 1, before any asset is fetched, with the app directory as it was.
struct DeploySigningCommandTests {
    let dir = TemporaryDirectory("deploy-signing")
    let server: LoopbackServer
    var db: String { dir.file("log.lmdb") }
    var serverDirectory: String { dir.file("server") }
    var app: String { dir.file("app") }
    var manifestURL: String { server.url.appendingPathComponent("manifest").absoluteString }

    init() throws {
        try FileManager.default.createDirectory(atPath: dir.file("server"), withIntermediateDirectories: true)
        server = try LoopbackServer(script: LoopbackServer.toolsDirectory.appendingPathComponent("update-server.py"),
                                    arguments: ["--dir", dir.file("server"), "--exit-with-parent", "--request-log", dir.file("requests.jsonl"),
                                                "--asset-log", dir.file("assets.jsonl")])
    }

    func key(_ name: String, _ validity: SigningKeyPair.Validity = .current) throws -> SigningKeyPair {
        try SigningKeyPair(in: dir.path, name: name, validity: validity)
    }

    /// Publishes a one-page bundle as update `id`, signed from now on with `key` when given.
    @discardableResult
    func publish(_ id: String, signWith key: SigningKeyPair? = nil, keyID: String? = nil) throws -> CommandOutcome {
        let bundle = dir.file("bundle-" + id)
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data(id.utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        let outcome = try runEventlog(["deploy", "publish", bundle, "--server-dir", serverDirectory, "--runtime-version", "1.0", "--id", id]
                                      + (key.map { ["--sign-with", $0.key] } ?? []) + (keyID.map { ["--key-id", $0] } ?? []))
        #expect(outcome.code == 0, "\(outcome.err)")
        return outcome
    }

    func deploy(_ action: String, server: String? = nil, _ extra: [String] = []) throws -> CommandOutcome {
        try runEventlog(["deploy", action, "--db", db, "--server", server ?? manifestURL, "--app-dir", app, "--runtime-version", "1.0"] + extra)
    }

    var working: String? { try? String(contentsOfFile: app + "/working/index.html", encoding: .utf8) }
    var listing: [String] { (FileManager.default.subpaths(atPath: app) ?? []).sorted() }
    func lines(_ name: String) -> [String] {
        ((try? String(contentsOfFile: dir.file(name), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
    var manifestRequests: [StateValue] { lines("requests.jsonl").compactMap { try? StateValue(json: $0) } }

    /// Installs and confirms u1 signed with `key` and trusted through `certificates`.
    func installed(_ key: SigningKeyPair, _ certificates: [String]) throws {
        try publish("u1", signWith: key)
        let delivered = try deploy("deliver", certificates)
        #expect(delivered.code == 0, "\(delivered.err)")
        #expect(working == "u1")
        #expect(try deploy("confirm").code == 0)
    }

    /// Delivers and checks the refusal: exit 1 naming `reason`, the last event a one-line
    /// `signatureInvalid`, no asset fetched, the app directory as it was, and a log that replays.
    func expectRefused(_ reason: String, server: String? = nil, _ certificates: [String]) throws {
        let listingBefore = listing
        let assetsBefore = lines("assets.jsonl").count
        let refused = try deploy("deliver", server: server, certificates)
        #expect(refused.code == 1, "\(refused.out)\(refused.err)")
        #expect(refused.err.hasPrefix("Error: signatureInvalid: "), "\(refused.err)")
        #expect(refused.err.contains(reason), "\(refused.err)")
        #expect(refused.err.split(separator: "\n").count == 1)
        #expect(working == "u1")
        #expect(listing == listingBefore, "a refused update changed the app directory")
        #expect(lines("assets.jsonl").count == assetsBefore, "an asset was fetched for a refused manifest")
        let status = try StateValue(json: try runEventlog(["deploy", "status", "--db", db, "--app-dir", app, "--runtime-version", "1.0", "--json"]).out)
        #expect(status["deploy.phase"] == "signatureInvalid")
        #expect(status["deploy.lastError"]?.stringValue?.contains(reason) == true)
        #expect(try runEventlog(["replay", "--verify", "--db", db]).code == 0)
    }

    @Test func aSignedUpdateIsVerifiedAndInstalled() throws {
        let main = try key("main")
        try installed(main, ["--certificate", main.certificate])
        // The key's path is recorded, never the key itself.
        let configuration = try StateValue(json: String(contentsOfFile: serverDirectory + "/code-signing.json", encoding: .utf8))
        #expect(configuration["keyId"] == "main")
        #expect(configuration["privateKey"]?.stringValue == URL(fileURLWithPath: main.key).resolvingSymlinksInPath().path)
        #expect(try FileManager.default.subpathsOfDirectory(atPath: serverDirectory).allSatisfy { !$0.hasSuffix(".key.pem") })
        #expect(manifestRequests.first?["expo-expect-signature"] == #"sig, keyid="main", alg="rsa-v1_5-sha256""#)
    }

    @Test func aServerWithNoKeyIsRefused() throws {
        let main = try key("main")
        try installed(main, ["--certificate", main.certificate])
        try FileManager.default.removeItem(atPath: serverDirectory + "/code-signing.json")
        try publish("u2")
        try expectRefused("the manifest carries no expo-signature", ["--certificate", main.certificate])
    }

    @Test func aSignatureByAnotherKeyUnderTheTrustedKeyIDIsRefused() throws {
        let main = try key("main")
        try installed(main, ["--certificate", main.certificate])
        try publish("u2", signWith: try key("impostor"), keyID: "main")
        try expectRefused(#"the manifest's signature does not verify with the certificate of key id "main""#, ["--certificate", main.certificate])
    }

    @Test func anUnknownKeyIDIsRefused() throws {
        let main = try key("main")
        try installed(main, ["--certificate", main.certificate])
        try publish("u2", signWith: main, keyID: "other")
        try expectRefused(#"signed with key id "other", which no trusted certificate has (trusted: main)"#, ["--certificate", main.certificate])
    }

    /// The signature is over the exact bytes: one byte of the manifest changed on the way (the
    /// update id, u2 to u3, which would install without a certificate) is refused.
    @Test func bytesChangedAfterSigningAreRefused() throws {
        let main = try key("main")
        try installed(main, ["--certificate", main.certificate])
        try publish("u2")
        let proxy = try LoopbackServer.tamperingProxy(to: server.url, replacing: [(#""id":"u2""#, #""id":"u3""#)])
        let proxied = proxy.url.appendingPathComponent("manifest").absoluteString
        try expectRefused("the manifest's signature does not verify", server: proxied, ["--certificate", main.certificate])
        // The same change is taken by a client that checks nothing: the proxy does change the bytes.
        let unchecked = try deploy("check", server: proxied)
        #expect(unchecked.out.contains("deploy/newDeployAvailable(u3"), "\(unchecked.out)\(unchecked.err)")
    }

    @Test("a malformed expo-signature is refused, naming what is wrong", arguments: [
        ("sig=(((", "is not a structured-field dictionary"),
        (#"keyid="main", alg="rsa-v1_5-sha256""#, "has no sig string"),
        ("sig=:AAAA:, keyid=\"main\"", "has no sig string"),
        (#"sig="not*base64", keyid="main""#, "sig is not base64"),
        (#"sig="AAAA", keyid="main", alg="rsa-pss-sha512""#, #"uses alg "rsa-pss-sha512"; only rsa-v1_5-sha256 is accepted"#),
    ])
    func malformedSignatures(_ header: String, _ reason: String) throws {
        let main = try key("main")
        try installed(main, ["--certificate", main.certificate])
        try publish("u2")
        let proxy = try LoopbackServer.tamperingProxy(to: server.url, replacing: [("expo-signature: [^\\r\\n]*", "expo-signature: " + header)])
        try expectRefused(reason, server: proxy.url.appendingPathComponent("manifest").absoluteString, ["--certificate", main.certificate])
    }

    @Test("a certificate outside its validity dates is refused", arguments: [
        (SigningKeyPair.Validity.expired, "has expired"), (.notYetValid, "is not valid yet"),
    ])
    func certificatesOutOfDate(_ validity: SigningKeyPair.Validity, _ reason: String) throws {
        let main = try key("main")
        try installed(main, ["--certificate", main.certificate])
        let dated = try key("dated", validity)
        try publish("u2", signWith: dated, keyID: "dated")
        try expectRefused(#"the certificate of key id "dated" "# + reason, ["--certificate", main.certificate, "--certificate", "dated=" + dated.certificate])
    }

    /// Rotation: with the certificates of 2025 and 2026 trusted, updates signed by either
    /// install; one signed by a third key is refused, naming its key id.
    @Test func rotatingKeys() throws {
        let (old, new) = (try key("k2025"), try key("k2026"))
        // A repeatable option, in both spellings.
        let trusted = ["--certificate", "2025=" + old.certificate, "--certificate=2026=" + new.certificate]
        try publish("u1", signWith: old, keyID: "2025")
        #expect(try deploy("deliver", trusted).code == 0)
        #expect(working == "u1")
        #expect(try deploy("confirm").code == 0)
        try publish("u2", signWith: new, keyID: "2026")
        let second = try deploy("deliver", trusted)
        #expect(second.code == 0, "\(second.err)")
        #expect(working == "u2")
        #expect(try deploy("confirm").code == 0)
        // The expectation names the first certificate given.
        #expect(manifestRequests.last?["expo-expect-signature"] == #"sig, keyid="2025", alg="rsa-v1_5-sha256""#)
        try publish("u3", signWith: try key("k2027"), keyID: "2027")
        let refused = try deploy("deliver", trusted)
        #expect(refused.code == 1)
        #expect(refused.err.hasPrefix(#"Error: signatureInvalid: the manifest is signed with key id "2027", which no trusted certificate has (trusted: 2025, 2026)"#),
                "\(refused.err)")
        #expect(working == "u2")
    }

    /// A client that trusts no certificate sends no `expo-expect-signature`, and installs an
    /// unsigned update as before; a server with a key does not sign for it.
    @Test func aClientWithoutCertificatesAsksForNoSignature() throws {
        try publish("u1")
        #expect(try deploy("deliver").code == 0)
        #expect(working == "u1")
        #expect(try deploy("confirm").code == 0)
        try publish("u2", signWith: try key("main"))
        #expect(try deploy("deliver").code == 0)
        #expect(working == "u2")
        #expect(manifestRequests.count == 2)
        #expect(manifestRequests.allSatisfy { $0["expo-expect-signature"] == nil }, "\(manifestRequests)")
    }

    /// `APP_DIR/certificates/KEYID.pem` is trusted without `--certificate`.
    @Test func theAppDirectorysCertificatesAreTrusted() throws {
        let main = try key("main")
        try FileManager.default.createDirectory(atPath: app + "/certificates", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: main.certificate, toPath: app + "/certificates/main.pem")
        try installed(main, [])
        #expect(manifestRequests.first?["expo-expect-signature"] == #"sig, keyid="main", alg="rsa-v1_5-sha256""#)
        try FileManager.default.removeItem(atPath: serverDirectory + "/code-signing.json")
        try publish("u2")
        try expectRefused("the manifest carries no expo-signature", [])
    }

    /// A directive is signed too: a signed rollBackToEmbedded is followed, an unsigned one refused.
    @Test func directivesAreVerified() throws {
        let main = try key("main")
        try installed(main, ["--certificate", main.certificate])
        try Data("rollBackToEmbedded\n".utf8).write(to: URL(fileURLWithPath: serverDirectory + "/updates/1.0/current"))
        let configuration = try Data(contentsOf: URL(fileURLWithPath: serverDirectory + "/code-signing.json"))
        try FileManager.default.removeItem(atPath: serverDirectory + "/code-signing.json")
        try expectRefused("the directive carries no expo-signature", ["--certificate", main.certificate])
        try configuration.write(to: URL(fileURLWithPath: serverDirectory + "/code-signing.json"))
        let rolledBack = try deploy("check", ["--certificate", main.certificate])
        #expect(rolledBack.code == 0, "\(rolledBack.err)")
        #expect(rolledBack.out.contains("deploy/rolledBack("), "\(rolledBack.out)")
        #expect(working == nil)
    }

    @Test func badSigningInputIsAOneLineErrorAndWritesNothing() throws {
        let main = try key("main")
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: dir.file("junk.pem")))
        for (arguments, message) in [
            (["--certificate", dir.file("missing.pem")], "\(dir.file("missing.pem")): no such certificate file"),
            (["--certificate", dir.file("junk.pem")], "\(dir.file("junk.pem")): not a PEM X.509 certificate"),
            (["--certificate", main.key], "\(main.key): not a PEM X.509 certificate"),
            (["--certificate", "a=" + main.certificate, "--certificate", "a=" + main.certificate], "--certificate: key id a is given twice"),
        ] {
            let outcome = try deploy("check", arguments)
            #expect(outcome.code == 2, "\(arguments)")
            #expect(outcome.err.hasPrefix("Error: \(message)\nUsage: "), "\(outcome.err)")
        }
        #expect(!FileManager.default.fileExists(atPath: db), "a refused command created the database")
        #expect(!FileManager.default.fileExists(atPath: app), "a refused command created the app directory")
        // What the app ships is checked as strictly.
        try FileManager.default.createDirectory(atPath: app + "/certificates", withIntermediateDirectories: true)
        for (name, message) in [("main.pem", "\(app)/certificates/main.pem: not a PEM X.509 certificate"),
                                ("two words.pem", "\(app)/certificates/two words.pem: the name is no key id: a key id is 1 to 64")] {
            try FileManager.default.copyItem(atPath: dir.file("junk.pem"), toPath: app + "/certificates/" + name)
            let outcome = try deploy("check")
            #expect(outcome.code == 2)
            #expect(outcome.err.hasPrefix("Error: \(message)"), "\(outcome.err)")
            try FileManager.default.removeItem(atPath: app + "/certificates/" + name)
        }

        let bundle = dir.file("bundle")
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data("one".utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        let publishing = ["deploy", "publish", bundle, "--server-dir", dir.file("fresh"), "--runtime-version", "1.0"]
        for (arguments, message) in [
            (["--sign-with", main.certificate], "\(main.certificate): not an unencrypted PEM private key"),
            (["--sign-with", dir.file("missing.pem")], "\(dir.file("missing.pem")): no such key file"),
            (["--sign-with", main.key, "--key-id", "../x"], "--key-id: a key id is 1 to 64 letters, digits, '-', '_' or '.', not first, not \"../x\""),
            (["--key-id", "2026"], "--key-id names the key of --sign-with KEY.pem"),
        ] {
            let outcome = try runEventlog(publishing + arguments)
            #expect(outcome.code == 2, "\(arguments)")
            #expect(outcome.err.hasPrefix("Error: \(message)\nUsage: "), "\(outcome.err)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("fresh")), "a refused publish wrote the server directory")
    }
}
