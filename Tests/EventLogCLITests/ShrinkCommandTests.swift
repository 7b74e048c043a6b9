import EventLog
import EventLogTesting
import Foundation
import Testing

/// `eventlog shrink`: the demo's faulty session comes down to the one URL that shows the bug,
/// random sessions to one input that still fails alone, and bad input changes nothing.
@Suite struct ShrinkCommandTests {
    /// A demo session recorded by the faulty code `compound-tab-filter` into `directory`.
    func faultySession(in directory: TemporaryDirectory, plans: Int = 80, seed: Int = 1) -> String {
        let db = directory.file("faulty-\(plans)-\(seed)")
        let recorded = eventlog(["demo", "--plans", "\(plans)", "--seed", "\(seed)", "--regression", "compound-tab-filter", "--db", db])
        #expect(recorded.code == 0, "\(recorded.err)")
        return db
    }

    /// Whether the one plan `url`, opened by `origin` through the faulty code on a new log, is
    /// found wrong by today's code.
    func failsAlone(_ url: String, origin: String, in directory: TemporaryDirectory) -> Bool {
        let db = directory.file("alone-\(UUID().uuidString)")
        #expect(eventlog(["open", url, "--origin", origin, "--regression", "compound-tab-filter", "--db", db]).code == 0)
        return eventlog(["replay", "--verify", "--db", db]).code == 1
    }

    @Test func theDemosFaultySessionShrinksToTheOneBotsURL() throws {
        let directory = TemporaryDirectory()
        let db = faultySession(in: directory)
        let shrunk = eventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--db", db, "--json"])
        #expect(shrunk.code == 0, "\(shrunk.err)")
        let report = try StateValue(json: shrunk.out)
        #expect(report["inputs"] == [["seq": 110, "input": "tap botmessages://bots?filter=unread"]])
        #expect(report["of"] == 149)
        #expect(report["oneMinimal"] == true)
        #expect(report["stoppedBy"] == .null)
        // The shrunk session: the initial state, the plan's start and its three steps.
        #expect(report["firstBad"] == 5)
        #expect(failsAlone("botmessages://bots?filter=unread", origin: "tap", in: directory))

        let text = eventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--db", db])
        #expect(text.code == 0)
        let lines = text.out.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("shrunk 149 inputs to 1 in ") == true, "\(text.out)")
        #expect(lines.first?.hasSuffix("leaving out any one of them makes the failure go away:") == true, "\(text.out)")
        #expect(lines.dropFirst().first == "  #110  tap botmessages://bots?filter=unread")
        #expect(text.out.contains("first bad event of the shrunk session: 5\n"))
        #expect(text.out.contains("  unexpected write: messenger.listFilter: null → \"unread\""), "\(text.out)")

