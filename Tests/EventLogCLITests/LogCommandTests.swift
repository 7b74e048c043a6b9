import DemoCLI
import EventLog
@testable import EventLogCLI
import EventLogTesting
import Foundation
import Testing

@Suite struct LogCommandTests {
    let dir = TemporaryDirectory()
    var db: String { dir.file("log.lmdb") }

    func seeded(_ count: Int = 20) -> String {
        let result = eventlog(["import", "-", "--db", db], stdin: counterEvents(key: "counter", count: count))
        #expect(result.code == 0, "\(result.err)")
        return db
    }

    @Test func importThenLogListsEveryEvent() {
        let result = eventlog(["import", "-", "--db", db], stdin: counterEvents(key: "counter", count: 3))
        #expect(result.out == "imported 3 events (seq 1-3)\n")
        let log = eventlog(["log", "--db", db])
        #expect(log.code == 0)
        let lines = log.out.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[2].hasSuffix("test         applied   test/tick  counter: 1 → 2"))
        #expect(lines[0].hasPrefix("      1  20"))
    }

    @Test func logHonoursTheRangeAndJSONIsOneRecordPerLine() throws {
        _ = seeded()
        let result = eventlog(["log", "--from", "5", "--to=7", "--json", "--db", db])
        let records = try result.out.split(separator: "\n").map { try StateValue(json: String($0)) }
        #expect(records.map { $0["seq"] } == [5, 6, 7])
        #expect(records[0]["writes[0].new"] == 4)
        #expect(eventlog(["log", "--from", "9", "--to", "3", "--db", db]).code == 2)
    }

    @Test func infoReportsCountsAndFormat() throws {
        _ = seeded()
        let info = try StateValue(json: eventlog(["info", "--json", "--db", db]).out)
        #expect(info["events"] == 20)
        #expect(info["firstSeq"] == 1)
        #expect(info["lastSeq"] == 20)
        #expect(info["format"] == .int(Int64(EventStore.uncompactedFormatVersion)))
        #expect(info["fileBytes"]?.intValue ?? 0 > 0)
        #expect(eventlog(["info", "--db", db]).out.contains("events     20"))
    }

    @Test func showPrintsTheRecordWritesAndState() throws {
        _ = seeded()
        let text = eventlog(["show", "4", "--db", db])
        #expect(text.out.contains("type      tick"))
        #expect(text.out.contains("  counter: 2 → 3"))
        #expect(text.out.contains("\"counter\": 3"))
        let json = try StateValue(json: eventlog(["show", "4", "--json", "--db", db]).out)
        #expect(json["record.seq"] == 4)
        #expect(json["state.counter"] == 3)
        let missing = eventlog(["show", "99", "--db", db])
        #expect(missing.code == 2)
        #expect(missing.err == "Error: no event 99: the log holds 1-20\n")
    }

    @Test func snapshotAndDiffReadAnyMoment() throws {
        _ = seeded()
        #expect(eventlog(["snapshot", "7", "--json", "--db", db]).out == "{\"counter\":6}\n")
        #expect(eventlog(["snapshot", "0", "--json", "--db", db]).out == "{}\n")
        #expect(eventlog(["snapshot", "--path", "counter", "--db", db]).out == "19\n")
        let badPath = eventlog(["snapshot", "--path", "a..b", "--db", db])
        #expect(badPath.code == 2)
        #expect(badPath.err.hasPrefix("Error: --path a..b: column 3: expected a key\nUsage: eventlog snapshot"))
        #expect(eventlog(["diff", "3", "9", "--db", db]).out == "~ counter: 2 → 8\n")
        #expect(eventlog(["diff", "0", "1", "--db", db]).out == "+ counter: 0\n")
        #expect(eventlog(["diff", "5", "5", "--db", db]).out == "no differences between the states after 5 and 5\n")
        let json = try StateValue(json: eventlog(["diff", "1", "0", "--json", "--db", db]).out)
        #expect(json["writes"] == [["old": 0, "path": "counter"]])
    }

    @Test func verifyReportsOKAndExportImportRoundTrips() throws {
        _ = seeded(300)
        let verify = eventlog(["verify", "--db", db])
        #expect(verify.code == 0)
        #expect(verify.out.hasPrefix("ok: 300 events and "))
        let export = eventlog(["export", "--db", db])
        let copy = dir.file("copy.lmdb")
        #expect(eventlog(["import", "-", "--db", copy], stdin: export.out).code == 0)
        #expect(eventlog(["export", "--db", copy]).out == export.out)
    }

    @Test func importOfABadLineAppendsNothing() {
        _ = seeded(5)
        let bad = counterEvents(key: "counter", count: 3, start: 5) + #"{"stream":"test","type":"tick","writes":[{"path":"counter","old":1,"new":2}]}"# + "\n"
        let result = eventlog(["import", "-", "--db", db], stdin: bad)
        #expect(result.code == 2)
        #expect(result.err == "Error: - line 4: stale write at counter: the write set expects 1 but the state holds 7\n")
        #expect(eventlog(["info", "--json", "--db", db]).out.contains("\"lastSeq\":5"))

        let malformed = eventlog(["import", "-", "--db", db], stdin: "{\"stream\":\"s\",\n")
        #expect(malformed.err == "Error: - line 1, column 15: expected a string key\n")
        let wrongSeq = eventlog(["import", "-", "--db", db], stdin: #"{"seq":9,"stream":"s","type":"t"}"#)
        #expect(wrongSeq.err == "Error: - line 1: seq 9 does not follow the log's last seq 5\n")
        #expect(eventlog(["info", "--json", "--db", db]).out.contains("\"lastSeq\":5"))
    }

    @Test func aBatchedImportKeepsTheBatchesBeforeABadLine() {
        let input = counterEvents(key: "counter", count: 25) + "{\"stream\":\n" + counterEvents(key: "counter", count: 5, start: 25)
        let result = eventlog(["import", "-", "--batch", "10", "--db", db], stdin: input)
        #expect(result.code == 2)
        #expect(result.err == "Error: - line 26, column 11: unexpected end of input; the 20 events committed before it (seq 1-20) are kept"
            + "; after fixing the input, continue with: eventlog import - --batch 10 --db \(db), given the input from line 21 on\n")
        #expect(eventlog(["info", "--json", "--db", db]).out.contains("\"lastSeq\":20"))
    }

    @Test func aFailedImportIntoANewDatabaseLeavesNoDatabase() {
        let result = eventlog(["import", "-", "--db", db], stdin: #"{"stream":"s","type":"t","writes":[{"path":"x","old":1,"new":2}]}"#)
        #expect(result.code == 2)
        #expect(!FileManager.default.fileExists(atPath: db))
    }

    @Test func readCommandsOnAMissingDatabaseExitThree() {
        for command in ["info", "log", "verify", "export", "snapshot"] {
            let result = eventlog([command, "--db", dir.file("nothing.lmdb")])
            #expect(result.code == 3, "\(command)")
            #expect(result.err == "Error: cannot open \(dir.file("nothing.lmdb")): no event log at \(dir.file("nothing.lmdb"))\n")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("nothing.lmdb")))
    }

    @Test func theDatabaseComesFromTheFlagThenTheEnvironment() {
        _ = seeded(2)
        #expect(eventlog(["info", "--json"], environment: ["EVENTLOG_DB": db]).out.contains("\"events\":2"))
        #expect(eventlog(["info", "--json", "--db", dir.file("other")], environment: ["EVENTLOG_DB": db]).code == 3)
    }
}

@Suite struct LineReaderTests {
    @Test(arguments: ["", "\n", "a", "a\n", "a\nb", "a\n\nb\n", "\n\nlast line without newline", String(repeating: "x", count: 5_000) + "\ny\n"])
    func linesAreTheSameWhateverTheChunkSizes(_ text: String) throws {
        var expected = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if text.hasSuffix("\n") || text.isEmpty { expected.removeLast() }
        for chunkSize in [1, 2, 3, 7, 64, 1 << 20] {
            var bytes = Data(text.utf8)[...]
            var reader = LineReader {
                defer { bytes = bytes.dropFirst(chunkSize) }
                return Data(bytes.prefix(chunkSize))
            }
            var lines: [String] = []
            while let line = try reader.next() { lines.append(String(decoding: line, as: UTF8.self)) }
            #expect(lines == expected, "chunks of \(chunkSize)")
        }
    }

    @Test func aFailedReadIsThrown() throws {
        struct ReadFailure: Error {}
        var chunks = [Data("first\nsecond".utf8)]
        var reader = LineReader {
            guard !chunks.isEmpty else { throw ReadFailure() }
            return chunks.removeFirst()
        }
        #expect(try reader.next() == Array("first".utf8)[...])
        #expect(throws: ReadFailure.self) { try reader.next() }
    }
}

@Suite struct ParsingTests {
    @Test(arguments: [
        (["frob"], "Error: unknown command 'frob'; the commands are: info, log, history, watch, show, snapshot, diff, verify, salvage, export, import, rebuild, compact, open, routes, capture, testgen, shrink, demo, objects, update-check, deploy, ship, pull, fleet, replay, bisect, view\nUsage: eventlog <command> [arguments] [--db PATH] [--json]\n"),
        (["log", "--bogus"], "Error: unknown option '--bogus' for 'log'\nUsage: eventlog log [--from N] [--to N] [--stream S[,S…]] [--type T[,T…]] [--outcome O[,O…]] [--hide-noop] [--touching PATH] [--follow] [--db PATH] [--json]\n"),
        (["log", "--from"], "Error: --from needs a value (N)\nUsage: eventlog log [--from N] [--to N] [--stream S[,S…]] [--type T[,T…]] [--outcome O[,O…]] [--hide-noop] [--touching PATH] [--follow] [--db PATH] [--json]\n"),
        (["show"], "Error: missing N\nUsage: eventlog show N [--path PATH] [--db PATH] [--json]\n"),
        (["show", "1", "2"], "Error: unexpected argument '2'\nUsage: eventlog show N [--path PATH] [--db PATH] [--json]\n"),
        (["show", "-3"], "Error: N must be a whole number (0 or more), not \"-3\"\nUsage: eventlog show N [--path PATH] [--db PATH] [--json]\n"),
        (["verify", "--json=yes"], "Error: --json takes no value\nUsage: eventlog verify [--db PATH] [--json]\n"),
        (["import", "-", "--batch", "0"], "Error: --batch must be a positive whole number, not \"0\"\nUsage: eventlog import FILE [--batch N] [--resume] [--db PATH] [--json]\n"),
        (["log", "--db", ""], "Error: --db needs a directory, not an empty path\nUsage: eventlog log [--from N] [--to N] [--stream S[,S…]] [--type T[,T…]] [--outcome O[,O…]] [--hide-noop] [--touching PATH] [--follow] [--db PATH] [--json]\n"),
        (["show", "+1"], "Error: N must be a whole number (0 or more), not \"+1\"\nUsage: eventlog show N [--path PATH] [--db PATH] [--json]\n"),
        (["salvage", "--into", "x.lmdb", "--db", "./x.lmdb"], "Error: --into must name a new database, not the damaged one (--db)\nUsage: eventlog salvage [--into NEW_DB] [--db PATH] [--json]\n"),
        (["help", "diff", "show"], "Error: help takes one command, not 2 words\nUsage: eventlog <command> [arguments] [--db PATH] [--json]\n"),
    ])
    func usageErrorsExitTwoWithTheUsageLine(_ arguments: [String], _ message: String) {
        let result = eventlog(arguments)
        #expect(result.code == 2)
        #expect(result.err == message)
        #expect(result.out.isEmpty)
    }

    @Test func helpIsTheSameEverywhere() {
        let help = eventlog(["help", "diff"])
        #expect(help.code == 0)
        #expect(help.out.hasPrefix("OVERVIEW: Show the structural diff"))
        #expect(help.out.contains("USAGE: eventlog diff A B [--path PATH] [--db PATH] [--json]"))
        #expect(help.out.contains("EXIT CODES:"))
        #expect(eventlog(["diff", "--help"]).out == help.out)
        #expect(eventlog(["diff", "1", "-h"]).out == help.out)
        let overview = eventlog([])
        #expect(overview.out.contains("SUBCOMMANDS:"))
        #expect(eventlog(["--help"]).out == overview.out)
        #expect(eventlog(["help", "help"]).out == overview.out)
    }

    /// Some editors begin a file with a UTF-8 byte order mark: on the first line it is not
    /// part of the JSON; anywhere else it is.
    @Test func anImportMayBeginWithAByteOrderMark() throws {
        let dir = TemporaryDirectory()
        let event = #"{"stream":"s","type":"t"}"#
        #expect(try runEventlog(["import", "-", "--db", dir.file("db")], stdin: "\u{FEFF}\(event)\n\(event)\n").out == "imported 2 events (seq 1-2)\n")
        let second = try runEventlog(["import", "-", "--db", dir.file("db")], stdin: "\(event)\n\u{FEFF}\(event)\n")
        #expect(second.code == 2 && second.err.hasPrefix("Error: - line 2, column 1: unexpected character"), "\(second.err)")
    }

    @Test func doubleDashEndsOptions() throws {
        let dir = TemporaryDirectory()
        let file = dir.file("--json")
        try counterEvents(key: "c", count: 1).write(toFile: file, atomically: true, encoding: .utf8)
        let result = eventlog(["import", "--db", dir.file("db"), "--", file])
        #expect(result.out == "imported 1 events (seq 1-1)\n")
    }
}

@Suite struct ProcessTests {
    @Test func twoProcessesAppendingEndWithADenseSequence() throws {
        let dir = TemporaryDirectory()
        let db = dir.file("shared.lmdb")
        for name in ["a", "b"] {
            try counterEvents(key: name, count: 2_000).write(toFile: dir.file("\(name).jsonl"), atomically: true, encoding: .utf8)
        }
        let processes = try ["a", "b"].map { name in
            let process = try spawnEventlog(["import", dir.file("\(name).jsonl"), "--batch", "7", "--db", db])
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            return process
        }
        for process in processes { process.waitUntilExit() }
        #expect(processes.map(\.terminationStatus) == [0, 0])
        let verify = try runEventlog(["verify", "--json", "--db", db])
        let report = try StateValue(json: verify.out)
        #expect(report["events"] == 4000 && report["ok"] == true)
        #expect((report["keyframes"]?.intValue ?? 0) > 0)
        let state = try StateValue(json: try runEventlog(["snapshot", "--json", "--db", db]).out)
        #expect(state == ["a": 1999, "b": 1999])
    }

    @Test func aMapGrownByAnotherProcessIsAdopted() throws {
        let dir = TemporaryDirectory()
        let db = dir.file("grown.lmdb")
        var options = EventStore.Options()
        options.initialMapSize = 1 << 20
        let store = try EventStore(path: db, options: options)
        try store.append(Event(stream: "s", type: "first"))
        #expect(store.environment.mapSize == 1 << 20)
        // The child opens with the default map of 64 MiB and writes past this process's 1 MiB,
        // so this process's next transactions see MDB_MAP_RESIZED and must adopt the new size.
        try counterEvents(key: "n", count: 20_000).write(toFile: dir.file("n.jsonl"), atomically: true, encoding: .utf8)
        let imported = try runEventlog(["import", dir.file("n.jsonl"), "--db", db])
        #expect(imported.code == 0, "\(imported.err)")
        #expect(try store.lastSeq() == 20_001)
        #expect(store.environment.mapSize > 1 << 20)
        try store.append(Event(stream: "s", type: "last"))
        #expect(try store.currentState == ["n": 19_999])
        #expect(try store.verify().eventsChecked == 20_002)
    }

    @Test func theExecutableReportsErrorsOnStderrWithExitCodes() throws {
        let dir = TemporaryDirectory()
        let missing = try runEventlog(["log", "--db", dir.file("none")])
        #expect(missing.code == 3)
        #expect(missing.out.isEmpty)
        #expect(missing.err.hasPrefix("Error: cannot open"))
        let usage = try runEventlog(["nope"])
        #expect(usage.code == 2)
    }

    /// A writer killed at any moment (SIGKILL, so in the middle of a commit too) leaves a
    /// database that verifies, holds whole transactions only and everything a reader saw
    /// committed, and the next writer goes on at once (LMDB's lock survives its owner dying).
    @Test func aWriterKilledMidImportLeavesWholeBatchesAndTheNextWriterGoesOn() throws {
        let dir = TemporaryDirectory()
        let (events, batch) = (20_000, 100)
        try counterEvents(key: "n", count: events).write(toFile: dir.file("n.jsonl"), atomically: true, encoding: .utf8)
        var killedMidway = 0
        for round in 0..<6 {
            let db = dir.file("killed-\(round).lmdb")
            let writer = try spawnEventlog(["import", dir.file("n.jsonl"), "--batch", "\(batch)", "--db", db])
            writer.standardOutput = FileHandle.nullDevice
            writer.standardError = FileHandle.nullDevice
            try writer.run()
            // Once the first batch is in, kill after a delay that differs from round to round.
            let deadline = Date().addingTimeInterval(30)
            while writer.isRunning, try committedEvents(db) == 0, Date() < deadline { usleep(1_000) }
            usleep(UInt32(round) * 4_000)
            let seen = try committedEvents(db)
            kill(writer.processIdentifier, SIGKILL)
            writer.waitUntilExit()

            let kept = try committedEvents(db)
            if kept > 0 && kept < events { killedMidway += 1 }
            #expect(kept >= seen, "round \(round): a reader saw \(seen) events committed, \(kept) are left")
            #expect(kept % batch == 0, "round \(round): \(kept) events is not a whole number of transactions")
            // The next writer takes the lock the dead one held and appends the rest.
            try expectIntactAndResumable(db, keeping: kept, of: events, in: dir, "round \(round)")
        }
        #expect(killedMidway > 0, "every kill landed before the first or after the last commit")
    }

    /// A disk that fills up in the middle of an import (a file-size limit, under which LMDB's
    /// writes come up short as on a full disk) stops it with exit 3 and a message naming the
    /// batches kept; those verify, and with room again the next writer goes on.
    @Test func aFullDiskStopsAnImportAfterWholeBatchesAndSaysWhichAreKept() throws {
        let dir = TemporaryDirectory()
        let db = dir.file("full.lmdb")
        let (events, batch) = (40_000, 1_000)
        try counterEvents(key: "n", count: events).write(toFile: dir.file("n.jsonl"), atomically: true, encoding: .utf8)
        let full = try runEventlog(["import", dir.file("n.jsonl"), "--batch", "\(batch)", "--db", db], fileSizeLimit: 1 << 20)
        #expect(full.code == 3)
        let kept = try committedEvents(db)
        #expect(kept > 0 && kept < events && kept % batch == 0, "\(kept) events kept")
        #expect(full.err.hasPrefix("Error: cannot write to \(db): "), "\(full.err)")
        // The input has no seqs, so the way on is the lines after the last one committed.
        let continuation = "tail -n +\(kept + 1) \(dir.file("n.jsonl")) | eventlog import - --batch \(batch) --db \(db)"
        #expect(full.err.hasSuffix("; the \(kept) events committed before it (seq 1-\(kept)) are kept; after fixing the input, continue with: "
            + continuation + "\n"), "\(full.err)")
        // With room again, the command it names imports the rest.
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", continuation]
        shell.environment = ["PATH": builtExecutable().deletingLastPathComponent().path + ":/usr/bin:/bin"]
        shell.standardOutput = FileHandle.nullDevice
        try shell.run()
        shell.waitUntilExit()
        #expect(shell.terminationStatus == 0)
        #expect(try committedEvents(db) == events)
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
    }

    /// A reader killed inside its read transaction leaves its slot in LMDB's reader table, and
    /// while another process keeps the database open (this one, here) LMDB keeps every page
    /// that reader could see: the file stops reusing free pages. The next process to open the
    /// database clears the slot.
    @Test func aReaderKilledMidReadIsClearedByTheNextProcessToOpen() throws {
        let dir = TemporaryDirectory()
        let db = dir.file("readers.lmdb")
        try counterEvents(key: "n", count: 20_000).write(toFile: dir.file("n.jsonl"), atomically: true, encoding: .utf8)
        #expect(try runEventlog(["import", dir.file("n.jsonl"), "--db", db]).code == 0)
        let store = try EventStore(path: db)
        // Nobody reads the pipe, so the export blocks inside its read transaction.
        let reader = try spawnEventlog(["export", "--db", db])
        let unread = Pipe()
        reader.standardOutput = unread
        try reader.run()
        let deadline = Date().addingTimeInterval(30)
        while try !readerProcesses(db).contains(reader.processIdentifier), Date() < deadline { usleep(10_000) }
        kill(reader.processIdentifier, SIGKILL)
        reader.waitUntilExit()
        #expect(try readerProcesses(db).contains(reader.processIdentifier), "the dead reader's slot is not left behind")

        #expect(try runEventlog(["info", "--db", db]).code == 0)
        #expect(try !readerProcesses(db).contains(reader.processIdentifier))
        #expect(try store.lastSeq() == 20_000)
    }

    /// The process ids in `db`'s reader table, as `mdb_stat -r` lists them (without clearing any).
    private func readerProcesses(_ db: String) throws -> Set<Int32> {
        let tool = ["/usr/bin/mdb_stat", "/usr/local/bin/mdb_stat"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(tool, "mdb_stat from Debian's lmdb-utils is not installed"))
        process.arguments = ["-r", db]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // "    pid     thread     txnid", then one line per slot: pid, thread (hex), txnid.
        return Set(output.split(separator: "\n").compactMap { $0.split(separator: " ").first.flatMap { Int32($0) } })
    }

    /// The events committed in `db` (0 when it cannot be opened).
    private func committedEvents(_ db: String) throws -> Int {
        let info = try runEventlog(["info", "--json", "--db", db])
        return info.code == 0 ? Int(try StateValue(json: info.out)["events"]?.intValue ?? 0) : 0
    }

    /// Expects that a database an import of `events` counter events left with the first `kept`
    /// verifies and holds their state, and that the next writer appends the rest.
    private func expectIntactAndResumable(_ db: String, keeping kept: Int, of events: Int, in dir: TemporaryDirectory,
                                          _ context: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        func counter() throws -> StateValue { try StateValue(json: try runEventlog(["snapshot", "--json", "--db", db]).out) }
        let verify = try runEventlog(["verify", "--json", "--db", db])
        let report = try StateValue(json: verify.out)
        #expect(verify.code == 0 && report["ok"] == true, "\(context): \(verify.out)\(verify.err)", sourceLocation: sourceLocation)
        #expect(try counter() == ["n": .int(Int64(kept - 1))], "\(context)", sourceLocation: sourceLocation)
        try counterEvents(key: "n", count: events - kept, start: kept).write(toFile: dir.file("rest.jsonl"), atomically: true, encoding: .utf8)
        let rest = try runEventlog(["import", dir.file("rest.jsonl"), "--db", db])
        #expect(rest.code == 0, "\(context): \(rest.err)", sourceLocation: sourceLocation)
        #expect(try counter() == ["n": .int(Int64(events - 1))], "\(context)", sourceLocation: sourceLocation)
    }
}

