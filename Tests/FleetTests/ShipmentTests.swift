import CNATS
import EventLog
import EventLogTesting
@testable import Fleet
import Foundation
import LoopbackServer
import Testing

/// Records travel many to a message, as many as a message carries, and a stream a first
/// shipper filled one record to a message is read and continued all the same.
@Suite(.serialized) struct ShipmentTests {
    /// 3,000 small records are three messages (runs of at most 1,024, a chunk read out of the
    /// log at a time); a stream whose messages take at most 4 KiB gets runs that fill them.
    /// Each pulls back byte for byte, and the fleet counts every record.
    @Test func recordsTravelManyToAMessageUpToTheStreamsLimit() throws {
        let nats = try NATSServers()
        let js = try JetStream(servers: nats.urls, timeout: 5)
        let log = try counterLog(3_000)
        let logID = try #require(try log.store.logID)
        #expect(try Shipper(store: log.store, servers: nats.urls).ship() == Shipper.Report(logID: logID, shipped: 3_000, through: 3_000))
        #expect(try heldMessages(js, of: log.store) == 3)
        #expect(try Fleet(servers: nats.urls).logs().map(\.events) == [3_000])

        let small = try NATSServers()
        let smallJS = try JetStream(servers: small.urls, timeout: 5)
        #expect(smallJS.addStream("SMALL") { $0.MaxMsgSize = 4_096 }.status == NATS_OK)
        var shipper = Shipper(store: log.store, servers: small.urls)
        shipper.stream = "SMALL"
        #expect(try shipper.ship().through == 3_000)
        let messages = try heldMessages(smallJS, "SMALL", of: log.store)
        let recordBytes = try storedRecords(log.store).reduce(0) { $0 + $1.count + Shipment.lengthBytes }
        // Each message is full but for less than one record and the room kept for headers.
        #expect(messages > 3 && messages <= UInt64(recordBytes / (4_096 - Shipper.headerRoom - 200) + 1), "\(messages) messages")
        for (servers, stream) in [(nats.urls, "EVENTLOG"), (small.urls, "SMALL")] {
            let copy = TemporaryDirectory()
            var puller = Puller(servers: servers)
            puller.stream = stream
            let pulled = try EventStore(path: copy.file("db"))
            #expect(try puller.pull(logID, into: pulled).pulled == 3_000)
            #expect(try storedRecords(pulled) == storedRecords(log.store))
        }
    }

    /// A copy whose newest record is in the middle of a message (it was pulled from another
    /// stream, or is a backup) meets the stream there, and takes the rest of the run on.
    @Test func aCopyEndingInTheMiddleOfARunContinuesFromIt() throws {
        let nats = try NATSServers()
        let log = try counterLog(2_000)
        let logID = try #require(try log.store.logID)
        try Shipper(store: log.store, servers: nats.urls).ship()
        let copy = try copyOfLog(log.store, through: 500)
        #expect(try Puller(servers: nats.urls).pull(logID, into: copy.store) == Puller.Report(logID: logID, pulled: 1_500, through: 2_000))
        #expect(try storedRecords(copy.store) == storedRecords(log.store))
        // Another copy ending mid-run with its own record 500 is a fork.
        let other = try copyOfLog(log.store, through: 499)
        try appendCountdown(1, to: other.store)
        let error = #expect(throws: FleetError.self) { try Puller(servers: nats.urls).pull(logID, into: other.store) }
        #expect(error?.description.contains("holds another record 500 of log") == true, "\(String(describing: error))")
        #expect(try other.store.lastSeq() == 500)
    }

    /// A stream a first shipper filled, one record to a message under id `<log id>:<seq>`:
    /// the fleet counts it, a pull copies it, and today's shipper goes on after it in runs.
    @Test func aStreamOfOneRecordToAMessageIsReadAndContinued() throws {
        let nats = try NATSServers()
        let js = try JetStream(servers: nats.urls, timeout: 5)
        #expect(js.addStream("EVENTLOG") { _ in }.status == NATS_OK)
        let log = try counterLog(10)
        let logID = try #require(try log.store.logID)
        let subject = JetStream.Subjects.of(logID)
        var last: UInt64 = 0
        for (index, bytes) in try storedRecords(log.store).enumerated() {
            last = try bytes.withUnsafeBytes { try js.publish($0, subject: subject, id: Shipment.id(logID, seq: UInt64(index + 1)), after: last) }.sequence
        }
        #expect(try Fleet(servers: nats.urls).logs().map(\.events) == [10])
        try appendCounter(5, to: log.store)
        #expect(try Shipper(store: log.store, servers: nats.urls).ship() == Shipper.Report(logID: logID, shipped: 5, through: 15))
        #expect(try heldMessages(js, of: log.store) == 11)
        #expect(try Fleet(servers: nats.urls).logs().map(\.events) == [15])
        let copy = TemporaryDirectory()
        let pulled = try EventStore(path: copy.file("db"))
        #expect(try Puller(servers: nats.urls).pull(logID, into: pulled).pulled == 15)
        #expect(try storedRecords(pulled) == storedRecords(log.store))
        #expect(try Shipper(store: log.store, servers: nats.urls).ship().shipped == 0)
    }