        // Said as a predicate on the state, through the faulty code: the same input.
        let wrongFilter = eventlog(["shrink", "--where", #"messenger.selectedTab == "bots" && messenger.listFilter == null"#,
                                    "--regression", "compound-tab-filter", "--db", db, "--json"])
        #expect(wrongFilter.code == 0, "\(wrongFilter.err)")
        #expect(try StateValue(json: wrongFilter.out)["inputs"] == [["seq": 110, "input": "tap botmessages://bots?filter=unread"]])
    }

    /// The update checks are decided again by their rules on the shrunk session's state, so a
    /// failure that needs two declines keeps a lookup, two prompts and two declines: a recorded
    /// decline alone would write the count it had reached.
    @Test func aFailureThatNeedsTwoDeclinesKeepsTwoPromptsAndTheirDeclines() throws {
        let directory = TemporaryDirectory()
        let db = directory.file("demo")
        #expect(eventlog(["demo", "--db", db]).code == 0)
        let shrunk = eventlog(["shrink", "--where", #"messenger.selectedTab == "bots" && updates.declineCount >= 2"#, "--db", db, "--json"])
        #expect(shrunk.code == 0, "\(shrunk.err)")
        let report = try StateValue(json: shrunk.out)
        #expect(report["oneMinimal"] == true)
        let inputs = (report["inputs"]?.arrayValue ?? []).compactMap { $0["input"]?.stringValue }
        #expect(inputs.filter { $0 == "updates/promptDecided" }.count == 2, "\(inputs)")
        #expect(inputs.filter { $0 == "updates/declined" }.count == 2, "\(inputs)")
        #expect(inputs.filter { $0 == "updates/storeVersionFound" }.count == 1, "\(inputs)")
        #expect(inputs.filter { $0.hasPrefix("tap botmessages://bots") || $0.hasPrefix("url botmessages://bots") }.count == 1, "\(inputs)")
        #expect(inputs.count == 6, "\(inputs)")
    }

    /// Random sessions of the demo: each shrinks to one input, proved 1-minimal, that fails
    /// alone when driven again by hand.
    @Test(arguments: [2, 3, 4, 5, 6])
    func randomSessionsShrinkToOneInputThatFailsAlone(seed: Int) throws {
        let directory = TemporaryDirectory()
        let db = faultySession(in: directory, plans: 40, seed: seed)
        guard eventlog(["replay", "--verify", "--db", db]).code == 1 else { return } // no bots tab with a filter in this session
        let shrunk = eventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--db", db, "--json"])
        #expect(shrunk.code == 0, "\(shrunk.err)")
        let report = try StateValue(json: shrunk.out)
        #expect(report["oneMinimal"] == true)
        let inputs = report["inputs"]?.arrayValue ?? []
        #expect(inputs.count == 1, "\(shrunk.out)")
        let input = try #require(inputs.first?["input"]?.stringValue)
        let parts = input.split(separator: " ", maxSplits: 1).map(String.init)
        #expect(parts.count == 2 && parts[1].hasPrefix("botmessages://bots"), "\(input)")
        #expect(failsAlone(parts[1], origin: parts[0], in: directory), "\(input)")
    }

    @Test func stoppedEarlyItSaysSoAndKeepsTheSmallestFailingInputsFound() throws {
        let directory = TemporaryDirectory()
        let db = faultySession(in: directory)
        let stopped = eventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--max-runs", "3", "--db", db])
        #expect(stopped.code == 0, "\(stopped.err)")
        #expect(stopped.out.hasPrefix("shrunk 149 inputs to "), "\(stopped.out)")
        #expect(stopped.out.contains(" in 3 runs ("), "\(stopped.out)")
        #expect(stopped.out.contains("stopped by --max-runs 3 before trying to leave out each one:"), "\(stopped.out)")
        #expect(stopped.out.contains("first bad event of the shrunk session: "), "\(stopped.out)")
        let json = try StateValue(json: eventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--max-runs", "3", "--db", db, "--json"]).out)
        #expect(json["oneMinimal"] == false)
        #expect(json["stoppedBy"] == "--max-runs 3")
        #expect(json["runs"] == 3)
        // Fewer inputs than the session's, which still fail: the shrunk session's first bad event.
        let kept = json["inputs"]?.arrayValue?.count ?? 0
        #expect(kept > 1 && kept < 149, "\(json)")
        #expect(json["firstBad"]?.intValue != nil)
        #expect(stopped.out.split(separator: "\n").filter { $0.hasPrefix("  #") }.count == kept)
    }

    /// An event recorded between a plan's steps is an input of its own, and the plan's steps
    /// after it are what the plan's run makes: none is lost, none is counted twice.
    @Test func anEventRecordedInsideAPlanIsAnInputOfItsOwn() throws {
        let directory = TemporaryDirectory()
        let db = directory.file("demo")
        #expect(eventlog(["demo", "--db", db]).code == 0)
        var lines = eventlog(["export", "--db", db]).out.split(separator: "\n").map(String.init)
        // Inside the plan that starts at #39: a note after its first step.
        let start = try #require(lines.firstIndex { $0.contains(#""seq":39,"#) && $0.contains("planStarted") }, "no plan starts at #39")
        let time = try #require(lines[start + 1].firstMatch(of: /"time":"([^"]*)"/)?.1)
        lines.insert(#"{"stream":"notes","type":"marked","origin":"system","time":"\#(time)","writes":[{"path":"marker","new":1}]}"#, at: start + 2)
        let edited = directory.file("inside.jsonl")
        try (lines.map { line in line.replacingOccurrences(of: #","checksum":\d+"#, with: "", options: .regularExpression)
            .replacingOccurrences(of: #""seq":\d+,"#, with: "", options: .regularExpression) }.joined(separator: "\n") + "\n")
            .write(toFile: edited, atomically: true, encoding: .utf8)
        let inside = directory.file("inside")
        let imported = eventlog(["import", edited, "--db", inside])
        #expect(imported.code == 0, "\(imported.err)")
        let marker = try #require(try firstBad(["--where", "exists(marker)", "--db", inside]))
        let shrunk = eventlog(["shrink", "--where", "exists(marker)", "--db", inside, "--json"])
        #expect(shrunk.code == 0, "\(shrunk.err)")
        let report = try StateValue(json: shrunk.out)
        #expect(report["inputs"] == [["seq": .int(Int64(marker)), "input": "notes/marked"]])
        #expect(report["of"] == 150)
    }

    func firstBad(_ arguments: [String]) throws -> UInt64? {
        try StateValue(json: eventlog(["bisect", "--json"] + arguments).out)["firstBad"]?.intValue.map(UInt64.init)
    }

    /// The first run is always made: a stop before it cannot pass off a session that does not
    /// fail as shrunk.
    @Test func aTimeoutStillMakesTheFirstRun() throws {
        let directory = TemporaryDirectory()
        let db = faultySession(in: directory)
        let nothing = eventlog(["shrink", "--where", #"messenger.selectedTab == "nope""#, "--timeout", "0.001", "--db", db])
        #expect(nothing.code == 1 && nothing.err.hasPrefix("Error: nothing to shrink"), "\(nothing.err)")
        let stopped = eventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--timeout", "0.001", "--db", db])
        #expect(stopped.code == 0, "\(stopped.err)")
        #expect(stopped.out.hasPrefix("shrunk 149 inputs to 149 in 1 runs ("), "\(stopped.out)")
        #expect(stopped.out.contains("stopped by --timeout before trying to leave out each one:"), "\(stopped.out)")
    }

    @Test func badInputIsAOneLineErrorAndChangesNothing() throws {
        let directory = TemporaryDirectory()
        let db = faultySession(in: directory)
        let before = try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb"))
        let refused: [([String], Int32, String)] = [
            (["shrink"], 2, "say what failing is with --where or --replay"),
            (["shrink", "--replay", "--where", "a == 1"], 2, "use only one of --where, --replay"),
            (["shrink", "--replay", "--regression", "nope"], 2, "unknown regression \"nope\" (expected compound-tab-filter, wrong-upcaster)"),
            (["shrink", "--replay", "--testgen", "t", "--json"], 2, "--testgen prints a Swift test; leave out --json"),
            (["shrink", "--replay", "--testgen", "not-a-name"], 2, "--testgen must be a Swift identifier"),
            (["shrink", "--replay", "--testgen", "struct"], 2, "--testgen struct is a Swift keyword"),
            (["shrink", "--replay", "--testgen", "\u{345}x"], 2, "--testgen must be a Swift identifier"),
            (["shrink", "--replay", "--max-runs", "0"], 2, "--max-runs must be a positive whole number"),
            (["shrink", "--where", "messenger.selectedTab =="], 2, "--where "),
            (["shrink", "--replay"], 1, "nothing to shrink: today's code agrees with the session driven again (say which code recorded it with --regression)"),
            (["shrink", "--where", "messenger.selectedTab == \"nowhere\""], 1,
             "nothing to shrink: messenger.selectedTab == \"nowhere\" holds after no event of the session driven again"),
        ]
        for (arguments, code, message) in refused {
            let outcome = eventlog(arguments + ["--db", db])
            #expect(outcome.code == code, "\(arguments): \(outcome.err)")
            #expect(outcome.out == "", "\(arguments)")
            #expect(outcome.err.hasPrefix("Error: " + message), "\(arguments): \(outcome.err)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb")) == before)
        #expect(eventlog(["shrink", "--replay", "--db", directory.file("missing")]).code == 3)
        let empty = directory.file("empty")
        _ = try EventStore(path: empty)
        #expect(eventlog(["shrink", "--replay", "--db", empty]).err == "Error: the log is empty: nothing to shrink\n")
    }

    /// From outside, with the built binary: every scratch log goes with the call, and Ctrl-C
    /// in the middle prints the smallest failing inputs found so far.
    @Test func scratchLogsGoWithTheCallAndAnInterruptionPrintsTheBestSoFar() throws {
        let directory = TemporaryDirectory()
        let db = faultySession(in: directory)
        let temporary = directory.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        let finished = try runEventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--db", db], environment: ["TMPDIR": temporary])
        #expect(finished.code == 0, "\(finished.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary) == [])
        let nowhere = try runEventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--db", db], environment: ["TMPDIR": directory.file("missing")])
        #expect(nowhere.code == 3 && nowhere.err.hasPrefix("Error: cannot make the scratch directory \(directory.file("missing"))/eventlog-shrink-")
                && nowhere.err.contains("(TMPDIR): No such file or directory"), "\(nowhere.err)")

        let big = faultySession(in: directory, plans: 2_000, seed: 1)
        let process = try spawnEventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--db", big], environment: ["TMPDIR": temporary],
                                        interruptible: true)
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Scratch log 1 holds the inputs found; any other is a run of the shrink under way.
        func shrinking() -> Bool {
            guard let root = (try? FileManager.default.contentsOfDirectory(atPath: temporary))?.first else { return false }
            return ((try? FileManager.default.contentsOfDirectory(atPath: temporary + "/" + root)) ?? []).contains { $0 != "1" }
        }
        let deadline = Date().addingTimeInterval(120)
        while process.isRunning, Date() < deadline, !shrinking() { usleep(2_000) }
        kill(process.processIdentifier, SIGINT)
        let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let said = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 128 + SIGINT, "\(printed)\(said)")
        #expect(printed.hasPrefix("shrunk 2942 inputs to "), "\(printed)")
        #expect(printed.contains("stopped by an interruption before trying to leave out each one:"), "\(printed)")
        #expect(said.hasSuffix("Interrupted: the smallest failing inputs found so far are above\n"), "\(said)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary) == [])
    }
}