@Suite struct DamagedDatabaseTests {
    let dir = TemporaryDirectory()
    var db: String { dir.file("damaged.lmdb") }

    /// Flips one byte inside the payload of the event whose payload is `needle`.
    func flipByte(in needle: String) throws {
        let file = URL(fileURLWithPath: db + "/data.mdb")
        var data = try Data(contentsOf: file)
        let range = try #require(data.range(of: Data(needle.utf8)))
        data[range.lowerBound + 2] ^= 0x01
        try data.write(to: file)
    }

    @Test func aCorruptRecordIsAProblemForVerifyShowAndReplay() throws {
        let lines = (1...50).map { #"{"stream":"s","type":"t","payload":"needle-\#($0)-end"}"# }.joined(separator: "\n")
        #expect(eventlog(["import", "-", "--db", db], stdin: lines).code == 0)
        try flipByte(in: "needle-30-end")
        let verify = eventlog(["verify", "--db", db])
        #expect(verify.code == 1)
        #expect(verify.out.hasPrefix("problem at seq 30: checksum mismatch"))
        let show = eventlog(["show", "30", "--db", db])
        #expect(show.code == 1)
        #expect(show.err.hasPrefix("Error: record 30 is corrupt: checksum mismatch"))
        #expect(eventlog(["show", "29", "--db", db]).code == 0)
        #expect(eventlog(["replay", "--db", db]).code == 1)
        #expect(eventlog(["export", "--db", db]).code == 1)
    }

    @Test func aNewerFormatExitsThree() throws {
        #expect(eventlog(["import", "-", "--db", db], stdin: #"{"stream":"s","type":"t"}"#).code == 0)
        try Environment.open(path: db).write { txn in
            let meta = try #require(try txn.openDatabase(named: "meta"))
            try txn.put(meta, key: "format", value: EventStore.formatVersion + 1)
            // As a log written before the meta record had a checksum.
            _ = try Array("checksum".utf8).withUnsafeBytes { try txn.delete(meta, key: $0) }
        }
        let result = eventlog(["info", "--db", db])
        #expect(result.code == 3)
        #expect(result.err == "Error: cannot open \(db): the database has format version \(EventStore.formatVersion + 1), newer than the \(EventStore.formatVersion) this build reads; upgrade eventlog\n")
        #expect(eventlog(["import", "-", "--db", db], stdin: #"{"stream":"s","type":"t"}"#).code == 3)
    }

    @Test func aDirectoryThatIsNotAnEventLogExitsThree() throws {
        try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: true)
        try Data("not lmdb at all".utf8).write(to: URL(fileURLWithPath: db + "/data.mdb"))
        let result = eventlog(["log", "--db", db])
        #expect(result.code == 3)
        #expect(result.err.hasPrefix("Error: cannot open \(db): "))
    }
}

