import EventLog
import Foundation

/// Where a log stands in a stream: the last log seq the stream holds (shipped or pulled
/// through) and the stream sequence of that message. Kept in the database beside the log
/// (`fleet` read model), per stream, so that a restart asks the stream only to confirm it.
struct StreamPosition: Equatable {
    var through: UInt64 = 0
    var sequence: UInt64 = 0

    static let database = "fleet"

    static func key(_ direction: String, stream: String) -> [UInt8] { Array("\(direction):\(stream)".utf8) }

    static func read(_ direction: String, stream: String, in store: EventStore) throws -> StreamPosition? {
        guard let db = try store.openDatabase(named: database, create: false) else { return nil }
        return try store.read { txn in
            try key(direction, stream: stream).withUnsafeBytes { key in
                guard let bytes = try txn.get(db, key: key), bytes.count == 16 else { return nil }
                return StreamPosition(through: UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self)),
                                      sequence: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            }
        }
    }

    func write(_ direction: String, stream: String, in batch: inout AppendBatch, db: Database) throws {
        var bytes = withUnsafeBytes(of: through.littleEndian) { Array($0) }
        withUnsafeBytes(of: sequence.littleEndian) { bytes += $0 }
        try StreamPosition.key(direction, stream: stream).withUnsafeBytes { key in
            try bytes.withUnsafeBytes { try batch.put(db, key: key, value: $0) }
        }
    }
}

/// The message id of a log's record in the stream: `<log id>:<seq>`.
enum MessageID {
    static func of(_ logID: UUID, seq: UInt64) -> String { "\(logID.uuidString.lowercased()):\(seq)" }

    /// The seq a message id names, when it names one of `logID`'s records.
    static func seq(_ id: String?, of logID: UUID) -> UInt64? {
        guard let id, let colon = id.lastIndex(of: ":"), UUID(uuidString: String(id[..<colon])) == logID else { return nil }
        return UInt64(id[id.index(after: colon)...])
    }
}

/// Ships one log's records to a JetStream stream, on the subject `eventlog.<log id>`, each as
/// its stored bytes (checksum included) with message id `<log id>:<seq>` and the subject's
/// expected last sequence, so that a retry after any crash neither loses nor duplicates a
/// record, and a record never lands after a gap. Where the stream stands is asked of the
/// stream at every start (its newest message for the subject names the last seq it holds),
/// and kept in the database as records are acknowledged.
public struct Shipper {
    /// The log shipped; it keeps the shipping position in its `fleet` read model.
    public let store: EventStore
    /// `nats://host:port`, or several, comma-separated, for a cluster.
    public let servers: String
    /// The stream, created when missing.
    public var stream = "EVENTLOG"
    /// The copies the stream keeps when this shipper creates it.
    public var replicas = 1
    /// Seconds a request may wait for an answer.
    public var timeout = 5.0
    /// Seconds a request keeps being tried while the servers are out of reach, once connected
    /// (reaching none at the start fails at once).
    public var retryFor = 30.0

    /// A shipper of `store` to the default stream at `servers`; nothing is connected until
    /// `ship`.
    public init(store: EventStore, servers: String) {
        self.store = store
        self.servers = servers
    }

    /// What a `ship` did.
    public struct Report: Sendable, Equatable {
        /// The id of the log shipped.
        public var logID: UUID
        /// Records published by this call.
        public var shipped: Int
        /// The last seq the stream holds.
        public var through: UInt64

        /// A report of the given values.
        public init(logID: UUID, shipped: Int, through: UInt64) {
            self.logID = logID
            self.shipped = shipped
            self.through = through
        }
    }

