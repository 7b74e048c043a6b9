import CLMDB
import CSQLite
import EventLog
import Foundation
import Objects

/// The sizes of a run: `--quick` for CI smoke runs (under a minute), full for docs/performance.md.
struct Sizes {
    var singleCommits: Int
    var batchEvents: [Int: Int]  // batch size → events in the scenario
    var logEvents: Int
    var snapshotProbes: Int
    var bisects: Int
    var objects: Int
    var objectUpdates: Int
    var fetches: Int
    var perProducer: Int
    /// Events appended one at a time by append.queued.
    var queuedEvents: Int
    var importEvents: Int
    /// The size of the deploy.download update, in MB, and how many assets it is split into.
    var deployMegabytes: Int
    var deployFiles: Int
    /// Events appended one at a time while followers wait for each.
    var followEvents: Int
    /// The log shipped and pulled by fleet.ship and fleet.pull; the logs fleet.bisect finds its answer in.
    var fleetEvents: Int
    var fleetLogs: Int
    var fleetEventsPerLog: Int
    /// The installs fleet.many ships and counts, and the events of each.
    var manyLogs: Int
    var manyEventsPerLog: Int
    /// The newest events retention.compact keeps of a log of `logEvents`.
    var retentionKeep: Int
    /// retention.flat: the events appended (in commits of 1,000) and the newest kept by the policy.
    var flatEvents: Int
    var flatKeep: Int

    static let quick = Sizes(singleCommits: 100, batchEvents: [1: 500, 100: 5_000, 10_000: 50_000], logEvents: 100_000,
                             snapshotProbes: 2_000, bisects: 20, objects: 10_000, objectUpdates: 40_000, fetches: 5_000, perProducer: 50,
                             queuedEvents: 2_000, importEvents: 50_000, deployMegabytes: 20, deployFiles: 4, followEvents: 50,
                             fleetEvents: 10_000, fleetLogs: 10, fleetEventsPerLog: 1_000, manyLogs: 20, manyEventsPerLog: 1_000, retentionKeep: 1_000,
                             flatEvents: 200_000, flatKeep: 10_000)
    static let full = Sizes(singleCommits: 500, batchEvents: [1: 5_000, 100: 50_000, 10_000: 500_000], logEvents: 1_000_000,
                            snapshotProbes: 20_000, bisects: 100, objects: 100_000, objectUpdates: 400_000, fetches: 50_000, perProducer: 250,
                            queuedEvents: 20_000, importEvents: 2_000_000, deployMegabytes: 200, deployFiles: 20, followEvents: 500,
                            fleetEvents: 100_000, fleetLogs: 100, fleetEventsPerLog: 10_000, manyLogs: 1_000, manyEventsPerLog: 1_000, retentionKeep: 10_000,
                            flatEvents: 4_000_000, flatKeep: 100_000)
}

enum Scenarios {
    /// The append subjects, or only the one named `only` (`--subject`, for profiling).
    static func subjects(in scratch: Scratch, fast: Bool, only: String?) throws -> [any AppendSubject] {
        let makers: [(String, () throws -> any AppendSubject)] = [
            ("eventlog", { try EngineSubject(path: scratch.file("eventlog.lmdb"), fast: fast) }),
            ("raw-lmdb", { try RawLMDBSubject(path: scratch.file("raw.lmdb"), fast: fast) }),
            ("sqlite", { try SQLiteSubject(path: scratch.file("sqlite.db"), fast: fast) }),
            ("jsonl", { JSONLinesSubject(path: scratch.file("trace.jsonl"), fast: fast) }),
        ]
        return try makers.filter { only == nil || only == $0.0 }.map { try $0.1() }
    }

    /// Appends `events` in batches of `batch` to every subject, timing each commit. The
    /// subjects take turns batch by batch, so that a slow moment of a shared machine falls on
    /// all of them alike rather than on whichever was running.
    static func append(name: String, summary: String, events: Int, batch: Int, fast: Bool, only: String?) throws -> ScenarioReport {
        let scratch = Scratch()
        var subjects = try subjects(in: scratch, fast: fast, only: only)
        var latencies = [[Double]](repeating: [], count: subjects.count)
        var workload = Workload()
        var seq: UInt64 = 1
        while Int(seq) <= events {
            let count = min(batch, events - Int(seq) + 1)
            let input = workload.next(count)
            for index in subjects.indices {
                subjects[index].prepare(input, firstSeq: seq)
                latencies[index].append(try time { try subjects[index].commit() } * 1e6)
            }
            seq += UInt64(count)
        }
        let measurements = zip(subjects, latencies).map { subject, latencies in
            Measurement(subject: subject.name, operations: events, seconds: latencies.reduce(0, +) / 1e6, latencies: latencies,
                        bytesPerEvent: Double(subject.bytesOnDisk) / Double(events))
        }
        for subject in subjects { subject.close() }
        return ScenarioReport(name: name, summary: summary, measurements: measurements,
                              note: "ops/s are events per second; latencies are per commit of \(batch) event\(batch == 1 ? "" : "s")")
    }