/// `log` filters and `history` against the demo's log, each checked against a scan of `log --json`.
@Suite struct QueryCommandTests {
    let dir = TemporaryDirectory()
    var db: String { dir.file("demo.lmdb") }

    init() { _ = eventlog(["demo", "--db", dir.file("demo.lmdb")]) }

    var everything: [StateValue] {
        eventlog(["log", "--json", "--db", db]).out.split(separator: "\n").compactMap { try? StateValue(json: String($0)) }
    }

    func seqs(_ lines: [StateValue]) -> [Int64] { lines.compactMap { $0["seq"]?.intValue } }

    func logged(_ options: [String]) -> [Int64] {
        seqs(eventlog(["log", "--json", "--db", db] + options).out.split(separator: "\n").compactMap { try? StateValue(json: String($0)) })
    }

    @Test func filtersAgreeWithAScan() throws {
        let all = everything
        #expect(all.count > 400)
        #expect(logged(["--stream", "deploy,updates"]) == seqs(all.filter { ["deploy", "updates"].contains($0["stream"]?.stringValue ?? "") }))
        #expect(logged(["--outcome", "skipped"]) == seqs(all.filter { $0["outcome"] == "skipped" }))
        #expect(logged(["--hide-noop"]) == seqs(all.filter { !($0["writes"]?.arrayValue ?? []).isEmpty }))
        #expect(logged(["--type", "selectBotTab", "--outcome", "applied"])
                == seqs(all.filter { $0["type"] == "selectBotTab" && $0["outcome"] == "applied" }))
        let touching = seqs(all.filter { line in
            (line["writes"]?.arrayValue ?? []).contains { ["messenger", "messenger.listFilter"].contains($0["path"]?.stringValue ?? "") }
        })
        #expect(!touching.isEmpty)
        #expect(logged(["--touching", "messenger.listFilter"]) == touching)
        #expect(logged(["--stream", "nothing"]).isEmpty)
    }

    @Test func historyNamesEveryWriterOfAPath() throws {
        let history = eventlog(["history", "messenger.listFilter", "--db", db])
        #expect(history.code == 0)
        let lines = history.out.split(separator: "\n")
        #expect(lines.first?.contains("system/initialState(messenger)  messenger.listFilter: (absent) → null") == true)
        #expect(lines.dropFirst().allSatisfy { $0.contains("messenger.listFilter:") })
        let json = eventlog(["history", "messenger.listFilter", "--json", "--db", db]).out.split(separator: "\n").compactMap { try? StateValue(json: String($0)) }
        #expect(json.count == lines.count)
        // Each line's old value is the previous line's new value: no writer is missing.
        var last: StateValue? = nil
        for line in json {
            let write = try #require(line["writes"]?.arrayValue?.first)
            #expect(write["old"] == last ?? .null || (last == nil && write["old"] == nil))
            last = write["new"]
        }
        #expect(eventlog(["history", "nothing.here", "--db", db]).out == "no event changed nothing.here\n")
        let bad = eventlog(["history", "a..b", "--db", db])
        #expect(bad.code == 2)
    }

    @Test func badFiltersAreUsageErrors() {
        for (options, message) in [(["--outcome", "maybe"], "--outcome takes applied, skipped or cancelled, not \"maybe\""),
                                   (["--stream", ","], "--stream needs names separated by commas, not \",\""),
                                   (["--touching", "a["], "--touching a[:")] {
            let outcome = eventlog(["log", "--db", db] + options)
            #expect(outcome.code == 2)
            #expect(outcome.err.hasPrefix("Error: \(message)"), "\(outcome.err)")
        }
    }
}

