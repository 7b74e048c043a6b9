import EventLog
@testable import EventLogCLI
import EventLogTesting
import Foundation
import Testing

@Suite struct MessengerCommandTests {
    let dir = TemporaryDirectory()
    var db: String { dir.file("demo.lmdb") }

    @Test func openPrintsOneLinePerStep() {
        let result = eventlog(["open", "botmessages://avatar/aria-7/expanded", "--db", db])
        #expect(result.code == 0, "\(result.err)")
        let lines = result.out.split(separator: "\n").map(String.init)
        #expect(lines[0] == "plan-2  botmessages://avatar/aria-7/expanded  (url)")
        #expect(lines.count == 9)
        #expect(lines[2].contains("dismissAttachmentExpansion") && lines[2].contains("no-op: messenger.expandedAttachment is already null"))
        #expect(lines[8].hasSuffix("expandAvatar(aria-7)                 applied   messenger.expandedAvatar: null → \"aria-7\""))
    }

    @Test func openRecordsTheOriginAndJSONListsTheEvents() throws {
        let result = eventlog(["open", "botmessages://bots?filter=unread", "--origin", "test", "--json", "--db", db])
        let json = try StateValue(json: result.out)
        #expect(json["status"] == "finished")
        #expect(json["events"]?.arrayValue?.count == 4)
        #expect(json["events[3].writes"] == [
            ["new": "bots", "old": "chats", "path": "messenger.selectedTab"],
            ["new": "unread", "old": .null, "path": "messenger.listFilter"],
        ])
        #expect(json["events[3].origin"] == "test")
    }

    @Test func aMalformedURLIsAnErrorAndAppendsNothing() {
        for url in ["botmessages://nowhere", "https://example.com", "botmessages://avatar/aria-7/sideways"] {
            let result = eventlog(["open", url, "--db", db])
            #expect(result.code == 2)
            #expect(result.err.hasPrefix("Error: \(url): "))
        }
        #expect(!FileManager.default.fileExists(atPath: db))
        #expect(eventlog(["open", "botmessages://home", "--origin", "system", "--db", db]).code == 2)
    }

    @Test func routesListsEveryRouteWithItsSteps() throws {
        let text = eventlog(["routes"]).out
        #expect(text.contains("botmessages://avatar/<id>/expanded\n    go to the list, scroll to the avatar's row and expand it"))
        #expect(text.contains("steps: dismissAttachmentExpansion, clearInThreadSearch, clearListFilter, popToRoot, dismissSheet, scrollToAvatarRow(aria-7), expandAvatar(aria-7)"))
        let json = try StateValue(json: eventlog(["routes", "--json"]).out)
        #expect(json.arrayValue?.count == 12)
    }

    @Test func captureRunsAScriptAndPrintsCaptures() throws {
        let script = dir.file("session.capture")
        try """
            # open a thread, then search it
            open botmessages://conversation/dex-builds
            capture thread navigation.path
            open botmessages://conversation/dex-builds/search?q=failed
            capture search messenger.inThreadSearch
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let result = eventlog(["capture", script, "--db", db])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.out.contains("== thread (after event 8) ==\n[\n  \"thread/dex-builds\"\n]"))
        #expect(result.out.contains("== search (after event 16) ==\n\"failed\""))
        let log = eventlog(["log", "--json", "--from", "2", "--db", db]).out
        #expect(!log.contains("\"origin\":\"url\"") && log.contains("\"origin\":\"capture\""))
    }

    @Test func captureRejectsABadScriptBeforeRunningAnything() throws {
        let script = dir.file("bad.capture")
        try "open botmessages://home\nopen botmessages://nope\n".write(toFile: script, atomically: true, encoding: .utf8)
        let result = eventlog(["capture", script, "--db", db])
        #expect(result.code == 2)
        #expect(result.err == "Error: \(script) line 2: botmessages://nope: unknown destination 'nope' (see 'eventlog routes')\n")
        #expect(!FileManager.default.fileExists(atPath: db))
        #expect(eventlog(["capture", "-", "--db", db], stdin: "wait forever").err == "Error: - line 1: 'wait' takes one duration of at most an hour, such as 250ms or 1.5s\n")
    }

    @Test func demoRecordsAReproducibleSessionAndRefusesToOverwrite() throws {
        let first = eventlog(["demo", "--db", db])
        #expect(first.code == 0, "\(first.err)")
        #expect(first.out.hasPrefix("recorded 80 plans into \(db) as events 1-"))
        let export = eventlog(["export", "--db", db]).out
        let again = eventlog(["demo", "--db", db])
        #expect(again.code == 2)
        #expect(again.err.contains("already holds"))
        #expect(eventlog(["demo", "--force", "--db", db]).code == 0)
        // The same seed records the same bytes.
        #expect(eventlog(["export", "--db", db]).out == export)
        #expect(export.contains("\"time\":\"2026-01-05T09:00"))
        #expect(eventlog(["verify", "--db", db]).code == 0)
    }
}

@Suite struct AnalysisCommandTests {
    let dir = TemporaryDirectory()
    var good: String { dir.file("good.lmdb") }
    var bad: String { dir.file("bad.lmdb") }

    init() {
        _ = eventlog(["demo", "--db", dir.file("good.lmdb")])
        _ = eventlog(["demo", "--regression", "compound-tab-filter", "--db", dir.file("bad.lmdb")])
    }

    /// The first selectBotTab, in the log at `path`, whose filter changes the state.
    func firstFilterChange(_ path: String) throws -> UInt64 {
        var found: UInt64?
        for line in eventlog(["log", "--json", "--db", path]).out.split(separator: "\n") where found == nil {
            let record = try StateValue(json: String(line))
            if record["type"] == "selectBotTab", record["writes"]?.arrayValue?.contains(where: { $0["path"] == "messenger.listFilter" }) == true {
                found = UInt64(record["seq"]!.intValue!)
            }
        }
        return try #require(found)
    }

    @Test func replayOfACorrectRecordingAgrees() throws {
        let result = eventlog(["replay", "--verify", "--db", good])
        #expect(result.code == 0)
        #expect(result.out.contains("today's code agrees with every recomputed step and the read model\n"))
        #expect(result.out.hasSuffix("\n  deploy      32 recomputed\n  messenger   199 recomputed, 2 as recorded\n  navigation  151 recomputed\n  objects     10 as recorded\n  plans       80 as recorded\n  system      1 as recorded\n  updates     25 recomputed\n"),
                "\(result.out.suffix(300))")
        let json = try StateValue(json: eventlog(["replay", "--json", "--db", good]).out)
        #expect(json["divergence"] == .null)
        #expect(json["state"] == (try StateValue(json: eventlog(["snapshot", "--json", "--db", good]).out)))
    }

    @Test func replayWithTheRegressionStopsAtTheFirstFilterChangeAndNamesListFilter() throws {
        let expected = try firstFilterChange(good)
        let result = eventlog(["replay", "--verify", "--regression", "compound-tab-filter", "--json", "--db", good])
        #expect(result.code == 1)
        let json = try StateValue(json: result.out)
        #expect(json["divergence.seq"] == .int(Int64(expected)))
        #expect(json["divergence.type"] == "selectBotTab")
        #expect(json["divergence.missing[0].path"] == "messenger.listFilter")
        #expect(json["divergence.diff[0].path"] == "messenger.listFilter")
        let text = eventlog(["replay", "--verify", "--regression", "compound-tab-filter", "--db", good]).out
        #expect(text.contains("missing write: messenger.listFilter"))
        #expect(text.hasPrefix("divergence at event \(expected)"))
    }

    @Test func bisectWhereFindsTheFirstTabWithoutItsFilter() throws {
        let expression = "messenger.selectedTab == \"bots\" && messenger.listFilter == null"
        let result = eventlog(["bisect", "--where", expression, "--json", "--db", bad])
        #expect(result.code == 0, "\(result.err)")
        let json = try StateValue(json: result.out)
        let linear = try StateValue(json: eventlog(["bisect", "--where", expression, "--linear", "--json", "--db", bad]).out)
        #expect(json["firstBad"] == linear["firstBad"])
        #expect(json["event.type"] == "selectBotTab")
        #expect(json["writes"] == [["new": "bots", "old": "chats", "path": "messenger.selectedTab"]])
        #expect(json["diff"] == [["new": "bots", "old": "chats", "path": "messenger.selectedTab"]])
        #expect(json["firstBad"] == .int(Int64(try firstFilterChange(good))))
        // The app later restores the filter, so the state is not bad-stays-bad: the last event
        // is good and bisect scans. Up to the first bad event it binary-searches.
        #expect(json["scanned"] == true)
        let bounded = try StateValue(json: eventlog(["bisect", "--where", expression, "--to", "\(json["firstBad"]!.intValue! + 1)", "--json", "--db", bad]).out)
        #expect(bounded["firstBad"] == json["firstBad"])
        #expect(bounded["scanned"] == false)
        #expect((bounded["probes"]?.intValue ?? 99) <= 10)
        // The correct recording never shows the bot tab without a filter.
        let clean = eventlog(["bisect", "--where", expression, "--db", good])
        #expect(clean.code == 1)
        #expect(clean.out.hasPrefix("no bad event in range"))
    }

    @Test func bisectReplayAndAgainstAgreeOnTheFaultyRecording() throws {
        let replay = try StateValue(json: eventlog(["bisect", "--replay", "--json", "--db", bad]).out)
        let against = try StateValue(json: eventlog(["bisect", "--against", good, "--json", "--db", bad]).out)
        let expected = StateValue.int(Int64(try firstFilterChange(good)))
        #expect(replay["firstBad"] == expected)
        #expect(replay["actual[1].path"] == "messenger.listFilter")
        #expect(against["firstBad"] == expected)
        #expect(against["against[0].path"] == "messenger.listFilter")
        #expect(eventlog(["bisect", "--against", good, "--db", good]).code == 1)
    }

    @Test func bisectRunUsesExitCodesAsGitBisectRunDoes() throws {
        let expected = try firstFilterChange(good)
        // Bad when the tab is bots without a filter; skip three events around the answer's neighbour.
        let script = """
            case "$EVENTLOG_SEQ" in \(expected - 3)|\(expected - 2)) exit 125;; esac
            grep -q '"selectedTab":"bots","listFilter":null\\|"listFilter":null.*"selectedTab":"bots"' "$EVENTLOG_SNAPSHOT" && exit 1
            exit 0
            """
        let result = try runEventlog(["bisect", "--run", script, "--to", String(expected), "--json", "--db", bad])
        #expect(result.code == 0, "\(result.err)")
        #expect(try StateValue(json: result.out)["firstBad"] == .int(Int64(expected)))
        let aborted = try runEventlog(["bisect", "--run", "exit 200", "--db", bad])
        #expect(aborted.code == 2)
        #expect(aborted.err.contains("bisect aborted: 'exit 200' exited 200 at event"))
    }

    @Test func bisectNeedsExactlyOneModeAndAValidExpression() {
        #expect(eventlog(["bisect", "--db", bad]).err.hasPrefix("Error: say what bad is with --where, --replay, --against or --run"))
        #expect(eventlog(["bisect", "--replay", "--where", "x", "--db", bad]).code == 2)
        let syntax = eventlog(["bisect", "--where", "messenger.selectedTab == ", "--db", bad])
        #expect(syntax.code == 2)
        #expect(syntax.err == "Error: --where column 26: expected a value after '=='\n")
        #expect(eventlog(["bisect", "--replay", "--from", "900", "--db", bad]).code == 2)
    }
}

@Suite struct ObjectCommandTests {
    let dir = TemporaryDirectory()
    var db: String { dir.file("objects.lmdb") }

    @Test func saveGetListDeleteThroughTheCLI() throws {
        let saved = try StateValue(json: eventlog(["objects", "save", "BlogPost", #"{"title":"Hello","views":1}"#, "--json", "--db", db]).out)
        let id = try #require(saved["id"]?.stringValue)
        #expect(saved["version"] == 1)
        #expect(saved["createdAt"] == saved["updatedAt"])
        let updated = try StateValue(json: eventlog(["objects", "save", "BlogPost", "-", "--expect-version", "1", "--json", "--db", db],
                                                    stdin: #"{"id":"\#(id)","title":"Hello again","views":2}"#).out)
        #expect(updated["version"] == 2)
        #expect(updated["createdAt"] == saved["createdAt"])
        #expect(try StateValue(json: eventlog(["objects", "get", "BlogPost", id, "--json", "--db", db]).out)["title"] == "Hello again")
        _ = eventlog(["objects", "save", "BlogPost", #"{"title":"Second"}"#, "--db", db])
        let page = try StateValue(json: eventlog(["objects", "list", "BlogPost", "--limit", "1", "--json", "--db", db]).out)
        #expect(page["objects"]?.arrayValue?.count == 1)
        #expect(page["next"] == .string(id))
        #expect(eventlog(["objects", "delete", "BlogPost", id, "--db", db]).out == "deleted BlogPost \(id)\n")
        #expect(eventlog(["objects", "delete-all", "BlogPost", "--db", db]).out == "deleted 1 BlogPost object\n")
        let log = eventlog(["log", "--db", db]).out
        #expect(log.contains("objects/create") && log.contains("objects/update") && log.contains("objects/delete") && log.contains("objects/deleteAll"))
        #expect(eventlog(["replay", "--verify", "--db", db]).code == 0)
    }

    @Test func refusalsExitTwoAndAppendNothing() {
        _ = eventlog(["objects", "save", "BlogPost", #"{"id":"p1","title":"x"}"#, "--db", db])
        let cases: [([String], String)] = [
            (["objects", "save", "BlogPost", #"{"id":"p1","title":"y"}"#, "--expect-version", "5"], "Error: conflict: BlogPost \"p1\" is at version 1, not the expected 5\n"),
            (["objects", "save", "BlogPost", "[1]"], "Error: the object must be a JSON object\n"),
            (["objects", "save", "BlogPost", "{oops"], "Error: the object is not valid JSON: line 1, column 2: expected a string key\n"),
            (["objects", "save", "Blog Post", "{}"], "Error: invalid object: collection name \"Blog Post\" must be letters, digits and _ (not starting with a digit)\n"),
            (["objects", "get", "BlogPost", "nope"], "Error: no BlogPost with id \"nope\"\n"),
            (["objects", "delete", "BlogPost", "nope"], "Error: no BlogPost with id \"nope\"\n"),
        ]
        for (arguments, message) in cases {
            let result = eventlog(arguments + ["--db", db])
            #expect(result.code == 2, "\(arguments)")
            #expect(result.err == message)
        }
        #expect(eventlog(["info", "--json", "--db", db]).out.contains("\"lastSeq\":1"))
        #expect(eventlog(["objects", "get", "BlogPost", "--db", db]).err.hasPrefix("Error: missing ID\nUsage: eventlog objects get TYPE ID"))
    }

    @Test func theDemoRecordsBlogPosts() throws {
        _ = eventlog(["demo", "--db", db])
        let page = try StateValue(json: eventlog(["objects", "list", "BlogPost", "--json", "--db", db]).out)
        let posts = try #require(page["objects"]?.arrayValue)
        #expect(!posts.isEmpty)
        #expect(posts.allSatisfy { $0["jsonPubDate"]?.stringValue?.count == 16 })
        #expect(eventlog(["replay", "--verify", "--db", db]).code == 0)
    }
}