    /// `events` appended one at a time, as an app appends one per tap: queued (`enqueue`,
    /// durable commits shared by the writer thread, timed until `flush` returns, so that every
    /// event is committed) against SQLite in WAL mode with `synchronous=NORMAL` committing
    /// one row at a time, the same events (encoding timed on both sides).
    static func queued(events: Int) throws -> ScenarioReport {
        let scratch = Scratch()
        var workload = Workload()
        let input = workload.next(events)
        var options = EventStore.Options()
        options.initialMapSize = 1 << 30
        let store = try EventStore(path: scratch.file("eventlog.lmdb"), options: options)
        let engine = time {
            for event in input { store.enqueue(event) }
            store.flush()
        }
        guard try store.lastSeq() == UInt64(events), try store.verify().isOK else {
            throw BenchmarkError(description: "queued appends did not commit every event")
        }
        var sqlite = try SQLiteSubject(path: scratch.file("sqlite.db"), fast: true)
        defer { sqlite.close() }
        let peer = try time {
            for (offset, event) in input.enumerated() {
                sqlite.prepare([event], firstSeq: UInt64(offset + 1))
                try sqlite.commit()
            }
        }
        return ScenarioReport(name: "append.queued", summary: "one event at a time: queued, durable commits shared, against one SQLite commit each",
                              measurements: [Measurement(subject: "eventlog, queued", operations: events, seconds: engine),
                                             Measurement(subject: "sqlite NORMAL, a commit each", operations: events, seconds: peer)],
                              note: "\(events) events; eventlog durable (fsync per shared commit), SQLite WAL synchronous=NORMAL (no fsync per commit)")
    }

    /// `producers` threads each append `perProducer` events durably: with group commit
    /// (`appendGrouped`), and with one commit each (`append`), in the same run.
    static func concurrent(producers: Int, perProducer: Int) throws -> ScenarioReport {
        func run(grouped: Bool) throws -> Measurement {
            let scratch = Scratch()
            let store = try EventStore(path: scratch.file("eventlog.lmdb"))
            let done = DispatchGroup()
            let failures = Locked(0)
            let seconds = time {
                for producer in 0..<producers {
                    done.enter()
                    Thread {
                        let path = StatePath([.key("producers"), .key("p\(producer)")])
                        for i in 0..<perProducer {
                            let event = Event(stream: "bench", type: "tick", origin: .system, payload: ["producer": .int(Int64(producer))],
                                              writes: [Write(path, old: i == 0 ? nil : .int(Int64(i - 1)), new: .int(Int64(i)))])
                            do {
                                if grouped { try store.appendGrouped(event) } else { try store.append(event) }
                            } catch {
                                failures.withLock { $0 += 1 }
                            }
                        }
                        done.leave()
                    }.start()
                }
                done.wait()
            }
            let failed = failures.withLock { $0 }
            guard failed == 0, try store.lastSeq() == UInt64(producers * perProducer) else {
                throw BenchmarkError(description: "concurrent appends lost events (\(failed) failed)")
            }
            return Measurement(subject: grouped ? "eventlog, grouped" : "eventlog, one commit each",
                               operations: producers * perProducer, seconds: seconds)
        }
        return ScenarioReport(name: "append.concurrent", summary: "\(producers) producer threads, one durable event at a time each",
                              measurements: [try run(grouped: true), try run(grouped: false)],
                              note: "\(producers) threads × \(perProducer) events; the ratio is group commit over one commit per event")
    }

    /// The large log the read scenarios share, and its peers.
    struct BigLog {
        let scratch = Scratch()
        let store: EventStore
        /// The same log in each peer, when built `withPeers`.
        let peers: (raw: RawLMDBSubject, sqlite: SQLiteSubject, jsonl: String)?
        let events: Int
        let payloadBytes: Int
        /// The phase property grows by one every `phaseEvery` events, so `phase >= k` is monotone.
        static let phaseEvery = 1_000