    /// Records missing from one log (a message deleted) do not stop a bisect of the fleet:
    /// that log is read up to them, with a notice, and every other log as it is; a pull of
    /// that log alone refuses the gap.
    @Test func aLogWithAGapIsReadUpToItAndTheOtherLogsAllTheSame() throws {
        let nats = try NATSServers()
        let js = try JetStream(servers: nats.urls, timeout: 5)
        let gapped = try counterLog(10)
        for _ in 0..<2 {
            try Shipper(store: gapped.store, servers: nats.urls).ship()
            try appendCounter(10, to: gapped.store)
        }
        try Shipper(store: gapped.store, servers: nats.urls).ship()
        let whole = try counterLog(30)
        try Shipper(store: whole.store, servers: nats.urls).ship()
        #expect(try heldMessages(js, of: gapped.store) == 3)
        try js.deleteMessage(stream: "EVENTLOG", sequence: 2)
        let notices = Notices()
        var fleet = Fleet(servers: nats.urls)
        fleet.foreign = notices.add
        let gappedID = try #require(try gapped.store.logID), wholeID = try #require(try whole.store.logID)
        let scratch = TemporaryDirectory()
        let findings = try fleet.bisect(where: try StatePredicate(parsing: "count >= 25"), logs: [gappedID, wholeID], scratch: scratch.path)
        #expect(findings.map(\.events) == [10, 30])
        #expect(findings.map { $0.firstBad?.seq } == [nil, 25])
        #expect(notices.take() == [StreamNotice(logID: gappedID, subject: JetStream.Subjects.of(gappedID), streamSequence: 3,
                                                finding: "records 11-20 are missing before this one (deleted, or dropped by the stream's limits); the log is read through seq 10")])
        let copy = TemporaryDirectory()
        let refused = #expect(throws: FleetError.self) { try Puller(servers: nats.urls).pull(gappedID, into: try EventStore(path: copy.file("db"))) }
        #expect(refused?.description.contains("the stream skips from seq 10 to 21") == true, "\(String(describing: refused))")
    }

    /// Runs whose framing lies are not the log's records, whatever their id says.
    @Test func aMessageFramedWronglyIsForeign() throws {
        let logID = UUID()
        let records: [[UInt8]] = [[1, 2, 3], [4, 5]]
        let good = Shipment.body(ordinal: 1, records: records)
        let run = try Shipment(id: Shipment.id(logID, 1...2), body: good, of: logID)
        #expect(run.seqs == 1...2 && run.ordinal == 1)
        #expect(run.records.map { Array($0.bytes) } == records)
        let cases: [(String?, [UInt8], String)] = [
            (nil, good, "no message id"),
            (Shipment.id(UUID(), 1...2), good, "message id"),
            (Shipment.id(logID, 1...3), good, "a run named 1-3 that carries 2 records"),
            ("\(logID.uuidString.lowercased()):2-1", good, "message id"),
            (Shipment.id(logID, 1...2), Array(good.dropLast()), "a damaged run of records"),
            (Shipment.id(logID, 1...2), [1, 2, 3], "a body too short"),
            (Shipment.id(logID, 1...2), Shipment.body(ordinal: 2, records: records), "says it is message 2"),
            (Shipment.id(logID, 1...2), Shipment.body(ordinal: 0, records: records), "says it is message 0"),
            ("\(logID.uuidString.lowercased()):0", [1], "message id"),
            ("\(logID.uuidString.lowercased()):\(UInt64.max)", [1], "message id"),
            ("\(logID.uuidString.lowercased()):1-\(UInt64.max)", good, "message id"),
            ("\(logID.uuidString.lowercased()):+1-2", good, "message id"),
            ("\(logID.uuidString.lowercased()):01-02", good, "message id"),
            ("\(logID.uuidString.lowercased()):1-+2", good, "message id"),
            ("\(logID.uuidString.lowercased()): 1-2", good, "message id"),
        ]
        for (id, body, reason) in cases {
            let error = #expect(throws: Shipment.Foreign.self, "\(id ?? "nil")") { try Shipment(id: id, body: body, of: logID) }
            #expect(error?.reason.contains(reason) == true, "\(String(describing: error?.reason)) for \(id ?? "nil")")
        }
    }
}