    /// Ships every record the stream does not hold yet; with `follow`, goes on shipping as
    /// events commit until `stop` returns `true` (checked at least every quarter second).
    /// `progress` hears of every 1,024 records acknowledged.
    /// - Throws: `FleetError` of kind `.refused` when the log has no id yet, the stream's
    ///   newest message for the log is not one of its records, the stream holds the log
    ///   beyond its end or other bytes for one of its seqs (the log changed after it was
    ///   shipped, or is another copy), or the stream refuses a record; `.unavailable` when no
    ///   server can be reached at the start, or the servers stay out of reach for `retryFor`
    ///   seconds (the position reached is kept, and shipping again resumes there).
    ///   `EventStoreError` or `LMDBError` when the log cannot be read or the position cannot
    ///   be kept (`.readOnly` on a read-only store).
    @discardableResult
    public func ship(follow: Bool = false, stop: @escaping () -> Bool = { false },
                     progress: (Report) -> Void = { _ in }) throws -> Report {
        guard let logID = try store.logID else {
            throw FleetError(.refused, "\(store.path) has no log id yet: open it for writing once (for example with eventlog ship itself)")
        }
        let js = try JetStream(servers: servers, timeout: timeout)
        let limits = try js.ensureStream(stream, replicas: replicas)
        try limits.refuseDropping(stream)
        let largest = min(js.maxPayload, limits.maxMessageSize ?? .max) - Self.headerRoom
        let subject = JetStream.Subjects.of(logID)
        guard let db = try store.openDatabase(named: StreamPosition.database, create: true) else {
            throw FleetError(.refused, "cannot keep the shipping position in \(store.path)")
        }
        var position = try confirmedPosition(js, subject: subject, logID: logID)
        var report = Report(logID: logID, shipped: 0, through: position.through)
        func save() throws {
            try store.transact { batch in try position.write("shipped", stream: stream, in: &batch, db: db) }
        }
        try save()
        while true {
            // A chunk at a time, copied out of a short read transaction: the network never
            // holds one open.
            var chunk: [(seq: UInt64, bytes: [UInt8])] = []
            try store.forEachStoredRecord(after: position.through) { seq, bytes in
                chunk.append((seq, Array(bytes)))
                return chunk.count < 1_024
            }
            var resynced = false
            for (seq, bytes) in chunk {
                guard bytes.count <= largest else {
                    try save()
                    throw FleetError(.refused, "record \(seq) of this log is \(bytes.count) bytes, more than the \(largest + Self.headerRoom) a message may carry "
                        + "(\(largest + Self.headerRoom == js.maxPayload ? "max_payload of the server at \(servers)" : "max_msg_size of stream \(stream)"), headers included), "
                        + "so it and the records after it are not shipped; the stream holds this log through seq \(position.through). "
                        + "Raise \(largest + Self.headerRoom == js.maxPayload ? "the server's max_payload (at most 64 MiB)" : "the stream's max_msg_size") and ship again")
                }
                let ack: (sequence: UInt64, duplicate: Bool)
                do {
                    ack = try publish(bytes, seq: seq, after: position, js: js, subject: subject, logID: logID, save: save)
                } catch is JetStream.WrongLastSequence {
                    // A publish stored but not acknowledged (a leader lost on the way), or
                    // another shipper: the stream says where it stands, checked as at the start.
                    let confirmed = try retryingWhileUnavailable(for: retryFor) { try confirmedPosition(js, subject: subject, logID: logID) }
                    guard confirmed.through >= seq || confirmed.sequence != position.sequence else {
                        throw FleetError(.refused, "the stream refuses record \(seq) of this log after seq \(position.through) and holds nothing newer")
                    }
                    // The record this publish carried, when it was stored after all.
                    report.shipped += confirmed.through == seq ? 1 : 0
                    position = confirmed
                    report.through = confirmed.through
                    resynced = true
                    break
                }
                position = StreamPosition(through: seq, sequence: ack.sequence)
                report.shipped += ack.duplicate ? 0 : 1
                report.through = seq
                if stop() { break }
            }
            if resynced { continue }
            if !chunk.isEmpty {
                try save()
                progress(report)
            }
            if stop() { break }
            if chunk.count == 1_024 { continue }
            guard follow else { break }
            try store.follow(after: position.through, chunk: 1, stop: stop) { _ in false }
        }
        // What the stream holds, not what was published: another copy of the log may have
        // shipped the same seqs, the stream's limits or someone may have removed records.
        let held = try retryingWhileUnavailable(for: retryFor) { try confirmedPosition(js, subject: subject, logID: logID) }
        guard held.through >= position.through else {
            throw FleetError(.refused, "stream \(stream) holds this log only through seq \(held.through), though it acknowledged records through \(position.through): "
                + "they were removed (deleted, or dropped by the stream's limits); ship the log to a new stream (--stream NAME)")
        }
        report.through = held.through
        return report
    }

    /// Bytes of a message kept for its headers (message id, expected last sequence, expected
    /// stream), which the server's `max_payload` and a stream's `max_msg_size` count too.
    static let headerRoom = 512