        /// Builds the log, and the same log for each peer when `withPeers`.
        init(events: Int, withPeers: Bool) throws {
            self.events = events
            var engine = try EngineSubject(path: scratch.file("eventlog.lmdb"), fast: true)
            var raw = withPeers ? try RawLMDBSubject(path: scratch.file("raw.lmdb"), fast: true) : nil
            var sqlite = withPeers ? try SQLiteSubject(path: scratch.file("sqlite.db"), fast: true) : nil
            var jsonl = withPeers ? JSONLinesSubject(path: scratch.file("trace.jsonl"), fast: true) : nil
            var workload = Workload()
            var payloadBytes = 0
            var seq: UInt64 = 1
            while Int(seq) <= events {
                let count = min(10_000, events - Int(seq) + 1)
                var batch = workload.next(count)
                for offset in batch.indices {
                    let n = Int(seq) + offset
                    if n % Self.phaseEvery == 0 {
                        let phase = Int64(n / Self.phaseEvery)
                        batch[offset].writes.append(Write("phase", old: phase == 1 ? nil : .int(phase - 1), new: .int(phase)))
                    }
                    payloadBytes += EventRecord.storedBytes(of: batch[offset], seq: UInt64(n), time: Workload.time(UInt64(n))).count
                }
                engine.prepare(batch, firstSeq: seq); try engine.commit()
                raw?.prepare(batch, firstSeq: seq)
                try raw?.commit()
                sqlite?.prepare(batch, firstSeq: seq)
                try sqlite?.commit()
                jsonl?.prepare(batch, firstSeq: seq)
                try jsonl?.commit()
                seq += UInt64(count)
            }
            jsonl?.close()
            store = engine.store
            if let raw, let sqlite, let jsonl { peers = (raw, sqlite, jsonl.path) } else { peers = nil }
            self.payloadBytes = payloadBytes
            // Flush what the build left dirty, so that its writeback does not run during the reads.
            sync()
        }

        func close() {
            peers?.raw.close()
            peers?.sqlite.close()
        }
    }

    /// Two reports on the same peers' figures: folding full records (every field decoded, as
    /// `replay --verify` and `fold` do) and folding states (write sets only, as `bisect --where`
    /// and snapshots do).
    static func replay(_ log: BigLog) throws -> [ScenarioReport] {
        let before = residentMemory().anonymous
        var folded = StateValue.null
        let recordSeconds = try time {
            try log.store.fold { record, state in
                if record.seq == UInt64(log.events) { folded = state }
                return true
            }
        }
        let grown = max(0, residentMemory().anonymous - before)
        var stateFolded = StateValue.null
        let stateSeconds = try time {
            try log.store.forEachState { seq, state in
                if seq == UInt64(log.events) { stateFolded = state }
                return true
            }
        }
        guard stateFolded == folded, folded != .null else {
            throw BenchmarkError(description: "forEachState and fold end in different states")
        }
        var peers: [Measurement] = []
        if let subjects = log.peers {
            var jsonResult = (events: 0, properties: 0)
            let jsonSeconds = try time { jsonResult = try JSONLinesSubject.replay(subjects.jsonl, as: TraceLine.self) }
            var rawCount = 0
            let rawSeconds = try time { rawCount = try subjects.raw.scan() }
            var sqliteCount = 0
            let sqliteSeconds = try time { sqliteCount = try subjects.sqlite.scan() }
            blackHole(jsonResult)
            peers = [
                Measurement(subject: "jsonl", operations: jsonResult.events, seconds: jsonSeconds),
                Measurement(subject: "raw-lmdb", operations: rawCount, seconds: rawSeconds),
                Measurement(subject: "sqlite", operations: sqliteCount, seconds: sqliteSeconds),
            ]
        }
        let peersNote = "jsonl decodes every field and folds; raw-lmdb and sqlite only read the record bytes (no decoding)"
        // Through today's code, verifying: every event at today's version, then every event
        // read as version 1 through an upcaster that renames its payload's key.
        var plain = Projections()
        plain.recompute(["messenger"], with: RecordedWrites())
        var upcasting = plain
        for type in Workload.types {
            upcasting.upcast("messenger", type, from: 1, changing: { event in
                guard case .object(var payload) = event.payload else { return }
                payload["avatar"] = payload["id"]
                payload["id"] = nil
                event.payload = .object(payload)
            })
        }
        var plainReport: ReplayReport?, upcastReport: ReplayReport?
        let plainSeconds = try time { plainReport = try log.store.replay(through: plain, verify: true) }
        let upcastSeconds = try time { upcastReport = try log.store.replay(through: upcasting, verify: true) }
        guard let plainReport, let upcastReport, plainReport.divergence == nil, upcastReport.divergence == nil,
              upcastReport.state == folded, upcastReport.upcast.values.reduce(0, +) == log.events else {
            throw BenchmarkError(description: "the replay through an upcaster does not verify, or ends in another state")
        }
        return [
            ScenarioReport(
                name: "replay.upcast", summary: "replay --verify through today's code, plain and with every event read through an upcaster",
                measurements: [Measurement(subject: "eventlog", operations: log.events, seconds: plainSeconds),
                               Measurement(subject: "eventlog, upcast", operations: log.events, seconds: upcastSeconds)],
                note: "every event is version 1; 'upcast' registers today's version 2 for each type and an upcaster renaming a payload key; both verify every event"),
            ScenarioReport(
                name: "replay", summary: "decode every event and fold its writes into the state",
                measurements: [Measurement(subject: "eventlog", operations: log.events, seconds: recordSeconds,
                                           extra: [("heap growth MiB", Double(grown) / 1_048_576)])] + peers,
                note: "eventlog decodes every field of every record (fold); " + peersNote),
            ScenarioReport(
                name: "replay.state", summary: "check every record and fold its writes into the state",
                measurements: [Measurement(subject: "eventlog", operations: log.events, seconds: stateSeconds)] + peers,
                note: "eventlog checks each record's checksum and decodes only its write set (forEachState); " + peersNote),
        ]
    }

