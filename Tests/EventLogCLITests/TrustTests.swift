import EventLog
@testable import EventLogCLI
import EventLogTesting
import Foundation
import Testing

/// Nothing lost, nothing changed: what the built `eventlog` was seen to delete, lose or alter,
/// each tried again from outside.
@Suite struct TrustTests {
    let dir = TemporaryDirectory()

    @Test func aFailedImportRemovesOnlyWhatItCreated() throws {
        try "{bad\n".write(toFile: dir.file("bad.jsonl"), atomically: true, encoding: .utf8)
        // A directory of someone else's files: nothing in it goes.
        let docs = dir.file("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        try "hi".write(toFile: docs + "/thesis.txt", atomically: true, encoding: .utf8)
        let failed = try runEventlog(["import", dir.file("bad.jsonl"), "--db", docs])
        #expect(failed.code == 2, "\(failed.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: docs) == ["thesis.txt"])
        // `--db ..` seen from inside a directory: the parent keeps everything.
        let parent = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(try runEventlog(["import", dir.file("bad.jsonl"), "--db", docs + "/.."]).code == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == parent)
        // A new database is gone again; an existing one, even empty, stays.
        #expect(try runEventlog(["import", dir.file("bad.jsonl"), "--db", dir.file("new.lmdb")]).code == 2)
        #expect(!FileManager.default.fileExists(atPath: dir.file("new.lmdb")))
        #expect(try runEventlog(["import", "-", "--db", dir.file("empty.lmdb")], stdin: "").code == 0)
        #expect(try runEventlog(["import", dir.file("bad.jsonl"), "--db", dir.file("empty.lmdb")]).code == 2)
        #expect(FileManager.default.fileExists(atPath: dir.file("empty.lmdb/data.mdb")))
    }

    /// Another process that appended to the database a failing command created keeps its
    /// events: the files go only while the log in them is still empty.
    @Test func aCreatedDatabaseWithSomeoneElsesEventsIsKept() throws {
        let path = dir.file("shared.lmdb")
        let created = NewDatabase(at: path)
        _ = try EventStore(path: path)
        #expect(try runEventlog(["import", "-", "--db", path], stdin: #"{"stream":"s","type":"t"}"#).code == 0)
        created.removeIfStillEmpty()
        #expect(try runEventlog(["info", "--json", "--db", path]).out.contains(#""events":1"#))
        let untouched = NewDatabase(at: dir.file("empty.lmdb"))
        _ = try EventStore(path: dir.file("empty.lmdb"))
        untouched.removeIfStillEmpty()
        #expect(!FileManager.default.fileExists(atPath: dir.file("empty.lmdb")))
    }

    /// Any writing command that fails, and an import interrupted before its first commit,
    /// leave no database they created behind (and nothing else they did not create).
    @Test func failingAndInterruptedWritersLeaveNoNewDatabase() throws {
        let mine = dir.file("mine")
        try FileManager.default.createDirectory(atPath: mine, withIntermediateDirectories: true)
        try "x".write(toFile: mine + "/notes", atomically: true, encoding: .utf8)
        for command in [["objects", "save", "BlogPost", #"{"id":"","title":"a"}"#], ["objects", "delete", "BlogPost", "nope"],
                        ["open", "botmessages://nowhere"], ["rebuild"]] {
            let result = try runEventlog(command + ["--db", mine])
            #expect([2, 3].contains(result.code), "\(command): \(result.err)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: mine) == ["notes"], "\(command)")
        }
        let lines = (0..<400_000).map { #"{"stream":"s","type":"t","payload":\#($0)}"# }.joined(separator: "\n")
        try lines.write(toFile: dir.file("many.jsonl"), atomically: true, encoding: .utf8)
        // Ctrl-C, and the hang-up of a closed terminal or ssh session.
        for number in [SIGINT, SIGHUP] {
            let db = dir.file("interrupted-\(number).lmdb")
            let process = try spawnEventlog(["import", dir.file("many.jsonl"), "--db", db], interruptible: true)
            let err = Pipe()
            process.standardError = err
            try process.run()
            // Interrupt once the import has begun its one transaction.
            try waitForFile(db + "/data.mdb", of: process)
            usleep(200_000)
            #expect(process.isRunning)
            kill(process.processIdentifier, number)
            let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 128 + number, "\(message)")
            #expect(message == "Interrupted: nothing was imported\n")
            #expect(!FileManager.default.fileExists(atPath: db))
        }
        // Started with the hang-up ignored (nohup), an import goes on through it.
        let kept = dir.file("nohup.lmdb")
        let process = try spawnEventlog(["import", dir.file("many.jsonl"), "--db", kept], ignoringHangUp: true)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        try waitForFile(kept + "/data.mdb", of: process)
        usleep(200_000)
        #expect(process.isRunning)
        kill(process.processIdentifier, SIGHUP)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(try runEventlog(["info", "--json", "--db", kept]).out.contains(#""events":400000"#))
    }

    @Test func demoForceReplacesTheLogAndNothingElse() throws {
        let db = dir.file("demo.lmdb")
        #expect(try runEventlog(["demo", "--plans", "5", "--db", db]).code == 0)
        try "mine".write(toFile: db + "/notes.txt", atomically: true, encoding: .utf8)
        let again = try runEventlog(["demo", "--plans", "5", "--force", "--db", db])
        #expect(again.code == 0, "\(again.err)")
        #expect(try String(contentsOfFile: db + "/notes.txt", encoding: .utf8) == "mine")
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
    }

    /// A first launch killed between LMDB creating data.mdb and writing its pages leaves an
    /// empty file beside the creation marker: no log yet. The commands that need one say so,
    /// and demo, a writer, makes it there.
    @Test func anUnfinishedCreationIsNoLogAndDemoMakesOne() throws {
        let db = dir.file("unfinished.lmdb")
        try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: false)
        for file in ["data.mdb", "data.mdb.creating"] { #expect(FileManager.default.createFile(atPath: db + "/" + file, contents: nil)) }
        for command in [["rebuild"], ["compact", "--keep-last", "1"], ["info"]] {
            let refused = try runEventlog(command + ["--db", db])
            #expect(refused.code == 3 && refused.err.contains("no event log at \(db)"), "\(command): \(refused.err)")
        }
        let made = try runEventlog(["demo", "--plans", "5", "--db", db])
        #expect(made.code == 0, "\(made.err)")
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
        #expect(!FileManager.default.fileExists(atPath: db + "/data.mdb.creating"))
    }

    /// Past the 64 MiB the map starts with, from a file and from stdin, in one transaction
    /// and in batches: the map grows and every event is stored.
    @Test func anImportGrowsTheMap() throws {
        let payload = String(repeating: "x", count: 1 << 20)
        let lines = (0..<80).map { #"{"stream":"s","type":"big","payload":"\#(payload)\#($0)"}"# }.joined(separator: "\n")
        try lines.write(toFile: dir.file("big.jsonl"), atomically: true, encoding: .utf8)
        for (name, arguments, stdin) in [("file", [dir.file("big.jsonl")], false), ("file-batch", [dir.file("big.jsonl"), "--batch", "7"], false),
                                        ("stdin", ["-"], true), ("stdin-batch", ["-", "--batch", "7"], true)] {
            let db = dir.file("\(name).lmdb")
            let process = try spawnEventlog(["import"] + arguments + ["--db", db])
            if stdin { process.standardInput = FileHandle(forReadingAtPath: dir.file("big.jsonl")) }
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(name)")
            let info = try StateValue(json: try runEventlog(["info", "--json", "--db", db]).out)
            #expect(info["events"] == 80, "\(name)")
            #expect((info["mapBytes"]?.intValue ?? 0) > 64 << 20, "\(name)")
        }
    }

    @Test func nestingBeyondTheLimitIsRefusedAndTheDatabaseStaysReadable() throws {
        let db = dir.file("deep.lmdb")
        let deepArray = String(repeating: "[", count: 510) + String(repeating: "]", count: 510)
        let save = try runEventlog(["objects", "save", "Note", #"{"deep":\#(deepArray)}"#, "--db", db])
        #expect(save.code == 2)
        #expect(save.err.contains("levels deep; the limit is 256"), "\(save.err)")
        let longPath = (0..<600).map { "k\($0)" }.joined(separator: ".")
        let hugePath = (0..<50_000).map { _ in "k" }.joined(separator: ".")
        for path in [longPath, hugePath] {
            let result = try runEventlog(["import", "-", "--db", db], stdin: #"{"stream":"s","type":"t","writes":[{"path":"\#(path)","new":1}]}"#)
            #expect(result.code == 2, "\(result.err.prefix(200))")
        }
        _ = try runEventlog(["objects", "save", "Note", #"{"title":"fine"}"#, "--db", db])
        for command in [["verify"], ["export"], ["bisect", "--where", "exists(x)"]] {
            let result = try runEventlog(command + ["--db", db])
            #expect([0, 1].contains(result.code), "\(command): \(result.err)")
        }
    }

    @Test func exportImportKeepsEveryValue() throws {
        let db = dir.file("a.lmdb")
        let events = [
            #"{"stream":"s","type":"t","writes":[{"path":"o","new":{"a\nb":1,"tab\t":[-0.0,9223372036854775807,-9223372036854775808,1.7976931348623157e+308,5e-324]}}]}"#,
            #"{"stream":"s","type":"t","writes":[{"path":"o[\"a\\nb\"]","old":1,"new":"\u001b[31m\u0000"}]}"#,
            #"{"stream":"s\u2028","type":"t","time":"9999-12-31T23:59:59.999999Z","payload":"\ud83d\ude00"}"#,
            #"{"stream":"s","type":"t","time":"0000-01-01T00:00:00Z"}"#,
        ]
        #expect(try runEventlog(["import", "-", "--db", db], stdin: events.joined(separator: "\n")).code == 0)
        let first = try runEventlog(["export", "--db", db]).out
        try first.write(toFile: dir.file("a.jsonl"), atomically: true, encoding: .utf8)
        #expect(try runEventlog(["import", dir.file("a.jsonl"), "--db", dir.file("b.lmdb")]).code == 0)
        #expect(try runEventlog(["export", "--db", dir.file("b.lmdb")]).out == first)
        #expect(try runEventlog(["snapshot", "--path", #"o["a\nb"]"#, "--db", dir.file("b.lmdb")]).out == "\"\\u001b[31m\\u0000\"\n")
        #expect(try runEventlog(["bisect", "--against", db, "--db", dir.file("b.lmdb")]).out.hasPrefix("no bad event in range"))
    }

    @Test func inputThatWouldNotComeBackTheSameIsRefused() throws {
        let db = dir.file("r.lmdb")
        let cases: [(String, String)] = [
            (#"{"stream":"s","type":"t","writes":[{"path":"v","new":1e400}]}"#, "beyond the range of a double"),
            (#"{"stream":"s","type":"t","time":"2023-02-29T00:00:00Z"}"#, "month 2 of 2023 has days 1 to 28, not 29"),
            (#"{"stream":"s","type":"t","time":"2026-02-30T00:00:00Z"}"#, "month 2 of 2026 has days 1 to 28, not 30"),
            (#"{"stream":"s","type":"t","time":"2026-01-01T00:00:00+24:00"}"#, "the offset must be under 24 hours and its minutes under 60"),
            (#"{"stream":"s","type":"t","time":"2026-01-01T00:00:00+05:60"}"#, "the offset must be under 24 hours and its minutes under 60"),
            (#"{"stream":"s","type":"t","time":"2026-01-01T00:00:60Z"}"#, "second 60 is a leap second, which the log's clock does not have"),
            (#"{"stream":"s","type":"t","time":"9999-12-31T23:59:59-01:00"}"#, "it falls outside the years 0000 to 9999 in UTC"),
            (#"{"stream":"s","type":"t","time":"2026-01-01T00:00:00.1234567Z"}"#, "the fraction is finer than a microsecond, which the log keeps"),
        ]
        for (line, reason) in cases {
            let result = try runEventlog(["import", "-", "--db", db], stdin: line)
            #expect(result.code == 2 && result.err.contains(reason), "\(line): \(result.err)")
        }
        // Bytes that are not UTF-8, on stdin and in a file.
        var bytes = Data(#"{"stream":"s","type":"t","payload":"a"#.utf8)
        bytes.append(contentsOf: [0xFF, 0xFE])
        bytes.append(contentsOf: Data(#"b"}"#.utf8))
        try bytes.write(to: URL(fileURLWithPath: dir.file("bad.jsonl")))
        let fromFile = try runEventlog(["import", dir.file("bad.jsonl"), "--db", db])
        #expect(fromFile.code == 2 && fromFile.err.contains("not valid UTF-8"), "\(fromFile.err)")
        let process = try spawnEventlog(["import", "-", "--db", db])
        process.standardInput = FileHandle(forReadingAtPath: dir.file("bad.jsonl"))
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 2)
        #expect(!FileManager.default.fileExists(atPath: db))
        let leap = try runEventlog(["import", "-", "--db", db], stdin: #"{"stream":"s","type":"t","time":"2024-02-29T23:59:59.5+05:30"}"#)
        #expect(leap.code == 0, "\(leap.err)")
        #expect(try runEventlog(["log", "--json", "--db", db]).out.contains(#""time":"2024-02-29T18:29:59.500000Z""#))
    }

    /// The documented example (docs/cli.md, objects): an imported copy answers object queries as the original does.
    @Test func anImportedCopyHasItsObjectsReadModel() throws {
        let original = dir.file("demo.lmdb")
        #expect(try runEventlog(["demo", "--plans", "30", "--db", original]).code == 0)
        let exported = try runEventlog(["export", "--db", original]).out
        try exported.write(toFile: dir.file("session.jsonl"), atomically: true, encoding: .utf8)
        let copy = dir.file("copy.lmdb")
        #expect(try runEventlog(["import", dir.file("session.jsonl"), "--batch", "50", "--db", copy]).code == 0)
        let listed = try runEventlog(["objects", "list", "BlogPost", "--db", original]).out
        #expect(!listed.isEmpty)
        #expect(try runEventlog(["objects", "list", "BlogPost", "--db", copy]).out == listed)
        #expect(try runEventlog(["verify", "--db", copy]).code == 0)
    }

    @Test func aDamagedReadModelIsFoundByVerifyAndRebuilt() throws {
        let db = dir.file("objects.lmdb")
        for title in ["one", "two", "three"] {
            #expect(try runEventlog(["objects", "save", "Note", #"{"title":"\#(title)"}"#, "--db", db]).code == 0)
        }
        // Flip one byte of the stored title "two" (the read model's copy; the log's copy sits in
        // a record whose checksum would catch it too, so flip the last occurrence only).
        let path = db + "/data.mdb"
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        let needle = Data("three".utf8)
        let found = try #require(data.lastRange(of: needle))
        data[found.lowerBound] ^= 0x01
        try data.write(to: URL(fileURLWithPath: path))
        let verify = try runEventlog(["verify", "--db", db])
        #expect(verify.code == 1, "\(verify.out)\(verify.err)")
        #expect(verify.out.contains("read model"), "\(verify.out)")
        #expect(try runEventlog(["rebuild", "--db", db]).out == "rebuilt the objects' read model: 3 objects\n")
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
    }

    @Test func aSaveWithoutAnIDAlwaysCreates() throws {
        let db = dir.file("notes.lmdb")
        #expect(try runEventlog(["objects", "save", "Note", #"{"id":"00000003","title":"mine"}"#, "--db", db]).code == 0)
        #expect(try runEventlog(["objects", "save", "Note", #"{"title":"two"}"#, "--db", db]).code == 0)
        let third = try StateValue(json: try runEventlog(["objects", "save", "Note", #"{"title":"three"}"#, "--json", "--db", db]).out)
        #expect(third["version"] == 1)
        #expect(third["id"] != "00000003")
        let mine = try StateValue(json: try runEventlog(["objects", "get", "Note", "00000003", "--json", "--db", db]).out)
        #expect(mine["title"] == "mine")
    }

    @Test func anInterruptedImportResumes() throws {
        let db = dir.file("resume.lmdb")
        let all = counterEvents(key: "n", count: 300)
        let lines = all.split(separator: "\n")
        #expect(try runEventlog(["import", "-", "--db", db], stdin: lines.prefix(120).joined(separator: "\n")).code == 0)
        // The export of a whole source log, imported again with --resume, skips what is there.
        let source = dir.file("source.lmdb")
        #expect(try runEventlog(["import", "-", "--db", source], stdin: all).code == 0)
        try runEventlog(["export", "--db", source]).out.write(toFile: dir.file("all.jsonl"), atomically: true, encoding: .utf8)
        let refused = try runEventlog(["import", dir.file("all.jsonl"), "--db", db])
        #expect(refused.code == 2 && refused.err.contains("add --resume"), "\(refused.err)")
        // Only the copy made with the same times matches: import the first 120 from the export.
        let exact = dir.file("exact.lmdb")
        let exported = try String(contentsOfFile: dir.file("all.jsonl"), encoding: .utf8).split(separator: "\n")
        #expect(try runEventlog(["import", "-", "--db", exact], stdin: exported.prefix(120).joined(separator: "\n")).code == 0)
        let resumed = try runEventlog(["import", dir.file("all.jsonl"), "--resume", "--batch", "50", "--db", exact])
        #expect(resumed.out == "imported 180 events (seq 121-300); skipped 120 events the log already held\n", "\(resumed.err)")
        #expect(try runEventlog(["export", "--db", exact]).out == exported.joined(separator: "\n") + "\n")
        // A log whose events differ (other times) is refused, not merged.
        let differs = try runEventlog(["import", dir.file("all.jsonl"), "--resume", "--db", db])
        #expect(differs.code == 2 && differs.err.contains("line 1: event 1 differs"), "\(differs.err)")
    }

    @Test func aPredicateOverAPathNoStateHoldsIsWarnedOf() throws {
        let db = dir.file("demo.lmdb")
        #expect(try runEventlog(["demo", "--plans", "10", "--db", db]).code == 0)
        let typo = try runEventlog(["bisect", "--where", #"messenger.selectedtab == "bots""#, "--db", db])
        #expect(typo.code == 1)
        #expect(typo.err.hasPrefix("warning: no state in 1-"), "\(typo.err)")
        #expect(typo.err.hasSuffix(" holds messenger.selectedtab, which reads as null; did you mean messenger.selectedTab?\n"), "\(typo.err)")
        let fine = try runEventlog(["bisect", "--where", #"messenger.selectedTab == "nowhere""#, "--db", db])
        #expect(fine.code == 1 && fine.err.isEmpty, "\(fine.err)")
    }

    @Test func importRefusesInputsWithoutEnd() throws {
        let zero = try runEventlog(["import", "/dev/zero", "--db", dir.file("z.lmdb")])
        #expect(zero.code == 2 && zero.err.contains("longer than"), "\(zero.err)")
        let directory = try runEventlog(["import", dir.path, "--db", dir.file("d.lmdb")])
        #expect(directory.err == "Error: \(dir.path) is a directory, not a file of JSON lines\n")
    }
}

/// Damage is always found: bytes flipped all over a real database, each tried from outside.
@Suite struct StorageDamageTests {
    let dir = TemporaryDirectory()

    /// Every page, at offsets in its header, node pointers, nodes and meta fields: `verify`,
    /// `salvage` and `export` exit with a documented code and never die by a signal; a flip
    /// `verify` passes changed nothing a reader sees (the export is byte-identical); and a flip
    /// of the page number of any page in use (all but the free ones) is reported.
    @Test func aFlippedByteAnywhereIsFoundOrHarmless() throws {
        let original = dir.file("demo.lmdb")
        #expect(try runEventlog(["demo", "--plans", "20", "--db", original]).code == 0)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: original + "/data.mdb"))
        let export = try runEventlog(["export", "--db", original]).out
        let pageSize = 4096
        let freePages = try #require(Int(mdbStat(["-f", original]).split(separator: "\n")
            .first { $0.contains("Free pages:") }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? ""))
        var unreportedPageNumbers = 0
        for page in 0..<bytes.count / pageSize {
            for offset in [0, 10, 12, 14, 17, 40, 80, 130, 136, 144, 2048, 4000, 4095] {
                let damaged = dir.file("flip.lmdb")
                try? FileManager.default.removeItem(atPath: damaged)
                try FileManager.default.createDirectory(atPath: damaged, withIntermediateDirectories: true)
                var copy = bytes
                copy[page * pageSize + offset] ^= 0x10
                try copy.write(to: URL(fileURLWithPath: damaged + "/data.mdb"))
                let verify = try runEventlog(["verify", "--db", damaged])
                #expect([0, 1].contains(verify.code), "page \(page) offset \(offset): \(verify.code) \(verify.err.prefix(300))")
                // Salvage reads a damaged file without LMDB: it never dies by a signal either.
                try? FileManager.default.removeItem(atPath: dir.file("saved.lmdb"))
                let salvage = try runEventlog(["salvage", "--into", dir.file("saved.lmdb"), "--db", damaged])
                #expect((0...3).contains(salvage.code), "salvage, page \(page) offset \(offset): \(salvage.code) \(salvage.err.prefix(300))")
                // A salvage that succeeds copied every event: none is lost without a word.
                if salvage.code == 0 {
                    let saved = try runEventlog(["export", "--db", dir.file("saved.lmdb")])
                    #expect(saved.out == export, "salvage, page \(page) offset \(offset): exit 0, yet events are missing or changed")
                }
                // A command that reads through LMDB meets the damage as a one-line error, not a
                // signal; an export that succeeds is the whole log.
                let exported = try runEventlog(["export", "--db", damaged])
                #expect([0, 1].contains(exported.code), "export, page \(page) offset \(offset): \(exported.code) \(exported.err.prefix(300))")
                #expect(exported.code != 0 || exported.out == export, "export, page \(page) offset \(offset): exit 0, yet short or changed")
                if verify.code == 0 {
                    #expect(exported.out == export, "page \(page) offset \(offset): passed, yet changed")
                    if offset == 0 { unreportedPageNumbers += 1 }
                }
            }
        }
        #expect(unreportedPageNumbers == freePages)
    }

    /// A damaged tree page, which LMDB would follow into a fault: salvage reads the file
    /// itself and copies the events before the page that held them.
    @Test func salvageReadsADamagedTreeWithoutLMDB() throws {
        let db = dir.file("demo.lmdb")
        #expect(try runEventlog(["demo", "--db", db]).code == 0)
        let original = try runEventlog(["export", "--db", db]).out.split(separator: "\n")
        let path = db + "/data.mdb"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[4 * 4096 + 16] = 0x9B // the first node pointer of a leaf of events
        try bytes.write(to: URL(fileURLWithPath: path))
        let verify = try runEventlog(["verify", "--db", db])
        #expect(verify.code == 1 && verify.out.hasPrefix("problem in the storage: page 4 of database \"events\""), "\(verify.out)")
        let salvage = try runEventlog(["salvage", "--into", dir.file("saved.lmdb"), "--db", db])
        #expect(salvage.code == 1)
        #expect(salvage.out.contains("left behind: event ") && salvage.out.contains("(missing: the page that held it is damaged)"), "\(salvage.out)")
        #expect(try runEventlog(["verify", "--db", dir.file("saved.lmdb")]).code == 0)
        // What it copied is the original's prefix, byte for byte.
        let saved = try runEventlog(["export", "--db", dir.file("saved.lmdb")]).out.split(separator: "\n")
        #expect(!saved.isEmpty && saved.count < original.count)
        #expect(Array(original.prefix(saved.count)) == saved)
    }

    /// A zeroed tree page makes LMDB fail one of its own assertions or read past its map:
    /// the command still says so in one line (LMDB's text and its abort, or the signal, are
    /// replaced), with exit 1. The page is the first whose zeroing makes `export` fault
    /// (pages freed by copy-on-write are not read, and a zeroed root is a clean LMDB error),
    /// so the test holds whatever the demo's layout.
    @Test func anAssertionLMDBFailsIsOneLine() throws {
        let db = dir.file("demo.lmdb")
        #expect(try runEventlog(["demo", "--db", db]).code == 0)
        let path = db + "/data.mdb"
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        var noticed = false
        for page in 2..<original.count / 4096 where !noticed {
            var bytes = original
            bytes.replaceSubrange(page * 4096..<(page + 1) * 4096, with: Data(count: 4096))
            try bytes.write(to: URL(fileURLWithPath: path))
            noticed = try runEventlog(["export", "--db", db]).err.hasPrefix("Error: the database is damaged: reading it faulted")
        }
        #expect(noticed, "no zeroed page made export fault")
        for command in ["export", "log", "replay"] {
            let result = try runEventlog([command, "--db", db])
            #expect(result.code == 1, "\(command): \(result.err)")
            #expect(result.err.hasPrefix("Error: the database") && result.err.split(separator: "\n").count == 1, "\(command): \(result.err)")
        }
    }

    @Test func aTruncatedOrEmptiedFileIsReportedNotFaultedOn() throws {
        let db = dir.file("demo.lmdb")
        #expect(try runEventlog(["demo", "--plans", "20", "--db", db]).code == 0)
        let path = db + "/data.mdb"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        truncate(path, off_t(size / 2))
        for command in [["verify"], ["info"], ["log"], ["export", "--to", "3"], ["snapshot"]] {
            let result = try runEventlog(command + ["--db", db])
            #expect(result.code == 1, "\(command): \(result.err)")
            #expect(result.err.contains("truncated") || result.out.contains("truncated"), "\(command): \(result.out)\(result.err)")
        }
        truncate(path, 0)
        let write = try runEventlog(["import", "-", "--db", db], stdin: #"{"stream":"s","type":"t"}"#)
        #expect(write.code == 1 && write.err.contains("is empty (0 bytes)"), "\(write.err)")
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0)
    }

    /// A data file left empty while another process holds LMDB's creating lock is a database
    /// being created, not damage: a reader waits for its meta pages (for as long as the lock is
    /// held, past the one second it waits for a creator to take it).
    @Test func anEmptyDataFileUnderTheCreatorsLockIsWaitedFor() throws {
        let source = dir.file("source.lmdb")
        #expect(try runEventlog(["import", "-", "--db", source], stdin: #"{"stream":"s","type":"t"}"#).code == 0)
        let db = dir.file("creating.lmdb")
        try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: db + "/data.mdb", contents: nil))
        let lockFile = open(db + "/lock.mdb", O_RDWR | O_CREAT, 0o644)
        defer { close(lockFile) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_len = 1
        #expect(fcntl(lockFile, F_SETLK, &lock) == 0)
        let reader = try spawnEventlog(["info", "--json", "--db", db])
        let out = Pipe()
        reader.standardOutput = out
        reader.standardError = FileHandle.nullDevice
        try reader.run()
        // The "creator" finishes after the reader's first second: the meta pages appear, then
        // the lock goes.
        usleep(1_500_000)
        let pages = try Data(contentsOf: URL(fileURLWithPath: source + "/data.mdb"))
        let handle = try #require(FileHandle(forWritingAtPath: db + "/data.mdb"))
        try handle.write(contentsOf: pages)
        try handle.close()
        lock.l_type = Int16(F_UNLCK)
        #expect(fcntl(lockFile, F_SETLK, &lock) == 0)
        let info = try StateValue(json: String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        reader.waitUntilExit()
        #expect(reader.terminationStatus == 0)
        #expect(info["events"] == 1)
    }

    /// A flipped byte in the newest record locks nothing: verify names it, the good part
    /// reads, and salvage copies it.
    @Test func damageAfterTheLastKeyframeLeavesTheGoodPartReadable() throws {
        let db = dir.file("log.lmdb")
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "n", count: 40)).code == 0)
        let path = db + "/data.mdb"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        // The newest record is the one whose write sets n to 39: its new value, zigzag-encoded.
        let record = try #require(bytes.range(of: Data([0x00, 0x01, 0x6E, 0x03, 0x4C, 0x03, 0x4E])))
        bytes[record.lowerBound + 6] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path))
        let verify = try runEventlog(["verify", "--db", db])
        #expect(verify.code == 1 && verify.out.hasPrefix("problem at seq 40: checksum mismatch"), "\(verify.out)\(verify.err)")
        #expect(try runEventlog(["export", "--to", "10", "--db", db]).out.split(separator: "\n").count == 10)
        #expect(try runEventlog(["snapshot", "39", "--db", db]).out == "{\n  \"n\": 38\n}\n")
        let salvage = try runEventlog(["salvage", "--into", dir.file("saved.lmdb"), "--db", db])
        #expect(salvage.code == 1)
        #expect(salvage.out.hasPrefix("copied events 1-39 into \(dir.file("saved.lmdb"))\nleft behind: event 40 (checksum mismatch"), "\(salvage.out)")
        #expect(try runEventlog(["verify", "--db", dir.file("saved.lmdb")]).out.hasPrefix("ok: 39 events and "))
    }

    /// Creating a database on a full filesystem: LMDB maps its lock file, whose writes to a
    /// hole would fault (`SIGBUS`); it must be exit 3 with nothing left behind. A real full
    /// filesystem needs a tmpfs mount, so root (as CI runs).
    @Test(.enabled(if: getuid() == 0, "mounting a small tmpfs needs root"))
    func creatingADatabaseOnAFullFilesystemFailsCleanly() throws {
        let mountPoint = dir.file("full")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        #expect(try run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", mountPoint]) == 0)
        defer { _ = try? run("/bin/umount", [mountPoint]) }
        // Fill it to the last block.
        _ = try run("/bin/dd", ["if=/dev/zero", "of=\(mountPoint)/fill", "bs=4k", "count=64"])
        let result = try runEventlog(["import", "-", "--db", mountPoint + "/log.lmdb"], stdin: #"{"stream":"s","type":"t"}"#)
        #expect(result.code == 3, "\(result.err.prefix(300))")
        #expect(result.err.contains("No space left on device"), "\(result.err.prefix(300))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: mountPoint) == ["fill"])
    }

    private func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    private func mdbStat(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ["/usr/bin/mdb_stat", "/usr/local/bin/mdb_stat"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/mdb_stat")
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
