import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// What an outside attack found in the commands that talk to servers: a server that closes the
/// connection early, trickles, or is reached by a URL holding a password. Each command ends
/// with a recorded failure and its reason, never by a signal, and no secret reaches the log.
struct NetworkTrustTests {
    let dir = TemporaryDirectory("network-trust")
    var db: String { dir.file("log.lmdb") }
    var app: String { dir.file("app") }

    /// A fixture server over a directory holding `v1.json`, a manifest of update v1 whose
    /// assets are served from `assetPath` of the same server.
    func manifestServer(assetPath: String) throws -> LoopbackServer {
        let bundle = dir.file("bundle")
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data("<p>one</p>".utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        let published = eventlog(["deploy", "publish", bundle, "--server-dir", dir.file("published"), "--runtime-version", "1.0", "--id", "v1", "--json"])
        #expect(published.code == 0, "\(published.err)")
        let served = dir.file("served")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let server = try LoopbackServer.fixtures(in: served)
        var manifest = try StateValue(json: String(contentsOfFile: dir.file("published/updates/1.0/v1.json"), encoding: .utf8))
        try manifest.set(.string(server.url.absoluteString + "/" + assetPath), at: "launchAsset.url")
        try manifest.set("application/json", at: "launchAsset.contentType") // what the fixture server says it sends
        try Data(manifest.json().utf8).write(to: URL(fileURLWithPath: served + "/v1.json"))
        return server
    }

    func deploy(_ action: String, server: String, _ extra: [String] = []) -> Outcome {
        eventlog(["deploy", action, "--db", db, "--server", server, "--app-dir", app, "--runtime-version", "1.0", "--timeout", "5"] + extra)
    }

    func partialDirectories() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: app + "/updates")) ?? []).filter { $0.contains(".partial") }
    }

    @Test("a server that cuts the connection is a recorded failure of check, download and update-check",
          arguments: ["cut/status", "cut/headers", "cut/body", "not-http"])
    func aCutConnectionIsARecordedFailure(path: String) throws {
        let server = try manifestServer(assetPath: path)
        let check = deploy("check", server: server.url.absoluteString + "/" + path)
        #expect(check.code == 1, "\(check.err)")
        #expect(check.out.contains("deploy/checkFailed"), "\(check.out)")

        let download = deploy("download", server: server.url.absoluteString + "/v1.json")
        #expect(download.code == 1, "\(download.err)")
        #expect(download.out.contains("deploy/downloadFailed"), "\(download.out)")
        #expect(download.err.contains("asset index.html: "), "\(download.err)")
        #expect(!download.err.contains("HTTP 404") && !download.err.contains("came as"), "\(download.err)")
        #expect(partialDirectories().isEmpty)

        let lookup = eventlog(["update-check", "--db", db, "--lookup", server.url.absoluteString + "/" + path, "--installed", "1.0", "--timeout", "5", "--json"])
        #expect(lookup.code == 1, "\(lookup.err)")
        #expect(try StateValue(json: lookup.out)["lookupFailure"]?.stringValue?.isEmpty == false, "\(lookup.out)")
        #expect(eventlog(["verify", "--db", db]).code == 0)
    }

    @Test func aPasswordInAServerURLNeverReachesTheLogOrAnErrorLine() throws {
        let server = try manifestServer(assetPath: "assets/missing")
        let port = try #require(server.url.port)
        let deploy = deploy("check", server: "http://deployer:hunter2@127.0.0.1:\(port)/missing.json")
        #expect(deploy.code == 1)
        let lookup = eventlog(["update-check", "--db", db, "--lookup", "http://reader:hunter2@127.0.0.1:\(port)/lookup.json?api_key=k3y",
                               "--installed", "1.0"])
        #expect(lookup.code == 1)
        let refused = eventlog(["update-check", "--db", db, "--lookup", "http://reader:hunter2@127.0.0.1:0/x", "--installed", "1.0"])
        #expect(refused.code == 2)
        let exported = eventlog(["export", "--db", db])
        #expect(exported.code == 0)
        #expect(exported.out.contains("http://REDACTED@127.0.0.1:\(port)/missing.json"), "\(exported.out)")
        #expect(exported.out.contains("api_key=REDACTED"), "\(exported.out)")
        for text in [exported.out, deploy.out, deploy.err, lookup.out, lookup.err, refused.err] {
            #expect(!text.contains("hunter2") && !text.contains("k3y"), "\(text)")
        }
    }

    @Test func aTricklingServerIsCutOffByTheDeadline() throws {
        let server = try manifestServer(assetPath: "trickle")
        // The manifest request trickles: a byte a second is never silence.
        let check = deploy("deliver", server: server.url.absoluteString + "/trickle", ["--deadline", "2"])
        #expect(check.code == 1)
        #expect(check.out.contains("deploy/checkFailed"), "\(check.out)")
        #expect(check.err.contains("not done within 2 s in all"), "\(check.err)")
        // So does an asset.
        let download = deploy("download", server: server.url.absoluteString + "/v1.json", ["--deadline", "2"])
        #expect(download.code == 1)
        #expect(download.err.contains("not done within 2 s in all"), "\(download.err)")
        #expect(partialDirectories().isEmpty)
        // A lookup's deadline is its timeout unless given: the trickle, never silent for long, ends.
        let lookup = eventlog(["update-check", "--db", db, "--lookup", server.url.absoluteString + "/trickle", "--installed", "1.0",
                               "--timeout", "4", "--json"])
        #expect(try StateValue(json: lookup.out)["lookupFailure"]?.stringValue?.contains("timed out") == true, "\(lookup.out)")
    }
}