    static func snapshots(_ log: BigLog, probes: Int) throws -> ScenarioReport {
        var rng = SplitMix64(seed: 17)
        var latencies: [Double] = []
        let seconds = try time {
            for _ in 0..<probes {
                let seq = UInt64.random(in: 1...UInt64(log.events), using: &rng)
                let start = now()
                blackHole(try log.store.snapshot(after: seq))
                latencies.append(Double(now() - start) / 1e3)
            }
        }
        return ScenarioReport(
            name: "snapshot.random", summary: "the state after a random event: nearest keyframe plus write sets",
            measurements: [Measurement(subject: "eventlog", operations: probes, seconds: seconds, latencies: latencies)],
            note: "\(try log.store.keyframeCount()) keyframes (ratio \(log.store.keyframePolicy.ratio)); \(log.events) events in the log")
    }

    static func bisect(_ log: BigLog, runs: Int) throws -> ScenarioReport {
        var rng = SplitMix64(seed: 23)
        var latencies: [Double] = []
        var probes = 0
        let phases = log.events / BigLog.phaseEvery
        let seconds = try time {
            for _ in 0..<runs {
                let k = Int.random(in: 1...phases, using: &rng)
                let predicate = try StatePredicate(parsing: "phase >= \(k)")
                let start = now()
                let result = try log.store.firstEvent(where: predicate)
                latencies.append(Double(now() - start) / 1e3)
                guard result.firstBad == UInt64(k * BigLog.phaseEvery) else {
                    throw BenchmarkError(description: "bisect found \(String(describing: result.firstBad)), expected \(k * BigLog.phaseEvery)")
                }
                probes += result.probes
            }
        }
        return ScenarioReport(
            name: "bisect.where", summary: "first event where a monotone predicate holds, by binary search over snapshots",
            measurements: [Measurement(subject: "eventlog", operations: runs, seconds: seconds, latencies: latencies,
                                       extra: [("probes/bisect", Double(probes) / Double(runs))])],
            note: "ops/s are whole bisects per second over \(log.events) events; each answer is checked")
    }

    /// `history`: every event that changed one property, from write sets alone, against a scan
    /// of whole records through `forEachRecord`; both must find the same changes.
    static func history(_ log: BigLog) throws -> ScenarioReport {
        let path = Workload.paths[3]
        var fromWriteSets = 0
        let historySeconds = try time { try log.store.forEachChange(of: path) { _, _ in fromWriteSets += 1; return true } }
        var fromRecords = 0
        let scanSeconds = try time {
            try log.store.forEachRecord { record in
                if record.event.writes.contains(where: { $0.seen(from: path) != nil }) { fromRecords += 1 }
                return true
            }
        }
        guard fromWriteSets == fromRecords, fromWriteSets > 0 else {
            throw BenchmarkError(description: "history found \(fromWriteSets) changes, the record scan \(fromRecords)")
        }
        return ScenarioReport(
            name: "history", summary: "every event that changed \(path) (eventlog history), over the whole log",
            measurements: [Measurement(subject: "eventlog", operations: log.events, seconds: historySeconds, extra: [("changes", Double(fromWriteSets))]),
                           Measurement(subject: "forEachRecord scan", operations: log.events, seconds: scanSeconds)],
            note: "ops/s are events of the log scanned per second")
    }

