import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// `eventlog update-check` from the command line, against a lookup server on loopback.
struct UpdateCheckCommandTests {
    let dir = TemporaryDirectory("update-check")
    var db: String { dir.file("updates.lmdb") }

    /// A lookup response for `version`, released on `releaseDate` (by default long ago; `nil`: the
    /// response gives no date).
    static func lookupResponse(_ version: String, releaseDate: String? = "2020-01-01T00:00:00Z") -> String {
        let date = releaseDate.map { #","currentVersionReleaseDate":"\#($0)""# } ?? ""
        return #"{"resultCount":1,"results":[{"version":"\#(version)","releaseNotes":"Fixes."\#(date)}]}"#
    }

    func lookupFile(_ version: String) throws -> String {
        let path = dir.file("lookup-\(version).json")
        try Data(Self.lookupResponse(version).utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aConversationFromCheckToTheCapIsRecordedAndReplays() throws {
        let lookup = try lookupFile("3.4.1")
        for declines in 1...2 {
            let check = eventlog(["update-check", "--db", db, "--lookup", lookup, "--installed", "3.4", "--max-declines", "2", "--answer", "later"])
            #expect(check.code == 0, "\(check.err)")
            #expect(check.out.contains("decision: promptShown"))
            #expect(check.out.contains("updates.declineCount: \(declines == 1 ? "(absent)" : "1") → \(declines)"))
        }
        let capped = eventlog(["update-check", "--db", db, "--lookup", lookup, "--installed", "3.4", "--max-declines", "2", "--json"])
        #expect(capped.code == 0)
        let json = try StateValue(json: capped.out)
        #expect(json["decision"] == "declineCapReached")
        #expect(json["updates.declineCount"] == 2)
        // An answer with no prompt on screen is refused and appends nothing.
        let before = eventlog(["info", "--db", db, "--json"]).out
        let refused = eventlog(["update-check", "--db", db, "--answer", "later"])
        #expect(refused.code == 2)
        #expect(refused.err == "Error: cannot record --answer: no update prompt is on screen\n")
        #expect(eventlog(["info", "--db", db, "--json"]).out == before)

        let replay = eventlog(["replay", "--verify", "--db", db])
        #expect(replay.code == 0, "\(replay.out)\(replay.err)")
        #expect(replay.out.contains("updates  8 recomputed"))
        let bisect = eventlog(["bisect", "--db", db, "--where", #"updates.lastDecision == "declineCapReached""#, "--json"])
        #expect(try StateValue(json: bisect.out)["firstBad"] == 8)
    }

    @Test func failedLookupsExitOneAndChangeOnlyTheCheck() throws {
        let directory = TemporaryDirectory("lookup-server")
        let server = try LoopbackServer.fixtures(in: directory.path)
        // A generous timeout but where the silence is the point: the machine may be busy.
        for (path, reason, timeout) in [("status/500", "HTTP 500 from 127.0.0.1", "10"), ("hang", "timed out", "0.5"), ("missing.json", "HTTP 404", "10")] {
            let url = server.url.appendingPathComponent(path).absoluteString
            let check = eventlog(["update-check", "--db", db, "--lookup", url, "--installed", "1.0", "--timeout", timeout, "--json"])
            #expect(check.code == 1)
            let json = try StateValue(json: check.out)
            #expect(json["lookupFailure"]?.stringValue?.contains(reason) == true, "\(check.out)")
            #expect(json["decision"] == .null)
            #expect(json["updates"]?.objectValue?.keys.sorted() == ["lastCheck", "lastLookupError"])
        }
    }

    @Test func badCommandLinesChangeNothing() throws {
        let lookup = try lookupFile("2.0")
        for (arguments, message) in [
            (["--lookup", lookup], "--lookup needs --installed VERSION"),
            (["--installed", "1.0"], "give --lookup to check, --answer to answer, or both"),
            (["--lookup", lookup, "--installed", "one"], "--installed must be a version such as 3.4.1, not \"one\""),
            (["--answer", "maybe"], "--answer must be update, later or skip, not \"maybe\""),
            (["--lookup", lookup, "--installed", "1", "--max-declines", "0"], "--max-declines must be a positive whole number, not \"0\""),
            (["--lookup", lookup, "--installed", "1", "--timeout", "nan"], "--timeout must be a number of seconds above 0 and at most 3600, not \"nan\""),
            (["--lookup", lookup, "--installed", "1", "--rules", "major"], "--rules: \"major\" is not KIND=RULE, such as major=force"),
            (["--lookup", lookup, "--installed", "1", "--rules", "major=force,"], "--rules: \"\" is not KIND=RULE, such as major=force"),
            (["--lookup", lookup, "--installed", "1", "--rules", "huge=force"], "--rules: unknown kind \"huge\" (major, minor, patch or revision)"),
            (["--lookup", lookup, "--installed", "1", "--rules", "major=loud"], "--rules: unknown rule \"loud\" for major (force, option, skip or none)"),
            (["--lookup", lookup, "--installed", "1", "--rules", "minor=skip,minor=none"], "--rules: minor is given twice"),
            (["--lookup", lookup, "--installed", "1", "--release-age-days=-1"], "--release-age-days must be a whole number of days from 0 to 36500, not \"-1\""),
            (["--lookup", lookup, "--installed", "1", "--release-age-days", "1.5"], "--release-age-days must be a whole number of days from 0 to 36500, not \"1.5\""),
        ] {
            let outcome = eventlog(["update-check", "--db", db] + arguments)
            #expect(outcome.code == 2)
            #expect(outcome.err.hasPrefix("Error: \(message)\n"), "\(outcome.err)")
            #expect(outcome.out.isEmpty)
        }
        #expect(!FileManager.default.fileExists(atPath: db), "a refused command created the database")
    }

    @Test func rulesAndReleaseAgeDecideAndReplay() throws {
        let directory = TemporaryDirectory("lookup-server")
        let now = Timestamp(microsecondsSince1970: Int64(Date().timeIntervalSince1970 * 1_000_000)).description
        for (name, body) in [("fresh.json", Self.lookupResponse("3.4.1", releaseDate: now)), ("old.json", Self.lookupResponse("3.4.1")),
                             ("undated.json", Self.lookupResponse("3.4.1", releaseDate: nil)),
                             ("baddate.json", Self.lookupResponse("3.4.1", releaseDate: "2026-02-30T00:00:00Z"))] {
            try Data(body.utf8).write(to: URL(fileURLWithPath: directory.file(name)))
        }
        let server = try LoopbackServer.fixtures(in: directory.path)
        func check(_ file: String, _ installed: String, _ options: [String] = []) -> CommandOutcome {
            eventlog(["update-check", "--db", db, "--lookup", server.url.appendingPathComponent(file).absoluteString, "--installed", installed] + options)
        }
        for (file, installed, options, expected) in [
            ("fresh.json", "3.4", [], "releaseTooNew"),
            ("fresh.json", "3.4", ["--forced"], "releaseTooNew"),
            ("fresh.json", "3.4", ["--release-age-days", "0"], "promptShown"),
            ("undated.json", "3.4", [], "releaseDateUnknown"),
            ("undated.json", "3.4", ["--release-age-days", "0"], "promptShown"),
            ("old.json", "3.4", ["--rules", "patch=none"], "ruleIsNone"),
            ("old.json", "3.3", ["--rules", "patch=none"], "promptShown"),
            ("old.json", "3.3", ["--rules", "minor=option"], "promptShownWithoutSkip"),
            ("old.json", "3.4", ["--forced", "--rules", "patch=skip"], "promptShown"),
            ("old.json", "3.3", ["--forced", "--rules", "patch=skip"], "forcedPromptShown"),
            ("old.json", "2.9", ["--rules", "major=force,minor=option,patch=skip,revision=none"], "forcedPromptShown"),
        ] {
            let outcome = check(file, installed, options)
            #expect(outcome.code == 0, "\(outcome.err)")
            let decision = outcome.out.split(separator: "\n").first { $0.hasPrefix("decision: ") }
            #expect(decision == "decision: \(expected)"[...] || decision?.hasPrefix("decision: \(expected) (") == true,
                    "\(file) \(installed) \(options): \(outcome.out)")
        }
        // An option prompt has no "Skip this version": the check stays recorded, the answer does not.
        let skip = check("old.json", "3.3", ["--rules", "minor=option", "--answer", "skip"])
        #expect(skip.code == 1)
        #expect(skip.err == "Error: --answer not recorded: the prompt has no \"Skip this version\"\n")
        #expect(skip.out.contains("decision: promptShownWithoutSkip"))
        // A date that is not a time is a failed lookup, as any other bad answer.
        let bad = check("baddate.json", "3.4", ["--json"])
        #expect(bad.code == 1)
        #expect(try StateValue(json: bad.out)["lookupFailure"] == #""currentVersionReleaseDate" is not an RFC 3339 time: "2026-02-30T00:00:00Z""#)

        let replay = eventlog(["replay", "--verify", "--db", db])
        #expect(replay.code == 0, "\(replay.out)\(replay.err)")
        #expect(replay.out.contains("updates  25 recomputed"), "\(replay.out)")
        let payloads = try eventlog(["log", "--db", db, "--json"]).out.split(separator: "\n").map { try StateValue(json: String($0)) }
            .filter { $0["type"] == "promptDecided" }.map { $0["payload"] }
        #expect(payloads.first??["releaseAgeDays"] == 1 && payloads.first??["releaseDate"] == .string(now))
        #expect(payloads.count == 12 && payloads[10]?["rules"] == ["major": "force", "minor": "option", "patch": "skip", "revision": "none"])
    }

    @Test func aLogRecordedBeforeRulesAndReleaseAgeStillVerifies() throws {
        let fixture = try String(contentsOfFile: EventVersionTests.fixture, encoding: .utf8)
        let decisions = fixture.split(separator: "\n").filter { $0.contains(#""type":"promptDecided""#) }
        #expect(decisions.count >= 2 && decisions.contains { $0.contains(#""forced":true"#) } && decisions.contains { $0.contains(#""forced":false"#) })
        #expect(!decisions.contains { $0.contains("rules") || $0.contains("releaseAgeDays") || $0.contains("releaseDate") },
                "the fixture predates the rules")
        #expect(eventlog(["import", EventVersionTests.fixture, "--db", db]).code == 0)
        let replay = eventlog(["replay", "--verify", "--db", db, "--json"])
        #expect(replay.code == 0, "\(replay.out)\(replay.err)")
        let report = try StateValue(json: replay.out)
        #expect(report["divergence"] == .null)
        #expect(report["streams.updates.recomputed"]?.intValue ?? 0 >= decisions.count, "\(replay.out)")
    }

    @Test func theDemoRecordsAPromptHistory() throws {
        #expect(eventlog(["demo", "--db", db]).code == 0)
        let bisect = eventlog(["bisect", "--db", db, "--where", #"updates.declineCount >= 5 && updates.lastDecision == "declined""#, "--json"])
        let firstBad = try StateValue(json: bisect.out)["firstBad"]?.intValue
        #expect(firstBad != nil, "\(bisect.out)\(bisect.err)")
        let shown = eventlog(["show", "--db", db, String(firstBad ?? 0), "--json"])
        #expect(try StateValue(json: shown.out)["record.type"] == "declined")
        let state = try StateValue(json: eventlog(["snapshot", "--db", db, "--json"]).out)
        #expect(state["updates.lastDecision"] == "upToDate")
        #expect(state["updates.declineCount"] == 0)
        #expect(state["updates.declineCountVersion"] == "3.5.0")
        let log = eventlog(["log", "--db", db])
        for type in ["updates/lookupFailed", "\"forcedPromptShown\"", "\"declineCapReached\"", "updates/updateTapped"] {
            #expect(log.out.contains(type), "the demo's prompt history has no \(type)")
        }
        let replay = eventlog(["replay", "--verify", "--db", db])
        #expect(replay.code == 0, "\(replay.out)\(replay.err)")
    }
}
