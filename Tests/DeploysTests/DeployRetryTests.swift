@testable import Deploys
import EventLog
import Foundation
import Testing

/// Rollback retry and ready timeout (issue 30, point 6): CodePush's `rollbackRetryOptions`
/// and Capgo's `appReadyTimeout`.
struct DeployRetryTests {
    /// The deploy state at `path` (dotted, under `deploy`).
    private func state(_ harness: DeployHarness, _ path: String) throws -> StateValue? {
        try harness.store.currentState[StatePath(parsing: "deploy." + path)]
    }

    /// The `noNewDeploy` reason or `newDeployAvailable` update of the newest check.
    private func lastCheck(_ harness: DeployHarness, after seq: UInt64) throws -> String {
        var outcome = ""
        try harness.store.forEachRecord(from: seq + 1) { record in
            switch record.event.type {
            case "noNewDeploy": outcome = record.event.payload["reason"]?.stringValue ?? ""
            case "newDeployAvailable": outcome = "offered " + (record.event.payload["updateId"]?.stringValue ?? "")
            default: break
            }
            return true
        }
        return outcome
    }

    /// Rejected once, u2 stays rejected while the delay has not passed; once it has, it is
    /// offered again (the event says after how many rejections), and rejected a second time
    /// it stays rejected for good with one retry allowed. The log replays.
    @Test func aRejectedUpdateIsOfferedAgainAfterTheDelayAtMostMaxRetriesTimes() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.deliverTwoUpdates(by: client, confirmingTheSecond: false)
        // Never confirmed: the next launch rolls back and does not take u2 again.
        var seq = try harness.store.lastSeq()
        try client.deliver()
        #expect(try lastCheck(harness, after: seq) == "rolledBackBefore")
        #expect(try state(harness, "rejections.u2.times") == 1)

        client.rejectedRetry = DeployClient.RejectedRetry(delay: 3_600_000_000, maxRetries: 1)
        seq = try harness.store.lastSeq()
        try client.deliver()
        #expect(try lastCheck(harness, after: seq) == "rolledBackBefore")
        #expect(harness.workingFile() == "one")

        client.rejectedRetry = DeployClient.RejectedRetry(delay: 0, maxRetries: 1)
        seq = try harness.store.lastSeq()
        try client.deliver()
        #expect(try lastCheck(harness, after: seq) == "offered u2")
        #expect(harness.workingFile() == "two")
        var offer: StateValue?
        try harness.store.forEachRecord(from: seq + 1) { if $0.event.type == "newDeployAvailable" { offer = $0.event.payload }; return true }
        #expect(offer?["retryAfterRejections"] == 1)

        // Unconfirmed again: rejected a second time, past the one retry.
        seq = try harness.store.lastSeq()
        try client.deliver()
        #expect(harness.workingFile() == "one")
        #expect(try state(harness, "rejections.u2.times") == 2)
        #expect(try lastCheck(harness, after: seq) == "rolledBackBefore")
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// A confirmation later than the ready timeout is recorded as `launchConfirmedTooLate`,
    /// the install stays pending, and the next start rolls it back; one within it confirms.
    @Test func aConfirmationLaterThanTheReadyTimeoutIsAFailedLaunch() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try client.deliver()
        // Within: the harness's clock steps a millisecond an event.
        client.readyTimeout = 60_000_000
        try client.confirmLaunch()
        #expect(try harness.deploy("phase") == "confirmed")

        try harness.publish(["index.html": "two"], id: "u2")
        try client.deliver()
        #expect(try client.directory.pending()?.launchedAt != nil)
        client.readyTimeout = 0
        let seq = try harness.store.lastSeq()
        try client.confirmLaunch()
        #expect(try harness.transitions(after: seq) == ["launchConfirmedTooLate"])
        #expect(try harness.deploy("lastError")?.stringValue?.hasSuffix("later than the ready timeout of 0.0 s: the next start rolls it back") == true)
        #expect(try client.directory.pending()?.update == "u2")
        try client.deliver()
        #expect(harness.workingFile() == "one")
        #expect(try state(harness, "rejectedUpdates.u2") != nil)
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// A pending file written before ready timeouts (no `launchedAt`) still reads; no
    /// timeout applies to it.
    @Test func aPendingInstallWithoutALaunchTimeIsNeverTooLate() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try client.deliver()
        var pending = try #require(try client.directory.pending())
        pending.launchedAt = nil
        try client.directory.setPending(pending)
        #expect(try String(contentsOfFile: harness.appDirectory + "/pending", encoding: .utf8) == #"{"launched":true,"previous":null,"update":"u1"}"#)
        client.readyTimeout = 0
        try client.confirmLaunch()
        #expect(try harness.deploy("phase") == "confirmed")
    }
}
