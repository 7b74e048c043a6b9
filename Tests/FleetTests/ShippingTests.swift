import EventLog
import EventLogTesting
@testable import Fleet
import Foundation
import LoopbackServer
import Testing

/// A log of `count` counter events (a keyframe every few), with payloads to make records differ in size.
func counterLog(_ count: Int, name: String = #function) throws -> TemporaryEventStore {
    let log = try TemporaryEventStore(keyframePolicy: KeyframePolicy(ratio: 4), name: name)
    try appendCounter(count, to: log.store)
    return log
}

func appendCounter(_ count: Int, to store: EventStore) throws {
    try store.transact { batch in
        for _ in 0..<count {
            let n = Int64(batch.lastSeq)
            try batch.append(Event(stream: "counter", type: "increment", origin: "test", payload: ["note": .string(String(repeating: "x", count: Int(n % 7)))],
                                   writes: [Write("count", old: n == 0 ? nil : .int(n), new: .int(n + 1))]))
        }
    }
}

/// Every record's bytes as stored, checksum included, in order.
func storedRecords(_ store: EventStore) throws -> [[UInt8]] {
    var records: [[UInt8]] = []
    try store.forEachStoredRecord(after: 0) { _, bytes in records.append(Array(bytes)); return true }
    return records
}

@Suite(.serialized) struct ShippingTests {
    /// A bisect's copy of a log goes in a directory the call makes; one of that name already
    /// in the scratch directory (someone's copy of the log, say) is refused, never used or
    /// removed. Refused before any server is asked, so none is started.
    @Test func aBisectNeverUsesOrRemovesADirectoryItDidNotMake() throws {
        let scratch = TemporaryDirectory()
        let id = UUID()
        let theirs = scratch.file(id.uuidString.lowercased())
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: false)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: theirs + "/data.mdb"))
        #expect(throws: LMDBError(code: EEXIST)) {
            try Fleet(servers: "nats://127.0.0.1:1").bisect(where: try StatePredicate(parsing: "a == 1"), logs: [id], scratch: scratch.path)
        }
        #expect(try String(contentsOfFile: theirs + "/data.mdb", encoding: .utf8) == "keep me")
    }

    /// Installs shipping for the first time at once, to a stream none has made yet: one
    /// creates it, and every other takes it as made (the server may say the name exists, or,
    /// while the creation settles, that the subjects overlap: seen once in the benchmark's
    /// fleet.many, rarely hit here), several rounds over. A request may wait 30 s, not the
    /// default 5: on a machine loaded by the rest of the suite, a just-started server once
    /// took longer than 5 s to answer one of the eight (a timeout is `.unavailable`, which
    /// this test is not about).
    @Test func firstShipsAtOnceToANewStreamAllSucceed() throws {
        let logs = try (0..<8).map { try counterLog(20, name: "first-\($0)") }
        for round in 0..<10 {
            let nats = try NATSServers()
            let failures = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: logs.count) { index in
                var shipper = Shipper(store: logs[index].store, servers: nats.urls)
                shipper.timeout = 30
                do { _ = try shipper.ship() } catch { failures.withLock { $0.append("\(error)") } }
            }
            #expect(failures.withLock { $0 } == [], "round \(round)")
            #expect(try Fleet(servers: nats.urls).logs().count == logs.count)
        }
    }

    @Test func aShippedLogPullsBackRecordForRecordAndAgainOnlyWhatIsNew() throws {
        let nats = try NATSServers()
        let log = try counterLog(300)
        let logID = try #require(try log.store.logID)
        let first = try Shipper(store: log.store, servers: nats.urls).ship()
        #expect(first == Shipper.Report(logID: logID, shipped: 300, through: 300))

        let copyDirectory = TemporaryDirectory()
        let copy = try EventStore(path: copyDirectory.file("copy"))
        #expect(try Puller(servers: nats.urls).pull(logID, into: copy) == Puller.Report(logID: logID, pulled: 300, through: 300))
        #expect(try copy.logID == logID)
        #expect(try storedRecords(copy) == storedRecords(log.store))
        #expect(try copy.verify().isOK)

        // Nothing new: nothing shipped or pulled. Then 50 more: only those.
        #expect(try Shipper(store: log.store, servers: nats.urls).ship().shipped == 0)
        try appendCounter(50, to: log.store)
        #expect(try Shipper(store: log.store, servers: nats.urls).ship() == Shipper.Report(logID: logID, shipped: 50, through: 350))
        #expect(try Puller(servers: nats.urls).pull(logID, into: copy).pulled == 50)
        #expect(try storedRecords(copy) == storedRecords(log.store))
        #expect(try copy.currentState == log.store.currentState)
    }

    @Test func aCopyOfAnotherLogIsRefused() throws {
        let nats = try NATSServers()
        let a = try counterLog(10), b = try counterLog(10)
        try Shipper(store: a.store, servers: nats.urls).ship()
        let aID = try #require(try a.store.logID)
        #expect(throws: FleetError.self) { try Puller(servers: nats.urls).pull(aID, into: b.store) }
        #expect(try b.store.lastSeq() == 10)
        let unknown = TemporaryDirectory()
        let error = #expect(throws: FleetError.self) { try Puller(servers: nats.urls).pull(UUID(), into: try EventStore(path: unknown.file("db"))) }
        #expect(error?.description.contains("holds no log") == true, "\(String(describing: error))")
    }

    @Test func aServerThatIsDownIsUnavailableAndShippingResumesWhenItIsBack() throws {
        let nats = try NATSServers()
        let log = try counterLog(100)
        try Shipper(store: log.store, servers: nats.urls).ship()
        nats.kill(0)
        try appendCounter(100, to: log.store)
        var shipper = Shipper(store: log.store, servers: nats.urls)
        shipper.timeout = 1
        let error = #expect(throws: FleetError.self) { try shipper.ship() }
        #expect(error?.kind == .unavailable, "\(String(describing: error))")
        try nats.restart(0)
        #expect(try shipper.ship().shipped == 100)
        let copy = TemporaryDirectory()
        let pulled = try EventStore(path: copy.file("db"))
        try Puller(servers: nats.urls).pull(try #require(try log.store.logID), into: pulled)
        #expect(try storedRecords(pulled) == storedRecords(log.store))
    }

    @Test func aLogChangedAfterShippingIsRefused() throws {
        let nats = try NATSServers()
        let log = try counterLog(20)
        try Shipper(store: log.store, servers: nats.urls).ship()
        // Another log given the same id (a restored backup that went its own way).
        let other = try TemporaryEventStore()
        try other.store.adoptLogID(try #require(try log.store.logID))
        try appendCounter(5, to: other.store)
        let error = #expect(throws: FleetError.self) { try Shipper(store: other.store, servers: nats.urls).ship() }
        #expect(error?.description.contains("but the log ends at 5") == true, "\(String(describing: error))")
    }
}

/// What someone else put on a log's subject is never taken for the log.
@Suite(.serialized) struct HostileStreamTests {
    @Test func aDamagedRecordInTheStreamIsRefusedAndTheCopyKeepsWhatWasGood() throws {
        let nats = try NATSServers()
        let log = try counterLog(20)
        let logID = try #require(try log.store.logID)
        try Shipper(store: log.store, servers: nats.urls).ship()
        // Record 21, published by someone else: the bytes of record 20 with one byte flipped.
        var bytes = try #require(try storedRecords(log.store).last)
        bytes[bytes.count / 2] ^= 0x40
        let js = try JetStream(servers: nats.urls, timeout: 5)
        let subject = JetStream.Subjects.of(logID)
        let last = try #require(try js.lastMessage(stream: "EVENTLOG", subject: subject))
        let body = Shipment.body(ordinal: 2, records: [bytes])
        _ = try body.withUnsafeBytes { try js.publish($0, subject: subject, id: Shipment.id(logID, 21...21), after: last.sequence) }

        let copy = TemporaryDirectory()
        let store = try EventStore(path: copy.file("db"))
        let error = #expect(throws: FleetError.self) { try Puller(servers: nats.urls).pull(logID, into: store) }
        #expect(error?.kind == .refused)
        #expect(error?.description.contains("record 21 is corrupt") == true, "\(String(describing: error))")
        // The records before it are committed only with it, in one batch: the copy is empty or whole up to 20.
        #expect([0, 20].contains(try store.lastSeq()))
        #expect(try store.verify().isOK)
        // And the shipper of the real log refuses to go on after a record that is not its own.
        let refused = #expect(throws: FleetError.self) { try Shipper(store: log.store, servers: nats.urls).ship() }
        #expect(refused?.description.contains("ends at 20") == true, "\(String(describing: refused))")
    }

    @Test func aMessageThatIsNoRecordOfTheLogIsRefused() throws {
        let nats = try NATSServers()
        let log = try counterLog(5)
        let logID = try #require(try log.store.logID)
        try Shipper(store: log.store, servers: nats.urls).ship()
        let js = try JetStream(servers: nats.urls, timeout: 5)
        let subject = JetStream.Subjects.of(logID)
        let last = try #require(try js.lastMessage(stream: "EVENTLOG", subject: subject))
        _ = try Array("hello".utf8).withUnsafeBytes { try js.publish($0, subject: subject, id: "someone-else", after: last.sequence) }
        let error = #expect(throws: FleetError.self) { try Shipper(store: log.store, servers: nats.urls).ship() }
        #expect(error?.description.contains("is not one of this log's records") == true, "\(String(describing: error))")
        let copy = TemporaryDirectory()
        let pulled = #expect(throws: FleetError.self) { try Puller(servers: nats.urls).pull(logID, into: try EventStore(path: copy.file("db"))) }
        #expect(pulled != nil)
    }
}