@Suite struct ColorTests {
    @Test func outcomesAndDiffsAreColouredOnlyWhenAsked() throws {
        let dir = TemporaryDirectory()
        let db = dir.file("c.lmdb")
        try counterEvents(key: "c", count: 3).write(toFile: dir.file("c.jsonl"), atomically: true, encoding: .utf8)
        _ = eventlog(["import", dir.file("c.jsonl"), "--db", db])
        let out = Captured()
        let console = Console(stdout: out.append, stderr: { _ in }, usesColors: true)
        #expect(EventLogCLI.run(["log", "--db", db], environment: [:], console: console, app: .demo) == 0)
        #expect(out.text.contains("\u{1B}[32mapplied"))
        let diff = Captured()
        _ = EventLogCLI.run(["diff", "1", "3", "--db", db], environment: [:], console: Console(stdout: diff.append, stderr: { _ in }, usesColors: true), app: .demo)
        #expect(diff.text.hasPrefix("\u{1B}[33m~ c: 0 → 2"))
        // The executable's stdout is a pipe here: no colour, and never in --json.
        let piped = try runEventlog(["log", "--db", db])
        #expect(!piped.out.contains("\u{1B}["))
        #expect(!eventlog(["log", "--json", "--db", db]).out.contains("\u{1B}["))
    }
}

