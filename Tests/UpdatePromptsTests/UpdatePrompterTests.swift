import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing
import UpdatePrompts

final class PromptHarness {
    let temporary: TemporaryEventStore
    var store: EventStore { temporary.store }

    init() throws { temporary = try TemporaryEventStore(stepMicroseconds: 1_000) }

    func prompter(_ installed: String, _ policy: PromptPolicy = PromptPolicy()) -> UpdatePrompter {
        UpdatePrompter(store: store, installedVersion: AppVersion(installed)!, policy: policy)
    }

    /// A release date long before the store's clock starts (2025-11-30): old enough to prompt.
    static let longAgo = "2025-01-01T00:00:00Z"

    /// A check whose lookup found `storeVersion`, released on `releaseDate`.
    @discardableResult
    func check(_ installed: String, store storeVersion: String, _ policy: PromptPolicy = PromptPolicy(),
               minimumOS: String? = nil, releaseDate: String? = longAgo) throws -> PromptDecision? {
        let release = StoreRelease(version: AppVersion(storeVersion)!, releaseNotes: "Fixes.", minimumOSVersion: minimumOS.flatMap(AppVersion.init),
                                   releaseDate: releaseDate)
        return try prompter(installed, policy).check(.success(release), source: "test").decision
    }

    func updates(_ key: String) throws -> StateValue? { try store.currentState[UpdateRules.path(key)] }

    /// Replays the whole log through today's rules and checks they agree with every event.
    func expectReplayAgrees() throws {
        let report = try store.replay(through: RulesProjection(UpdateRules.self), verify: true)
        #expect(report.divergence == nil)
        #expect(report.unknownStreams.isEmpty)
        #expect(report.streams[UpdateRules.stream]?.recomputed == Int(try store.lastSeq()))
        #expect(try report.state == store.currentState)
    }
}

struct UpdateDecisionTests {
    @Test func storeNewerShowsTheOptionalPrompt() throws {
        let harness = try PromptHarness()
        #expect(try harness.check("3.4.0", store: "3.4.1") == .promptShown)
        #expect(try harness.updates("storeVersion") == "3.4.1")
        #expect(try harness.updates("installedVersion") == "3.4.0")
        #expect(try harness.updates("releaseNotes") == "Fixes.")
        #expect(try harness.updates("lastDecision") == "promptShown")
        #expect(try harness.updates("lastPromptAt") != nil)
        try harness.expectReplayAgrees()
    }

    @Test func sameVersionAndOlderStoreDoNothing() throws {
        let harness = try PromptHarness()
        #expect(try harness.check("1.0", store: "1.0.0") == .upToDate)
        #expect(try harness.check("2.0", store: "1.9") == .storeOlder)
        #expect(try harness.updates("lastPromptAt") == nil)
        #expect(throws: RuleError.self) { try harness.prompter("2.0").answer(.later) }
        try harness.expectReplayAgrees()
    }

    @Test func declinesAreCappedAndANewInstalledVersionResetsTheCount() throws {
        let harness = try PromptHarness()
        let policy = PromptPolicy(maxDeclines: 3)
        for expected in 1...3 {
            #expect(try harness.check("1.0", store: "2.0", policy) == .promptShown)
            try harness.prompter("1.0", policy).answer(.later)
            #expect(try harness.updates("declineCount") == .int(Int64(expected)))
            #expect(try harness.updates("declineCountVersion") == "1.0")
            #expect(try harness.updates("lastDecision") == "declined")
        }
        #expect(try harness.check("1.0", store: "2.0", policy) == .declineCapReached)
        #expect(throws: RuleError.self) { try harness.prompter("1.0", policy).answer(.later) }
        // The person updated: same version now, and the count starts over for 2.0.
        #expect(try harness.check("2.0", store: "2.0", policy) == .upToDate)
        #expect(try harness.updates("declineCount") == 0)
        #expect(try harness.updates("declineCountVersion") == "2.0")
        #expect(try harness.check("2.0", store: "2.1", policy) == .promptShown)
        try harness.expectReplayAgrees()
    }

    @Test func theDefaultCapIsFive() throws {
        let harness = try PromptHarness()
        for _ in 0..<5 {
            #expect(try harness.check("1.0", store: "1.1") == .promptShown)
            try harness.prompter("1.0").answer(.later)
        }
        #expect(try harness.check("1.0", store: "1.1") == .declineCapReached)
    }

    @Test func theForcedPromptComesBackAfterUpdateAndTakesNoOtherAnswer() throws {
        let harness = try PromptHarness()
        let forced = PromptPolicy(rules: .forced, maxDeclines: 1)
        #expect(try harness.check("1.0", store: "1.1", forced) == .forcedPromptShown)
        let tapped = try harness.prompter("1.0", forced).answer(.update)
        #expect(tapped.event.type == "updateTapped")
        #expect(tapped.event.origin == .prompt)
        #expect(try harness.updates("lastDecision") == "forcedPromptShown")
        #expect(throws: RuleError.self) { try harness.prompter("1.0", forced).answer(.later) }
        #expect(throws: RuleError.self) { try harness.prompter("1.0", forced).answer(.skip) }
        // A forced prompt ignores the decline cap and a skipped version.
        try harness.prompter("1.0", forced).answer(.update)
        #expect(try harness.check("1.0", store: "1.1", forced) == .forcedPromptShown)
        try harness.expectReplayAgrees()
    }

