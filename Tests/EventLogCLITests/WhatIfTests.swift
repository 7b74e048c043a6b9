import EventLog
import EventLogTesting
import Foundation
import Testing

/// `eventlog replay --what-if`: the demo's session decided again under other update-prompt
/// rules, from its recorded lookups and answers alone.
@Suite struct WhatIfTests {
    /// The recorded update events of the demo session at `db`: seq, type and the decision written.
    func updateEvents(_ db: String) throws -> [(seq: Int64, type: String, decision: String?)] {
        try eventlog(["log", "--json", "--db", db]).out.split(separator: "\n").compactMap { line in
            let event = try StateValue(json: String(line))
            guard event["stream"] == "updates", let seq = event["seq"]?.intValue, let type = event["type"]?.stringValue else { return nil }
            let decision = event["writes"]?.arrayValue?.first { $0["path"] == "updates.lastDecision" }?["new"]?.stringValue
            return (seq, type, decision)
        }
    }

    @Test func fewerDeclinesChangeTheFourthAndFifthPromptsAndTheirAnswersAndNothingElse() throws {
        let directory = TemporaryDirectory()
        let db = directory.file("demo")
        #expect(eventlog(["demo", "--db", db]).code == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb"))
        let events = try updateEvents(db)
        let shown = events.filter { $0.type == "promptDecided" && $0.decision == "promptShown" }.map(\.seq)
        #expect(shown.count == 5, "\(events)")
        // Declined three times, the fourth and fifth optional prompts are no longer shown, and
        // the "Not now" recorded right after each has no prompt to answer.
        let expected = [shown[3], shown[3] + 1, shown[4], shown[4] + 1]
        #expect(events.filter { expected.contains($0.seq) }.map(\.type) == ["promptDecided", "declined", "promptDecided", "declined"])

        let outcome = eventlog(["replay", "--what-if", "maxDeclines=3", "--json", "--db", db])
        #expect(outcome.code == 0, "\(outcome.err)")
        let report = try StateValue(json: outcome.out)
        #expect(report["changed"] == .array(expected.map { .int($0) }))
        #expect(report["whatIf"] == ["maxDeclines": "3"])
        #expect(report["first"]?["seq"]?.intValue == shown[3])
        #expect(report["first"]?["whatIf"]?["writes"] == [["path": "updates.lastDecision", "old": "declined", "new": "declineCapReached"]])
        #expect(report["first"]?["whatIf"]?["payload"]?["maxDeclines"] == 3)
        let counts = report["counts"]?.arrayValue ?? []
        func count(_ name: String) -> (StateValue?, StateValue?) {
            let entry = counts.first { $0["name"]?.stringValue == name }
            return (entry?["before"], entry?["whatIf"])
        }
        #expect(count("prompts shown") == (6, 4))
        #expect(count("declines") == (5, 3))
        #expect(count("updates tapped") == (1, 1))
        #expect(count("answers with no prompt") == (0, 2))

        let text = eventlog(["replay", "--what-if", "maxDeclines=3", "--db", db])
        #expect(text.out.hasPrefix("what if maxDeclines=3: 4 of 500 events would differ; the first is \(shown[3]):\n"), "\(text.out)")
        #expect(text.out.contains("  what if: applied, writes updates.lastDecision: \"declined\" → \"declineCapReached\"\n"), "\(text.out)")
        #expect(text.out.contains("  declines                5 → 3\n"), "\(text.out)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb")) == before)

        // Against a session the faulty code recorded, the setting it was recorded with changes
        // nothing: today's code disagreeing with the recording is not the setting's doing.
        let faulty = directory.file("faulty")
        #expect(eventlog(["demo", "--regression", "compound-tab-filter", "--db", faulty]).code == 0)
        #expect(eventlog(["replay", "--what-if", "maxDeclines=5", "--db", faulty]).out == "what if maxDeclines=5: no event of the 500 would differ\n")
        #expect(try StateValue(json: eventlog(["replay", "--what-if", "maxDeclines=3", "--json", "--db", faulty]).out)["changed"] == report["changed"])

        // No interval was recorded: none changes nothing. Up to an event before the fourth
        // prompt, three declines change nothing either.
        #expect(eventlog(["replay", "--what-if", "promptIntervalDays=none", "--db", db]).out == "what if promptIntervalDays=none: no event of the 500 would differ\n")
        #expect(eventlog(["replay", "--what-if", "maxDeclines=3", "--to", "\(shown[3] - 1)", "--db", db]).out.contains("no event of the"))
        // Forced below the version installed at first: the first prompt is already forced.
        let forced = try StateValue(json: eventlog(["replay", "--what-if", "forcedBelow=3.4", "--json", "--db", db]).out)
        #expect(forced["first"]?["seq"]?.intValue == shown[0])
        #expect(forced["first"]?["whatIf"]?["writes"]?.arrayValue?.contains { $0["new"] == "forcedPromptShown" } == true, "\(forced)")
    }

    @Test func badSettingsAreUsageErrorsNamingTheSettings() throws {
        let directory = TemporaryDirectory()
        let db = directory.file("demo")
        #expect(eventlog(["demo", "--plans", "10", "--db", db]).code == 0)
        let refused: [([String], String)] = [
            (["--what-if", "nope=1"], "--what-if: no setting \"nope\"; the settings are maxDeclines, promptIntervalDays, releaseAgeDays, forcedBelow"),
            (["--what-if", "maxDeclines=-1"], "--what-if maxDeclines takes a whole number, 0 or more, not \"-1\""),
            (["--what-if", "forcedBelow=soon"], "--what-if forcedBelow takes a version, such as 3.4, not \"soon\""),
            (["--what-if", "maxDeclines"], "--what-if takes NAME=VALUE pairs separated by commas, not \"maxDeclines\""),
            (["--what-if", "maxDeclines=1,"], "--what-if takes NAME=VALUE pairs separated by commas, not \"\""),
            (["--what-if", "maxDeclines=1,maxDeclines=2"], "--what-if sets maxDeclines twice"),
            (["--what-if", "maxDeclines=1", "--verify"], "--what-if decides the session again under other rules; leave out --verify"),
            (["--what-if", "maxDeclines=1", "--accept-recorded"], "--what-if decides the session again under other rules; leave out --accept-recorded"),
        ]
        for (arguments, message) in refused {
            let outcome = eventlog(["replay"] + arguments + ["--db", db])
            #expect(outcome.code == 2, "\(arguments)")
            #expect(outcome.out == "")
            #expect(outcome.err.hasPrefix("Error: \(message)\n"), "\(arguments): \(outcome.err)")
        }
        #expect(eventlog(["help", "replay"]).out.contains("  maxDeclines         after this many \"Not now\" answers no optional prompt is shown\n"
                                                          + "                      (a whole number, 0 or more)\n"))
    }
}