@Suite struct TerminalWidthTests {
    @Test func rowsAreCutToTheTerminalsWidthAndWholeWhenPiped() throws {
        let dir = TemporaryDirectory()
        let db = dir.file("w.lmdb")
        let event = #"{"stream":"messenger","type":"selectBotTab","origin":"tap","writes":[{"path":"messenger.selectedTab","new":"bots"},{"path":"messenger.listFilter","new":"unread"}]}"#
        #expect(eventlog(["import", "-", "--db", db], stdin: event + "\n").code == 0)
        let piped = eventlog(["log", "--db", db]).out
        #expect(piped.count > 100)
        for colors in [false, true] {
            let out = Captured()
            let console = Console(stdout: out.append, stderr: { _ in }, usesColors: colors, width: 60)
            #expect(EventLogCLI.run(["log", "--db", db], environment: [:], console: console, app: .demo) == 0)
            let line = String(out.text.dropLast())
            let visible = line.replacingOccurrences(of: #"\x1B\[[0-9;]*m"#, with: "", options: .regularExpression)
            #expect(visible.count == 60 && visible.hasSuffix("…"), "\(visible)")
            #expect(piped.hasPrefix(String(visible.dropLast())))
            #expect(!colors || line.hasSuffix("…\u{1B}[0m"))
            // JSON is never cut.
            let json = Captured()
            _ = EventLogCLI.run(["log", "--json", "--db", db], environment: [:], console: Console(stdout: json.append, stderr: { _ in }, width: 60), app: .demo)
            #expect(json.text.count > 100)
        }
    }

    @Test func fittingCountsColumnsNotEscapes() {
        #expect(Render.fitted("abcdef", width: 6) == "abcdef")
        #expect(Render.fitted("abcdefg", width: 6) == "abcde…")
        #expect(Render.fitted("\u{1B}[32mabc\u{1B}[0mdefg", width: 6) == "\u{1B}[32mabc\u{1B}[0mde…\u{1B}[0m")
        #expect(Render.fitted("\u{1B}[32mabc\u{1B}[0mdef", width: 6) == "\u{1B}[32mabc\u{1B}[0mdef")
    }

    /// Only a terminal's width cuts a row: a trace line keeps a long step name, and a step
    /// number of four digits, whole.
    @Test func aTraceLineKeepsEveryColumnWhole() {
        let step = "prompt(" + String(repeating: "x", count: 40) + ")"
        let record = EventRecord(seq: 7, time: Timestamp(microsecondsSince1970: 0),
                                 event: Event(stream: "updates", type: "prompt", cause: Cause(id: "p", step: 1234),
                                              payload: ["version": .string(String(repeating: "x", count: 40))]), checksum: 0)
        let line = Render.traceLine(record)
        #expect(line.hasSuffix("  1234 " + step + "  applied   "), "\(line)")
        let short = Render.traceLine(EventRecord(seq: 7, time: Timestamp(microsecondsSince1970: 0),
                                                 event: Event(stream: "s", type: "t", cause: Cause(id: "p", step: 1)), checksum: 0))
        #expect(short == "      7  1  t" + String(repeating: " ", count: 36) + "applied   ", "\(short)")
    }
}
