import CNATS
import Dispatch
import EventLog
import Fleet
import Foundation
import LoopbackServer

extension Scenarios {
    /// `fleet.ship`, `fleet.pull` and `fleet.bisect` against one nats-server with JetStream on
    /// loopback (file storage), started here: shipping and pulling one log of `events`,
    /// against appending the same events locally; then bisecting `logs` logs of `perLog`
    /// events, each turning bad at an event of its own.
    static func fleet(events: Int, logs: Int, perLog: Int) throws -> [ScenarioReport] {
        let nats = try NATSServers()
        let scratch = Scratch()
        func counterEvents(_ count: Int, key: String = "n") -> [Event] {
            (0..<count).map { n in
                Event(stream: "bench", type: "tick", origin: "test",
                      writes: [Write(StatePath([.key(key)]), old: n == 0 ? nil : .int(Int64(n - 1)), new: .int(Int64(n)))])
            }
        }
        let batch = counterEvents(events)
        let store = try EventStore(path: scratch.file("shipped.lmdb"))
        let appendSeconds = try time {
            for start in stride(from: 0, to: events, by: 10_000) { try store.append(contentsOf: batch[start..<min(events, start + 10_000)]) }
        }
        var shipper = Shipper(store: store, servers: nats.urls)
        shipper.stream = "BENCH"
        var shipped = 0
        let shipSeconds = try time { shipped = try shipper.ship().shipped }
        guard shipped == events else { throw BenchmarkError(description: "fleet.ship shipped \(shipped) of \(events) events") }
        var records: [[UInt8]] = []
        try store.forEachStoredRecord(after: 0) { _, bytes in records.append(Array(bytes)); return true }
        let peerSeconds = try rawAsyncPublish(records, servers: nats.urls)
        var puller = Puller(servers: nats.urls)
        puller.stream = "BENCH"
        let copy = try EventStore(path: scratch.file("pulled.lmdb"))
        var pulled = 0
        let logID = try store.logID!
        let pullSeconds = try time { pulled = try puller.pull(logID, into: copy).pulled }
        guard pulled == events, try copy.snapshot(after: UInt64(events)) == store.snapshot(after: UInt64(events)) else {
            throw BenchmarkError(description: "fleet.pull copied \(pulled) of \(events) events, or a copy that differs")
        }
        let local = Measurement(subject: "local append (batches of 10,000, durable)", operations: events, seconds: appendSeconds)

        // Logs that each turn bad (`bad` becomes true) at an event of their own, shipped eight at
        // a time (shipping waits on the network, not on the cores).
        var badAt: [UUID: UInt64] = [:]
        let ids = try (0..<logs).map { index -> UUID in
            let log = try EventStore(path: scratch.file("log-\(index).lmdb"))
            var events = counterEvents(perLog)
            let bad = perLog / 2 + index * (perLog / 2 - 1) / max(1, logs)
            events[bad].writes.append(Write("bad", old: nil, new: true))
            try log.append(contentsOf: events)
            let id = try log.logID!
            badAt[id] = UInt64(bad + 1)
            return id
        }
        let failures = Locked<[String]>([])
        let paths = (0..<logs).map { scratch.file("log-\($0).lmdb") }
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for index in stride(from: worker, to: logs, by: 8) {
                do {
                    var logShipper = Shipper(store: try EventStore(path: paths[index]), servers: nats.urls)
                    logShipper.stream = "BENCH"
                    try logShipper.ship()
                } catch { failures.withLock { $0.append("\(error)") } }
            }
        }
        if let failure = failures.withLock({ $0.first }) { throw BenchmarkError(description: "fleet.bisect could not ship its logs: \(failure)") }
        var fleet = Fleet(servers: nats.urls)
        fleet.stream = "BENCH"
        try FileManager.default.createDirectory(atPath: scratch.file("bisect"), withIntermediateDirectories: true)
        var findings: [Fleet.Finding] = []
        let bisectSeconds = try time {
            findings = try fleet.bisect(where: try StatePredicate(parsing: "bad == true"), logs: ids, scratch: scratch.file("bisect"))
        }
        for finding in findings where finding.firstBad?.seq != badAt[finding.logID] {
            throw BenchmarkError(description: "fleet.bisect found \(String(describing: finding.firstBad?.seq)) in a log that turns bad at \(badAt[finding.logID]!)")
        }
        return [
            ScenarioReport(name: "fleet.ship", summary: "one log of \(events) events to JetStream on loopback, exactly once",
                           measurements: [Measurement(subject: "eventlog ship", operations: events, seconds: shipSeconds),
                                          Measurement(subject: "nats.c async publish, a record a message", operations: events, seconds: peerSeconds), local],
                           note: "ship sends runs of up to 1,024 records a message, each acknowledged before the next (its expected last subject sequence); "
                               + "the peer publishes the same stored bytes without ids or expected sequences, 4,000 at a time in flight"),
            ScenarioReport(name: "fleet.pull", summary: "the same log back into a new database, checksums and writes checked",
                           measurements: [Measurement(subject: "eventlog pull", operations: events, seconds: pullSeconds), local]),
            ScenarioReport(name: "fleet.bisect", summary: "\(logs) logs of \(perLog) events: each pulled, then bisected with --where",
                           measurements: [Measurement(subject: "fleet bisect (logs)", operations: logs, seconds: bisectSeconds,
                                                      extra: [("events/s", Double(logs * perLog) / bisectSeconds)])],
                           comparesThroughput: false),
        ]
    }
}

