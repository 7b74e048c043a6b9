import DemoMessenger
import Effects
import EventLog
import EventLogTesting
import Foundation
import Testing
@testable import EventLogCLI

/// The demo's second release: `selectBotTab`'s arguments changed shape (version 2), and a log
/// recorded by release 1 (`Fixtures/demo-v1.jsonl`, exported by the build of b36d3cc from
/// `eventlog demo`) replays and verifies through its upcaster.
@Suite struct EventVersionTests {
    let dir = TemporaryDirectory()
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/demo-v1.jsonl").path

    /// The release-1 fixture imported into a fresh database.
    func releaseOneLog(_ jsonl: String? = nil) throws -> String {
        let db = dir.file("v1-\(UUID().uuidString).lmdb")
        let source = jsonl.map { text in
            let path = dir.file("edited-\(UUID().uuidString).jsonl")
            #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
            return path
        } ?? Self.fixture
        let imported = try runEventlog(["import", source, "--db", db])
        #expect(imported.code == 0, "\(imported.err)")
        return db
    }

    @Test func aReleaseOneLogVerifiesThroughReleaseTwo() throws {
        let fixture = try String(contentsOfFile: Self.fixture, encoding: .utf8)
        // Keys are sorted: an event's version would come between its type and its writes.
        #expect(fixture.range(of: #""type":"[^"]*","version":"#, options: .regularExpression) == nil
                && fixture.contains(#""payload":{"filter":"unread"}"#), "the fixture is a release-1 log")
        let db = try releaseOneLog()
        let verified = try runEventlog(["replay", "--verify", "--db", db])
        #expect(verified.code == 0, "\(verified.out)\(verified.err)")
        #expect(verified.out.contains("  8 messenger/selectBotTab v1 read through upcasters"), "\(verified.out)")
        let json = try runEventlog(["replay", "--verify", "--json", "--db", db])
        let report = try StateValue(json: json.out)
        #expect(report["upcast"] == [["events": 8, "stream": "messenger", "type": "selectBotTab", "version": 1]])
        #expect(report["newer"] == [] && report["unreadable"] == .null && report["divergence"] == .null)
        // Nothing stored was rewritten: the log exports as it was imported.
        #expect(try runEventlog(["export", "--db", db]).out == fixture)
    }

    @Test func todaysCodeRecordsVersionTwoAndNeedsNoUpcaster() throws {
        let db = dir.file("v2.lmdb")
        #expect(try runEventlog(["demo", "--db", db]).code == 0)
        let exported = try runEventlog(["export", "--db", db]).out
        let selects = exported.split(separator: "\n").filter { $0.contains(#""type":"selectBotTab""#) }
        #expect(!selects.isEmpty && selects.allSatisfy { $0.contains(#""version":2"#) && $0.contains(#""tab":"bots""#) })
        let report = try StateValue(json: try runEventlog(["replay", "--verify", "--json", "--db", db]).out)
        #expect(report["upcast"] == [] && report["divergence"] == .null)
    }

    @Test func aWrongUpcasterFailsAtItsFirstEventNamingTheWrite() throws {
        let db = try releaseOneLog()
        let replay = try runEventlog(["replay", "--verify", "--regression", "wrong-upcaster", "--db", db])
        #expect(replay.code == 1)
        #expect(replay.out.contains("divergence at event 113"), "\(replay.out)")
        #expect(replay.out.contains(#"  upcast  messenger/selectBotTab v2 {"tab":"bots"}"#), "\(replay.out)")
        #expect(replay.out.contains(#"  missing write: messenger.listFilter: null → "unread""#), "\(replay.out)")
        let bisect = try runEventlog(["bisect", "--replay", "--regression", "wrong-upcaster", "--db", db])
        #expect(bisect.code == 0 && bisect.out.hasPrefix("first bad event: 113 "), "\(bisect.out)")
        let json = try StateValue(json: try runEventlog(["replay", "--verify", "--json", "--regression", "wrong-upcaster", "--db", db]).out)
        #expect(json["divergence.seq"] == 113)
        #expect(json["divergence.upcast"] == [["payload": ["tab": "bots"], "stream": "messenger", "type": "selectBotTab", "version": 2]])
    }

    /// An app whose `selectBotTab` is at version 2 but that forgot the upcaster: the first
    /// release-1 `selectBotTab` is its own error, with exit 1, in replay and bisect alike.
    @Test func aMissingUpcasterIsItsOwnError() throws {
        let db = try releaseOneLog()
        let forgetful = EventLogApp(name: "forgetful") { _ in
            var code = Projections()
            code.recompute(["messenger", "navigation"], with: EffectProjection(model: MessengerModel()))
            code.takeAsRecorded(["plans", "system", "objects", "updates", "deploy"])
            return code
        }
        func run(_ arguments: [String]) -> CommandOutcome {
            let out = Captured(), err = Captured()
            let code = EventLogCLI.run(arguments + ["--db", db], environment: [:], console: Console(stdout: out.append, stderr: err.append), app: forgetful)
            return CommandOutcome(code: code, out: out.text, err: err.text)
        }
        let replay = run(["replay"])
        #expect(replay.code == 1)
        #expect(replay.out == "no upcaster for messenger/selectBotTab v1 → v2; first at seq 32 (after 31 replayed events)\n", "\(replay.out)")
        let json = try StateValue(json: run(["replay", "--verify", "--json"]).out)
        #expect(json["unreadable"] == ["reason": "no upcaster for messenger/selectBotTab v1 → v2", "seq": 32, "stream": "messenger",
                                       "type": "selectBotTab", "version": 1])
        let bisect = run(["bisect", "--replay"])
        #expect(bisect.out.hasPrefix("first bad event: 32 ") && bisect.out.contains("today's code cannot read it: no upcaster for messenger/selectBotTab v1 → v2"),
                "\(bisect.out)")
    }

