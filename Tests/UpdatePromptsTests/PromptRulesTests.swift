import EventLog
import EventLogTesting
import Testing
import UpdatePrompts

/// Siren's rules: a rule per kind of update, and no prompt before the store's release is old enough.
struct PromptRulesTests {
    /// The store's clock at its start, less `hours`, as a lookup spells a release date.
    static func released(hoursBeforeStart hours: Int64) -> String {
        Timestamp(microsecondsSince1970: TemporaryEventStore.defaultStart.microsecondsSince1970 - hours * 3_600_000_000).description
    }

    @Test("the kind is the first component the store is ahead in",
          arguments: [("1.9", "2.0", UpdateKind.major), ("1.2", "1.3", .minor), ("1", "1.0.1", .patch), ("1.2.3", "1.2.4", .patch),
                      ("1.2.3.4", "1.2.3.5", .revision), ("1.2.3", "1.2.3.0.1", .revision), ("1.2b", "1.2", .revision),
                      ("1.9.9", "2", .major)])
    func kind(_ installed: String, _ store: String, _ expected: UpdateKind) {
        #expect(UpdateKind(from: AppVersion(installed)!, to: AppVersion(store)!) == expected)
    }

    @Test func eachKindOfUpdateFollowsItsRule() throws {
        let harness = try PromptHarness()
        let policy = PromptPolicy(rules: PromptRules(major: .force, minor: .option, patch: .skip, revision: .none))
        #expect(try harness.check("1.0.0.0", store: "1.0.0.1", policy) == .ruleIsNone)
        #expect(try harness.updates("lastPromptAt") == nil)
        #expect(throws: RuleError.self) { try harness.prompter("1.0.0.0", policy).answer(.update) }
        #expect(try harness.check("1.0.0", store: "1.0.1", policy) == .promptShown)
        #expect(try harness.check("1.0", store: "1.1", policy) == .promptShownWithoutSkip)
        #expect(try harness.check("1.0", store: "2.0", policy) == .forcedPromptShown)
        try harness.expectReplayAgrees()
    }

    @Test func theDefaultRulesAreTheSeedsOptionalPromptAndForcedMakesEveryKindForce() {
        #expect(PromptPolicy().rules == PromptRules(major: .skip, minor: .skip, patch: .skip, revision: .skip))
        #expect(PromptRules.forced == PromptRules(major: .force, minor: .force, patch: .force, revision: .force))
        var rules = PromptRules(every: .force)
        rules[.minor] = .none
        #expect(rules == PromptRules(major: .force, minor: .none, patch: .force, revision: .force))
        #expect(rules[.minor] == .none && rules[.major] == .force)
    }

    @Test func anOptionPromptTakesNotNowButHasNoSkip() throws {
        let harness = try PromptHarness()
        let policy = PromptPolicy(rules: PromptRules(every: .option), maxDeclines: 1)
        #expect(try harness.check("1.0", store: "1.1", policy) == .promptShownWithoutSkip)
        #expect(throws: RuleError.self) { try harness.prompter("1.0", policy).answer(.skip) }
        #expect(try harness.updates("skippedVersion") == nil)
        try harness.prompter("1.0", policy).answer(.later)
        #expect(try harness.updates("declineCount") == 1)
        // "Not now" counts toward the cap as it does for the prompt with "Skip this version".
        #expect(try harness.check("1.0", store: "1.1", policy) == .declineCapReached)
        try harness.expectReplayAgrees()
    }

    @Test func aReleaseYoungerThanTheAgeIsNotPromptedUntilItIsOldEnough() throws {
        let harness = try PromptHarness()
        let halfADayOld = Self.released(hoursBeforeStart: 12)
        #expect(try harness.check("1.0", store: "1.1", releaseDate: halfADayOld) == .releaseTooNew)
        #expect(try harness.updates("lastPromptAt") == nil)
        #expect(throws: RuleError.self) { try harness.prompter("1.0").answer(.later) }
        // The age holds a forced prompt back too: the store does not serve the update yet.
        #expect(try harness.check("1.0", store: "1.1", PromptPolicy(rules: .forced), releaseDate: halfADayOld) == .releaseTooNew)
        #expect(try harness.check("1.0", store: "1.1", PromptPolicy(releaseAgeDays: 0), releaseDate: halfADayOld) == .promptShown)
        #expect(try harness.check("1.0", store: "1.1", PromptPolicy(releaseAgeDays: 2), releaseDate: Self.released(hoursBeforeStart: 36)) == .releaseTooNew)
        harness.temporary.clock.advance(microseconds: 12 * 3_600_000_000)
        #expect(try harness.check("1.0", store: "1.1", releaseDate: halfADayOld) == .promptShown)
        // A release dated after the check (the store's clock ahead of ours) is too new.
        #expect(try harness.check("1.0", store: "1.2", releaseDate: Self.released(hoursBeforeStart: -48)) == .releaseTooNew)
        try harness.expectReplayAgrees()
    }

    @Test func aLookupWithoutAReleaseDateIsItsOwnDecision() throws {
        let harness = try PromptHarness()
        #expect(try harness.check("1.0", store: "1.1", releaseDate: nil) == .releaseDateUnknown)
        #expect(try harness.updates("lastPromptAt") == nil)
        #expect(try harness.check("1.0", store: "1.1", PromptPolicy(releaseAgeDays: 0), releaseDate: nil) == .promptShown)
        try harness.expectReplayAgrees()
    }

    @Test func theDecisionRecordsTheRulesTheAgeAndTheReleaseDate() throws {
        let harness = try PromptHarness()
        let policy = PromptPolicy(rules: PromptRules(minor: .none), releaseAgeDays: 3)
        let check = try harness.prompter("1.0", policy).check(.success(StoreRelease(version: AppVersion("1.1")!, releaseDate: PromptHarness.longAgo)),
                                                               source: "test")
        #expect(check.decision == .ruleIsNone)
        let payload = check.records[1].event.payload
        #expect(payload["rules"] == ["major": "skip", "minor": "none", "patch": "skip", "revision": "skip"])
        #expect(payload["releaseAgeDays"] == 3)
        #expect(payload["releaseDate"] == .string(PromptHarness.longAgo))
        #expect(PromptPolicy(payload: payload) == policy)
    }

    @Test func aPolicyRecordedBeforeRulesReadsAsItWasDecided() {
        #expect(PromptPolicy(payload: ["forced": false, "maxDeclines": 5]) == PromptPolicy(releaseAgeDays: 0))
        #expect(PromptPolicy(payload: ["forced": true, "maxDeclines": 2]) == PromptPolicy(rules: .forced, maxDeclines: 2, releaseAgeDays: 0))
        // Neither shape, or a rule that does not exist, is not a policy.
        #expect(PromptPolicy(payload: ["maxDeclines": 5]) == nil)
        #expect(PromptPolicy(payload: ["maxDeclines": 5, "rules": ["major": "loud", "minor": "skip", "patch": "skip", "revision": "skip"]]) == nil)
        #expect(PromptPolicy(payload: ["maxDeclines": 5, "forced": false, "releaseAgeDays": -1]) == nil)
    }
}