    static func verify(_ log: BigLog) throws -> ScenarioReport {
        var report: VerificationReport?
        let seconds = try time { report = try log.store.verify() }
        guard let report else { throw BenchmarkError(description: "verify did not run") }
        guard report.isOK else { throw BenchmarkError(description: "verify failed: \(report.problem!)") }
        return ScenarioReport(
            name: "verify", summary: "checksums, dense sequence, every keyframe against the fold of write sets",
            measurements: [Measurement(subject: "eventlog", operations: Int(report.eventsChecked), seconds: seconds)])
    }

    static func storage(_ log: BigLog) throws -> ScenarioReport {
        let payload = Double(log.payloadBytes) / Double(log.events)
        func bytes(_ name: String, _ size: Int) -> Measurement {
            Measurement(subject: name, operations: log.events, seconds: 1, bytesPerEvent: Double(size) / Double(log.events),
                        extra: [("× payload", Double(size) / Double(log.events) / payload)])
        }
        var measurements = [bytes("eventlog", fileSize(log.store.environment.path))]
        if let peers = log.peers {
            measurements += [bytes("raw-lmdb", peers.raw.bytesOnDisk), bytes("sqlite", peers.sqlite.bytesOnDisk),
                             bytes("jsonl", fileSize(peers.jsonl))]
        }
        return ScenarioReport(
            name: "storage", summary: "bytes on disk per event, keyframes included", measurements: measurements,
            note: String(format: "payload (the encoded record) averages %.0f bytes; ops/s does not apply here", payload),
            comparesThroughput: false)
    }

