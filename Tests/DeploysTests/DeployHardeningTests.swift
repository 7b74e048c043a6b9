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
        try harness.deliverTwoUpdates(by: client, confirmingTheSecond: true)
        // The operator rolls back to the embedded bundle, then serves u1 again (an update older
        // than the working one is not taken; the embedded bundle has no age): the copy on disk
        // is taken, not deleted and fetched again.
        try Data("rollBackToEmbedded\n".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/current"))
        #expect(try client.check() == nil && harness.deploy("workingUpdate") == nil)
        try Data("u1\n".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/current"))
        let inode = try FileManager.default.attributesOfItem(atPath: harness.appDirectory + "/updates/u1")[.systemFileNumber] as? Int
        #expect(try client.download() == "u1")
        #expect(try FileManager.default.attributesOfItem(atPath: harness.appDirectory + "/updates/u1")[.systemFileNumber] as? Int == inode)
        #expect(try client.directory.target(of: AppDirectory.holding) == "u1")
    }

    /// A call removes only what it created itself, file by file: files it finds (someone's, or
    /// what a killed call left) stay, whether the call succeeds or fails.
    @Test func callsRemoveOnlyWhatTheyCreated() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        let found = ["working.next", "holding.next", "pending.next", "updates/u1.json.next", "updates/u2.partial-left/index.html",
                     "updates/u2.partial-left/js/app.js", "working.next-left"]
        for file in found {
            let path = harness.appDirectory + "/" + file
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data("someone's \(file)".utf8).write(to: URL(fileURLWithPath: path))
        }
        try client.deliver()
        try client.confirmLaunch()
        // A download refused halfway: what it wrote goes, nothing else.
        let manifest = try harness.publish(["index.html": "two", "js/app.js": "good()", "js/z.js": "z()"], id: "u2")
        let asset = manifest.assets.first { $0.key == "js/z.js" }!
        try Data("evil()".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + asset.url))
        #expect(try client.download() == nil)
        for file in found {
            #expect(try String(contentsOfFile: harness.appDirectory + "/" + file, encoding: .utf8) == "someone's \(file)", "\(file)")
        }
        let updates = try FileManager.default.contentsOfDirectory(atPath: harness.appDirectory + "/updates").sorted()
        #expect(updates == ["u1", "u1.json", "u1.json.next", "u2.partial-left"], "\(updates)")
    }

    /// A download moved into place by a call killed before its manifest was written is
    /// completed when every asset checks out, and refused (not deleted) when one does not.
    @Test func anInterruptedDownloadIsCompletedOrRefusedNeverDeleted() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one", "js/app.js": "go()"], id: "u1")
        let leftover = harness.appDirectory + "/updates/u1"
        try FileManager.default.createDirectory(atPath: leftover + "/js", withIntermediateDirectories: true)
        try Data("one".utf8).write(to: URL(fileURLWithPath: leftover + "/index.html"))
        try Data("go()".utf8).write(to: URL(fileURLWithPath: leftover + "/js/app.js"))
        let inode = try FileManager.default.attributesOfItem(atPath: leftover)[.systemFileNumber] as? Int
        #expect(try client.download() == "u1")
        #expect(try FileManager.default.attributesOfItem(atPath: leftover)[.systemFileNumber] as? Int == inode)
        #expect(client.directory.hasUpdate("u1"))

        try harness.publish(["index.html": "two"], id: "u2")
        let other = harness.appDirectory + "/updates/u2"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        try Data("not two".utf8).write(to: URL(fileURLWithPath: other + "/index.html"))
        #expect(try client.download() == nil)
        #expect(try harness.deploy("lastError")?.stringValue?.contains("interrupted download that differs") == true)
        #expect(try String(contentsOfFile: other + "/index.html", encoding: .utf8) == "not two")
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

    @Test("ids that are the client's own file names are refused", arguments: ["u1.json", "u1.partial", "u1.next", "u1.partial-x", "a.next-b", "..", "a/b"])
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

    @Test func aFileThatCannotBeFlushedFailsTheCallThatWroteIt() throws {
        let directory = TemporaryDirectory("flush")
        let good = open(directory.path + "/good", O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(good >= 0)
        // A descriptor that is not open: its fsync fails (EBADF), as a disk's error would.
        #expect(throws: DeployError.filesystem("cannot flush bad: Bad file descriptor")) {
            try BackgroundFlusher.flushing { flusher in
                flusher.flush(good, path: directory.path + "/good")
                flusher.flush(-1, path: "bad")
            }
        }
        // What the caller threw comes first; files it handed over are still flushed and closed.
        struct Stopped: Error {}
        #expect(throws: Stopped.self) {
            try BackgroundFlusher.flushing { flusher in
                flusher.flush(-1, path: "bad")
                throw Stopped()
            }
        }
        #expect(try BackgroundFlusher.flushing { _ in 7 } == 7)
    }
}