/// The peer of `fleet.ship`: `records` published by nats.c alone to a stream of their own,
/// each its own message, asynchronously (`js_PublishAsync`, at most 4,000 in flight, then
/// `js_PublishAsyncComplete`), without message ids or expected sequences. Returns the seconds
/// taken, once the stream says it holds them all.
private func rawAsyncPublish(_ records: [[UInt8]], servers: String) throws -> Double {
    func check(_ status: natsStatus, _ what: String) throws {
        guard status == NATS_OK else { throw BenchmarkError(description: "the raw publish peer: \(what): \(String(cString: natsStatus_GetText(status)))") }
    }
    var connection: OpaquePointer?
    try check(natsConnection_ConnectTo(&connection, servers), "connect")
    defer { natsConnection_Destroy(connection) }
    var options = jsOptions()
    try check(jsOptions_Init(&options), "options")
    options.PublishAsync.MaxPending = 4_000
    var context: OpaquePointer?
    try check(natsConnection_JetStream(&context, connection, &options), "JetStream")
    defer { jsCtx_Destroy(context) }
    var config = jsStreamConfig()
    try check(jsStreamConfig_Init(&config), "stream config")
    var created: UnsafeMutablePointer<jsStreamInfo>?
    try "PEER".withCString { name in
        try "peer.log".withCString { subject in
            var subjects: [UnsafePointer<CChar>?] = [subject]
            try subjects.withUnsafeMutableBufferPointer { list in
                config.Name = name
                config.Subjects = list.baseAddress
                config.SubjectsLen = 1
                try check(js_AddStream(&created, context, &config, nil, nil), "add stream PEER")
            }
        }
    }
    jsStreamInfo_Destroy(created)
    let seconds = try time {
        for record in records {
            try check(record.withUnsafeBytes { js_PublishAsync(context, "peer.log", $0.baseAddress, Int32($0.count), nil) }, "publish")
        }
        try check(js_PublishAsyncComplete(context, nil), "complete")
    }
    var info: UnsafeMutablePointer<jsStreamInfo>?
    try check(js_GetStreamInfo(&info, context, "PEER", nil, nil), "stream info")
    defer { jsStreamInfo_Destroy(info) }
    guard let held = info?.pointee.State.Msgs, held == UInt64(records.count) else {
        throw BenchmarkError(description: "the raw publish peer: stream PEER holds \(info?.pointee.State.Msgs ?? 0) of \(records.count) records")
    }
    return seconds
}

