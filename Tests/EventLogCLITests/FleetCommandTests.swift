import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// `eventlog ship`, `pull` and `fleet` against nats-server on loopback, started by the tests:
/// one server, or a cluster of three.
@Suite(.serialized) struct FleetCommandTests {
    let dir = TemporaryDirectory()

    /// A database of `count` counter events, imported by the built binary.
    func log(_ name: String, events count: Int) throws -> String {
        let db = dir.file(name)
        try counterEvents(key: name, count: count).write(toFile: dir.file("\(name).jsonl"), atomically: true, encoding: .utf8)
        #expect(try runEventlog(["import", dir.file("\(name).jsonl"), "--batch", "5000", "--db", db]).code == 0)
        return db
    }

    func logID(_ db: String) throws -> String {
        try #require(try StateValue(json: try runEventlog(["info", "--json", "--db", db]).out)["logId"]?.stringValue)
    }

    /// How many messages the stream holds for each log.
    func streamCounts(_ servers: String) throws -> [String: Int64] {
        let listed = try runEventlog(["fleet", "list", "--json", "--servers", servers])
        guard listed.code == 0, let logs = try StateValue(json: listed.out)["logs"]?.arrayValue else { return [:] }
        return Dictionary(uniqueKeysWithValues: logs.compactMap { log in
            log["logId"]?.stringValue.flatMap { id in log["events"]?.intValue.map { (id, $0) } }
        })
    }

    /// The number of `id`'s events the stream holds, once a `fleet list` answers with it (up to
    /// 30 s): right after a leader dies, a cluster answers no list until it has elected another.
    func settledCount(_ id: String, _ servers: String) throws -> Int64? {
        let deadline = Date().addingTimeInterval(30)
        repeat {
            if let count = try streamCounts(servers)[id] { return count }
            usleep(100_000)
        } while Date() < deadline
        return nil
    }

