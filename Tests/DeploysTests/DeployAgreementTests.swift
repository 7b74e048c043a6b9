@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import Testing

/// The log and the app directory never disagree: a change of the directory is recorded before
/// it is made, so a log that cannot take the event (full, read-only) leaves the directory as
/// it was, and one that took it has the next call finish the change.
struct DeployAgreementTests {
    /// v1 installed and confirmed, v2 installed and launched, never confirmed.
    static func launchedUnconfirmed() throws -> DeployHarness {
        let harness = try DeployHarness()
        try harness.publish(["index.html": "one"], id: "u1")
        try harness.launchAndConfirm()
        try harness.publish(["index.html": "two"], id: "u2")
        try harness.client().deliver()
        #expect(harness.workingFile() == "two")
        return harness
    }

    /// A client of the harness's app directory whose log refuses every event: a read-only
    /// copy of the harness's log, as it is now (the harness's clients must be gone).
    static func clientOfAFullLog(_ harness: DeployHarness, runtime: String = "1.0") throws -> DeployClient {
        let copy = harness.root.file("refusing.lmdb")
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false)
        try FileManager.default.copyItem(atPath: harness.store.path + "/data.mdb", toPath: copy + "/data.mdb")
        var options = EventStore.Options()
        options.readOnly = true
        let store = try EventStore(path: copy, options: options)
        return DeployClient(store: store, directory: try AppDirectory(path: harness.appDirectory),
                            source: .server(harness.manifestURL), target: try DeployTarget(runtimeVersion: runtime))
    }

    /// What the log says the directory holds, and what it holds.
    static func expectAgreement(_ harness: DeployHarness, _ comment: Comment? = nil) throws {
        let directory = try AppDirectory(path: harness.appDirectory)
        #expect(try directory.target(of: AppDirectory.working) == harness.deploy("workingUpdate")?.stringValue, comment)
        #expect(try directory.pending()?.update == harness.deploy("pendingUpdate")?.stringValue, comment)
    }

    @Test func aConfirmationTheLogCannotTakeLeavesTheInstallPending() throws {
        let harness = try Self.launchedUnconfirmed()
        let listing = harness.appDirectoryListing()
        let pending = try String(contentsOfFile: harness.appDirectory + "/pending", encoding: .utf8)
        #expect(throws: EventStoreError.readOnly) { try Self.clientOfAFullLog(harness).confirmLaunch() }
        #expect(harness.appDirectoryListing() == listing)
        #expect(try String(contentsOfFile: harness.appDirectory + "/pending", encoding: .utf8) == pending)
        try Self.expectAgreement(harness)
        // With room again, the confirmation goes through.
        try harness.client().confirmLaunch()
        #expect(try harness.deploy("phase") == "confirmed")
        try Self.expectAgreement(harness)
    }

    @Test func aRollbackTheLogCannotTakeChangesNothingAndHappensOnceThereIsRoom() throws {
        let harness = try Self.launchedUnconfirmed()
        let listing = harness.appDirectoryListing()
        #expect(throws: EventStoreError.readOnly) { try Self.clientOfAFullLog(harness).deliver() }
        #expect(harness.appDirectoryListing() == listing)
        #expect(harness.workingFile() == "two")
        try Self.expectAgreement(harness)
        // Once there is room, the launch rolls back, records it, and never takes u2 again.
        let before = try harness.store.lastSeq()
        try harness.client().deliver()
        #expect(try harness.transitions(after: before) == ["rolledBack", "checkStarted", "noNewDeploy", "updatesReaped", "reapFinished"])
        #expect(harness.workingFile() == "one")
        #expect(try harness.deploy("rejectedUpdates")?["u2"] != nil)
        try Self.expectAgreement(harness)
    }

    @Test func aReloadTheLogCannotTakeLeavesTheInstallUnlaunched() throws {
        let harness = try DeployHarness()
        try harness.publish(["index.html": "one"], id: "u1")
        try {
            let client = try harness.client()
            client.launchBehavior = .downloadNewDeploy
            try client.deliver()
            #expect(try client.install() == "u1")
        }()
        #expect(throws: EventStoreError.readOnly) { try Self.clientOfAFullLog(harness).reload() }
        #expect(try AppDirectory(path: harness.appDirectory).pending()?.launched == false)
    }

    /// A call that died after recording a change and before making it: the next call makes it.
    @Test func aRecordedChangeIsFinishedByTheNextCall() throws {
        let harness = try Self.launchedUnconfirmed()
        // As a kill between the record and the change leaves it: rolledBack recorded, the directory as it was.
        var event = Event(stream: DeployRules.stream, type: "rolledBack", origin: .deploy,
                          payload: ["from": "u2", "to": "u1", "reason": "killed before the change", "rejectsUpdate": true])
        event.writes = try DeployRules.writes(for: event, in: try harness.store.currentState, at: .now()).get()
        try harness.store.append(event)
        let before = try harness.store.lastSeq()
        try harness.client().recover()
        #expect(try harness.store.lastSeq() == before, "finishing a recorded change records nothing more")
        #expect(harness.workingFile() == "one")
        try Self.expectAgreement(harness)
        try harness.client().deliver()
        #expect(harness.workingFile() == "one", "the rejected update was installed again")
    }

    /// Ids published for two runtimes are refused by the publisher; a server that serves one
    /// anyway is not taken for the bundle on disk.
    @Test func anIdIsPublishedForOneRuntimeOnly() throws {
        let harness = try DeployHarness()
        try harness.publish(["index.html": "for one"], id: "same", runtime: "1.0")
        #expect(throws: DeployError.usage("update same is already published for runtime version 1.0; publish under a new id")) {
            try harness.publish(["index.html": "for two"], id: "same", runtime: "2.0")
        }
        #expect(!FileManager.default.fileExists(atPath: harness.serverDirectory + "/updates/2.0"))
        try harness.client(runtime: "1.0").deliver()
        #expect(harness.workingFile() == "for one")
        // Another server's 2.0 update under the same id: the 1.0 bundle is not "alreadyWorking".
        let json = try DeployPublisher(serverDirectory: harness.root.file("other")).publish(
            bundle: harness.root.file("bundle-same"), runtimeVersion: "2.0", id: "same").json
        try FileManager.default.createDirectory(atPath: harness.serverDirectory + "/updates/2.0", withIntermediateDirectories: true)
        try Data(json.json().utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/2.0/same.json"))
        try Data("same\n".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/2.0/current"))
        let before = try harness.store.lastSeq()
        let client = try harness.client(runtime: "2.0")
        #expect(try client.check()?.id == "same")
        #expect(try harness.transitions(after: before) == ["checkStarted", "newDeployAvailable"])
        #expect(try client.download() == nil)
        #expect(try harness.deploy("lastError") == "update same on the server differs from the copy on disk; a published update must never change")
    }

    /// After the native runtime moves 1.0 → 2.0, an unconfirmed 2.0 launch never rolls back
    /// onto the 1.0 bundle, and a 1.0 bundle in holding is never installed.
    @Test func aBundleOfAnotherRuntimeIsNeverRestoredOrInstalled() throws {
        let harness = try DeployHarness()
        try harness.publish(["index.html": "one"], id: "u1", runtime: "1.0")
        try harness.launchAndConfirm(runtime: "1.0")
        try harness.publish(["index.html": "two"], id: "u2", runtime: "2.0")
        try harness.client(runtime: "2.0").deliver()
        #expect(harness.workingFile() == "two")
        let before = try harness.store.lastSeq()
        try harness.client(runtime: "2.0").deliver()
        let rolledBack = try #require(try harness.store.record(before + 1))
        #expect(rolledBack.event.type == "rolledBack")
        #expect(rolledBack.event.payload["to"] == .null)
        // The 2.0 launch that installed u2 let the 1.0 bundle go first (a new runtime version
        // starts from the embedded bundle), so u2's rollback goes there.
        #expect(rolledBack.event.payload["reason"] == "update u2 was launched but the app never confirmed a good launch (confirmLaunch)")
        #expect(harness.workingFile() == nil)
        try Self.expectAgreement(harness)

        // A 1.0 download waiting in holding when the app starts on 2.0.
        try harness.publish(["index.html": "three"], id: "u3", runtime: "1.0")
        try {
            let client = try harness.client(runtime: "1.0")
            client.launchBehavior = .downloadNewDeploy
            _ = try client.check()
            #expect(try client.download() == "u3")
        }()
        let client = try harness.client(runtime: "2.0")
        #expect(try client.install() == nil)
        #expect(try harness.deploy("phase") == "installFailed")
        #expect(try harness.deploy("lastError") == "update u3 on disk is for runtime version 1.0, this app runs 2.0")
        #expect(try client.directory.target(of: AppDirectory.holding) == nil)
        #expect(client.directory.hasUpdate("u3"), "the bundle itself is kept, only the link goes")
        #expect(harness.workingFile() == nil)
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }
}
