@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// The client's side of Expo code signing in the library: the answer shapes a signature
/// travels in, the directory source, and the projection of `signatureInvalid`. End to end
/// with the server and the built binary: `DeploySigningCommandTests`.
struct CodeSigningTests {
    let keys = TemporaryDirectory("code-signing")

    func trusting(_ pairs: [(String, SigningKeyPair)]) throws -> TrustedCertificates {
        var certificates = TrustedCertificates()
        for (keyID, pair) in pairs { try certificates.trust(pair.certificate, keyID: keyID) }
        return certificates
    }

    /// A JSON answer carries its signature as a response header; the bytes it covers are the
    /// whole body.
    @Test func aJSONAnswerIsVerifiedByItsResponseHeader() throws {
        let main = try SigningKeyPair(in: keys.path, name: "main")
        let certificates = try trusting([("main", main)])
        let body = Array(ManifestAnswerTests.manifest.utf8)
        let header = #"sig="\#(try main.sign(body))", keyid="main", alg="rsa-v1_5-sha256""#
        let answer = try ManifestAnswer(status: 200, contentType: "application/json", body: body, signature: header, certificates: certificates)
        guard case .update(let manifest, _) = answer else { Issue.record("\(answer)"); return }
        #expect(manifest.id == "u1")
        // Expo's defaults: no keyid is main, no alg is rsa-v1_5-sha256.
        #expect(throws: Never.self) {
            try ManifestAnswer(status: 200, contentType: "application/json", body: body, signature: #"sig="\#(try main.sign(body))""#, certificates: certificates)
        }
        var changed = body
        changed[changed.firstIndex(of: UInt8(ascii: "1"))!] = UInt8(ascii: "2")
        #expect(throws: DeployError.signature(#"the manifest's signature does not verify with the certificate of key id "main""#)) {
            try ManifestAnswer(status: 200, contentType: "application/json", body: changed, signature: header, certificates: certificates)
        }
        #expect(throws: DeployError.signature("the manifest carries no expo-signature")) {
            try ManifestAnswer(status: 200, contentType: "application/json", body: body, certificates: certificates)
        }
        // Without certificates nothing is checked, as before signing existed.
        #expect(throws: Never.self) { try ManifestAnswer(status: 200, contentType: "application/json", body: changed, signature: "sig=(((") }
    }

    /// In multipart, each part is signed alone: a signed manifest beside unsigned extensions
    /// is whole; a signature moved onto the extensions part signs nothing that counts.
    @Test func multipartSignaturesAreThePartsOwn() throws {
        let main = try SigningKeyPair(in: keys.path, name: "main")
        let certificates = try trusting([("main", main)])
        let signature = #"sig="\#(try main.sign(Array(ManifestAnswerTests.manifest.utf8)))", keyid="main""#
        func answer(manifestHeaders: String, extensionsHeaders: String) throws(DeployError) -> ManifestAnswer {
            let text = "--b\r\ncontent-disposition: form-data; name=\"manifest\"\r\n\(manifestHeaders)content-type: application/json\r\n\r\n"
                + ManifestAnswerTests.manifest + "\r\n--b\r\ncontent-disposition: form-data; name=\"extensions\"\r\n\(extensionsHeaders)"
                + "content-type: application/json\r\n\r\n{}\r\n--b--\r\n"
            return try ManifestAnswer(status: 200, contentType: "multipart/mixed; boundary=b", body: Array(text.utf8), certificates: certificates)
        }
        #expect(throws: Never.self) { try answer(manifestHeaders: "expo-signature: \(signature)\r\n", extensionsHeaders: "") }
        #expect(throws: DeployError.signature("the manifest carries no expo-signature")) {
            try answer(manifestHeaders: "", extensionsHeaders: "expo-signature: \(signature)\r\n")
        }
    }

    @Test func certificatesAreCheckedWhenTrusted() throws {
        var certificates = TrustedCertificates()
        let main = try SigningKeyPair(in: keys.path, name: "main")
        #expect(throws: DeployError.usage(#"a key id is 1 to 64 letters, digits, '-', '_' or '.', not first, not "a/b""#)) {
            try certificates.trust(main.certificate, keyID: "a/b")
        }
        #expect(throws: DeployError.usage("\(main.key): not a PEM X.509 certificate")) { try certificates.trust(main.key, keyID: "main") }
        #expect(certificates.isEmpty)
        try certificates.trust(main.certificate, keyID: "main")
        try certificates.trust(main.certificate, keyID: "main")
        #expect(certificates.keyIDs == ["main"])
        #expect(certificates.expectSignatureHeader == #"sig, keyid="main", alg="rsa-v1_5-sha256""#)
    }

    /// A directory source has no signatures: a client that requires them refuses it, records
    /// `signatureInvalid` with working untouched, and the log replays.
    @Test func aDirectorySourceIsNeverSigned() throws {
        let harness = try DeployHarness(serve: false)
        try harness.publish(["index.html": "one"], id: "u1")
        let client = try harness.client(overHTTP: false)
        try client.deliver()
        try client.confirmLaunch()
        try harness.publish(["index.html": "two"], id: "u2")
        client.certificates = try trusting([("main", try SigningKeyPair(in: keys.path, name: "main"))])
        let before = harness.appDirectoryListing()
        #expect(try client.check() == nil)
        let last = try #require(try harness.store.record(try harness.store.lastSeq()))
        #expect(last.event.type == "signatureInvalid")
        #expect(last.event.payload["reason"] == "the manifest carries no expo-signature (a directory source is never signed)")
        #expect(try harness.deploy("phase") == "signatureInvalid")
        #expect(harness.workingFile() == "one")
        #expect(harness.appDirectoryListing() == before)
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    @Test func signatureInvalidNeedsAReason() {
        let event = Event(stream: DeployRules.stream, type: "signatureInvalid", origin: .deploy, payload: .object([:]))
        #expect(throws: RuleError.self) { try DeployRules.writes(for: event, in: .emptyObject, at: .now()).get() }
        #expect(DeployRules.Transition.failures.contains(.signatureInvalid))
    }
}
