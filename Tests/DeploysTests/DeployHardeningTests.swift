@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// What outside tests found: each stays fixed.
struct DeployHardeningTests {
    @Test func oneClientAtATimePerAppDirectory() throws {
        let harness = try DeployHarness(serve: false)
        let first = try AppDirectory(path: harness.appDirectory)
        #expect(throws: DeployError.busy("another deploy client is using \(harness.appDirectory)")) { try AppDirectory(path: harness.appDirectory) }
        _ = first
    }

    @Test func theTokenGoesToTheUpdateServerOnly() throws {
        let harness = try DeployHarness()
        let other = TemporaryDirectory("other-host")
        let elsewhere = try LoopbackServer.fixtures(in: other.path)
        let manifest = try harness.publish(["index.html": "one"], id: "u1")
        var json = manifest.json
        try json.set(.string(elsewhere.url.appendingPathComponent("record/asset").absoluteString), at: "launchAsset.url")
        try Data(json.json().utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/u1.json"))
        let client = DeployClient(store: harness.store, directory: try AppDirectory(path: harness.appDirectory),
                                  source: .server(harness.manifestURL), target: try DeployTarget(runtimeVersion: "1.0", projectToken: "SECRET"))
        #expect(try client.download() == nil)
        let headers = try String(contentsOfFile: other.file("asset.headers"), encoding: .utf8)
        #expect(!headers.contains("SECRET"), "\(headers)")
        #expect(!headers.lowercased().contains("authorization"))
    }

    @Test func aRollbackTargetOnDiskIsReusedNotReplaced() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try client.deliver()
        try client.confirmLaunch()
        try harness.publish(["index.html": "two"], id: "u2")
        try client.deliver()
        // The operator serves u1 again: the copy on disk is taken, not deleted and fetched again.
        try Data("u1\n".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/current"))
        let inode = try FileManager.default.attributesOfItem(atPath: harness.appDirectory + "/updates/u1")[.systemFileNumber] as? Int
        #expect(try client.download() == "u1")
        #expect(try FileManager.default.attributesOfItem(atPath: harness.appDirectory + "/updates/u1")[.systemFileNumber] as? Int == inode)
        #expect(try client.directory.target(of: AppDirectory.holding) == "u1")
    }

    @Test func anUpdateMissingFromDiskIsNeverLinked() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        #expect(try client.download() == "u1")
        try FileManager.default.removeItem(atPath: harness.appDirectory + "/updates/u1")
        #expect(try client.install() == nil)
        #expect(try harness.deploy("phase") == "installFailed")
        #expect(harness.workingFile() == nil)
        #expect(try client.directory.target(of: AppDirectory.working) == nil)
    }

    @Test("ids that are the client's own file names are refused", arguments: ["u1.json", "u1.partial", "u1.next", "..", "a/b"])
    func ownNames(_ id: String) {
        #expect(!AppDirectory.isSafeUpdateID(id))
    }

    @Test("a pending install or a link the client did not write is refused before anything is recorded",
          arguments: [#"{"update":"A","previous":"../../etc","launched":true}"#, #"{"update":"A","previous":null,"launched":1}"#, "garbage"])
    func foreignPending(_ content: String) throws {
        let harness = try DeployHarness(serve: false)
        try FileManager.default.createDirectory(atPath: harness.appDirectory, withIntermediateDirectories: true)
        try Data(content.utf8).write(to: URL(fileURLWithPath: harness.appDirectory + "/pending"))
        #expect(throws: DeployError.self) { try AppDirectory(path: harness.appDirectory) }
        #expect(try harness.store.lastSeq() == 0)
        #expect(try String(contentsOfFile: harness.appDirectory + "/pending", encoding: .utf8) == content)
    }

    @Test func aPublishedIdIsNeverReplaced() throws {
        let harness = try DeployHarness(serve: false)
        try harness.publish(["index.html": "one"], id: "same")
        #expect(throws: DeployError.usage("update same is already published for runtime version 1.0; publish under a new id")) {
            try harness.publish(["index.html": "two"], id: "same")
        }
    }

    @Test func aDirectorySourceReadsRegularFilesOnly() throws {
        let harness = try DeployHarness(serve: false)
        let manifest = try harness.publish(["index.html": "one"], id: "u1")
        let asset = harness.serverDirectory + manifest.launchAsset.url
        try FileManager.default.removeItem(atPath: asset)
        try FileManager.default.createSymbolicLink(atPath: asset, withDestinationPath: "/dev/zero")
        let client = try harness.client(overHTTP: false)
        #expect(try client.download() == nil)
        #expect(try harness.deploy("lastError")?.stringValue?.contains("not a regular file") == true)
    }
}
