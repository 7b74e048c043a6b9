@testable import EventLog
import EventLogTesting
import Foundation
import Testing

/// `eventlog compact` and every command on the window it leaves.
@Suite struct CompactCommandTests {
    let dir = TemporaryDirectory()
    var db: String { dir.file("log.lmdb") }

    /// A log of `count` counter events; the first `old` are recorded in 2020.
    func seeded(_ count: Int = 100, old: Int = 0) {
        var lines = counterEvents(key: "counter", count: count).split(separator: "\n").map(String.init)
        for i in 0..<old { lines[i] = lines[i].replacingOccurrences(of: #"{"stream""#, with: #"{"time":"2020-01-01T00:00:0\#(i % 10)Z","stream""#) }
        let result = eventlog(["import", "-", "--db", db], stdin: lines.joined(separator: "\n") + "\n")
        #expect(result.code == 0, "\(result.err)")
    }

    func export(_ path: String? = nil) -> String {
        let result = eventlog(["export", "--db", path ?? db])
        #expect(result.code == 0, "\(result.err)")
        return result.out
    }

    @Test func compactBeforeThenEveryCommandWorksOnTheWindow() throws {
        seeded()
        let state40 = eventlog(["snapshot", "40", "--db", db]).out
        let compacted = eventlog(["compact", "--before", "41", "--db", db])
        #expect(compacted.code == 0, "\(compacted.err)")
        #expect(compacted.out.hasPrefix("dropped events 1-40; the log starts at event 41, after its base (checksum "))
        let info = try StateValue(json: eventlog(["info", "--json", "--db", db]).out)
        #expect(info["firstSeq"] == 41 && info["lastSeq"] == 100 && info["events"] == 60 && info["format"] == 4)
        #expect(info["base"]?["seq"] == 40 && info["base"]?["dropped"] == ["test": 40])
        #expect(eventlog(["info", "--db", db]).out.contains("base       after event 40 (checksum "))
        // The keyframes info counts include the base, which verify checks apart.
        #expect(eventlog(["verify", "--db", db]).out == "ok: events 41-100 from the base after 40 and \(info["keyframes"]!.intValue! - 1) keyframes verified\n")
        #expect(eventlog(["snapshot", "40", "--db", db]).out == state40)
        #expect(eventlog(["diff", "40", "100", "--db", db]).out == "~ counter: 39 → 99\n")
        #expect(eventlog(["log", "--db", db]).out.split(separator: "\n").count == 60)
        #expect(eventlog(["history", "counter", "--db", db]).out.split(separator: "\n").first?.hasPrefix("     41  ") == true)
        let replayed = eventlog(["replay", "--verify", "--accept-recorded", "--db", db])
        #expect(replayed.code == 0 && replayed.out.contains("test  60 as recorded, unknown to the code"), "\(replayed.out)")
        #expect(eventlog(["bisect", "--where", "counter >= 70", "--db", db]).out.hasPrefix("first bad event: 71 "))
        // Asking for a dropped event: one line, exit 2.
        for arguments in [["show", "12"], ["snapshot", "39"], ["diff", "3", "50"], ["log", "--from", "12"], ["history", "counter", "--to", "12"],
                          ["export", "--from", "1"], ["bisect", "--where", "counter >= 70", "--from", "2"], ["replay", "--to", "30"]] {
            let result = eventlog(arguments + ["--db", db])
            #expect(result.code == 2, "\(arguments)")
            #expect(result.err.hasPrefix("Error: event \(arguments.first(where: { Int($0) != nil })!) was compacted away; the log starts after event 40 from its base\n"),
                    "\(arguments): \(result.err)")
        }
    }

    @Test func exportWritesTheBaseFirstAndImportMakesTheSameWindow() throws {
        seeded()
        #expect(eventlog(["compact", "--keep-last", "25", "--db", db]).code == 0)
        let exported = export()
        let lines = exported.split(separator: "\n")
        #expect(lines.count == 26)
        #expect(lines[0].hasPrefix(#"{"base":{"checksum":""#) && lines[1].hasPrefix(#"{"checksum":"#) && lines[1].contains(#""seq":76,"#))
        let copy = dir.file("copy.lmdb")
        #expect(eventlog(["import", "-", "--db", copy], stdin: exported).out == "imported 25 events (seq 76-100)\n")
        #expect(export(copy) == exported)
        #expect(eventlog(["verify", "--db", copy]).code == 0)
        // Again with --resume: the same base and events are passed over.
        #expect(eventlog(["import", "-", "--resume", "--db", copy], stdin: exported).out == "imported 0 events; skipped 25 events the log already held\n")
        // A base whose state was changed no longer matches its checksum; a base after events is refused.
        let tampered = exported.replacingOccurrences(of: #""state":{"counter":74}"#, with: #""state":{"counter":7}"#)
        #expect(tampered != exported)
        let refused = eventlog(["import", "-", "--db", dir.file("tampered.lmdb")], stdin: tampered)
        #expect(refused.code != 0 && refused.err.contains("the base after event 75 has checksum "), "\(refused.err)")
        let late = eventlog(["import", "-", "--db", dir.file("late.lmdb")], stdin: #"{"stream":"test","type":"tick"}"# + "\n" + String(lines[0]) + "\n")
        #expect(late.code == 2 && late.err.contains("line 2: a base belongs on the first line"), "\(late.err)")
    }

    @Test func olderThanCutsAtTheFirstEventRecordedSince() throws {
        seeded(50, old: 10)
        let result = eventlog(["compact", "--older-than", "30d", "--json", "--db", db])
        #expect(result.code == 0, "\(result.err)")
        #expect(try StateValue(json: result.out)["firstSeq"] == 11)
        #expect(eventlog(["compact", "--older-than", "2021-01-01T00:00:00Z", "--db", db]).out == "nothing to drop: the log starts at event 11\n")
    }

    @Test func salvageKeepsTheBase() throws {
        seeded()
        #expect(eventlog(["compact", "--before", "90", "--db", db]).code == 0)
        let salvaged = dir.file("salvaged.lmdb")
        let result = eventlog(["salvage", "--db", db, "--into", salvaged])
        #expect(result.out == "copied events 90-100 into \(salvaged)\n", "\(result.err)")
        #expect(export(salvaged) == export())
    }

    @Test func badInputIsOneLineExitTwoAndChangesNothing() throws {
        seeded(20, old: 0)
        let existing = dir.file("existing")
        try FileManager.default.createDirectory(atPath: existing, withIntermediateDirectories: false)
        let before = try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb"))
        let cases: [([String], String)] = [
            (["--before", "0"], "Error: --before 0: there is no event 0; the first event to keep is 2 or later"),
            (["--before", "21"], "Error: --before 21 is past the newest event 20; the log keeps at least one event"),
            (["--keep-last", "0"], "Error: --keep-last must be a positive whole number, not \"0\""),
            (["--older-than", "2999-01-01T00:00:00Z"], "Error: --older-than 2999-01-01T00:00:00Z is in the future"),
            (["--older-than", "0s"], "Error: every event was recorded before "),
            (["--keep-last", "5", "--to", existing], "Error: --to \(existing) exists; compact copies into a new path"),
        ]
        for (arguments, error) in cases {
            let result = eventlog(["compact"] + arguments + ["--db", db])
            #expect(result.code == 2, "\(arguments): \(result.err)")
            #expect(result.err.hasPrefix(error), "\(arguments): \(result.err)")
            #expect(result.err.split(separator: "\n").first.map { String($0) }?.hasPrefix("Error: ") == true)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb")) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: existing).isEmpty)
    }

    @Test func aDamagedLogIsRefused() throws {
        seeded(40)
        // Flip a byte of the newest record's value: verify finds it, compact refuses.
        let store = try EventStore(path: db)
        try store.environment.write { txn in
            var bytes = Array(try EventRecord.storedBytes(of: store.record(40)!.event, seq: 40, time: store.record(40)!.time))
            bytes[bytes.count - 1] ^= 0xFF
            try withUnsafeBytes(of: UInt64(40).bigEndian) { key in try bytes.withUnsafeBytes { try txn.put(store.events, key: key, value: $0) } }
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb"))
        let result = eventlog(["compact", "--keep-last", "5", "--db", db])
        #expect(result.code == 2)
        #expect(result.err.hasPrefix("Error: \(db) is damaged (seq 40: checksum mismatch"), "\(result.err)")
        #expect(result.err.contains("run 'eventlog salvage' first"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb")) == before)
    }

    @Test func toAndInPlaceWriteASmallerCopyAndADiskFullLeavesTheOriginal() throws {
        // 6,000 events of about 1 KiB, the last 1,200 kept: a copy of about 1.6 MiB.
        let note = String(repeating: "x", count: 1_000)
        let lines = counterEvents(key: "counter", count: 6_000).replacingOccurrences(of: #"{"stream""#, with: #"{"payload":{"note":"\#(note)"},"stream""#)
        #expect(eventlog(["import", "-", "--db", db], stdin: lines).code == 0)
        #expect(eventlog(["compact", "--keep-last", "1200", "--db", db]).code == 0)
        let original = try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb"))
        let copy = dir.file("copy.lmdb")
        // A file-size limit below the copy's size, so that the write comes up short as on a
        // full disk, and above what a ThreadSanitizer build needs to start (it faults under
        // 512 KiB).
        let limit = 1 << 20
        let full = try runEventlog(["compact", "--to", copy, "--db", db], fileSizeLimit: limit)
        #expect(full.code == 3, "\(full.err)")
        #expect(!FileManager.default.fileExists(atPath: copy))
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb")) == original)
        let written = eventlog(["compact", "--to", copy, "--db", db])
        #expect(written.out == "wrote a compacted copy into \(copy)\n", "\(written.err)")
        let size = { (path: String) in try FileManager.default.attributesOfItem(atPath: path + "/data.mdb")[.size] as! Int }
        #expect(try size(copy) < size(db) / 4)
        #expect(export(copy) == export())
        #expect(eventlog(["verify", "--db", copy]).code == 0)
        // --in-place: a full disk leaves the file as it was and nothing beside it; then the space comes back.
        let exported = export()
        let inPlaceFull = try runEventlog(["compact", "--in-place", "--db", db], fileSizeLimit: limit)
        #expect(inPlaceFull.code == 3, "\(inPlaceFull.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb")) == original)
        #expect(try FileManager.default.contentsOfDirectory(atPath: db).sorted() == ["data.mdb", "lock.mdb"])
        let inPlace = try runEventlog(["compact", "--in-place", "--json", "--db", db])
        #expect(inPlace.code == 0, "\(inPlace.err)")
        let sizes = try StateValue(json: inPlace.out)["fileBytes"]
        #expect(sizes?["before"]?.intValue == Int64(original.count))
        #expect(try size(db) == Int(sizes?["after"]?.intValue ?? 0) && size(db) < original.count / 4)
        #expect(export() == exported)
        #expect(eventlog(["verify", "--db", db]).code == 0)
    }

    /// `--in-place` never swaps the file under a process that has the log open (its writes
    /// would go to the old file): it says so, and changes nothing.
    @Test func inPlaceWaitsForOtherProcessesToCloseTheLog() throws {
        seeded(200)
        #expect(eventlog(["compact", "--keep-last", "10", "--db", db]).code == 0)
        let original = try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb"))
        let follower = try spawnEventlog(["log", "--follow", "--db", db])
        let out = Pipe()
        follower.standardOutput = out
        follower.standardError = FileHandle.nullDevice
        try follower.run()
        // SIGKILL: a child spawned from a Dispatch thread inherits its blocked signals (SIGTERM among them).
        defer { if follower.isRunning { kill(follower.processIdentifier, SIGKILL) }; follower.waitUntilExit() }
        // Once it has printed the window, it has the log open.
        _ = out.fileHandleForReading.availableData
        // Run as a process of its own, as a user would: what this test asks is whether another
        // process's open log is seen (stores of the test process are another question).
        let refused = try runEventlog(["compact", "--in-place", "--db", db])
        #expect(refused.code == 3 && refused.err.contains("another process has the log open"), "\(refused.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "/data.mdb")) == original)
        #expect(try FileManager.default.contentsOfDirectory(atPath: db).sorted() == ["data.mdb", "lock.mdb"])
        kill(follower.processIdentifier, SIGKILL)
        follower.waitUntilExit()
        #expect(try runEventlog(["compact", "--in-place", "--db", db]).code == 0)
    }

    /// SIGKILL at random moments of `compact` (200 times, `killRounds`, within the time a whole
    /// run takes, learnt from the first round, which is not killed): afterwards
    /// `verify` passes and the log is either as it was or compacted, never anything else.
    @Test func killedAtRandomMomentsTheLogIsAsBeforeOrCompacted() throws {
        seeded(2_000)
        let source = db
        let whole = export()
        let compactedCopy = dir.file("reference.lmdb")
        #expect(eventlog(["import", "-", "--db", compactedCopy], stdin: whole).code == 0)
        #expect(eventlog(["compact", "--keep-last", "100", "--db", compactedCopy]).code == 0)
        let compacted = export(compactedCopy)
        var outcomes = (before: 0, compacted: 0)
        // 200 kills, or as many as five minutes allow on a loaded machine: never fewer than 50.
        let total = killRounds(200)
        let deadline = Date().addingTimeInterval(300)
        try killAtRandomMoments(rounds: 0...total, until: deadline) { round, runAndKill in
            let db = dir.file("kill-\(round).lmdb")
            try FileManager.default.copyItem(atPath: source, toPath: db)
            try runAndKill(try spawnEventlog(["compact", "--keep-last", "100", "--db", db]))
            let verified = eventlog(["verify", "--db", db])
            #expect(verified.code == 0, "round \(round): \(verified.out)\(verified.err)")
            let now = export(db)
            if now == whole { outcomes.before += 1 } else if now == compacted { outcomes.compacted += 1 } else {
                Issue.record("round \(round): the log is neither as before nor compacted")
            }
            try FileManager.default.removeItem(atPath: db)
        }
        let rounds = outcomes.before + outcomes.compacted
        #expect(rounds >= total || (Date() >= deadline && rounds >= total / 4), "\(outcomes)")
        #expect(outcomes.before > 0 && outcomes.compacted > 0, "\(outcomes): the kills never fell on both sides of the commit")
    }
}