    /// Publishes one record. While the servers are out of reach (a node down, a leader being
    /// elected), it tries again for up to `retryFor` seconds: the same message id makes a retry
    /// of a publish that was stored but not acknowledged a duplicate, which the stream drops.
    /// A duplicate is taken only when the stream holds these very bytes under the id: another
    /// copy of the log shipping at the same time gets its record in first under the same id,
    /// and the stream answers "duplicate" before it checks the expected sequence.
    private func publish(_ bytes: [UInt8], seq: UInt64, after position: StreamPosition, js: JetStream, subject: String,
                         logID: UUID, save: () throws -> Void) throws -> (sequence: UInt64, duplicate: Bool) {
        let id = MessageID.of(logID, seq: seq)
        do {
            let ack = try retryingWhileUnavailable(for: retryFor) {
                try bytes.withUnsafeBytes { try js.publish($0, subject: subject, id: id, after: position.sequence, stream: stream) }
            }
            guard ack.duplicate else { return ack }
            let held = try retryingWhileUnavailable(for: retryFor) { try js.message(stream: stream, sequence: ack.sequence) }
            guard let held, held.id == id, held.data == bytes else {
                try save()
                throw FleetError(.refused, "stream \(stream) holds another record \(seq) of this log (stream seq \(ack.sequence)), shipped by another copy of it at the same time: "
                    + "the copies went their own ways (a fork), and this one is not shipped past seq \(position.through)")
            }
            return ack
        } catch let error as FleetError where error.kind == .unavailable {
            try? save()
            throw FleetError(.unavailable, "\(error.description); the stream holds this log through seq \(position.through), and shipping again resumes there")
        }
    }

    /// Where the stream stands for this log, from its newest message on the subject, checked
    /// against the log: a stream ahead of the log, or holding other bytes for a seq, is
    /// another log's (a copy that went its own way) and is refused.
    private func confirmedPosition(_ js: JetStream, subject: String, logID: UUID) throws -> StreamPosition {
        guard let last = try js.lastMessage(stream: stream, subject: subject) else { return StreamPosition() }
        guard let seq = MessageID.seq(last.id, of: logID) else {
            throw FleetError(.refused, "the newest message on \(subject) is not one of this log's records (message id \(last.id ?? "none"))")
        }
        var local: [UInt8]?
        try store.forEachStoredRecord(after: seq - 1, through: seq) { _, bytes in local = Array(bytes); return false }
        guard let local else {
            throw FleetError(.refused, "stream \(stream) holds this log through seq \(seq), but the log ends at \(try store.lastSeq()): it is not the log that was shipped")
        }
        guard local == last.data else {
            throw FleetError(.refused, "stream \(stream) holds another record \(seq) for this log: the log was changed after it was shipped, or another copy of it was shipped (a fork)")
        }
        // Every record through its newest, or the stream lost some: deleted, or dropped by
        // limits it had (or was given) after they were acknowledged.
        let held = try js.subjects(stream: stream, filter: subject).first?.messages ?? 0
        guard held >= seq else {
            throw FleetError(.refused, "stream \(stream) holds \(held) messages of this log, not all of its records 1-\(seq): \(seq - held) missing "
                + "(deleted, or dropped by the stream's limits), and a stream cannot take them back in order; ship the log to a new stream (--stream NAME)")
        }
        return StreamPosition(through: seq, sequence: last.sequence)
    }
}

/// Copies one log out of a stream into a local database, record for record and byte for
/// byte: each record's checksum is checked, seqs must follow on without a gap, and writes are
/// checked against the state as any append's are. A second pull goes on from where the copy
/// ends.
public struct Puller {
    /// `nats://host:port`, or several, comma-separated, for a cluster.
    public let servers: String
    /// The stream the log was shipped to.
    public var stream = "EVENTLOG"
    /// Seconds a request may wait for an answer; without `follow`, also how long the stream
    /// may stay silent before the pull stops.
    public var timeout = 5.0
    /// Seconds a request keeps being tried while the servers are out of reach, once connected.
    public var retryFor = 30.0

    /// A puller from the default stream at `servers`; nothing is connected until `pull`.
    public init(servers: String) {
        self.servers = servers
    }

    /// What a `pull` did.
    public struct Report: Sendable, Equatable {
        /// The id of the log pulled.
        public var logID: UUID
        /// Records appended to the copy by this call.
        public var pulled: Int
        /// The last seq the copy holds.
        public var through: UInt64

        /// A report of the given values.
        public init(logID: UUID, pulled: Int, through: UInt64) {
            self.logID = logID
            self.pulled = pulled
            self.through = through
        }
    }

