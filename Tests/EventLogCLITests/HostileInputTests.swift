import EventLog
import EventLogTesting
import Foundation
import Testing

/// No input crashes the program or reaches the terminal raw: each tried from outside.
@Suite struct HostileInputTests {
    let dir = TemporaryDirectory()

    @Test func recordedControlCharactersCannotForgeLinesOrDriveTheTerminal() throws {
        let db = dir.file("log.lmdb")
        let line = #"{"stream":"s\n      9  FORGED","type":"t\u001b[31m","outcome":"skipped","reason":"r\r\u009b2J\u202egnp.exe"}"#
        #expect(try runEventlog(["import", "-", "--db", db], stdin: line).code == 0)
        for command in [["log"], ["show", "1"], ["bisect", "--where", "exists(nothing)", "--linear"]] {
            let output = try runEventlog(command + ["--db", db])
            let text = output.out + output.err
            #expect(!text.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\r" || $0 == "\u{9B}" || $0 == "\u{202E}" }, "\(command): \(text.debugDescription)")
        }
        let log = try runEventlog(["log", "--db", db]).out
        #expect(log.split(separator: "\n").count == 1)
        #expect(log.contains(#"s\n      9  FORGED/t\u{1B}[31m  r\r\u{9B}2J\u{202E}gnp.exe"#), "\(log)")
        let refused = try runEventlog(["open", "botmessages://nowhere/\u{1B}[2J", "--db", db])
        #expect(refused.code == 2 && refused.err.contains(#"\u{1B}[2J"#) && !refused.err.contains("\u{1B}"), "\(refused.err.debugDescription)")
    }