    /// Waits (up to 30 s) until the stream holds more than `count` of `id`'s events.
    func waitUntilShipping(_ id: String, _ servers: String, past count: Int64 = 0) throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if (try streamCounts(servers)[id] ?? 0) > count { return }
            usleep(20_000)
        }
        Issue.record("no more than \(count) of the events were shipped within 30 s")
    }

    /// Pulls `id` into a new database and checks it exports byte for byte as `original`.
    func expectPulledCopyEquals(_ original: String, id: String, from servers: String) throws {
        let copy = dir.file("copy-\(UUID().uuidString)")
        let pulled = try runEventlog(["pull", "--servers", servers, "--log", id, "--db", copy])
        #expect(pulled.code == 0, "\(pulled.err)")
        #expect(try runEventlog(["verify", "--db", copy]).code == 0)
        let a = try runEventlog(["export", "--db", original]).out, b = try runEventlog(["export", "--db", copy]).out
        #expect(!a.isEmpty && a == b)
        #expect(try logID(copy) == id)
    }

    /// Messages of at most 700 bytes carry one record each (the 512 bytes kept for headers
    /// leave room for no second): a ship of 30,000 takes seconds, and the kill lands in it. A
    /// ship that ended before the kill (the sanitizers slow the polling more than the ship) is
    /// followed by 30,000 more events and another, at most three times.
    @Test func aShipperKilledMidBatchAndRestartedLosesAndDuplicatesNothing() throws {
        let nats = try NATSServers(maxPayload: 700)
        let db = try log("killed", events: 30_000)
        let id = try logID(db)
        var events = 30_000, killedMidShip = false
        for _ in 0..<3 where !killedMidShip {
            let before = try streamCounts(nats.urls)[id] ?? 0
            let shipper = try spawnEventlog(["ship", "--servers", nats.urls, "--db", db])
            shipper.standardOutput = FileHandle.nullDevice
            try shipper.run()
            try waitUntilShipping(id, nats.urls, past: before)
            kill(shipper.processIdentifier, SIGKILL)
            shipper.waitUntilExit()
            killedMidShip = shipper.terminationReason == .uncaughtSignal
            if !killedMidShip {
                #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "killed", count: 30_000, start: events)).code == 0)
                events += 30_000
            }
        }
        // Under a sanitizer each poll spawns a slowed child and every ship may end before its kill:
        // there the re-ship's exactness is still checked, the kill's timing only in the plain run.
        #expect(killedMidShip || ProcessInfo.processInfo.environment["EVENTLOG_TEST_SANITIZER"] != nil)
        let again = try runEventlog(["ship", "--servers", nats.urls, "--json", "--db", db])
        #expect(again.code == 0, "\(again.err)")
        #expect(try StateValue(json: again.out)["through"] == .int(Int64(events)))
        #expect(try streamCounts(nats.urls)[id] == Int64(events))
        try expectPulledCopyEquals(db, id: id, from: nats.urls)
    }

    /// A retention policy stored with `compact --policy` never drops what the log shipped
    /// but the stream does not hold yet: the writers of the app (with the fleet family) hold
    /// their steps at the shipped position, and catch up once the rest is shipped.
    @Test func aPolicyWaitsForTheShipBeforeDroppingEvents() throws {
        let nats = try NATSServers()
        let db = try log("held", events: 50)
        #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0)
        #expect(try runEventlog(["compact", "--policy", "keep-last=10", "--db", db]).code == 0)
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "held", count: 500, start: 50)).code == 0)
        func info() throws -> StateValue { try StateValue(json: try runEventlog(["info", "--json", "--db", db]).out) }
        let held = try info()
        #expect(held["firstSeq"] == 51 && held["lastSeq"] == 550, "\(held)")
        #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0)
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "held", count: 1, start: 550)).code == 0)
        let after = try info()
        #expect((after["firstSeq"]?.intValue ?? 0) > 500 && after["lastSeq"] == 551, "\(after)")
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
    }

    @Test func aServerThatIsDownExitsThreeAndShippingResumesWhenItIsBack() throws {
        let nats = try NATSServers()
        let db = try log("down", events: 500)
        #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0)
        nats.kill(0)
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "down", count: 100, start: 500)).code == 0)
        let down = try runEventlog(["ship", "--servers", nats.urls, "--timeout", "1", "--db", db])
        #expect(down.code == 3)
        #expect(down.err.hasPrefix("Error: cannot reach \(nats.urls)") && down.err.split(separator: "\n").count == 1, "\(down.err)")
        try nats.restart(0)
        let back = try runEventlog(["ship", "--servers", nats.urls, "--json", "--db", db])
        #expect(try StateValue(json: back.out)["shipped"] == 100, "\(back.err)")
        try expectPulledCopyEquals(db, id: try logID(db), from: nats.urls)
    }

    /// Messages of at most 1 KiB carry runs of four records or so, so the ship is still under
    /// way when the leader dies (in runs of a thousand it would be over).
    @Test func aClusterLosingItsLeaderMidShipLosesNothing() throws {
        let nats = try NATSServers(count: 3, maxPayload: 1_024)
        let db = try log("cluster", events: 20_000)
        let id = try logID(db)
        let shipper = try spawnEventlog(["ship", "--servers", nats.urls, "--replicas", "3", "--db", db])
        let output = Pipe()
        shipper.standardOutput = FileHandle.nullDevice
        shipper.standardError = output
        try shipper.run()
        try waitUntilShipping(id, nats.urls)
        let leader = try #require(nats.leader(of: "EVENTLOG"))
        nats.kill(leader)
        let err = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        shipper.waitUntilExit()
        #expect(shipper.terminationStatus == 0, "\(err)")
        let survivor = nats.url((leader + 1) % 3)
        #expect(try settledCount(id, survivor) == 20_000)
        try expectPulledCopyEquals(db, id: id, from: survivor)
    }

    /// Ships of a growing log while a node of a 3-replica cluster (the stream's leader or a
    /// follower, chosen at random) is killed with SIGKILL at a random moment and started
    /// again: 25 kills (`killRounds`), at least 20 within 210 s. A ship rides the kill out or stops as
    /// unavailable (exit 3), never refused; after a last ship, a pull from each node gives the
    /// log byte for byte, with no duplicate and no gap (the stream holds exactly its events).
    /// Messages of at most 1 KiB (runs of four records or so) keep a ship of 2,000 events
    /// under way for the kill to land in.
    @Test func aClusterLosingNodesAtRandomMomentsMidShipLosesAndDuplicatesNothing() throws {
        let nats = try NATSServers(count: 3, maxPayload: 1_024)
        let db = try log("killloop", events: 2_000)
        let id = try logID(db)
        #expect(try runEventlog(["ship", "--servers", nats.urls, "--replicas", "3", "--db", db]).code == 0)
        var events = 2_000, kills = 0
        let total = killRounds(25)
        // A round is mostly the node's restart (about 6 s here); the sanitizers slow the rest.
        let deadline = Date().addingTimeInterval(210)
        while kills < total, Date() < deadline {
            #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "killloop", count: 2_000, start: events)).code == 0)
            events += 2_000
            let shipper = try spawnEventlog(["ship", "--servers", nats.urls, "--db", db])
            let output = Pipe()
            shipper.standardOutput = FileHandle.nullDevice
            shipper.standardError = output
            try shipper.run()
            usleep(UInt32.random(in: 0...400_000))
            let leader = nats.leader(of: "EVENTLOG")
            let victim = Bool.random() ? leader ?? Int.random(in: 0..<3) : ((leader ?? 0) + Int.random(in: 1...2)) % 3
            nats.kill(victim)
            kills += 1
            try nats.restart(victim)
            let err = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            shipper.waitUntilExit()
            #expect([0, 3].contains(shipper.terminationStatus), "kill \(kills): \(err)")
        }
        #expect(kills >= total * 4 / 5)
        let last = try runEventlog(["ship", "--servers", nats.urls, "--json", "--db", db])
        try #require(last.code == 0, "\(last.err)")
        #expect(try StateValue(json: last.out)["through"] == .int(Int64(events)))
        for node in 0..<3 {
            #expect(try settledCount(id, nats.url(node)) == Int64(events))
            try expectPulledCopyEquals(db, id: id, from: nats.url(node))
        }
    }

    /// With two of three nodes down the stream has no quorum: a ship fails as unavailable
    /// (exit 3) in one line, and once they are back the next ship completes, losing nothing.
    @Test func aShipWithoutQuorumIsUnavailableAndTheNextShipCompletes() throws {
        let nats = try NATSServers(count: 3)
        let db = try log("quorum", events: 1_000)
        let id = try logID(db)
        #expect(try runEventlog(["ship", "--servers", nats.urls, "--replicas", "3", "--db", db]).code == 0)
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "quorum", count: 500, start: 1_000)).code == 0)
        nats.kill(1)
        nats.kill(2)
        let down = try runEventlog(["ship", "--servers", nats.url(0), "--timeout", "1", "--db", db])
        #expect(down.code == 3, "\(down.err)")
        #expect(down.err.hasPrefix("Error: ") && down.err.split(separator: "\n").count == 1, "\(down.err)")
        try nats.restart(1)
        try nats.restart(2)
        let back = try runEventlog(["ship", "--servers", nats.urls, "--json", "--db", db])
        #expect(back.code == 0, "\(back.err)")
        #expect(try StateValue(json: back.out)["through"] == 1_500)
        #expect(try streamCounts(nats.urls)[id] == 1_500)
        try expectPulledCopyEquals(db, id: id, from: nats.url(2))
    }

    @Test func followingShipperAndPullerCarryNewEventsAsTheyCommit() throws {
        let nats = try NATSServers()
        let db = try log("followed", events: 10)
        let id = try logID(db)
        let copy = dir.file("followed-copy")
        let shipper = try spawnEventlog(["ship", "--servers", nats.urls, "--follow", "--db", db])
        let shipped = Pipe()
        shipper.standardOutput = shipped
        shipper.standardError = FileHandle.nullDevice
        try shipper.run()
        try waitUntilShipping(id, nats.urls)
        let puller = try spawnEventlog(["pull", "--servers", nats.urls, "--log", id, "--follow", "--db", copy])
        let pulled = Pipe()
        puller.standardOutput = pulled
        puller.standardError = FileHandle.nullDevice
        try puller.run()
        // Events committed while both follow reach the copy.
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "followed", count: 40, start: 10)).code == 0)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, (try? EventStore(path: copy, options: { var o = EventStore.Options(); o.readOnly = true; return o }()).lastSeq()) != 50 {
            usleep(50_000)
        }
        // Both end when their reader goes away, as log --follow does.
        try shipped.fileHandleForReading.close()
        try pulled.fileHandleForReading.close()
        shipper.waitUntilExit()
        puller.waitUntilExit()
        #expect(shipper.terminationStatus == 0 && puller.terminationStatus == 0)
        #expect(try runEventlog(["export", "--db", copy]).out == runEventlog(["export", "--db", db]).out)
    }

    @Test func fleetBisectFindsTheFirstBadEventOfEveryLog() throws {
        let nats = try NATSServers()
        let a = try log("a", events: 300), b = try log("b", events: 100)
        for db in [a, b] { #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0) }
        let listed = try runEventlog(["fleet", "list", "--servers", nats.urls])
        #expect(listed.out.hasSuffix("2 logs in EVENTLOG\n"), "\(listed.out)")
        let found = try runEventlog(["fleet", "bisect", "--servers", nats.urls, "--where", "a >= 150 || b >= 150", "--json"])
        #expect(found.code == 0, "\(found.err)")
        let report = try StateValue(json: found.out)
        #expect(report["reached"] == 1 && report["total"] == 2)
        let logs = try #require(report["logs"]?.arrayValue)
        let reached = try #require(logs.first { $0["logId"]?.stringValue == (try? logID(a)) })
        #expect(reached["firstBad"]?["seq"] == 151)
        #expect(logs.first { $0["logId"]?.stringValue == (try? logID(b)) }?["firstBad"] == .null)
        #expect(report["earliest"]?.stringValue == (try logID(a)))
        let none = try runEventlog(["fleet", "bisect", "--servers", nats.urls, "--where", "a >= 1000"])
        #expect(none.code == 1)
        #expect(none.out.hasSuffix("0 of 2 logs reached a >= 1000\n"), "\(none.out)")
    }

    /// Three of the demo's logs, shipped: recorded by release 1 (read through its upcaster),
    /// by today's code, and by a faulty variant. fleet bisect --replay finds in each the
    /// event `bisect --replay` finds in the log itself, through today's code or a variant.
    @Test func fleetBisectReplayFindsWhereEachLogDisagreesWithTheCode() throws {
        let nats = try NATSServers()
        let releaseOne = dir.file("release-one"), today = dir.file("today"), faulty = dir.file("faulty")
        #expect(try runEventlog(["import", EventVersionTests.fixture, "--db", releaseOne]).code == 0)
        #expect(try runEventlog(["demo", "--db", today]).code == 0)
        #expect(try runEventlog(["demo", "--regression", "compound-tab-filter", "--db", faulty]).code == 0)
        for db in [releaseOne, today, faulty] { #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0) }

        for regression in [[], ["--regression", "wrong-upcaster"], ["--regression", "compound-tab-filter"]] {
            let found = try runEventlog(["fleet", "bisect", "--replay", "--servers", nats.urls, "--json"] + regression)
            let report = try StateValue(json: found.out)
            let logs = try #require(report["logs"]?.arrayValue)
            var reached: Int64 = 0
            for db in [releaseOne, today, faulty] {
                let local = try StateValue(json: try runEventlog(["bisect", "--replay", "--json", "--db", db] + regression).out)
                let finding = try #require(logs.first { $0["logId"]?.stringValue == (try? logID(db)) })
                #expect(finding["firstBad"]?["seq"] ?? .null == local["firstBad"], "\(regression) \(db): \(finding)")
                #expect(finding["missing"] ?? .null == local["missing"] ?? .null && finding["actual"] ?? .null == local["actual"] ?? .null)
                if local["firstBad"] != .null { reached += 1 }
            }
            #expect(reached > 0 && report["reached"]?.intValue == reached && report["total"] == 3, "\(regression): \(found.out)")
            #expect(found.code == 0, "\(found.err)")
        }
        // The release-1 log agrees with today's code only through its upcaster, and the wrong
        // upcaster is found at its first event, naming the write it lost.
        let wrong = try runEventlog(["fleet", "bisect", "--replay", "--regression", "wrong-upcaster", "--servers", nats.urls])
        let line = try #require(wrong.out.split(separator: "\n").first { $0.hasPrefix(try logID(releaseOne)) })
        #expect(line.contains("first bad event 113 of "), "\(wrong.out)")
        #expect(wrong.out.contains(#"      missing write: messenger.listFilter: null → "unread""#), "\(wrong.out)")
        #expect(wrong.out.contains("2 of 3 logs disagree with the code of --regression wrong-upcaster"), "\(wrong.out)")

        for (arguments, message) in [(["--replay", "--where", "a == 1"], "use only one of --where, --replay"),
                                     (["--where", "a == 1", "--regression", "wrong-upcaster"], "--regression goes with --replay"),
                                     (["--replay", "--regression", "nope"], #"unknown regression "nope" (expected compound-tab-filter, wrong-upcaster)"#)] {
            let refused = try runEventlog(["fleet", "bisect", "--servers", nats.urls] + arguments)
            #expect(refused.code == 2 && refused.err.hasPrefix("Error: \(message)\n"), "\(arguments): \(refused.err)")
        }
    }

    /// Three logs count one key to different ends: grouped by its final value, with how many
    /// reached a state and what took them there; without --where, counts only.
    @Test func fleetStatsCountsTheLogsByHowTheyEnded() throws {
        let nats = try NATSServers()
        for (name, count) in [("x", 300), ("y", 100), ("z", 100)] {
            let db = dir.file(name)
            try counterEvents(key: "n", count: count).write(toFile: dir.file("\(name).jsonl"), atomically: true, encoding: .utf8)
            #expect(try runEventlog(["import", dir.file("\(name).jsonl"), "--db", db]).code == 0)
            #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0)
        }
        let stats = try runEventlog(["fleet", "stats", "--servers", nats.urls, "--group-by", "n", "--where", "n >= 150", "--json"])
        #expect(stats.code == 0, "\(stats.err)")
        let report = try StateValue(json: stats.out)
        #expect(report["logs"] == 3 && report["reached"] == 1)
        #expect(report["groups"] == [
            ["value": 99, "absent": false, "logs": 2, "reached": 0, "causes": [:], "commonestCause": .null],
            ["value": 299, "absent": false, "logs": 1, "reached": 1, "causes": ["test test/tick": 1], "commonestCause": "test test/tick"],
        ])
        let text = try runEventlog(["fleet", "stats", "--servers", nats.urls, "--group-by", "n", "--where", "n >= 150"])
        #expect(text.out == """
            n     logs  reached  commonest cause
            99       2        0
            299      1        1  test test/tick (1)
            3 logs; 1 reached n >= 150

            """, "\(text.out)")
        let absent = try StateValue(json: try runEventlog(["fleet", "stats", "--servers", nats.urls, "--group-by", "m", "--json"]).out)
        #expect(absent["groups"] == [["value": .null, "absent": true, "logs": 3, "reached": 0, "causes": [:], "commonestCause": .null]])
        #expect(absent["reached"] == .null)
        #expect(try runEventlog(["fleet", "stats", "--servers", nats.urls]).out == "           logs\nall logs      3\n3 logs\n")
        for (arguments, message) in [(["--group-by", "a..b"], "Error: --group-by: column 3: expected a key"),
                                     (["--where", "n =="], "Error: --where: column 5: expected a value after '=='"),
                                     (["--logs", "nope"], "Error: --logs: \"nope\" is not a log id")] {
            let refused = try runEventlog(["fleet", "stats", "--servers", nats.urls] + arguments)
            #expect(refused.code == 2 && refused.err.hasPrefix(message + "\n"), "\(arguments): \(refused.err)")
        }
    }

    /// Messages on a log's subject that are not its records (no message id; an id naming the
    /// next record, or one far ahead, over bytes that are no record) and a subject naming no
    /// log: fleet list and fleet bisect say which log and stream seq on stderr, skip them,
    /// and list and search every log as its records are.
    @Test func foreignMessagesAreReportedAndSkippedNeverHidingALog() throws {
        let nats = try NATSServers()
        let a = try log("a", events: 300), b = try log("b", events: 100)
        for db in [a, b] { #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0) }
        let aID = try logID(a), bID = try logID(b)
        try nats.publish(Array("hello".utf8), on: "eventlog." + aID)
        try nats.publish(Array("not a record".utf8), on: "eventlog." + aID, messageID: "\(aID):301")
        try nats.publish(Array("not a record".utf8), on: "eventlog." + bID, messageID: "\(bID):7000")
        try nats.publish(Array("stray".utf8), on: "eventlog.nolog")
        try nats.publish(Array(#"{"seq":"many"}"#.utf8), on: "eventlog.\(bID).forks")
        let expected = [
            "warning: log \(aID), stream seq 3: not one of its records (no message id); skipped",
            "warning: log \(aID), stream seq 4: not one of its records (record 301 is corrupt: ",
            "warning: log \(bID), stream seq 5: not one of its records (record 7000 is corrupt: ",
        ]
        let listed = try runEventlog(["fleet", "list", "--json", "--servers", nats.urls])
        #expect(listed.code == 0, "\(listed.err)")
        let logs = try #require(try StateValue(json: listed.out)["logs"]?.arrayValue)
        #expect(logs.map { $0["logId"]?.stringValue ?? "" }.sorted() == [aID, bID].sorted())
        #expect(logs.first { $0["logId"]?.stringValue == aID }?["events"] == 300 && logs.first { $0["logId"]?.stringValue == aID }?["lastSeq"] == 300)
        #expect(logs.first { $0["logId"]?.stringValue == bID }?["events"] == 100)
        #expect(logs.allSatisfy { $0["forkedAt"] == [] })
        for line in expected + ["warning: subject eventlog.nolog, which names no log, stream seq 6: 1 message on it, not a log's records; skipped",
                                "warning: log \(bID), stream seq 7: not a notice of a fork; skipped"] {
            #expect(listed.err.contains(line), "\(line) in \(listed.err)")
        }
        let found = try runEventlog(["fleet", "bisect", "--servers", nats.urls, "--where", "a >= 150 || b >= 150"])
        #expect(found.code == 0, "\(found.err)")
        #expect(found.out.contains("1 of 2 logs reached a >= 150 || b >= 150; earliest \(aID) at "), "\(found.out)")
        #expect(found.out.contains("\(aID)  first bad event 151 of 300"), "\(found.out)")
        for line in expected { #expect(found.err.contains(line), "\(line) in \(found.err)") }
        // Only bisect's copy skips: a pull of one log refuses what is not its record.
        #expect(try runEventlog(["pull", "--servers", nats.urls, "--log", aID, "--db", dir.file("strict")]).code == 1)
    }

    /// fleet bisect that finds nothing warns of a path no log's state holds, as bisect
    /// --where does of a path no state of its log holds, with the same words and suggestion;
    /// a path some log holds is no typo, and a search that found the state warns of nothing.
    @Test func fleetBisectWarnsOfAPathNoLogHoldsAndSaysWhichWasMeant() throws {
        let nats = try NATSServers()
        let a = try log("a", events: 30), b = try log("b", events: 10)
        for db in [a, b] { #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0) }
        let typo = try runEventlog(["fleet", "bisect", "--servers", nats.urls, "--where", "A >= 15"])
        #expect(typo.code == 1)
        #expect(typo.err.hasSuffix("warning: no state of the 2 logs searched holds A, which reads as null; did you mean a?\n"), "\(typo.err)")
        let single = try runEventlog(["bisect", "--where", "A >= 15", "--db", a])
        #expect(single.err.hasSuffix(" holds A, which reads as null; did you mean a?\n"), "\(single.err)")
        let held = try runEventlog(["fleet", "bisect", "--servers", nats.urls, "--where", "a >= 100 || b >= 100"])
        #expect(held.code == 1)
        #expect(!held.err.contains("warning"), "\(held.err)")
        let reached = try runEventlog(["fleet", "bisect", "--servers", nats.urls, "--where", "a >= 15 || A >= 1"])
        #expect(reached.code == 0)
        #expect(!reached.err.contains("warning"), "\(reached.err)")
    }

    /// Two copies of one database that went their own ways (the same log id, 3,000 events in
    /// common, then 3 of their own), shipped at the same time: exactly one ships, the other
    /// exits 1 naming the fork, and the stream holds the one that shipped, byte for byte.
    @Test func twoCopiesOfALogShippedAtOnceOneShipsTheOtherIsRefusedAsAFork() throws {
        let nats = try NATSServers()
        let first = try log("fork-a", events: 3_000)
        let second = dir.file("fork-b")
        try FileManager.default.copyItem(atPath: first, toPath: second)
        #expect(try runEventlog(["import", "-", "--db", first], stdin: counterEvents(key: "fork-a", count: 3, start: 3_000)).code == 0)
        #expect(try runEventlog(["import", "-", "--db", second], stdin: counterEvents(key: "fork-b", count: 3)).code == 0)
        let id = try logID(first)
        #expect(try logID(second) == id)
        let shippers = try [first, second].map { db in
            let process = try spawnEventlog(["ship", "--servers", nats.urls, "--db", db])
            let err = Pipe()
            process.standardOutput = FileHandle.nullDevice
            process.standardError = err
            try process.run()
            return (process, err)
        }
        let outcomes = shippers.map { process, err in
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (code: process.terminationStatus, err: text)
        }
        #expect(outcomes.map(\.code).sorted() == [0, 1], "\(outcomes)")
        let refused = try #require(outcomes.first { $0.code == 1 })
        #expect(refused.err.contains("(a fork)") && refused.err.split(separator: "\n").count == 1, "\(refused.err)")
        #expect(refused.err.contains("holds other records for log \(id) from seq 3001 on"), "\(refused.err)")
        try expectPulledCopyEquals(outcomes[0].code == 0 ? first : second, id: id, from: nats.urls)
        #expect(try forkedAt(id, nats.urls) == [3001])
    }

    /// Where `fleet list --json` says copies of `id` refused as forks differ.
    func forkedAt(_ id: String, _ servers: String) throws -> [Int64] {
        let logs = try #require(try StateValue(json: try runEventlog(["fleet", "list", "--json", "--servers", servers]).out)["logs"]?.arrayValue)
        return try #require(logs.first { $0["logId"]?.stringValue == id }?["forkedAt"]?.arrayValue).compactMap(\.intValue)
    }

    /// A copy of a log shipped after the log itself (a restored backup, a copied app
    /// directory), made before the log was ever shipped and after: refused naming the log id
    /// and the first seq at which the copies differ, however far behind that is, and listed;
    /// refusing it again tells the stream nothing new.
    @Test func aForkShippedLaterIsRefusedAtItsFirstDifferentSeqAndListed() throws {
        let nats = try NATSServers()
        for shippedBeforeTheCopy in [false, true] {
            let name = shippedBeforeTheCopy ? "late-shipped" : "late"
            let original = try log(name, events: 2_000)
            if shippedBeforeTheCopy { #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", original]).code == 0) }
            let copy = dir.file("\(name)-copy")
            try FileManager.default.copyItem(atPath: original, toPath: copy)
            #expect(try runEventlog(["import", "-", "--db", original], stdin: counterEvents(key: name, count: 50, start: 2_000)).code == 0)
            #expect(try runEventlog(["import", "-", "--db", copy], stdin: counterEvents(key: "\(name)-copy", count: 5)).code == 0)
            let id = try logID(original)
            #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", original]).code == 0)
            #expect(try forkedAt(id, nats.urls) == [])
            for _ in 0..<2 {
                let refused = try runEventlog(["ship", "--servers", nats.urls, "--db", copy])
                #expect(refused.code == 1 && refused.err.contains("holds other records for log \(id) from seq 2001 on"), "\(refused.err)")
            }
            #expect(try forkedAt(id, nats.urls) == [2001])
            let listed = try runEventlog(["fleet", "list", "--servers", nats.urls])
            #expect(listed.out.contains("forked: a copy refused from seq 2001"), "\(listed.out)")
            #expect(listed.err.isEmpty, "\(listed.err)")
            try expectPulledCopyEquals(original, id: id, from: nats.urls)
        }
        // Every log is still found and searched: the forks subject is no log of its own.
        let searched = try StateValue(json: try runEventlog(["fleet", "bisect", "--servers", nats.urls, "--where", "late >= 0", "--json"]).out)
        #expect(searched["total"] == 2)
    }

    /// compact --shipped drops only what a stream acknowledged: never on a log never shipped,
    /// no further than the shipped part whatever else is asked, all of it but the newest
    /// event alone; shipping and pulling go on over the compacted log.
    @Test func compactShippedDropsOnlyWhatAStreamAcknowledged() throws {
        let nats = try NATSServers()
        let db = try log("kept", events: 300)
        let never = try runEventlog(["compact", "--shipped", "--db", db])
        #expect(never.code == 2 && never.err.contains("was never shipped"), "\(never.err)")
        #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0)
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "kept", count: 50, start: 300)).code == 0)
        let capped = try runEventlog(["compact", "--keep-last", "10", "--shipped", "--json", "--db", db])
        #expect(capped.code == 0, "\(capped.err)")
        #expect(try StateValue(json: capped.out)["dropped"] == 300 && StateValue(json: capped.out)["firstSeq"] == 301, "\(capped.out)")
        #expect(try runEventlog(["compact", "--shipped", "--db", db]).out == "nothing to drop: the log starts at event 301\n")
        #expect(try runEventlog(["verify", "--db", db]).code == 0)
        #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", db]).code == 0)
        let alone = try StateValue(json: try runEventlog(["compact", "--shipped", "--json", "--db", db]).out)
        #expect(alone["dropped"] == 49 && alone["firstSeq"] == 350, "\(alone)")
        let copy = dir.file("kept-copy")
        #expect(try runEventlog(["pull", "--servers", nats.urls, "--log", try logID(db), "--db", copy]).code == 0)
        #expect(try StateValue(json: try runEventlog(["info", "--json", "--db", copy]).out)["events"] == 350)
        #expect(try runEventlog(["bisect", "--where", "kept >= 349", "--db", db]).out.hasPrefix("first bad event: 350 "))

        // A log whose compacted part reached the stream from another copy cannot be compared with it.
        let original = try log("elsewhere", events: 300), copy2 = dir.file("elsewhere-copy")
        try FileManager.default.copyItem(atPath: original, toPath: copy2)
        #expect(try runEventlog(["import", "-", "--db", original], stdin: counterEvents(key: "elsewhere", count: 5, start: 300)).code == 0)
        #expect(try runEventlog(["ship", "--servers", nats.urls, "--db", copy2]).code == 0)
        #expect(try runEventlog(["compact", "--before", "301", "--db", original]).code == 0)
        let refused = try runEventlog(["ship", "--servers", nats.urls, "--db", original])
        #expect(refused.code == 1 && refused.err.contains("which the log compacted away (it starts after event 300) and did not ship there itself"), "\(refused.err)")
    }

    @Test func badFleetInputIsAUsageError() throws {
        let db = try log("usage", events: 1)
        for arguments in [["ship", "--db", db], ["ship", "--servers", "http://x:1", "--db", db], ["ship", "--servers", "nats://h:99999", "--db", db],
                          ["ship", "--servers", "nats://h:1", "--stream", "a.b", "--db", db], ["pull", "--servers", "nats://h:1", "--db", db],
                          ["pull", "--servers", "nats://h:1", "--log", "nope", "--db", db], ["fleet", "frob", "--servers", "nats://h:1"],
                          ["fleet", "bisect", "--servers", "nats://h:1"], ["fleet", "bisect", "--servers", "nats://h:1", "--where", "a =="]] {
            let result = try runEventlog(arguments, environment: ["EVENTLOG_NATS": ""])
            #expect(result.code == 2, "\(arguments): \(result.err)")
            #expect(result.err.hasPrefix("Error: "), "\(arguments): \(result.err)")
        }
    }
}
