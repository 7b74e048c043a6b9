@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Synchronization
import Testing

/// Every refused update is a recorded failure with a one-line reason, and working is untouched.
struct DeployRefusalTests {
    /// Installs u1 and confirms it, so that refusals have a working bundle to leave alone.
    static func installed() throws -> (DeployHarness, DeployClient) {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try client.deliver()
        try client.confirmLaunch()
        return (harness, client)
    }

    /// Runs `body` (which publishes or breaks something), downloads, and checks the failure.
    static func expectRefused(_ transition: String, reason: String, _ body: (DeployHarness) throws -> Void) throws {
        let (harness, client) = try installed()
        try body(harness)
        let before = try harness.store.lastSeq()
        let listing = harness.appDirectoryListing()
        #expect(try client.download() == nil)
        let last = try #require(try harness.store.record(try harness.store.lastSeq()))
        #expect(last.event.type == transition)
        let recorded = last.event.payload["reason"]?.stringValue ?? ""
        #expect(recorded.contains(reason), "\(recorded)")
        #expect(!recorded.contains("\n"))
        #expect(harness.workingFile() == "one")
        #expect(try client.directory.target(of: AppDirectory.holding) == nil)
        #expect(harness.appDirectoryListing() == listing, "a refused update left files behind")
        #expect(try harness.store.lastSeq() > before)
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    @Test func aCorruptedAssetIsRefused() throws {
        try Self.expectRefused("integrityFailed", reason: "asset js/app.js: its SHA-256 is") { harness in
            let manifest = try harness.publish(["index.html": "two", "js/app.js": "good()"], id: "u2")
            let asset = manifest.assets.first { $0.key == "js/app.js" }!
            try Data("evil()".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + asset.url))
        }
    }

