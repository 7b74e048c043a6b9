@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import Testing

/// Bounded app directories (issue 29, point 7): the client keeps working, holding, the pending
/// install with the one it replaced, and the update working before the newest install, and
/// reaps the other update directories its own downloads made, never a file it did not make.
struct DeployReapTests {
    /// `index.html` of its own and a script every update shares (linked from the one before).
    private func bundle(_ name: String) -> [String: String] { ["index.html": name, "js/lib.js": "shared()"] }

    private func updates(_ harness: DeployHarness) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: harness.appDirectory + "/updates").sorted()
    }

    /// The payloads of every event of `type`, oldest first.
    private func payloads(_ type: String, _ harness: DeployHarness) throws -> [StateValue] {
        var payloads: [StateValue] = []
        try harness.store.forEachRecord(from: 1) { record in
            if record.event.type == type { payloads.append(record.event.payload) }
            return true
        }
        return payloads
    }

    @Test func theClientKeepsWorkingHoldingAndOnePreviousAndReapsTheRest() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        for id in ["u1", "u2"] {
            try harness.publish(bundle(id), id: id)
            try client.deliver()
            try client.confirmLaunch()
        }
        #expect(try updates(harness) == ["u1", "u1.json", "u2", "u2.json"], "the update before the working one is kept")
        #expect(try payloads("updatesReaped", harness).isEmpty)
        // u3 pending: u2 is what it replaced, so u1 goes.
        try harness.publish(bundle("u3"), id: "u3")
        try client.deliver()
        #expect(try updates(harness) == ["u2", "u2.json", "u3", "u3.json"])
        #expect(try payloads("updatesReaped", harness) == [["updates": ["u1": "superseded"]]])
        #expect(try payloads("reapFinished", harness) == [["removedFiles": 2, "left": [:]]])
        try client.confirmLaunch()
        // u4 downloaded into holding by a launch that only downloads: working, holding and the
        // one before working stay.
        try harness.publish(bundle("u4"), id: "u4")
        client.launchBehavior = .downloadNewDeploy
        try client.deliver()
        #expect(try client.directory.target(of: AppDirectory.holding) == "u4")
        #expect(try updates(harness) == ["u2", "u2.json", "u3", "u3.json", "u4", "u4.json"])
        // The next launch installs u4 from holding: u2 goes.
        try client.deliver()
        try client.confirmLaunch()
        #expect(try updates(harness) == ["u3", "u3.json", "u4", "u4.json"])
        #expect(harness.workingFile() == "u4")
        #expect(harness.workingFile("js/lib.js") == "shared()", "a file linked from a reaped update stays in the ones kept")
        #expect(try harness.deploy("madeUpdates") == ["u3": true, "u4": true])
        #expect(try harness.deploy("previousUpdate") == "u3")
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    @Test func aReapNeverRemovesWhatTheClientDidNotMake() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "u1", "js/app.js": "one()"], id: "u1")
        try client.deliver()
        try client.confirmLaunch()
        // Someone else's: a file inside the client's update, a whole update copied in by hand,
        // and a directory of u2 replaced by a link to theirs.
        let foreign = harness.appDirectory + "/updates/u1/notes.txt"
        try Data("mine".utf8).write(to: URL(fileURLWithPath: foreign))
        let files = FileManager.default
        try files.copyItem(atPath: harness.appDirectory + "/updates/u1", toPath: harness.appDirectory + "/updates/u0")
        try files.copyItem(atPath: harness.appDirectory + "/updates/u1.json", toPath: harness.appDirectory + "/updates/u0.json")
        try harness.publish(["index.html": "u2", "js/app.js": "two()"], id: "u2")
        try client.deliver()
        try client.confirmLaunch()
        let theirs = harness.root.file("theirs")
        try files.createDirectory(atPath: theirs, withIntermediateDirectories: true)
        try Data("their script".utf8).write(to: URL(fileURLWithPath: theirs + "/app.js"))
        try files.moveItem(atPath: harness.appDirectory + "/updates/u2/js", toPath: harness.root.file("u2-js"))
        try files.createSymbolicLink(atPath: harness.appDirectory + "/updates/u2/js", withDestinationPath: theirs)
        for id in ["u3", "u4", "u5"] {
            // And a file of theirs put where u3 had a script, before u3 is reaped.
            if id == "u5" { try Data("their notes".utf8).write(to: URL(fileURLWithPath: harness.appDirectory + "/updates/u3/js/app.js")) }
            try harness.publish(["index.html": id, "js/app.js": "\(id)()"], id: id)
            try client.deliver()
            try client.confirmLaunch()
        }
        #expect(try payloads("updatesReaped", harness) == ["u1", "u2", "u3"].map { ["updates": [$0: "superseded"]] })
        let finished = try payloads("reapFinished", harness)
        #expect(finished.map { $0["left"] } == [["u1": "updates/u1 holds files this client did not make"],
                                                ["u2": "updates/u2/js/app.js is reached through a link or file this client did not make"],
                                                ["u3": "updates/u3/js/app.js is not the file this client downloaded"]])
        #expect(try String(contentsOfFile: harness.appDirectory + "/updates/u3/js/app.js", encoding: .utf8) == "their notes")
        #expect(!files.fileExists(atPath: harness.appDirectory + "/updates/u3/index.html"))
        #expect(try String(contentsOfFile: foreign, encoding: .utf8) == "mine")
        #expect(!files.fileExists(atPath: harness.appDirectory + "/updates/u1/index.html"))
        #expect(!files.fileExists(atPath: harness.appDirectory + "/updates/u1.json"), "a removal that leaves files still takes its manifest")
        #expect(try String(contentsOfFile: theirs + "/app.js", encoding: .utf8) == "their script", "nothing is removed through a link")
        #expect(try String(contentsOfFile: harness.appDirectory + "/updates/u0/js/app.js", encoding: .utf8) == "one()")
        #expect(files.fileExists(atPath: harness.appDirectory + "/updates/u0.json"))
        #expect(try harness.deploy("reaping") == nil)
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// `updates/` linked to another directory (another volume, say) is written and reaped
    /// through the link; below it nothing is followed.
    @Test func anUpdatesDirectoryLinkedElsewhereIsReapedThroughTheLink() throws {
        let harness = try DeployHarness()
        let elsewhere = harness.root.file("elsewhere")
        try FileManager.default.createDirectory(atPath: harness.appDirectory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: harness.appDirectory + "/updates", withDestinationPath: elsewhere)
        let client = try harness.client()
        for id in ["u1", "u2", "u3"] {
            try harness.publish(bundle(id), id: id)
            try client.deliver()
            try client.confirmLaunch()
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).sorted() == ["u2", "u2.json", "u3", "u3.json"])
        #expect(try payloads("reapFinished", harness) == [["removedFiles": 2, "left": [:]]])
        #expect(harness.workingFile() == "u3")
    }

    /// A removal cut short (as by a kill between two files) is finished by the next one, which
    /// skips what is gone.
    @Test func aRemovalCutShortFinishesWhereItStopped() throws {
        let harness = try DeployHarness()
        var files = ["index.html": "one"]
        for index in 0..<6 { files["js/\(index)/part.js"] = "part(\(index))" }
        try harness.publish(files, id: "u1")
        let client = try harness.client()
        try client.deliver()
        // Cut short after the manifest was taken away and three files went.
        try FileManager.default.moveItem(atPath: harness.appDirectory + "/updates/u1.json", toPath: harness.appDirectory + "/updates/.u1.reaping.json")
        for index in 0..<3 { try FileManager.default.removeItem(atPath: harness.appDirectory + "/updates/u1/js/\(index)/part.js") }
        try FileManager.default.removeItem(atPath: harness.appDirectory + "/updates/u1/js/0")
        #expect(!client.directory.hasUpdate("u1"), "an update whose manifest was taken away is not complete")
        let removal = client.directory.removeUpdate("u1")
        #expect(removal.removedFiles == 4 && removal.left == nil)
        #expect(try updates(harness).isEmpty)
        #expect(client.directory.removeUpdate("u1") == (0, nil), "a removal finished before finds nothing to do")
    }

    @Test func theRulesCheckTheReapEvents() throws {
        func writes(_ type: String, _ payload: StateObject) -> Result<[Write], RuleError> {
            DeployRules.writes(for: Event(stream: "deploy", type: type, payload: .object(payload)), in: .emptyObject, at: .now())
        }
        #expect(throws: RuleError.self) { try writes("updatesReaped", [:]).get() }
        #expect(throws: RuleError.self) { try writes("updatesReaped", ["updates": ["u1": 3]]).get() }
        #expect(throws: RuleError.self) { try writes("didUpdateWorkingDirectory", ["updateId": "u2", "previousUpdate": 7]).get() }
        #expect(try writes("didUpdateWorkingDirectory", ["updateId": "u2", "previousUpdate": "u1"]).get().contains { $0.path == DeployRules.path("previousUpdate") })
        // A download recorded before reaping made nothing the client may reap.
        #expect(try !writes("downloaded", ["updateId": "u1"]).get().contains { $0.path.description.contains("madeUpdates") })
    }
}