    /// Saves `count` objects, fetches random ones by id, appends `updates` more saves and
    /// fetches again: the fetch cost must not depend on the length of the log.
    static func objects(count: Int, updates: Int, fetches: Int) throws -> [ScenarioReport] {
        let scratch = Scratch()
        let objects = try objectStore(in: scratch)
        let store = objects.store
        var rng = SplitMix64(seed: 31)
        func post(_ i: Int) -> StateObject {
            ["title": .string("Post number \(i)"), "body": .string("What the bots learned in week \(i % 52)."),
             "views": .int(Int64(i % 1000)), "draft": .bool(i % 3 == 0), "jsonPubDate": .string("2026-01-\(10 + i % 18) 09:00")]
        }
        let before = residentMemory().anonymous
        var ids: [String] = []
        let saveSeconds = try time {
            try inTransactionsOf1000(count, on: store) { i, batch in
                ids.append(try objects.save(post(i), in: "BlogPost", batch: &batch)["id"]!.stringValue!)
            }
        }
        func fetchAll() throws -> Measurement {
            try timedFetches(fetches, among: ids, of: objects, rng: &rng) { id in
                guard try objects.fetch("BlogPost", id: id) != nil else { throw BenchmarkError(description: "object \(id) not found") }
            }
        }
        let early = try fetchAll()
        let updateSeconds = try time {
            try inTransactionsOf1000(updates, on: store) { i, batch in
                var fields = post(i)
                fields["id"] = .string(ids[Int.random(in: 0..<ids.count, using: &rng)])
                try objects.save(fields, in: "BlogPost", batch: &batch)
            }
        }
        let late = try fetchAll()
        let grown = max(0, residentMemory().anonymous - before)
        // Delete a tenth of the objects, scattered, 1,000 per transaction.
        let doomed = ids.indices.filter { $0 % 10 == 3 }.map { ids[$0] }
        let deleteSeconds = try time {
            try inTransactionsOf1000(doomed.count, on: store) { i, batch in try objects.delete("BlogPost", id: doomed[i], batch: &batch) }
        }
        guard try objects.problem(against: nil) == nil else { throw BenchmarkError(description: "read model differs from the log") }
        // Replay the whole objects log through a projection (every event as recorded), as
        // `eventlog replay` does: each write lands in a collection of up to `count` objects.
        var replayed: ReplayReport?
        let replaySeconds = try time { replayed = try store.replay(through: AsRecorded(), verify: true) }
        guard let replayed, replayed.divergence == nil, replayed.state == (try store.currentState) else {
            throw BenchmarkError(description: "the replayed objects log ends in another state")
        }
        var lateNamed = late
        lateNamed.subject = "eventlog, longer log"
        // The same saves, fetches and deletes in SQLite, the fields as their JSON.
        let peer = try SQLiteObjects(path: scratch.file("objects.sqlite"))
        var peerRNG = SplitMix64(seed: 31)
        let peerIDs = (0..<count).map { "p\($0)" }
        func json(_ i: Int) -> [UInt8] { Array(StateValue.object(post(i)).json().utf8) }
        let peerCreate = try time { try peer.inTransactionsOf1000(count) { i in try peer.create(id: peerIDs[i], fields: json(i)) } }
        let peerUpdate = try time {
            try peer.inTransactionsOf1000(updates) { i in try peer.update(id: peerIDs[Int.random(in: 0..<count, using: &peerRNG)], fields: json(i)) }
        }
        var peerFetch = try timedFetches(fetches, among: peerIDs, of: nil, rng: &peerRNG, subject: "sqlite") { id in
            let object = try peer.fetch(id: id) { fields, version, createdAt, updatedAt -> StateObject in
                var object = try StateValue(json: String(decoding: fields, as: UTF8.self)).objectValue ?? StateObject()
                object["id"] = .string(id)
                object["version"] = .int(version)
                object["createdAt"] = .string(Timestamp(microsecondsSince1970: createdAt).description)
                object["updatedAt"] = .string(Timestamp(microsecondsSince1970: updatedAt).description)
                return object
            }
            guard let object else { throw BenchmarkError(description: "SQLite object \(id) not found") }
            blackHole(object)
        }
        peerFetch.subject = "sqlite (JSON fields)"
        let peerDoomed = peerIDs.indices.filter { $0 % 10 == 3 }.map { peerIDs[$0] }
        let peerDelete = try time { try peer.inTransactionsOf1000(peerDoomed.count) { i in try peer.delete(id: peerDoomed[i]) } }
        // And in raw LMDB: the pages the same creates, updates and deletes must rewrite and flush.
        let raw = try RawLMDBObjects(path: scratch.file("objects-raw.lmdb"))
        var rawRNG = SplitMix64(seed: 31)
        let rawCreate = try time { try raw.inTransactionsOf1000(count) { i in try raw.create(id: peerIDs[i], fields: json(i)) } }
        let rawUpdate = try time {
            try raw.inTransactionsOf1000(updates) { i in try raw.update(id: peerIDs[Int.random(in: 0..<count, using: &rawRNG)], fields: json(i)) }
        }
        let rawDelete = try time { try raw.inTransactionsOf1000(peerDoomed.count) { i in try raw.delete(id: peerDoomed[i]) } }
        let rawSubject = "raw lmdb (no log)"
        return [
            ScenarioReport(name: "objects.create", summary: "creates of \(count) objects in transactions of 1,000",
                           measurements: [Measurement(subject: "eventlog", operations: count, seconds: saveSeconds,
                                                      extra: [("heap growth MiB", Double(grown) / 1_048_576)]),
                                          Measurement(subject: "sqlite (JSON fields)", operations: count, seconds: peerCreate),
                                          Measurement(subject: rawSubject, operations: count, seconds: rawCreate)],
                           note: "heap growth (RssAnon, not LMDB's mapped pages) covers the creates and the updates; SQLite in WAL mode, synchronous=NORMAL; raw LMDB holds the objects alone (mdb_put, mdb_del), flushed per commit as the engine's (MDB_NOMETASYNC)"),
            ScenarioReport(name: "objects.update", summary: "updates of random objects among \(count) in transactions of 1,000",
                           measurements: [Measurement(subject: "eventlog", operations: updates, seconds: updateSeconds),
                                          Measurement(subject: "sqlite (JSON fields)", operations: updates, seconds: peerUpdate),
                                          Measurement(subject: rawSubject, operations: updates, seconds: rawUpdate)],
                           note: "SQLite reads the row's version and updates under it, as the engine checks an object's version"),
            ScenarioReport(name: "objects.delete", summary: "deletes of every tenth object in transactions of 1,000",
                           measurements: [Measurement(subject: "eventlog", operations: doomed.count, seconds: deleteSeconds),
                                          Measurement(subject: "sqlite (JSON fields)", operations: peerDoomed.count, seconds: peerDelete),
                                          Measurement(subject: rawSubject, operations: peerDoomed.count, seconds: rawDelete)],
                           note: "SQLite's WAL at synchronous=NORMAL flushes at checkpoints only; LMDB flushes every rewritten page at each commit"),
            ScenarioReport(name: "objects.replay", summary: "replay the objects log through a projection, as `eventlog replay` does",
                           measurements: [Measurement(subject: "eventlog", operations: Int(replayed.events), seconds: replaySeconds)],
                           note: "every event replays as recorded; each write lands in a collection of up to \(count) objects"),
            ScenarioReport(name: "objects.fetch", summary: "fetch by id among \(count) objects, before and after \(updates) more events",
                           measurements: [early, lateNamed, peerFetch],
                           note: "the second row's ratio is the short log's fetch rate over the long log's: near 1.00× means fetch does not depend on the log's length"),
        ]
    }