    /// An argument that is not UTF-8 would be repaired by Swift into another path: refused.
    /// Output that cannot be written (a full disk: `/dev/full`) is an error, exit 3, not a
    /// silent success; a reader that goes away (`| head`) ends the command quietly.
    @Test func outputToAFullDiskIsAnError() throws {
        let db = dir.file("full.lmdb")
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "n", count: 2_000)).code == 0)
        for command in [["info"], ["export"], ["log", "--json"]] {
            let process = try spawnEventlog(command + ["--db", db])
            process.standardOutput = FileHandle(forWritingAtPath: "/dev/full")
            let err = Pipe()
            process.standardError = err
            try process.run()
            let said = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 3, "\(command): \(said)")
            #expect(said == "Error: cannot write the output: No space left on device\n", "\(command): \(said)")
        }
    }

    /// A reader that closed its end before anything was written: every command ends by its
    /// own exit, never by SIGPIPE.
    @Test func aClosedOutputEndsTheCommandNotTheProcess() throws {
        let db = dir.file("closed.lmdb")
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "n", count: 2_000)).code == 0)
        for command in [["info"], ["export"], ["snapshot", "2000"]] {
            // Started with SIGPIPE as a process gets it from a shell (this one ignores it, and
            // exec keeps an ignored signal ignored).
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", "import os, signal, sys; signal.signal(signal.SIGPIPE, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
                                 builtExecutable().path] + command + ["--db", db]
            let out = Pipe()
            process.standardOutput = out
            try out.fileHandleForReading.close()
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationReason == .exit, "\(command) ended by signal \(process.terminationStatus)")
        }
    }

    @Test func anArgumentThatIsNotUTF8IsRefused() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", #"exec "$0" import - --db "$1/$(printf 'd\377')" </dev/null"#, builtExecutable().path, dir.path]
        let err = Pipe()
        process.standardError = err
        try process.run()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 2)
        #expect(message == "Error: argument 4 is not UTF-8 text; paths and values must be\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test func deepNestingAndEndlessInputsAreOneLineErrors() throws {
        let db = dir.file("log.lmdb")
        #expect(try runEventlog(["import", "-", "--db", db], stdin: #"{"stream":"s","type":"t","writes":[{"path":"x","new":1}]}"#).code == 0)
        let wheres = [String(repeating: "(", count: 20_000) + "x" + String(repeating: ")", count: 20_000),
                      String(repeating: "!", count: 100_000) + "x"]
        for expression in wheres {
            let result = try runEventlog(["bisect", "--where", expression, "--db", db])
            #expect(result.code == 2, "\(result.err.prefix(200))")
            #expect(result.err.hasPrefix("Error: --where column "), "\(result.err.prefix(200))")
        }
        let brackets = String(repeating: "[", count: 100_000)
        let json = try runEventlog(["import", "-", "--db", db], stdin: #"{"stream":"s","type":"t","payload":\#(brackets)}"#)
        #expect(json.code == 2 && json.err.contains("nested deeper than 512"), "\(json.err.prefix(200))")
        for script in ["/dev/zero", "-"] {
            let process = try spawnEventlog(["capture", script, "--db", db])
            process.standardInput = FileHandle(forReadingAtPath: "/dev/zero")
            let err = Pipe()
            process.standardError = err
            try process.run()
            let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 2, "\(script): \(message)")
            #expect(message.hasPrefix("Error: cannot read the capture script") && message.contains("longer than"), "\(message)")
        }
    }

    @Test func aCaptureScriptWithCRLFRunsAndAnAbsentPathIsCapturedAsAbsent() throws {
        let db = dir.file("log.lmdb")
        let script = "open botmessages://bots?filter=unread\r\ncapture tab messenger.selectedTab\r\ncapture gone messenger.nothing\r\n"
        let result = try runEventlog(["capture", "-", "--db", db], stdin: script)
        #expect(result.code == 0, "\(result.err)")
        #expect(result.out.contains("== tab (after event ") && result.out.contains("\"bots\"\n== gone (after event "))
        #expect(result.out.hasSuffix(") ==\n(absent)\n"), "\(result.out)")
    }

    /// Another program's LMDB environment: refused by writing commands too, and left as it was.
    @Test func aForeignLMDBEnvironmentIsNeverWrittenTo() throws {
        let foreign = dir.file("foreign")
        try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: true)
        let load = Process()
        load.executableURL = URL(fileURLWithPath: "/usr/bin/mdb_load")
        load.arguments = ["-f", "/dev/stdin", foreign]
        let input = Pipe()
        load.standardInput = input
        try load.run()
        try input.fileHandleForWriting.write(contentsOf: Data("VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n 6b6579\n 76616c7565\nDATA=END\n".utf8))
        try input.fileHandleForWriting.close()
        load.waitUntilExit()
        #expect(load.terminationStatus == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: foreign + "/data.mdb"))
        for command in [["open", "botmessages://bots?filter=unread"], ["objects", "save", "Note", "{}"], ["demo", "--plans", "1"]] {
            let result = try runEventlog(command + ["--db", foreign])
            #expect(result.code == 3 && result.err.hasSuffix("is an LMDB environment but not an event log\n"), "\(command): \(result.err)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: foreign + "/data.mdb")) == before)
    }

    @Test func aDataFileThatIsNoFileIsReportedNotWaitedOn() throws {
        let fifo = dir.file("fifo.lmdb")
        try FileManager.default.createDirectory(atPath: fifo, withIntermediateDirectories: true)
        #expect(mkfifo(fifo + "/data.mdb", 0o644) == 0)
        let device = dir.file("device.lmdb")
        try FileManager.default.createDirectory(atPath: device, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: device + "/data.mdb", withDestinationPath: "/dev/zero")
        for db in [fifo, device] {
            for command in [["verify"], ["info"], ["import", "-"]] {
                let result = try runEventlog(command + ["--db", db], stdin: "")
                #expect(result.code == 1, "\(command) \(db): \(result.err)")
                #expect((result.out + result.err).contains("data.mdb is not a regular file"), "\(result.out)\(result.err)")
            }
        }
    }

    @Test func numbersThatWouldNotComeBackTheSameAreRefused() throws {
        for number in ["18446744073709551615", "-9223372036854775809", "1e-400", "0.0000e-999999"] {
            let result = try runEventlog(["import", "-", "--db", dir.file("n.lmdb")], stdin: #"{"stream":"s","type":"t","payload":\#(number)}"#)
            #expect(result.code == 2 && (result.err.contains("beyond 64 bits") || result.err.contains("too small for a double")) || number.hasPrefix("0.0"),
                    "\(number): \(result.err)")
        }
        // Zero, however written, is zero.
        #expect(try runEventlog(["import", "-", "--db", dir.file("n.lmdb")], stdin: #"{"stream":"s","type":"t","payload":0.0e-999}"#).code == 0)
    }

    @Test func anOptionsValueIsNeverTheNextOption() throws {
        let swallowed = try runEventlog(["log", "--from", "--db", dir.file("x.lmdb")])
        #expect(swallowed.code == 2 && swallowed.err.hasPrefix("Error: --from needs a value (N)\n"), "\(swallowed.err)")
        let twice = try runEventlog(["info", "--db", dir.file("a.lmdb"), "--db", dir.file("b.lmdb")])
        #expect(twice.code == 2 && twice.err.hasPrefix("Error: --db is given twice\n"), "\(twice.err)")
    }

    @Test func versionNamesTheStorageFormat() throws {
        let result = try runEventlog(["--version"])
        #expect(result.code == 0)
        #expect(result.out.hasPrefix("eventlog ") && result.out.hasSuffix(" (storage format \(EventStore.formatVersion))\n"))
        #expect(try runEventlog(["--version", "extra"]).code == 2)
    }
}