    /// A log from a newer release: its newer events replay as recorded, fail `--verify`
    /// naming the stream, type and versions, and pass it under `--accept-recorded`, counted.
    @Test func aNewerVersionIsTakenAsRecordedAndCounted() throws {
        let lines = try String(contentsOfFile: Self.fixture, encoding: .utf8).split(separator: "\n").map { line -> String in
            guard line.contains(#""seq":113,"#) else { return String(line) }
            var event = try! StateValue(json: String(line))
            try! event.set(3, at: "version")
            try! event.set(nil, at: "checksum")
            return event.json()
        }
        let db = try releaseOneLog(lines.joined(separator: "\n") + "\n")
        let strict = try runEventlog(["replay", "--verify", "--db", db])
        #expect(strict.code == 1)
        #expect(strict.out == "not verified: 1 messenger/selectBotTab v3 newer than today's code (a log from a newer release), replayed as recorded, unchecked"
                + " (--accept-recorded passes them)\n", "\(strict.out)")
        let accepted = try runEventlog(["replay", "--verify", "--accept-recorded", "--json", "--db", db])
        #expect(accepted.code == 0, "\(accepted.out)")
        let report = try StateValue(json: accepted.out)
        #expect(report["newer"] == [["events": 1, "stream": "messenger", "type": "selectBotTab", "version": 3]])
        #expect(report["upcast"] == [["events": 7, "stream": "messenger", "type": "selectBotTab", "version": 1]])
    }

    /// Every effect's version is the one the demo's code reads up to.
    @Test func theEffectsVersionsAreTheCodes() throws {
        let code = try EventLogApp.demo.projections(nil)
        #expect(code.versions(in: "messenger") == MessengerEffect.versions)
        #expect(MessengerEffect.selectBotTab(filter: "unread").version == 2 && MessengerEffect.collapseAvatar.version == 1)
    }
}
