@testable import Deploys
import EventLog
import Foundation
import LoopbackServer
import Testing

/// The client against asset servers that send more than any update should hold.
struct DeployTransportTests {
    @Test func anUpdateThatExpandsPastTheLimitIsRefusedAsItStreams() throws {
        let harness = try DeployHarness(serve: false)
        let served = harness.root.file("served")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let bombs = try LoopbackServer.fixtures(in: served)
        // 64 MiB of zeros once decoded, about 64 KiB on the wire, under a 1 MiB limit.
        var manifest = try harness.publish(["index.html": "one"], id: "u1")
        manifest.launchAsset.url = bombs.url.absoluteString + "/gzip-bomb"
        manifest.launchAsset.contentType = "application/octet-stream"
        try Data(manifest.json.json().utf8).write(to: URL(fileURLWithPath: served + "/u1.json"))
        let client = DeployClient(store: harness.store, directory: try AppDirectory(path: harness.appDirectory),
                                  source: .server(bombs.url.appendingPathComponent("u1.json")), target: try DeployTarget(runtimeVersion: "1.0"))
        client.maxUpdateBytes = 1 << 20
        #expect(try client.download() == nil)
        #expect(try harness.deploy("phase") == "downloadFailed")
        let reason = try harness.deploy("lastError")?.stringValue ?? ""
        #expect(reason.hasSuffix("update u1 holds more than 1048576 bytes (the client's limit)"), "\(reason)")
        // What the refused download wrote is gone; the rest is the directory's own (its lock,
        // and the install id the check made).
        #expect(harness.appDirectoryListing() == ["install-id", "lock", "updates"])
    }
}
