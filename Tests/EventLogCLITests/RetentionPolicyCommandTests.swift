@testable import EventLog
import EventLogTesting
import Foundation
import Testing

/// `eventlog compact --policy`: a retention policy that writers apply as they append.
@Suite struct RetentionPolicyCommandTests {
    let dir = TemporaryDirectory()
    var db: String { dir.file("log.lmdb") }

    func importTicks(_ count: Int, start: Int, into path: String? = nil) {
        let result = eventlog(["import", "-", "--db", path ?? db], stdin: counterEvents(key: "counter", count: count, start: start))
        #expect(result.code == 0, "\(result.err)")
    }

    func info(_ path: String? = nil) throws -> StateValue {
        try StateValue(json: eventlog(["info", "--json", "--db", path ?? db]).out)
    }

    func export(_ path: String? = nil) -> String {
        let result = eventlog(["export", "--db", path ?? db])
        #expect(result.code == 0, "\(result.err)")
        return result.out
    }

    @Test func aPolicyIsStoredShownAppliedByWritersAndRemoved() throws {
        importTicks(100, start: 0)
        let set = eventlog(["compact", "--policy", "keep-last=1000", "--db", db])
        #expect(set.code == 0 && set.out == "retention policy keep-last=1000: writers drop older events as they append\n", "\(set.err)")
        #expect(try info()["retention"] == "keep-last=1000" && info()["events"] == 100)
        #expect(eventlog(["info", "--db", db]).out.contains("\nretention  keep-last=1000 (writers drop older events as they append)\n"))
        // 20,000 events in 200 commits (imports of 100): the log stays within the policy and its slack.
        for round in 1...199 {
            importTicks(100, start: round * 100)
            let events = try info()["events"]?.intValue ?? 0
            #expect(events <= 1_100, "round \(round): \(events)")
        }
        let now = try info()
        #expect(now["lastSeq"] == 20_000 && (now["events"]?.intValue).map { $0 >= 1_000 && $0 <= 1_100 } == true, "\(now)")
        #expect(now["base"]?["digests"]?.arrayValue?.count == 1)
        #expect(eventlog(["verify", "--db", db]).code == 0)
        let exported = export()
        let copy = dir.file("copy.lmdb")
        #expect(eventlog(["import", "-", "--db", copy], stdin: exported).code == 0)
        #expect(export(copy) == exported)
        // none removes it: appends no longer drop anything.
        let removed = eventlog(["compact", "--policy", "none", "--json", "--db", db])
        #expect(removed.code == 0, "\(removed.err)")
        #expect(try StateValue(json: removed.out) == ["retention": .null])
        #expect(try info()["retention"] == .null)
        let held = try info()["events"]?.intValue ?? 0
        importTicks(500, start: 20_000)
        #expect(try info()["events"]?.intValue == held + 500)
    }

    @Test func badPoliciesAreOneLineErrorsExitTwoAndChangeNothing() throws {
        importTicks(20, start: 0)
        #expect(eventlog(["compact", "--policy", "keep-last=5", "--db", db]).code == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb"))
        let cases: [(String, String)] = [
            ("keep-last=0", "Error: --policy keep-last=0: keep-last must be a positive whole number"),
            ("keep-days=-1", "Error: --policy keep-days=-1: keep-days must be a positive whole number"),
            ("keep-last=", "Error: --policy keep-last=: keep-last must be a positive whole number"),
            ("keep-days=99999999999", "Error: --policy keep-days=99999999999: keep-days must be a positive whole number"),
            ("keep-weeks=3", #"Error: --policy takes keep-last=N, keep-days=D or none, not "keep-weeks=3""#),
            ("garbage", #"Error: --policy takes keep-last=N, keep-days=D or none, not "garbage""#),
        ]
        for (policy, error) in cases {
            // Given with a cut, which must not run either.
            let result = eventlog(["compact", "--policy", policy, "--keep-last", "2", "--db", db])
            #expect(result.code == 2, "\(policy): \(result.err)")
            #expect(result.err == error + "\n", "\(policy): \(result.err)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb")) == before)
        #expect(try info()["retention"] == "keep-last=5" && info()["events"] == 20)
    }

    /// SIGKILL at random moments of a writer appending under a policy (an import of 200 events
    /// in commits of 20 onto a log of 300 under keep-last=100, so that a step runs at its first
    /// commit and after every fifth), at least 100 times (of 160 rounds, `killRounds`) within five minutes (the first round
    /// is not killed: it learns how long a run takes; alone the loop's 160 rounds take about
    /// 17 s, and the bound is for a machine loaded by the suite's other kill loops, where one
    /// run of the whole suite got 73 kills in three minutes with twice the events): afterwards `verify`
    /// passes, the events acknowledged before (the 300) and, when the import finished, its 200
    /// are there as far as the policy keeps them, and the log holds at least the newest 100.
    @Test func killedWhileAppendingUnderAPolicyNothingAcknowledgedIsLost() throws {
        importTicks(300, start: 0)
        #expect(eventlog(["compact", "--policy", "keep-last=100", "--db", db]).code == 0)
        let input = dir.file("more.ndjson")
        try counterEvents(key: "counter", count: 200, start: 300).write(toFile: input, atomically: true, encoding: .utf8)
        var outcomes = (killed: 0, finished: 0)
        let total = killRounds(160)
        let deadline = Date().addingTimeInterval(300)
        try killAtRandomMoments(rounds: 0...total, within: 0.9, until: deadline) { round, runAndKill in
            let copy = dir.file("kill-\(round).lmdb")
            try FileManager.default.copyItem(atPath: db, toPath: copy)
            let process = try spawnEventlog(["import", "-", "--batch", "20", "--db", copy])
            process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
            try runAndKill(process)
            let finished = process.terminationReason == .exit && process.terminationStatus == 0
            if finished { outcomes.finished += 1 } else { outcomes.killed += 1 }
            let verified = eventlog(["verify", "--db", copy])
            #expect(verified.code == 0, "round \(round): \(verified.out)\(verified.err)")
            let now = try info(copy)
            let (last, events) = (now["lastSeq"]?.intValue ?? 0, now["events"]?.intValue ?? 0)
            #expect(finished ? last == 500 : last >= 300 && last <= 500, "round \(round): \(now)")
            #expect(events >= 100 && (finished ? events <= 200 : true), "round \(round): \(now)")
            // Event N wrote counter N - 1: the newest state is the newest acknowledged event's.
            #expect(eventlog(["snapshot", "\(last)", "--path", "counter", "--db", copy]).out == "\(last - 1)\n", "round \(round)")
            try FileManager.default.removeItem(atPath: copy)
        }
        #expect(outcomes.killed >= total * 5 / 8, "\(outcomes)")
        #expect(outcomes.finished > 0, "\(outcomes)")
    }
}