    @Test func updateOnAnOptionalPromptClosesIt() throws {
        let harness = try PromptHarness()
        #expect(try harness.check("1.0", store: "1.1") == .promptShown)
        try harness.prompter("1.0").answer(.update)
        #expect(try harness.updates("lastDecision") == "updateTapped")
        #expect(throws: RuleError.self) { try harness.prompter("1.0").answer(.update) }
    }

    @Test func skippingSilencesThatVersionOnly() throws {
        let harness = try PromptHarness()
        #expect(try harness.check("1.0", store: "1.1") == .promptShown)
        try harness.prompter("1.0").answer(.skip)
        #expect(try harness.updates("skippedVersion") == "1.1")
        #expect(try harness.check("1.0", store: "1.1.0") == .versionSkipped)
        #expect(try harness.check("1.0", store: "1.2") == .promptShown)
        try harness.expectReplayAgrees()
    }

    @Test func aReleaseForANewerOSIsNotOffered() throws {
        let harness = try PromptHarness()
        let policy = PromptPolicy(osVersion: AppVersion("15.4")!)
        #expect(try harness.check("1.0", store: "1.1", policy, minimumOS: "16.0") == .osTooOld)
        #expect(try harness.check("1.0", store: "1.1", policy, minimumOS: "15.4") == .promptShown)
        // Without a device version, the minimum is not checked.
        #expect(try harness.check("1.0", store: "1.2", minimumOS: "99") == .promptShown)
    }

    @Test func anOptionalPromptWaitsItsInterval() throws {
        let harness = try PromptHarness()
        let policy = PromptPolicy(promptIntervalDays: 2)
        #expect(try harness.check("1.0", store: "1.1", policy) == .promptShown)
        try harness.prompter("1.0", policy).answer(.later)
        harness.temporary.clock.advance(microseconds: 86_400_000_000)
        #expect(try harness.check("1.0", store: "1.1", policy) == .tooSoon)
        harness.temporary.clock.advance(microseconds: 86_400_000_000)
        #expect(try harness.check("1.0", store: "1.1", policy) == .promptShown)
        // A forced prompt does not wait.
        #expect(try harness.check("1.0", store: "1.1", PromptPolicy(rules: .forced, promptIntervalDays: 2)) == .forcedPromptShown)
        try harness.expectReplayAgrees()
    }

    @Test func aFailedLookupRecordsTheReasonAndChangesNothingElse() throws {
        let harness = try PromptHarness()
        #expect(try harness.check("1.0", store: "1.1") == .promptShown)
        let before = try harness.store.currentState
        let check = try harness.prompter("1.0").check(.failure(StoreLookupError("the store is down")), source: "test")
        #expect(check.decision == nil)
        #expect(check.records.map(\.event.type) == ["lookupFailed"])
        let writes = check.records[0].event.writes
        #expect(Set(writes.map(\.path)) == [UpdateRules.path("lastCheck"), UpdateRules.path("lastLookupError")])
        var expected = before
        try expected.apply(writes)
        #expect(try harness.store.currentState == expected)
        #expect(try harness.updates("lastLookupError") == "the store is down")
        #expect(try harness.updates("lastDecision") == "promptShown")
        try harness.expectReplayAgrees()
    }

    @Test func replayCatchesARecordedDecisionTodaysRulesWouldNotMake() throws {
        let harness = try PromptHarness()
        #expect(try harness.check("1.0", store: "1.1", PromptPolicy(maxDeclines: 1)) == .promptShown)
        try harness.prompter("1.0").answer(.later)
        // A faulty build recorded a prompt past the cap.
        let faulty = try harness.store.append(Event(stream: UpdateRules.stream, type: "promptDecided", origin: .updateCheck,
                                                     payload: PromptPolicy(maxDeclines: 1, releaseAgeDays: 0).payload,
                                                     writes: [Write(UpdateRules.path("lastDecision"), old: "declined", new: "promptShown")]))
        let report = try harness.store.replay(through: RulesProjection(UpdateRules.self), verify: true)
        #expect(report.divergence?.seq == faulty.seq)
        #expect(report.divergence?.actual.writes == [Write(UpdateRules.path("lastDecision"), old: "declined", new: "declineCapReached")])
        let found = try harness.store.firstEvent(where: try StatePredicate(parsing: #"updates.declineCount >= 1 && updates.lastDecision == "promptShown""#))
        #expect(found.firstBad == faulty.seq)
    }
}