    /// The objects scenarios through the typed API: `BlogPost` values (`StoredObject`, so
    /// `Codable`) saved and fetched with `save(_:batch:)` and `fetch(_:id:)`, which encode each
    /// one to its state fields and decode the stored fields back into a `BlogPost`, with the
    /// same counts and transactions of 1,000 as `objects`.
    static func typedObjects(count: Int, updates: Int, fetches: Int) throws -> [ScenarioReport] {
        let scratch = Scratch()
        let objects = try objectStore(in: scratch)
        var rng = SplitMix64(seed: 31)
        let before = residentMemory().anonymous
        var ids: [String] = []
        let saveSeconds = try time {
            try inTransactionsOf1000(count, on: objects.store) { i, batch in
                let saved = try objects.save(BlogPost.sample(i), batch: &batch)
                blackHole(saved.object)
                ids.append(saved.id)
            }
        }
        func fetchAll() throws -> Measurement {
            try timedFetches(fetches, among: ids, of: objects, rng: &rng) { id in
                guard let saved = try objects.fetch(BlogPost.self, id: id) else { throw BenchmarkError(description: "post \(id) not found") }
                blackHole(saved.object)
            }
        }
        let early = try fetchAll()
        let updateSeconds = try time {
            try inTransactionsOf1000(updates, on: objects.store) { i, batch in
                var post = BlogPost.sample(i)
                post.id = ids[Int.random(in: 0..<ids.count, using: &rng)]
                blackHole(try objects.save(post, batch: &batch).object)
            }
        }
        let late = try fetchAll()
        let grown = max(0, residentMemory().anonymous - before)
        guard try objects.problem(against: nil) == nil else { throw BenchmarkError(description: "read model differs from the log") }
        var lateNamed = late
        lateNamed.subject = "eventlog, longer log"
        // The same BlogPosts in SQLite, each encoded with JSONEncoder and decoded with JSONDecoder.
        let peer = try SQLiteObjects(path: scratch.file("objects.sqlite"))
        var peerRNG = SplitMix64(seed: 31)
        let peerIDs = (0..<count).map { "p\($0)" }
        let encoder = JSONEncoder(), decoder = JSONDecoder()
        let peerCreate = try time { try peer.inTransactionsOf1000(count) { i in try peer.create(id: peerIDs[i], fields: Array(try encoder.encode(BlogPost.sample(i)))) } }
        let peerUpdate = try time {
            try peer.inTransactionsOf1000(updates) { i in
                try peer.update(id: peerIDs[Int.random(in: 0..<count, using: &peerRNG)], fields: Array(try encoder.encode(BlogPost.sample(i))))
            }
        }
        let peerFetch = try timedFetches(fetches, among: peerIDs, of: nil, rng: &peerRNG, subject: "sqlite (Codable JSON)") { id in
            guard let post = try peer.fetch(id: id, { fields, _, _, _ in try decoder.decode(BlogPost.self, from: Data(fields)) }) else {
                throw BenchmarkError(description: "SQLite post \(id) not found")
            }
            blackHole(post)
        }
        return [
            ScenarioReport(name: "objects.typed.create", summary: "creates of \(count) BlogPost values through save(_:batch:) in transactions of 1,000",
                           measurements: [Measurement(subject: "eventlog", operations: count, seconds: saveSeconds,
                                                      extra: [("heap growth MiB", Double(grown) / 1_048_576)]),
                                          Measurement(subject: "sqlite (Codable JSON)", operations: count, seconds: peerCreate)],
                           note: "heap growth (RssAnon) covers the creates and the updates"),
            ScenarioReport(name: "objects.typed.update", summary: "updates of random BlogPosts among \(count) through save(_:batch:) in transactions of 1,000",
                           measurements: [Measurement(subject: "eventlog", operations: updates, seconds: updateSeconds),
                                          Measurement(subject: "sqlite (Codable JSON)", operations: updates, seconds: peerUpdate)]),
            ScenarioReport(name: "objects.typed.fetch", summary: "fetch(BlogPost.self, id:) among \(count) objects, before and after \(updates) more events",
                           measurements: [early, lateNamed, peerFetch],
                           note: "each fetch decodes the stored fields into a BlogPost; the second row's ratio is the short log's fetch rate over the long log's"),
        ]
    }

    /// Calls `body` for 0..<count, 1,000 calls per transaction of `store`.
    private static func inTransactionsOf1000(_ count: Int, on store: EventStore, _ body: (Int, inout AppendBatch) throws -> Void) throws {
        for start in stride(from: 0, to: count, by: 1_000) {
            try store.transact { batch in
                for i in start..<min(count, start + 1_000) { try body(i, &batch) }
            }
        }
    }