extension Scenarios {
    /// `fleet.many.ship` and `fleet.many.stats`: `logs` logs of `perLog` events, as many
    /// installs would ship them (eight shippers at a time), then `fleet stats` over all of them,
    /// grouped by the app version each log ends at and counting those that reached a bad
    /// state: the answer checked, and the peak resident memory of the stats alone.
    static func fleetMany(logs: Int, perLog: Int) throws -> [ScenarioReport] {
        let nats = try NATSServers()
        let scratch = Scratch()
        let versions = ["1.0.0", "1.1.0", "1.2.0"]
        let paths = (0..<logs).map { scratch.file("install-\($0).lmdb") }
        for (index, path) in paths.enumerated() {
            let log = try EventStore(path: path)
            var events = (0..<perLog).map { n in
                Event(stream: "bench", type: "tick", origin: "test",
                      writes: [Write("n", old: n == 0 ? nil : .int(Int64(n - 1)), new: .int(Int64(n)))])
            }
            events[0].writes.append(Write("app.version", old: nil, new: .string(versions[index % versions.count])))
            // One install in ten turns bad half way.
            if index % 10 == 0 { events[perLog / 2].writes.append(Write("bad", old: nil, new: true)) }
            try log.append(contentsOf: events)
        }
        let failures = Locked<[String]>([])
        let shipSeconds = time {
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                for index in stride(from: worker, to: logs, by: 8) {
                    do {
                        var shipper = Shipper(store: try EventStore(path: paths[index]), servers: nats.urls)
                        shipper.stream = "MANY"
                        guard try shipper.ship().shipped == perLog else { throw BenchmarkError(description: "a log was not shipped whole") }
                    } catch { failures.withLock { $0.append("\(error)") } }
                }
            }
        }
        if let failure = failures.withLock({ $0.first }) { throw BenchmarkError(description: "fleet.many could not ship its logs: \(failure)") }

        var fleet = Fleet(servers: nats.urls)
        fleet.stream = "MANY"
        try FileManager.default.createDirectory(atPath: scratch.file("stats"), withIntermediateDirectories: true)
        let before = residentMemory().current
        let reset = (try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)) != nil
        var groups: [Fleet.Group] = []
        let statsSeconds = try time {
            groups = try fleet.stats(groupingBy: try StatePath(parsing: "app.version"), reaching: try StatePredicate(parsing: "bad == true"),
                                     scratch: scratch.file("stats"))
        }
        let peak = residentMemory().peak
        let expected = versions.indices.map { version -> (value: StateValue, logs: Int, reached: Int) in
            let installs = Array(stride(from: version, to: logs, by: versions.count))
            return (.string(versions[version]), installs.count, installs.filter { $0 % 10 == 0 }.count)
        }
        for group in expected where !groups.contains(where: { $0.value == group.value && $0.logs == group.logs && $0.reached == group.reached }) {
            throw BenchmarkError(description: "fleet.many.stats counted \(groups.map { "\($0.value?.json() ?? "-"): \($0.logs)/\($0.reached)" }), not \(group)")
        }
        let memory: [(String, Double)] = reset ? [("MB RSS before", Double(before) / 1e6), ("MB peak RSS in stats", Double(peak) / 1e6)] : []
        return [
            ScenarioReport(name: "fleet.many.ship", summary: "\(logs) logs of \(perLog) events, eight shippers at a time, to JetStream on loopback",
                           measurements: [Measurement(subject: "eventlog ship (events)", operations: logs * perLog, seconds: shipSeconds,
                                                      extra: [("logs/s", Double(logs) / shipSeconds)])],
                           comparesThroughput: false),
            ScenarioReport(name: "fleet.many.stats", summary: "fleet stats over the \(logs) logs: grouped by app.version, counting bad == true",
                           measurements: [Measurement(subject: "fleet stats (events)", operations: logs * perLog, seconds: statsSeconds,
                                                      extra: [("logs/s", Double(logs) / statsSeconds)] + memory)],
                           note: "each log pulled into a scratch copy, asked, and removed, as many at once as there are cores; memory holds a group per value",
                           comparesThroughput: false),
        ]
    }
}