    @Test("asset keys that escape the update's directory are refused before anything is written",
          arguments: ["../escape.js", "/etc/passwd", "a/../../b.js", "./x.js", "a//b.js", "a\\..\\b.js"])
    func escapingKeys(_ key: String) throws {
        try Self.expectRefused("checkFailed", reason: "escapes the update's directory") { harness in
            let manifest = try harness.publish(["index.html": "two", "x.js": "x"], id: "u2")
            var json = manifest.json
            try json.set(.string(key), at: "assets[0].key")
            try Data(json.json().utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/u2.json"))
        }
    }

    /// A key that is only too long is refused for being too long, not for escaping.
    @Test("asset keys that are too long say so", arguments: [
        (String(repeating: "a", count: 256), "has a part of 256 bytes; a file name is at most 255"),
        (Array(repeating: String(repeating: "b", count: 99), count: 11).joined(separator: "/"), "is 1099 bytes long; an asset key is at most 1,024"),
        ("a\u{7}b.js", "holds a control character"),
    ])
    func longKeys(_ key: String, _ reason: String) throws {
        try Self.expectRefused("checkFailed", reason: "asset key \"\(key)\" \(reason)") { harness in
            let manifest = try harness.publish(["index.html": "two", "x.js": "x"], id: "u2")
            var json = manifest.json
            try json.set(.string(key), at: "assets[0].key")
            try Data(json.json().utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/u2.json"))
        }
    }

    /// Publishing never takes an asset file already in the server directory on trust, nor
    /// replaces it: one that is not the bytes its name says (damaged, or a link) is refused.
    @Test func publishRefusesAnAssetFileThatIsNotItsBytes() throws {
        let harness = try DeployHarness(serve: false)
        let first = try harness.publish(["index.html": "one", "a.css": "body{}"], id: "u1")
        let name = try #require(first.assets.first { $0.key == "a.css" }).url.dropFirst("/assets/".count)
        let file = harness.serverDirectory + "/assets/" + name
        // The same bytes again: the file there is kept, the same inode.
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.systemFileNumber] as? UInt64)
        try harness.publish(["index.html": "two", "a.css": "body{}"], id: "u2")
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.systemFileNumber] as? UInt64 == inode)
        for damage in ["other bytes", "link"] {
            try FileManager.default.removeItem(atPath: file)
            if damage == "link" {
                try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: harness.root.file("elsewhere.css"))
                try Data("body{}".utf8).write(to: URL(fileURLWithPath: harness.root.file("elsewhere.css")))
            } else {
                try Data("tampered".utf8).write(to: URL(fileURLWithPath: file))
            }
            let error = try #require(throws: DeployError.self) { try harness.publish(["index.html": "three", "a.css": "body{}"], id: "u3-\(damage.count)") }
            #expect(error == .refused("\(file) is already there, but it is not these bytes (damaged, or not a regular file); remove it and publish again"))
        }
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: file) == harness.root.file("elsewhere.css"))
        #expect(try String(contentsOfFile: harness.root.file("elsewhere.css"), encoding: .utf8) == "body{}")
        #expect(try FileManager.default.contentsOfDirectory(atPath: harness.serverDirectory + "/assets").allSatisfy { !$0.hasPrefix(".incoming-") })
    }

    /// A publish refused midway takes back the assets, type files and directories it added
    /// before the refusal, and nothing else: the server directory is as it was.
    @Test func aRefusedPublishLeavesTheServerDirectoryAsItWas() throws {
        let harness = try DeployHarness(serve: false)
        let first = try harness.publish(["index.html": "one", "a.css": "body{}"], id: "u1")
        let name = try #require(first.assets.first { $0.key == "a.css" }).url.dropFirst("/assets/".count)
        try Data("tampered".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/assets/" + name))
        func listing() throws -> [String] {
            try FileManager.default.subpathsOfDirectory(atPath: harness.serverDirectory).sorted()
        }
        let before = try listing()
        // "0.js" is stored before "a.css" is refused; runtime 2.0 gets a directory of its own.
        let error = try #require(throws: DeployError.self) {
            try harness.publish(["0.js": "new()", "a.css": "body{}", "index.html": "two"], id: "u2", runtime: "2.0")
        }
        #expect(error == .refused("\(harness.serverDirectory)/assets/\(name) is already there, but it is not these bytes (damaged, or not a regular file); remove it and publish again"))
        #expect(try listing() == before)
    }

    /// An asset's type file that says another type is refused like other bytes under its name.
    @Test func publishRefusesATypeFileThatSaysAnotherType() throws {
        let harness = try DeployHarness(serve: false)
        let first = try harness.publish(["index.html": "one", "app.js": "go()"], id: "u1")
        let typeFile = harness.serverDirectory + first.assets[0].url + ".type"
        try Data("text/plain\n".utf8).write(to: URL(fileURLWithPath: typeFile))
        let error = try #require(throws: DeployError.self) { try harness.publish(["index.html": "two", "app.js": "go()"], id: "u2") }
        #expect(error == .refused("\(typeFile) is already there, but it does not say application/javascript; remove it and publish again"))
        #expect(!FileManager.default.fileExists(atPath: harness.serverDirectory + "/updates/1.0/u2.json"))
    }

    /// Ids the server reads as something else, and a server directory the bundle would carry
    /// (its project token included), are refused before anything is written.
    @Test func publishRefusesIdsTheServerCannotServeAndAServerInsideTheBundle() throws {
        let harness = try DeployHarness(serve: false)
        for id in ["rollBackToEmbedded", ".hidden", "..", "a/b"] {
            #expect(throws: DeployError.usage("the update id must be 1 to 128 letters, digits, '-', '_' or '.', not first, and not the word rollBackToEmbedded: \"\(id)\"")) {
                try harness.publish(["index.html": "one"], id: id)
            }
        }
        let bundle = harness.root.file("bundle-inside")
        try FileManager.default.createDirectory(atPath: bundle + "/srv", withIntermediateDirectories: true)
        try Data("<html>".utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        try Data("s3cr3t".utf8).write(to: URL(fileURLWithPath: bundle + "/srv/project-token"))
        for server in [bundle + "/srv", bundle] {
            let error = try #require(throws: DeployError.self) {
                try DeployPublisher(serverDirectory: server).publish(bundle: bundle, runtimeVersion: "1.0", id: "u1")
            }
            #expect(error == .usage("\(server) is inside the bundle \(bundle): its files would be published"))
        }
        #expect(try FileManager.default.subpathsOfDirectory(atPath: bundle).sorted() == ["index.html", "srv", "srv/project-token"])
    }

    /// Publishes into one server directory take turns: one waits while another holds the lock,
    /// so that one that fails never takes back an asset the other has just published.
    @Test func publishesIntoOneDirectoryTakeTurns() throws {
        let harness = try DeployHarness(serve: false)
        try harness.publish(["index.html": "one"], id: "u1")
        let fd = open(harness.serverDirectory + "/.publish-lock", O_RDWR)
        #expect(fd >= 0 && flock(fd, LOCK_EX) == 0)
        let (server, bundle) = (harness.serverDirectory, harness.root.file("bundle-u2"))
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data("two".utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        let done = DispatchSemaphore(value: 0)
        let second = Thread {
            _ = try? DeployPublisher(serverDirectory: server).publish(bundle: bundle, runtimeVersion: "1.0", id: "u2")
            done.signal()
        }
        second.start()
        let waited = done.wait(timeout: .now() + 0.5)
        #expect(waited == .timedOut)
        #expect(!FileManager.default.fileExists(atPath: harness.serverDirectory + "/updates/1.0/u2.json"))
        close(fd)
        if waited == .timedOut { done.wait() }
        #expect(FileManager.default.fileExists(atPath: harness.serverDirectory + "/updates/1.0/u2.json"))
    }

    /// A publish told to stop (a command line's Ctrl-C) takes back what it had added.
    @Test func aCancelledPublishTakesBackWhatItAdded() throws {
        let harness = try DeployHarness(serve: false)
        try harness.publish(["index.html": "one"], id: "u1")
        let before = try FileManager.default.subpathsOfDirectory(atPath: harness.serverDirectory).sorted()
        let bundle = harness.root.file("bundle-u2")
        for (name, content) in ["0.js": "zero()", "a.css": "body{}", "index.html": "two"] {
            try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
            try Data(content.utf8).write(to: URL(fileURLWithPath: bundle + "/" + name))
        }
        // Stops at the third question: after the first asset is stored.
        final class Countdown: @unchecked Sendable {
            let asked = Atomic(0)
        }
        let countdown = Countdown()
        var publisher = DeployPublisher(serverDirectory: harness.serverDirectory)
        publisher.isCancelled = { countdown.asked.add(1, ordering: .relaxed).newValue >= 3 }
        #expect(throws: DeployError.cancelled) { try publisher.publish(bundle: bundle, runtimeVersion: "2.0", id: "u2") }
        #expect(countdown.asked.load(ordering: .relaxed) == 3)
        #expect(try FileManager.default.subpathsOfDirectory(atPath: harness.serverDirectory).sorted() == before)
    }

    /// What a killed publish left (its temporaries, by the names only the publisher gives
    /// them) stays for a person: the next publish goes through, says which of them are its
    /// own kind (regular files only), and leaves them and everything else exactly in place.
    @Test func theNextPublishLeavesAKilledOnesTemporariesInPlace() throws {
        let harness = try DeployHarness(serve: false)
        let first = try harness.publish(["index.html": "one"], id: "u1")
        let uuid = UUID().uuidString.lowercased()
        let asset = String(first.launchAsset.url.dropFirst("/assets/".count))
        let ours = ["assets/.incoming-\(uuid)", "assets/\(asset).type.next-\(uuid)", "updates/1.0/current.next-\(uuid)", "updates/1.0/u1.json.next-\(uuid)"]
        let others = ["assets/.incoming-\(uuid.uppercased())", "assets/.incoming-notauuid", "assets/notes.txt", "assets/notes.txt.next-\(uuid)",
                      "updates/1.0/current.next-\(uuid)x", "updates/2.0/current.next-\(uuid)"]
        for file in ours + others {
            let path = harness.serverDirectory + "/" + file
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data("left \(file)".utf8).write(to: URL(fileURLWithPath: path))
        }
        // A link or a directory under such a name is no file the publisher made.
        let link = harness.serverDirectory + "/assets/.incoming-" + UUID().uuidString.lowercased()
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: harness.root.file("elsewhere"))
        let directory = harness.serverDirectory + "/assets/.incoming-" + UUID().uuidString.lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let told = Locked<[[String]]>([])
        let second = try harness.publish(["index.html": "two"], id: "u2") { paths in told.withLock { $0.append(paths) } }
        #expect(second.id == "u2")
        #expect(try String(contentsOfFile: harness.serverDirectory + "/updates/1.0/current", encoding: .utf8) == "u2\n")
        #expect(told.withLock { $0 } == [ours.map { harness.serverDirectory + "/" + $0 }.sorted()])
        for file in ours + others {
            #expect((try? String(contentsOfFile: harness.serverDirectory + "/" + file, encoding: .utf8)) == "left \(file)", "\(file)")
        }
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == harness.root.file("elsewhere"))
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
        // Another runtime's publish is told only of those in the directories it writes.
        try harness.publish(["index.html": "three"], id: "u3", runtime: "3.0") { paths in told.withLock { $0.append(paths) } }
        #expect(told.withLock { $0 }.last == ours.filter { $0.hasPrefix("assets/") }.map { harness.serverDirectory + "/" + $0 }.sorted())
    }

    /// Hidden files and directories of a bundle (`.git/`, `.DS_Store`) are not published.
    @Test func hiddenFilesAreNotPublished() throws {
        let harness = try DeployHarness(serve: false)
        let manifest = try harness.publish(["index.html": "one", ".DS_Store": "x", ".git/config": "[core]", "js/.cache/a.js": "a", "js/app.js": "go()"], id: "u1")
        #expect(manifest.allAssets.map(\.key).sorted() == ["index.html", "js/app.js"])
    }

    @Test func aWrongContentTypeIsRefused() throws {
        try Self.expectRefused("downloadFailed", reason: "came as text/plain, the manifest says application/javascript") { harness in
            let manifest = try harness.publish(["index.html": "two", "app.js": "go()"], id: "u2")
            let asset = manifest.assets[0]
            try Data("text/plain\n".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + asset.url + ".type"))
        }
    }

    @Test func aMissingAssetIsRefused() throws {
        try Self.expectRefused("downloadFailed", reason: "HTTP 404 for asset app.js") { harness in
            let manifest = try harness.publish(["index.html": "two", "app.js": "go()"], id: "u2")
            try FileManager.default.removeItem(atPath: harness.serverDirectory + manifest.assets[0].url)
        }
    }

    @Test func anAssetWithoutAHashIsRefused() throws {
        try Self.expectRefused("checkFailed", reason: "has no hash to check it against") { harness in
            let manifest = try harness.publish(["index.html": "two", "x.js": "x"], id: "u2")
            var json = manifest.json
            try json.set(nil, at: "assets[0].hash")
            try Data(json.json().utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/u2.json"))
        }
    }

    @Test func aServerThatIsDownIsACheckFailure() throws {
        let (harness, client) = try Self.installed()
        harness.server?.kill()
        #expect(try client.check() == nil)
        #expect(try harness.deploy("phase") == "checkFailed")
        #expect(try harness.deploy("lastError")?.stringValue?.contains("cannot connect") == true)
        #expect(harness.workingFile() == "one")
    }

    @Test func aServerKilledMidDownloadLeavesWorkingWhole() throws {
        let harness = try DeployHarness(serve: false)
        try harness.startServer(rate: 200_000)
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try client.deliver()
        try client.confirmLaunch()
        try harness.publish(["index.html": "two", "big.bin": String(repeating: "b", count: 2_000_000)], id: "u2")
        #expect(try client.check()?.id == "u2")
        let server = harness.server!
        DispatchQueue.global().asyncAfter(deadline: .now() + 1) { server.kill() }
        #expect(try client.download() == nil)
        #expect(try harness.deploy("phase") == "downloadFailed")
        let reason = try harness.deploy("lastError")?.stringValue ?? ""
        #expect(reason.contains("big.bin"), "\(reason)")
        #expect(harness.workingFile() == "one")
        #expect(try FileManager.default.contentsOfDirectory(atPath: harness.appDirectory + "/updates").filter { $0.hasPrefix("u2") }.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: harness.appDirectory + "/updates/u2"))
    }

    @Test func aServerThatNeverAnswersTimesOut() throws {
        let harness = try DeployHarness(serve: false)
        let silent = try LoopbackServerForHang()
        let client = DeployClient(store: harness.store, directory: try AppDirectory(path: harness.appDirectory),
                                  source: .server(silent.url), target: try DeployTarget(runtimeVersion: "1.0"))
        client.timeout = 1
        #expect(try client.check() == nil)
        #expect(try harness.deploy("lastError")?.stringValue?.contains("timed out") == true)
    }

    @Test func badManifestsAreCheckFailures() throws {
        for (body, reason) in [("{", "not JSON"), ("[]", "not an object"), (#"{"id":"x"}"#, "no string \"createdAt\""),
                               (#"{"id":"x","createdAt":"t","runtimeVersion":"1.0","launchAsset":7,"assets":[]}"#, "launchAsset is not an object"),
                               (#"{"id":"x","createdAt":"t","runtimeVersion":"1.0","launchAsset":{"key":"index.html","hash":"h","contentType":"text/html","url":"/assets/a"},"assets":{"0":{"key":"a.js"}}}"#,
                                #"the manifest's "assets" is a JSON object, not an array"#)] {
            let harness = try DeployHarness()
            try FileManager.default.createDirectory(atPath: harness.serverDirectory + "/updates/1.0", withIntermediateDirectories: true)
            try Data(body.utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/x.json"))
            try Data("x\n".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/current"))
            // The server parses manifests it serves; the directory source hands them over as they are.
            let client = try harness.client(overHTTP: false)
            #expect(try client.check() == nil)
            let error = try harness.deploy("lastError")?.stringValue ?? ""
            #expect(error.contains(reason), "\(error)")
        }
    }
}

/// The fixture server's `/hang`, as a manifest URL.
struct LoopbackServerForHang {
    let directory = TemporaryDirectory("hang")
    let server: LoopbackServer
    var url: URL { server.url.appendingPathComponent("hang") }
    init() throws { server = try LoopbackServer.fixtures(in: directory.path) }
}
