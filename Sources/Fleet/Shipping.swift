import EventLog
import Foundation

/// Where a log stands in a stream: the last log seq the stream holds (shipped or pulled
/// through) and the stream sequence of that message. Kept in the database beside the log
/// (`fleet` read model), per stream, so that a restart asks the stream only to confirm it.
struct StreamPosition: Equatable {
    var through: UInt64 = 0
    var sequence: UInt64 = 0
    /// The ordinal of that message among the log's messages (`Shipment.ordinal`), as the
    /// stream says; never kept (0 when read from the database).
    var messages: UInt64 = 0

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

    /// The newest seq of `store` that any stream acknowledged, as its shippers saved it;
    /// `nil` when it was never shipped.
    static func shippedThrough(_ store: EventStore) throws -> UInt64? {
        guard let db = try store.openDatabase(named: database, create: false) else { return nil }
        let prefix = Array("shipped:".utf8)
        return try store.read { txn in
            try txn.withCursor(db) { cursor in
                var newest: UInt64?
                var entry = try prefix.withUnsafeBytes { try cursor.seek(atOrAfter: $0) }
                while let found = entry, found.key.starts(with: prefix) {
                    if found.value.count == 16 { newest = max(newest ?? 0, UInt64(littleEndian: found.value.loadUnaligned(as: UInt64.self))) }
                    entry = try cursor.next()
                }
                return newest
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

/// Ships one log's records to a JetStream stream, on the subject `eventlog.<log id>`, as runs
/// of records in their stored bytes (checksum included), as many to a message as it carries
/// (`Shipment`), each with a message id naming its run and the subject's expected last
/// sequence, so that a retry after any crash neither loses nor duplicates a record, and a
/// record never lands after a gap. Where the stream stands is asked of the stream at every
/// start (its newest message for the subject names the last seq it holds), and kept in the
/// database as runs are acknowledged.
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
        /// Records published by this call (the stream stored them, not a copy before).
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
    /// events commit until `stop` returns `true` (checked at least every quarter second, and
    /// after each message). `progress` hears of every 1,024 records acknowledged, at most.
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
        // The largest message the stream takes: the server's max_payload, unless the stream's
        // max_msg_size is smaller; a record needs room for its headers too.
        let byServer = (limits.maxMessageSize ?? .max) >= js.maxPayload
        let messageLimit = byServer ? js.maxPayload : limits.maxMessageSize!
        let subject = JetStream.Subjects.of(logID)
        guard let db = try store.openDatabase(named: StreamPosition.database, create: true) else {
            throw FleetError(.refused, "cannot keep the shipping position in \(store.path)")
        }
        var position = try confirmedPosition(js, subject: subject, logID: logID)
        // The stream must hold what a compaction dropped: shipping the window alone leaves a gap.
        if let base = try store.base(), position.through < base.seq {
            throw FleetError(.refused, "the log was compacted (it starts after event \(base.seq)), but stream \(stream) holds it only through seq \(position.through): shipping it would leave a gap")
        }
        var report = Report(logID: logID, shipped: 0, through: position.through)
        func save() throws {
            try store.transact { batch in try position.write("shipped", stream: stream, in: &batch, db: db) }
        }
        try save()
        while true {
            // A chunk at a time, copied out of a short read transaction: the network never
            // holds one open.
            var chunk: [(seq: UInt64, bytes: [UInt8])] = [], chunkBytes = 0, more = false
            try store.forEachStoredRecord(after: position.through) { seq, bytes in
                chunk.append((seq, Array(bytes)))
                chunkBytes += bytes.count
                more = chunk.count == 1_024 || chunkBytes >= Self.chunkBytes
                return !more
            }
            var resynced = false
            var rest = chunk[...]
            while let first = rest.first {
                let run = rest.prefix(Self.runLength(of: rest, within: messageLimit))
                guard !run.isEmpty else {
                    try save()
                    throw FleetError(.refused, "record \(first.seq) of this log is \(first.bytes.count) bytes, more than the \(messageLimit) a message may carry "
                        + "(\(byServer ? "max_payload of the server at \(servers)" : "max_msg_size of stream \(stream)"), headers included), "
                        + "so it and the records after it are not shipped; the stream holds this log through seq \(position.through). "
                        + "Raise \(byServer ? "the server's max_payload (at most 64 MiB)" : "the stream's max_msg_size") and ship again")
                }
                rest = rest.dropFirst(run.count)
                let seqs = first.seq...(first.seq + UInt64(run.count) - 1)
                let ack: (sequence: UInt64, duplicate: Bool)
                do {
                    ack = try publish(Shipment.body(ordinal: position.messages + 1, records: run.lazy.map(\.bytes)), seqs: seqs, after: position,
                                      js: js, subject: subject, logID: logID, save: save)
                } catch is JetStream.WrongLastSequence {
                    // A publish stored but not acknowledged (a leader lost on the way), or
                    // another shipper: the stream says where it stands, checked as at the start.
                    let confirmed = try retryingWhileUnavailable(for: retryFor) { try confirmedPosition(js, subject: subject, logID: logID) }
                    guard confirmed.through >= seqs.upperBound || confirmed.sequence != position.sequence else {
                        throw FleetError(.refused, "the stream refuses records \(seqs.lowerBound)-\(seqs.upperBound) of this log after seq \(position.through) and holds nothing newer")
                    }
                    // The run this publish carried, when it was stored after all.
                    report.shipped += confirmed.through == seqs.upperBound && confirmed.messages == position.messages + 1 ? run.count : 0
                    position = confirmed
                    report.through = confirmed.through
                    resynced = true
                    break
                }
                position = StreamPosition(through: seqs.upperBound, sequence: ack.sequence, messages: position.messages + 1)
                report.shipped += ack.duplicate ? 0 : run.count
                report.through = seqs.upperBound
                if stop() { break }
            }
            if resynced { continue }
            if !chunk.isEmpty {
                try save()
                progress(report)
            }
            if stop() { break }
            if more { continue }
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

    /// The newest seq of `store` that a stream acknowledged (any stream it was shipped to),
    /// as its shippers kept it beside the log; `nil` when it was never shipped. What is at or
    /// before it may be compacted away without losing what the fleet has not got.
    public static func shippedThrough(_ store: EventStore) throws -> UInt64? {
        try StreamPosition.shippedThrough(store)
    }

    /// Bytes of a message kept for its headers (message id, expected last sequence, expected
    /// stream), which the server's `max_payload` and a stream's `max_msg_size` count too.
    static let headerRoom = 512

    /// Bytes of records read out of the log at a time, at the least (a chunk is also at most
    /// 1,024 records).
    static let chunkBytes = 8 << 20

    /// How many of `records`, from the first, one message of at most `limit` bytes carries:
    /// 0 when the first alone is too large.
    static func runLength(of records: ArraySlice<(seq: UInt64, bytes: [UInt8])>, within limit: Int) -> Int {
        var bytes = headerRoom + Shipment.ordinalBytes, count = 0
        for record in records {
            bytes += Shipment.lengthBytes + record.bytes.count
            guard bytes <= limit else { break }
            count += 1
        }
        return count
    }

    /// Publishes the run `seqs`, framed in `body`. While the servers are out of reach (a node down, a leader being
    /// elected), it tries again for up to `retryFor` seconds: the same message id makes a retry
    /// of a publish that was stored but not acknowledged a duplicate, which the stream drops.
    /// A duplicate is taken only when the stream holds these very bytes under the id: another
    /// copy of the log shipping at the same time gets its record in first under the same id,
    /// and the stream answers "duplicate" before it checks the expected sequence.
    private func publish(_ body: [UInt8], seqs: ClosedRange<UInt64>, after position: StreamPosition, js: JetStream, subject: String,
                         logID: UUID, save: () throws -> Void) throws -> (sequence: UInt64, duplicate: Bool) {
        let id = Shipment.id(logID, seqs)
        do {
            let ack = try retryingWhileUnavailable(for: retryFor) {
                try body.withUnsafeBytes { try js.publish($0, subject: subject, id: id, after: position.sequence, stream: stream) }
            }
            guard ack.duplicate else { return ack }
            let held = try retryingWhileUnavailable(for: retryFor) { try js.message(stream: stream, sequence: ack.sequence) }
            guard let held, held.id == id, held.data == body else {
                try save()
                let first = firstDifference(js, logID: logID, below: seqs.upperBound + 1, after: position) ?? seqs.lowerBound
                throw fork(js, logID: logID, from: first, shippedThrough: position.through,
                           "another copy of it shipped at the same time, and the copies went their own ways (a fork)")
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
        let newest: Shipment
        do { newest = try Shipment(last, of: logID) } catch {
            throw FleetError(.refused, "the newest message on \(subject) is not one of this log's records (\(error.reason))")
        }
        let seq = newest.seqs.upperBound
        let shipped = try StreamPosition.read("shipped", stream: stream, in: store) ?? StreamPosition()
        if let base = try store.base(), newest.seqs.lowerBound <= base.seq {
            // Compacted away since: only the stream message this log's shipper was answered
            // for it can be taken for it.
            guard shipped.through == seq, shipped.sequence == last.sequence else {
                let compacted = newest.seqs.lowerBound == seq ? "seq \(seq)" : "seqs \(newest.seqs.lowerBound)-\(seq) in its newest message"
                throw FleetError(.refused, "stream \(stream) holds this log through \(compacted), which the log compacted away (it starts after event \(base.seq)) "
                    + "and did not ship there itself: they cannot be compared; ship the log to a new stream (--stream NAME)")
            }
        } else if let differs = try store.firstDifference(from: newest) {
            // The stream is ahead of a copy that is only behind, or of one that went its own
            // way before the stream's end; else it holds another record `differs`, and maybe others before it.
            let behind = try store.lastSeq() < differs
            let end = behind ? try store.lastSeq() : differs - 1
            guard let first = firstDifference(js, logID: logID, below: end + 1, after: shipped) ?? (behind ? nil : differs) else {
                throw FleetError(.refused, "stream \(stream) holds this log through seq \(seq), but the log ends at \(end): it is not the log that was shipped")
            }
            throw fork(js, logID: logID, from: first, shippedThrough: min(shipped.through, first - 1),
                       "the log was changed after it was shipped, or another copy of it was shipped (a fork)")
        }
        // Every message through its newest, or the stream lost some: deleted, or dropped by
        // limits it had (or was given) after they were acknowledged.
        let held = try js.subjects(stream: stream, filter: subject).first?.messages ?? 0
        guard held >= newest.ordinal else {
            throw FleetError(.refused, "stream \(stream) holds \(held) of the \(newest.ordinal) messages that carry this log's records 1-\(seq): "
                + "\(newest.ordinal - held) missing (deleted, or dropped by the stream's limits), and a stream cannot take them back in order; "
                + "ship the log to a new stream (--stream NAME)")
        }
        return StreamPosition(through: seq, sequence: last.sequence, messages: newest.ordinal)
    }

    /// The first seq below `known` at which the log's records differ from the stream's, among
    /// the messages after stream position `after` (records this copy shipped itself, the
    /// same since); `nil` when they agree up to it, or the stream cannot be read.
    private func firstDifference(_ js: JetStream, logID: UUID, below known: UInt64, after: StreamPosition) -> UInt64? {
        guard known > after.through + 1,
              let messages = try? js.messages(stream: stream, subject: JetStream.Subjects.of(logID), from: after.sequence + 1) else { return nil }
        while let message = try? messages.next(timeout: timeout), let run = try? Shipment(message, of: logID), run.seqs.lowerBound < known {
            for (seq, bytes) in run.records where seq < known {
                guard (try? store.holds(seq, bytes)) == true else { return seq }
            }
        }
        return nil
    }

    /// A copy of the log refused because the stream holds other records for it from seq
    /// `first` on. The stream is told, on `eventlog.<log id>.forks`, so that `fleet list`
    /// marks the log; it keeps its records, and telling it is best effort, never hiding the
    /// refusal.
    private func fork(_ js: JetStream, logID: UUID, from first: UInt64, shippedThrough through: UInt64, _ why: String) -> FleetError {
        let notice = Array(StateValue.object(["seq": .int(Int64(first))]).json().utf8)
        _ = try? notice.withUnsafeBytes { bytes in
            try js.publish(bytes, subject: JetStream.Subjects.forks(of: logID), id: ForkNotice.id(logID, seq: first, record: try store.storedRecord(first)),
                           after: nil, stream: stream)
        }
        return FleetError(.refused, "stream \(stream) holds other records for log \(logID.uuidString.lowercased()) from seq \(first) on: \(why). "
            + "The stream keeps its copy, this one is not shipped past seq \(through), and fleet list marks the log forked")
    }
}

/// What the stream is told of a copy of a log refused as a fork: a message on
/// `eventlog.<log id>.forks` whose body is `{"seq":N}`, the first seq at which the copy's
/// records differ from the stream's.
enum ForkNotice {
    /// One id for every refusal of the same copy's same record, which the stream keeps once
    /// (within its duplicate window).
    static func id(_ logID: UUID, seq: UInt64, record: [UInt8]?) -> String {
        var hasher = SHA256Hasher()
        (record ?? []).withUnsafeBytes { hasher.update($0) }
        return "\(logID.uuidString.lowercased()):fork:\(seq):" + hasher.finalize().prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// The seq a notice's body names.
    static func seq(_ body: [UInt8]) -> UInt64? {
        (try? StateValue(json: String(decoding: body, as: UTF8.self)))?["seq"]?.intValue.flatMap { $0 > 0 ? UInt64($0) : nil }
    }
}

/// What a reader of the stream found on a log's subject besides the log's records in order,
/// and went past: someone else's message, a damaged record, a second message for a seq, or
/// records missing before one (deleted, or dropped by the stream's limits).
public struct StreamNotice: Sendable, Equatable, CustomStringConvertible {
    /// The log whose subject it is on; `nil` on a subject `eventlog.<x>` whose `x` is no log
    /// id as a shipper writes it.
    public var logID: UUID?
    /// The subject.
    public var subject: String
    /// The stream sequence of the message it is about (the newest, for a subject of no log).
    public var streamSequence: UInt64
    /// What was found and done, such as `not one of its records (message id x); skipped`.
    public var finding: String

    /// One line: which log, which stream seq, what was found and done.
    public var description: String {
        (logID.map { "log \($0.uuidString.lowercased())" } ?? "subject \(subject), which names no log")
            + ", stream seq \(streamSequence): \(finding)"
    }

    /// The notice of records `gap` of `logID` missing before `message`, and what was done.
    static func missing(_ gap: ClosedRange<UInt64>, before message: JetStream.Message, of logID: UUID, then done: String? = nil) -> StreamNotice {
        StreamNotice(logID: logID, subject: JetStream.Subjects.of(logID), streamSequence: message.sequence,
                     finding: "records \(gap.lowerBound)-\(gap.upperBound) are missing before this one (deleted, or dropped by the stream's limits)"
                         + (done.map { "; " + $0 } ?? ""))
    }

    /// The notice of a message that is not the next record of `logID`, skipped.
    static func skipped(_ message: JetStream.Message, of logID: UUID, _ reason: String) -> StreamNotice {
        StreamNotice(logID: logID, subject: JetStream.Subjects.of(logID), streamSequence: message.sequence,
                     finding: "not one of its records (\(reason)); skipped")
    }
}

/// What a message on a log's subject is, to a reader that expects record `expected` next.
enum Delivery {
    /// A run of the log's records that follows on: it holds `expected`, or only records the
    /// reader had before it began (through `had`).
    case run(Shipment)
    /// Not a run of the log's records at all, a damaged one, or a second message for records
    /// the reader has had from the stream: `reason` says which.
    case foreign(reason: String)
    /// A run past the expected record: those in `gap` are missing before it.
    case after(gap: ClosedRange<UInt64>, Shipment)

    /// Classifies `message` on the subject of `logID`. With `decoding`, the checksums of its
    /// records from `expected` on are checked here (a damaged one is foreign); without, they
    /// are left to their appends.
    init(_ message: JetStream.Message, of logID: UUID, expected: UInt64, decoding: Bool, had: UInt64) {
        let run: Shipment
        do { run = try Shipment(message, of: logID) } catch {
            self = .foreign(reason: error.reason)
            return
        }
        let first = run.seqs.lowerBound
        if max(first, had + 1) < expected {
            self = .foreign(reason: "a second message for record \(max(first, had + 1))")
        } else if decoding, let damage = run.damage(from: expected) {
            self = .foreign(reason: damage)
        } else if first > expected {
            self = .after(gap: expected...(first - 1), run)
        } else {
            self = .run(run)
        }
    }
}

/// Copies one log out of a stream into a local database, record for record and byte for
/// byte: each record's checksum is checked, seqs must follow on without a gap, writes are
/// checked against the state as any append's are, and a copy that already holds records is
/// continued only when its newest is the stream's record of that seq, byte for byte. A second
/// pull goes on from where the copy ends.
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
    /// What becomes of a message on the log's subject that is not its next record: `nil` (the
    /// default) refuses the pull there; a function is told of it, and the pull skips it. Records
    /// missing before a message (a gap) are told too, and the pull ends before them, since a
    /// log cannot go on after a gap.
    public var foreign: (@Sendable (StreamNotice) -> Void)?

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
    ///   - store: An empty log, or a copy of `logID` (an earlier pull, or the log itself) whose
    ///     newest record the stream holds byte for byte; it takes the log's id.
    ///   - progress: Called after each commit with the report so far.
    /// - Throws: `FleetError` of kind `.refused`, changing nothing, when the stream holds no
    ///   such log (without `follow`), `store` holds another log, or its newest record is not
    ///   the stream's record of that seq (another copy of the log that went its own way: a
    ///   fork); `.refused`, keeping what was committed, when a message on the log's subject is
    ///   not one of its records (unless `foreign` skips it), the stream skips a seq, or the
    ///   copy refuses a record (its checksum, its writes against the state); `.unavailable`
    ///   when no server can be reached, or the stream stops delivering before the newest
    ///   record (pulling again resumes there). `EventStoreError` or `LMDBError` when the copy
    ///   cannot be read or written.
    @discardableResult
    public func pull(_ logID: UUID, into store: EventStore, follow: Bool = false, stop: @escaping () -> Bool = { false },
                     progress: (Report) -> Void = { _ in }) throws -> Report {
        let js = try JetStream(servers: servers, timeout: timeout)
        let subject = JetStream.Subjects.of(logID)
        let id = logID.uuidString.lowercased()
        let newest = try retryingWhileUnavailable(for: retryFor) { try js.lastMessage(stream: stream, subject: subject) }
        guard newest != nil || follow else { throw FleetError(.refused, "stream \(stream) holds no log \(id)") }
        // The newest run of records; `nil` when the newest message is none (skipped if foreign
        // messages are, refused otherwise).
        var newestRun: Shipment?
        if let newest {
            do { newestRun = try Shipment(newest, of: logID) } catch where foreign == nil {
                throw FleetError(.refused, "the newest message on \(subject) is not one of this log's records (\(error.reason))")
            } catch {}
        }
        let end = newestRun?.seqs.upperBound
        do { try store.adoptLogID(logID) } catch let error as EventStoreError {
            throw FleetError(.refused, "\(store.path) is not a copy of log \(id): \(error)")
        }
        let local = try store.lastSeq()
        var position = StreamPosition(through: local)
        // The copy continues the stream's log only if its newest record is the stream's record
        // of that seq: found at the kept position, else met on the way from the start.
        var continues = local == 0
        if !continues, let newest, let newestRun, let end, end <= local {
            guard try store.holds(end, newestRun.record(end)) else { throw fork(store, seq: end, logID: logID) }
            if !follow { return Report(logID: logID, pulled: 0, through: local) }
            continues = end == local
            if continues { position.sequence = newest.sequence }
        }
        if !continues, let kept = try StreamPosition.read("pulled", stream: stream, in: store), kept.through == local,
           let held = try retryingWhileUnavailable(for: retryFor, { try js.message(stream: stream, sequence: kept.sequence) }),
           let run = try? Shipment(held, of: logID), run.seqs.upperBound == local {
            guard try store.holds(local, run.record(local)) else { throw fork(store, seq: local, logID: logID) }
            continues = true
            position.sequence = kept.sequence
        }
        guard let db = try store.openDatabase(named: StreamPosition.database, create: true) else {
            throw FleetError(.refused, "cannot keep the pull position in \(store.path)")
        }
        var report = Report(logID: logID, pulled: 0, through: local)
        if !follow, let newest, position.sequence >= newest.sequence { return report }

        let messages = try retryingWhileUnavailable(for: retryFor) { try js.messages(stream: stream, subject: subject, from: position.sequence + 1) }
        // Whole messages' records, committed together with the sequence of the last of them.
        var pending: [(seq: UInt64, bytes: ArraySlice<UInt8>)] = [], pendingThrough: UInt64 = 0
        func commit() throws {
            guard !pending.isEmpty else { return }
            do { try append() } catch let error as EventStoreError {
                throw FleetError(.refused, "a record of log \(id) is refused: \(error)")
            }
            report.pulled += pending.count
            report.through = position.through
            pending.removeAll(keepingCapacity: true)
            progress(report)
        }
        func append() throws {
            try store.transact { batch in
                for (seq, bytes) in pending {
                    try bytes.withUnsafeBytes { _ = try batch.appendStored($0, seq: seq) }
                }
                position = StreamPosition(through: batch.lastSeq, sequence: pendingThrough)
                try position.write("pulled", stream: stream, in: &batch, db: db)
            }
        }
        // A message that is not the next records: told and skipped, or the pull refused.
        func skip(_ message: JetStream.Message, _ reason: String) throws {
            guard let foreign else { throw FleetError(.refused, "a message on \(subject) is not one of this log's records (\(reason))") }
            foreign(.skipped(message, of: logID, reason))
        }
        var expected = position.through + 1
        while !stop() {
            guard let message = try messages.next(timeout: follow ? 0.25 : timeout) else {
                try commit()
                if follow { continue }
                throw FleetError(.unavailable, "the stream stopped delivering log \(id) at seq \(report.through)\(end.map { " of \($0)" } ?? ""); pulling again resumes there")
            }
            switch Delivery(message, of: logID, expected: expected, decoding: foreign != nil, had: local) {
            case .foreign(let reason):
                try skip(message, reason)
            case .after(let gap, _):
                try commit()
                guard let foreign else {
                    throw FleetError(.refused, "the stream skips from seq \(gap.lowerBound - 1) to \(gap.upperBound + 1) of log \(id): a gap, refused")
                }
                // A log cannot go on after a gap: the copy ends before it.
                foreign(.missing(gap, before: message, of: logID, then: "the log is read through seq \(gap.lowerBound - 1)"))
                return report
            case .run(let run):
                // Records the copy has come before the new ones; its newest is where the copy
                // must meet the stream.
                if !continues, run.seqs.contains(local), local < expected {
                    guard try store.holds(local, run.record(local)) else { throw fork(store, seq: local, logID: logID) }
                    continues = true
                }
                if run.seqs.upperBound >= expected {
                    guard continues else {
                        throw FleetError(.refused, "stream \(stream) holds no record \(local) of log \(id) before record \(max(expected, run.seqs.lowerBound)), "
                            + "so the copy in \(store.path) cannot be shown to continue it; nothing was pulled")
                    }
                    pending += run.records.filter { $0.seq >= expected }
                    pendingThrough = message.sequence
                    expected = run.seqs.upperBound + 1
                    if pending.count >= 1_024 { try commit() }
                }
            }
            if !follow, let newest, message.sequence >= newest.sequence { break }
        }
        try commit()
        return report
    }

    /// The refusal of a copy whose record `seq` is not the stream's.
    private func fork(_ store: EventStore, seq: UInt64, logID: UUID) -> FleetError {
        FleetError(.refused, "\(store.path) holds another record \(seq) of log \(logID.uuidString.lowercased()) than stream \(stream) does: "
            + "the copy and the stream's log went their own ways (a fork), and pulling would make a log that never was; nothing was pulled")
    }
}