    /// A new store for the objects scenarios: commits that may lose the last one on a crash
    /// (no meta-page flush of their own), a map of 1 GiB from the start.
    private static func objectStore(in scratch: Scratch) throws -> ObjectStore {
        var options = EventStore.Options()
        options.durability = .lastCommitMayBeLost
        options.initialMapSize = 1 << 30
        return try ObjectStore(store: try EventStore(path: scratch.file("objects.lmdb"), options: options))
    }

    /// `fetches` fetches of ids drawn from `ids` with `rng`, each through `fetch` (which throws
    /// when the object is missing), timed one by one; the engine's (`objects`) with the
    /// length of its log.
    private static func timedFetches(_ fetches: Int, among ids: [String], of objects: ObjectStore?, rng: inout SplitMix64,
                                     subject: String = "eventlog", _ fetch: (String) throws -> Void) throws -> Measurement {
        var latencies: [Double] = []
        let seconds = try time {
            for _ in 0..<fetches {
                let id = ids.randomElement(using: &rng)!
                let start = now()
                try fetch(id)
                latencies.append(Double(now() - start) / 1e3)
            }
        }
        return Measurement(subject: subject, operations: fetches, seconds: seconds, latencies: latencies,
                           extra: try objects.map { [("log events", Double(try $0.store.lastSeq()))] } ?? [])
    }

    /// The release `eventlog` binary, beside this one: the import and deploy scenarios run it as a user does.
    static func eventlogBinary() throws -> String {
        let path = Bundle.main.executableURL!.deletingLastPathComponent().appendingPathComponent("eventlog").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchmarkError(description: "import.jsonl, deploy.download and follow.latency need \(path); run `swift build -c release --product eventlog` first")
        }
        return path
    }

    /// `eventlog import` of a file of `events` workload events as `export` writes them, run as
    /// the `eventlog` binary at `binary` in a child process: in one transaction, then with
    /// `--batch 10000`, each into a new log and each answer checked. The peer decodes the same
    /// file line by line with `JSONDecoder` and folds its writes.
    static func importJSONLines(events: Int, binary: String) throws -> ScenarioReport {
        let scratch = Scratch()
        let file = scratch.file("events.jsonl")
        try Workload.export(events, to: file)
        // Flush the file, so that its writeback does not run during the imports.
        sync()
        let expected: StateValue = ["first": 1, "imported": .int(Int64(events)), "last": .int(Int64(events)), "skipped": 0]
        func run(_ subject: String, _ options: [String], into database: String) throws -> Measurement {
            let child = try ChildRun(binary, ["import", file] + options + ["--db", scratch.file(database), "--json"], in: scratch)
            guard (try? StateValue(json: child.output)) == expected else {
                throw BenchmarkError(description: "\(subject) printed \(child.output.debugDescription), expected \(expected.json())")
            }
            return Measurement(subject: subject, operations: events, seconds: child.seconds,
                               extra: [("child peak MiB", Double(child.peakResidentBytes) / 1_048_576)])
        }
        var whole = try run("eventlog import", [], into: "whole.lmdb")
        whole.extra.append(("file MB", Double(fileSize(file)) / 1_000_000))
        let batched = try run("eventlog import --batch 10000", ["--batch", "10000"], into: "batched.lmdb")
        var decoded = (events: 0, properties: 0)
        let decodeSeconds = try time { decoded = try JSONLinesSubject.replay(file, as: ExportedLine.self) }
        guard decoded.events == events, decoded.properties == Workload.properties else {
            throw BenchmarkError(description: "the jsonl peer read \(decoded.events) events writing \(decoded.properties) properties")
        }
        return ScenarioReport(
            name: "import.jsonl", summary: "`eventlog import` of a JSON-lines file as `export` writes it, as a child process",
            measurements: [whole, batched, Measurement(subject: "jsonl", operations: events, seconds: decodeSeconds)],
            note: "ops/s are events per second of wall time, from spawning the child to its exit; child peak MiB is its own "
                + "peak resident memory (wait4), which the peak MiB column (this process) leaves out; the second row's ratio is "
                + "one transaction over --batch 10000; jsonl decodes every line of the file with JSONDecoder and folds its writes")
    }
}

/// A projection that recomputes nothing: every event replays as recorded.
struct AsRecorded: Projection {
    func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? { nil }
}

/// Today's code that writes what each event recorded: replay's own cost, with no app logic.
struct RecordedWrites: Projection {
    func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
        Recomputed(outcome: record.event.outcome, writes: record.event.writes)
    }
}
