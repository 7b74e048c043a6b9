import CNATS
import EventLog
import EventLogTesting
@testable import Fleet
import Foundation
import LoopbackServer
import Testing

/// A copy of `log`'s records under its id, in a log of its own (a restored backup, a cloned
/// install): the same history so far, free to go its own way.
func copyOfLog(_ log: EventStore, through: Int? = nil, name: String = #function) throws -> TemporaryEventStore {
    let copy = try TemporaryEventStore(keyframePolicy: KeyframePolicy(ratio: 4), name: name + "-copy")
    try copy.store.adoptLogID(try #require(try log.logID))
    let records = try storedRecords(log).prefix(through ?? .max)
    try copy.store.transact { batch in
        for (index, bytes) in records.enumerated() { _ = try bytes.withUnsafeBytes { try batch.appendStored($0, seq: UInt64(index + 1)) } }
    }
    return copy
}

/// `count` events counting down: what one copy of a log did that the other did not.
func appendCountdown(_ count: Int, to store: EventStore) throws {
    try store.transact { batch in
        for _ in 0..<count {
            let now = try #require(batch.state["count"]?.intValue)
            try batch.append(Event(stream: "counter", type: "decrement", origin: "fork", payload: [:],
                                   writes: [Write("count", old: .int(now), new: .int(now - 1))]))
        }
    }
}

/// How many messages the stream holds on a log's subject.
func heldMessages(_ js: JetStream, _ stream: String = "EVENTLOG", of store: EventStore) throws -> UInt64 {
    try js.subjects(stream: stream, filter: JetStream.Subjects.of(try #require(try store.logID))).first?.messages ?? 0
}

/// What a stream holds is what a shipper reports: never a record another copy shipped, never
/// one the stream's limits or someone took away.
@Suite(.serialized) struct StreamTrustTests {
    /// Two copies of one log shipped at the same time: the one that gets a seq in first
    /// keeps it; the other's publish of that seq under the same message id is answered
    /// "duplicate" (the stream checks ids before the expected sequence) and is refused as a
    /// fork. The other ships in the middle of this one, after its first chunk.
    @Test func copiesOfOneLogShippedAtOnceAreAForkAndTheSecondIsRefused() throws {
        let nats = try NATSServers()
        let a = try counterLog(1_024)
        let b = try copyOfLog(a.store)
        try appendCounter(3, to: a.store)
        try appendCountdown(3, to: b.store)
        var other: Result<Shipper.Report, any Error>?
        let error = #expect(throws: FleetError.self) {
            try Shipper(store: b.store, servers: nats.urls).ship(progress: { _ in
                if other == nil { other = Result { try Shipper(store: a.store, servers: nats.urls).ship() } }
            })
        }
        #expect(try other?.get() == Shipper.Report(logID: try #require(try a.store.logID), shipped: 3, through: 1_027))
        #expect(error?.kind == .refused)
        let id = try #require(try a.store.logID)
        #expect(error?.description.contains("holds other records for log \(id.uuidString.lowercased()) from seq 1025 on") == true, "\(String(describing: error))")
        #expect(try Fleet(servers: nats.urls).logs().map(\.forkedAt) == [[1_025]])
        #expect(error?.description.contains("a fork") == true, "\(String(describing: error))")
        // The stream holds a's history only, and shipping b again is refused as well.
        let copy = TemporaryDirectory()
        let pulled = try EventStore(path: copy.file("db"))
        try Puller(servers: nats.urls).pull(try #require(try a.store.logID), into: pulled)
        #expect(try storedRecords(pulled) == storedRecords(a.store))
        #expect(throws: FleetError.self) { try Shipper(store: b.store, servers: nats.urls).ship() }
    }

    /// An existing stream whose configuration removes records it acknowledged is refused
    /// before anything is published, saying which limit; one that refuses new messages when
    /// full (discard new) loses nothing and is used.
    @Test func aStreamWhoseLimitsWouldDropRecordsIsRefusedBeforeShipping() throws {
        let nats = try NATSServers()
        let js = try JetStream(servers: nats.urls, timeout: 5)
        let log = try counterLog(50)
        let lossy: [(stream: String, phrase: String, configure: (inout jsStreamConfig) -> Void)] = [
            ("PERSUBJECT", "it keeps 10 messages per subject", { $0.MaxMsgsPerSubject = 10 }),
            ("AGED", "older than 3600 s (max_age)", { $0.MaxAge = 3_600 * 1_000_000_000 }),
            ("CAPPED", "it keeps 100 messages (max_msgs) and drops the oldest", { $0.MaxMsgs = 100 }),
            ("SIZED", "it keeps 1000000 bytes (max_bytes)", { $0.MaxBytes = 1_000_000 }),
            ("QUEUE", "work-queue retention", { $0.Retention = js_WorkQueuePolicy }),
            ("ROLLUP", "purge a subject", { $0.AllowRollup = true }),
            ("MEMORY", "in memory only", { $0.Storage = js_MemoryStorage }),
        ]
        for (index, entry) in lossy.enumerated() {
            let (stream, phrase) = (entry.stream, entry.phrase)
            // One stream of subjects eventlog.> at a time: JetStream refuses overlapping ones.
            if index > 0 { #expect(js_DeleteStream(js.context, lossy[index - 1].stream, nil, nil) == NATS_OK) }
            #expect(js.addStream(stream, entry.configure).status == NATS_OK, "\(stream)")
            var shipper = Shipper(store: log.store, servers: nats.urls)
            shipper.stream = stream
            let error = #expect(throws: FleetError.self, "\(stream)") { try shipper.ship() }
            #expect(error?.kind == .refused)
            #expect(error?.description.hasPrefix("stream \(stream) would lose records it acknowledged: ") == true, "\(String(describing: error))")
            #expect(error?.description.contains(phrase) == true, "\(stream): \(String(describing: error))")
            #expect(try heldMessages(js, stream, of: log.store) == 0)
        }
        #expect(js_DeleteStream(js.context, lossy[lossy.count - 1].stream, nil, nil) == NATS_OK)
        #expect(js.addStream("FULL") { $0.MaxMsgs = 1_000; $0.Discard = js_DiscardNew }.status == NATS_OK)
        var shipper = Shipper(store: log.store, servers: nats.urls)
        shipper.stream = "FULL"
        #expect(try shipper.ship().through == 50)
    }

    /// A message removed from the stream after it was acknowledged (deleted by someone, or
    /// dropped by a limit given later) is found at the next ship, which refuses and says so;
    /// it publishes nothing after the hole, however often it is run.
    @Test func aMessageRemovedFromTheStreamIsFoundAndRefusedEveryTime() throws {
        let nats = try NATSServers()
        let log = try counterLog(10)
        let js = try JetStream(servers: nats.urls, timeout: 5)
        // Five ships of ten records: five messages.
        for round in 1...5 {
            if round > 1 { try appendCounter(10, to: log.store) }
            #expect(try Shipper(store: log.store, servers: nats.urls).ship().through == UInt64(round * 10))
        }
        #expect(try heldMessages(js, of: log.store) == 5)
        try js.deleteMessage(stream: "EVENTLOG", sequence: 2)
        try appendCounter(5, to: log.store)
        for _ in 0..<2 {
            let error = #expect(throws: FleetError.self) { try Shipper(store: log.store, servers: nats.urls).ship() }
            #expect(error?.description.contains("holds 4 of the 5 messages that carry this log's records 1-50: 1 missing (deleted, or dropped by the stream's limits)") == true,
                    "\(String(describing: error))")
            #expect(try heldMessages(js, of: log.store) == 4)
        }
    }

    /// A record larger than the server takes in one message (2 MiB against nats-server's
    /// 1 MiB max_payload) stops the shipping at it with a refusal that says so and what to
    /// do, every time: the records before it are shipped, none after it.
    @Test func aRecordOverTheServersPayloadLimitIsRefusedSayingWhatToDo() throws {
        let nats = try NATSServers()
        let log = try counterLog(5)
        try log.store.transact { batch in
            try batch.append(Event(stream: "counter", type: "increment", origin: "test", payload: ["blob": .string(String(repeating: "x", count: 2 << 20))],
                                   writes: [Write("count", old: .int(5), new: .int(6))]))
        }
        try appendCounter(3, to: log.store)
        let js = try JetStream(servers: nats.urls, timeout: 5)
        for _ in 0..<2 {
            let error = #expect(throws: FleetError.self) { try Shipper(store: log.store, servers: nats.urls).ship() }
            #expect(error?.kind == .refused)
            #expect(error?.description.hasPrefix("record 6 of this log is ") == true, "\(String(describing: error))")
            #expect(error?.description.contains("more than the 1048576 a message may carry (max_payload of the server at \(nats.urls), headers included)") == true,
                    "\(String(describing: error))")
            #expect(error?.description.contains("the stream holds this log through seq 5. Raise the server's max_payload") == true, "\(String(describing: error))")
            // Records 1-5, in one message.
            #expect(try heldMessages(js, of: log.store) == 1)
        }
    }

    /// A pull into a database that already holds records of the log continues it only when
    /// its newest record is the stream's record of that seq, byte for byte; a copy that went
    /// another way than the stream's log (a fork) is refused and nothing changes: whether the
    /// stream's log is behind the copy or ahead, and whether the pull finds its place from
    /// the position an earlier pull kept or by reading from the start (the log itself, which
    /// was never pulled).
    @Test func aPullOntoAnotherHistoryOfTheLogIsRefusedAndChangesNothing() throws {
        let nats = try NATSServers(), forked = try NATSServers()
        let a = try counterLog(100)
        let logID = try #require(try a.store.logID)
        try Shipper(store: a.store, servers: nats.urls).ship()
        let directory = TemporaryDirectory()
        let copy = try EventStore(path: directory.file("copy"))
        try Puller(servers: nats.urls).pull(logID, into: copy)
        // Another copy of the log: a's first 50 records, then its own, shipped elsewhere.
        let b = try copyOfLog(a.store, through: 50)
        try appendCountdown(30, to: b.store)
        try Shipper(store: b.store, servers: forked.urls).ship()
        let behind = #expect(throws: FleetError.self) { try Puller(servers: forked.urls).pull(logID, into: copy) }
        #expect(behind?.description.contains("holds another record 80 of log \(logID.uuidString.lowercased()) than stream EVENTLOG does") == true, "\(String(describing: behind))")
        try appendCountdown(40, to: b.store)
        try Shipper(store: b.store, servers: forked.urls).ship()
        for store in [copy, a.store] {
            let ahead = #expect(throws: FleetError.self) { try Puller(servers: forked.urls).pull(logID, into: store) }
            #expect(ahead?.kind == .refused)
            #expect(ahead?.description.contains("holds another record 100 of log") == true, "\(String(describing: ahead))")
            #expect(ahead?.description.hasSuffix("(a fork), and pulling would make a log that never was; nothing was pulled") == true, "\(String(describing: ahead))")
            #expect(try storedRecords(store) == storedRecords(a.store))
        }
        // The log itself, or its copy, from its own stream: nothing to pull, then what is new.
        #expect(try Puller(servers: nats.urls).pull(logID, into: a.store).pulled == 0)
        try appendCounter(10, to: a.store)
        try Shipper(store: a.store, servers: nats.urls).ship()
        #expect(try Puller(servers: nats.urls).pull(logID, into: copy).pulled == 10)
        #expect(try storedRecords(copy) == storedRecords(a.store))
    }

    /// A second message under a record's id (published once the stream's duplicate window has
    /// passed, here a tenth of a second, as a first shipper framed it), carrying that record's very bytes: fleet list and
    /// bisect tell of it with its stream seq and skip it; a single pull refuses it.
    @Test func aSecondMessageForARecordIsToldAndSkippedByTheFleetAndRefusedByAPull() throws {
        let nats = try NATSServers()
        let js = try JetStream(servers: nats.urls, timeout: 5)
        #expect(js.addStream("EVENTLOG") { $0.Duplicates = 100_000_000 }.status == NATS_OK)
        let log = try counterLog(10)
        let logID = try #require(try log.store.logID)
        try Shipper(store: log.store, servers: nats.urls).ship()
        usleep(1_000_000)  // past the duplicate window, so the stream stores the second one
        try nats.publish(try storedRecords(log.store)[4], on: JetStream.Subjects.of(logID), messageID: Shipment.id(logID, seq: 5))
        let notices = Notices()
        var fleet = Fleet(servers: nats.urls)
        fleet.foreign = notices.add
        let expected = [StreamNotice(logID: logID, subject: JetStream.Subjects.of(logID), streamSequence: 2,
                                     finding: "not one of its records (a second message for record 5); skipped")]
        #expect(try fleet.logs().map(\.events) == [10])
        #expect(notices.take() == expected)
        let scratch = TemporaryDirectory()
        #expect(try fleet.bisect(where: try StatePredicate(parsing: "count >= 7"), scratch: scratch.path).map { $0.firstBad?.seq } == [7])
        #expect(notices.take() == expected)
        let copy = TemporaryDirectory()
        let refused = #expect(throws: FleetError.self) { try Puller(servers: nats.urls).pull(logID, into: try EventStore(path: copy.file("db"))) }
        #expect(refused?.description.contains("(a second message for record 5)") == true, "\(String(describing: refused))")
    }
}

/// Notices told from any thread, in the order told.
final class Notices: Sendable {
    private let told = Locked<[StreamNotice]>([])

    func add(_ notice: StreamNotice) { told.withLock { $0.append(notice) } }

    /// The notices told since the last call.
    func take() -> [StreamNotice] { told.withLock { told in defer { told = [] }; return told } }
}
