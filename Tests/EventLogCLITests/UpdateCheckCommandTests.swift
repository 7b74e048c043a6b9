import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// `eventlog update-check` from the command line, against a lookup server on loopback.
struct UpdateCheckCommandTests {
    let dir = TemporaryDirectory("update-check")
    var db: String { dir.file("updates.lmdb") }

    func lookupFile(_ version: String) throws -> String {
        let path = dir.file("lookup-\(version).json")
        try Data(#"{"resultCount":1,"results":[{"version":"\#(version)","releaseNotes":"Fixes."}]}"#.utf8).write(to: URL(fileURLWithPath: path))
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
        ] {
            let outcome = eventlog(["update-check", "--db", db] + arguments)
            #expect(outcome.code == 2)
            #expect(outcome.err.hasPrefix("Error: \(message)\n"), "\(outcome.err)")
        }
        #expect(!FileManager.default.fileExists(atPath: db), "a refused command created the database")
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