    /// Copies the records of `logID` the copy in `store` lacks; with `follow`, goes on as
    /// they arrive until `stop` returns `true`. Records are committed 1,024 at a time, with
    /// the stream position, and stay committed when a later one fails.
    /// - Parameters:
    ///   - store: An empty log, or a copy of `logID` made by an earlier pull; it takes the
    ///     log's id.
    ///   - progress: Called after each commit with the report so far.
    /// - Throws: `FleetError` of kind `.refused` when the stream holds no such log (without
    ///   `follow`), `store` holds another log, a message on the log's subject is not one of
    ///   its records, the stream skips a seq, or the copy refuses a record (its checksum, its
    ///   writes against the state); `.unavailable` when no server can be reached, or the
    ///   stream stops delivering before the newest record (pulling again resumes there).
    ///   `EventStoreError` or `LMDBError` when the copy cannot be read or written.
    @discardableResult
    public func pull(_ logID: UUID, into store: EventStore, follow: Bool = false, stop: @escaping () -> Bool = { false },
                     progress: (Report) -> Void = { _ in }) throws -> Report {
        let js = try JetStream(servers: servers, timeout: timeout)
        let subject = JetStream.Subjects.of(logID)
        let newest = try retryingWhileUnavailable(for: retryFor) { try js.lastMessage(stream: stream, subject: subject) }
        guard newest != nil || follow else { throw FleetError(.refused, "stream \(stream) holds no log \(logID.uuidString.lowercased())") }
        do { try store.adoptLogID(logID) } catch let error as EventStoreError {
            throw FleetError(.refused, "\(store.path) is not a copy of log \(logID.uuidString.lowercased()): \(error)")
        }
        guard let db = try store.openDatabase(named: StreamPosition.database, create: true) else {
            throw FleetError(.refused, "cannot keep the pull position in \(store.path)")
        }
        var position = StreamPosition(through: try store.lastSeq())
        if let kept = try StreamPosition.read("pulled", stream: stream, in: store), kept.through == position.through {
            position.sequence = kept.sequence
        }
        var report = Report(logID: logID, pulled: 0, through: position.through)
        var end: UInt64 = 0
        if let newest {
            guard let seq = MessageID.seq(newest.id, of: logID) else {
                throw FleetError(.refused, "the newest message on \(subject) is not one of this log's records (message id \(newest.id ?? "none"))")
            }
            end = seq
        }
        if !follow, position.through >= end { return report }

        let messages = try retryingWhileUnavailable(for: retryFor) { try js.messages(stream: stream, subject: subject, from: position.sequence + 1) }
        var pending: [JetStream.Message] = []
        func commit() throws {
            guard !pending.isEmpty else { return }
            do { try append() } catch let error as EventStoreError {
                throw FleetError(.refused, "a record of log \(logID.uuidString.lowercased()) is refused: \(error)")
            }
            report.pulled += pending.count
            report.through = position.through
            pending.removeAll(keepingCapacity: true)
            progress(report)
        }
        func append() throws {
            try store.transact { batch in
                for message in pending {
                    guard let seq = MessageID.seq(message.id, of: logID) else { continue }
                    try message.data.withUnsafeBytes { _ = try batch.appendStored($0, seq: seq) }
                }
                position = StreamPosition(through: batch.lastSeq, sequence: pending[pending.count - 1].sequence)
                try position.write("pulled", stream: stream, in: &batch, db: db)
            }
        }
        var expected = position.through + 1
        while !stop() {
            guard let message = try messages.next(timeout: follow ? 0.25 : timeout) else {
                try commit()
                if follow { continue }
                throw FleetError(.unavailable, "the stream stopped delivering log \(logID.uuidString.lowercased()) at seq \(report.through) of \(end); pulling again resumes there")
            }
            guard let seq = MessageID.seq(message.id, of: logID) else {
                throw FleetError(.refused, "a message on \(subject) is not one of this log's records (message id \(message.id ?? "none"))")
            }
            if seq < expected { continue }  // already in the copy
            guard seq == expected else {
                try commit()
                throw FleetError(.refused, "the stream skips from seq \(expected - 1) to \(seq) of log \(logID.uuidString.lowercased()): a gap, refused")
            }
            pending.append(message)
            expected += 1
            if pending.count == 1_024 { try commit() }
            if !follow, seq >= end { break }
        }
        try commit()
        return report
    }
}