/// Databases written by an older build open: a format-1 database (Fixtures/format1.mdbdump,
/// `mdb_dump -a` of a demo log that build recorded) and a format-2 one (format2.mdbdump, five
/// events imported by the build of `c686958`: named origins, a cause, each outcome) read,
/// verify and export as they did, and become format 3 when a writer opens them, their records
/// unchanged.
@Suite struct FormatCompatibilityTests {
    let dir = TemporaryDirectory()
    let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// The database `mdb_load` makes of fixture `name`.mdbdump.
    func load(_ name: String) throws -> String {
        let db = dir.file("\(name).lmdb")
        try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: true)
        let load = Process()
        load.executableURL = URL(fileURLWithPath: "/usr/bin/mdb_load")
        load.arguments = ["-f", fixtures.appendingPathComponent("\(name).mdbdump").path, db]
        load.standardError = FileHandle.nullDevice
        try load.run()
        load.waitUntilExit()
        #expect(load.terminationStatus == 0)
        return db
    }

    func format(of db: String) throws -> StateValue? { try StateValue(json: try runEventlog(["info", "--json", "--db", db]).out)["format"] }

    @Test func aFormatOneDatabaseOpensVerifiesAndUpgrades() throws {
        let db = try load("format1")
        let exported = try String(contentsOf: fixtures.appendingPathComponent("format1.jsonl"), encoding: .utf8)
        #expect(try format(of: db) == 1)
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
        #expect(try runEventlog(["export", "--db", db]).out == exported)
        // A writer brings it to today's format; an origin by name is then stored as such.
        let append = try runEventlog(["import", "-", "--db", db], stdin: #"{"stream":"deploy","type":"checkStarted","origin":"deploy-client"}"#)
        #expect(append.code == 0, "\(append.err)")
        #expect(try format(of: db) == .int(Int64(EventStore.uncompactedFormatVersion)))
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
        let after = try runEventlog(["export", "--db", db]).out
        #expect(after.hasPrefix(exported))
        let last = try StateValue(json: String(after.split(separator: "\n").last!))
        #expect(last["seq"] == 68 && last["origin"] == "deploy-client")
    }

    @Test func aFormatTwoDatabaseOpensVerifiesAndUpgradesWithVersions() throws {
        let db = try load("format2")
        let exported = try String(contentsOf: fixtures.appendingPathComponent("format2.jsonl"), encoding: .utf8)
        #expect(try format(of: db) == 2)
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
        #expect(try runEventlog(["export", "--db", db]).out == exported)
        // A writer brings it to format 3, and an event of version 2 is stored with its version.
        let append = try runEventlog(["import", "-", "--db", db], stdin: #"{"stream":"counter","type":"increment","version":2,"payload":{"by":{"step":1}},"writes":[{"path":"counter.value","old":6,"new":7}]}"#)
        #expect(append.code == 0, "\(append.err)")
        #expect(try format(of: db) == 3)
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
        let after = try runEventlog(["export", "--db", db]).out
        #expect(after.hasPrefix(exported))
        let last = try StateValue(json: String(after.split(separator: "\n").last!))
        #expect(last["seq"] == 6 && last["version"] == 2)
        // Version 1 is never written out; any other is shown.
        #expect(!exported.contains("\"version\""))
        #expect(try runEventlog(["log", "--from", "6", "--db", db]).out.contains("counter/increment(1) v2"))
        #expect(try runEventlog(["show", "6", "--db", db]).out.contains("type      increment (version 2)"))
        // What an export holds imports back the same, version included.
        let copy = dir.file("copy.lmdb")
        #expect(try runEventlog(["import", "-", "--db", copy], stdin: after).code == 0)
        #expect(try runEventlog(["export", "--db", copy]).out == after)
    }

    /// A format-2 database has no base and opens as it is; compacted, it becomes format 4,
    /// and the digest it keeps is the one a copy of the dropped events (its export) gives.
    @Test func aFormatTwoDatabaseCompactsAndItsExportProvesTheDroppedPart() throws {
        let db = try load("format2")
        let exported = try String(contentsOf: fixtures.appendingPathComponent("format2.jsonl"), encoding: .utf8)
        let info = try StateValue(json: try runEventlog(["info", "--json", "--db", db]).out)
        #expect(info["format"] == 2 && info["base"] == .null && info["firstSeq"] == 1)
        let compacted = try runEventlog(["compact", "--before", "3", "--json", "--db", db])
        #expect(compacted.code == 0, "\(compacted.err)")
        #expect(try format(of: db) == .int(Int64(EventStore.formatVersion)))
        let lines = exported.split(separator: "\n").map(String.init)
        let after = try runEventlog(["export", "--db", db]).out.split(separator: "\n").map(String.init)
        #expect(Array(after.dropFirst()) == Array(lines.dropFirst(2)))
        let records = try lines.prefix(2).map { line -> [UInt8] in
            let imported = try ImportedEvent(json: try StateValue(json: line))
            return EventRecord.storedBytes(of: imported.event, seq: imported.seq!, time: imported.time!)
        }
        let digest = DroppedRange.digest(of: records).map { String(format: "%02x", $0) }.joined()
        let base = try StateValue(json: after[0])["base"]
        #expect(base?["digests"] == [["from": 1, "sha256": .string(digest), "to": 2]])
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
    }
}
