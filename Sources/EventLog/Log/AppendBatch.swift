import Foundation

/// The appends of one write transaction, lent by `EventStore.transact`.
public struct AppendBatch: ~Copyable {
    private let store: EventStore
    private let transaction: OpaquePointer
    /// Cursors that append to the log's databases, open for the batch's lifetime.
    private let events: OpaquePointer
    private let keyframes: OpaquePointer
    /// Where the transaction's environment is mapped, for the values it borrows.
    private let map: MapBounds
    private var writer = BinaryWriter(capacity: 512)
    private(set) var tip: Tip

    /// The sequence number of the newest event, including those appended by this batch.
    public var lastSeq: UInt64 { tip.seq }
    /// The state after `lastSeq`, including this batch's writes.
    public var state: StateValue { tip.state }

    init(store: EventStore, transaction: borrowing Transaction, events: borrowing Cursor, keyframes: borrowing Cursor, tip: Tip) {
        self.store = store
        self.transaction = transaction.handle
        self.events = events.handle
        self.keyframes = keyframes.handle
        self.map = transaction.map
        self.tip = tip
    }

    /// The batch's transaction, lent again to the calls below.
    private var txn: Transaction { Transaction(handle: transaction, map: map) }

    /// Appends `event` after checking that it keeps to `StateLimits` and that every write's
    /// old value matches the state, and returns it as stored. `time` defaults to the store's clock.
    ///
    /// - Parameters:
    ///   - event: The event; its writes are checked against ``state`` and applied to it.
    ///   - time: The time to store, such as the original's when copying a log; `nil` reads the
    ///     store's clock.
    /// - Throws: ``EventStoreError/limitExceeded(_:)`` when the time is outside years 0000 to
    ///   9999, or the event nests deeper than ``StateLimits/maxDepth``, takes more than
    ///   ``StateLimits/maxRecordBytes`` or holds an infinite or NaN number;
    ///   ``EventStoreError/invalidWrite(_:)`` when a write does not fit the state, or the event
    ///   is not applied yet writes; ``EventStoreError/staleWrite(path:expected:actual:)`` when
    ///   a write's old value is not what the state holds. After any of these the batch is as it
    ///   was before the call. An
    ///   ``LMDBError`` when the record cannot be stored.
    @discardableResult
    public mutating func append(_ event: consuming Event, time: Timestamp? = nil) throws -> EventRecord {
        let seq = tip.seq + 1
        let time = time ?? store.clock.now()
        writer.reset()
        let encoded = RecordCodec.encode(event, seq: seq, time: time, into: &writer)
        if let error = encoded.limitExceeded(recordBytes: writer.count) { throw error }
        try apply(Self.writes(event.writes, outcome: event.outcome))
        try writer.withUnsafeBytes { try put($0, seq: seq) }
        try advance(recordBytes: writer.count, stateDelta: encoded.stateDelta)
        return EventRecord(seq: seq, time: time, event: event, checksum: encoded.checksum)
    }

    /// Appends `events` in order, checking each as `append(_:)` does, with times from the
    /// store's clock. A batch of `EncodingPipeline.minimumEvents` or more is encoded on a second
    /// thread while this one checks write sets and stores the records encoded so far. If an
    /// event is refused, the events before it stay appended in this batch.
    ///
    /// - Throws: What ``append(_:time:)`` throws, for the first event refused.
    public mutating func append(contentsOf events: [Event]) throws {
        guard EncodingPipeline.isWorthwhile(for: events.count) else {
            for event in events { try append(event) }
            return
        }
        try EncodingPipeline.encode(events, firstSeq: tip.seq + 1, clock: store.clock) { index, record, encoded in
            if let error = encoded.limitExceeded(recordBytes: record.count) { throw error }
            // The event's two fields, not a copy of it: a copy retains every field and costs
            // more than the rest of this closure but the state's checks.
            try apply(Self.writes(events[index].writes, outcome: events[index].outcome))
            try put(record, seq: tip.seq + 1)
            try advance(recordBytes: record.count, stateDelta: encoded.stateDelta)
        }
    }

    /// Appends a record exactly as another copy of this log stored it (`eventlog pull`): its
    /// checksum, which covers its seq, is checked; `seq` must be the next; its writes are checked
    /// against the state as any append's are; the bytes are stored unchanged.
    @discardableResult
    package mutating func appendStored(_ bytes: UnsafeRawBufferPointer, seq: UInt64) throws -> EventRecord {
        guard seq == tip.seq + 1 else { throw EventStoreError.outOfSequence(expected: tip.seq + 1, found: seq) }
        var stateDelta = 0
        let record: EventRecord
        do throws(RecordDecodingError) { record = try RecordCodec.decode(bytes, seq: seq, stateDelta: &stateDelta) } catch {
            throw EventStoreError.corruptRecord(seq: seq, reason: error.reason)
        }
        try apply(record.event.writes)
        try put(bytes, seq: seq)
        try advance(recordBytes: bytes.count, stateDelta: stateDelta)
        return record
    }

    /// Makes an empty log start after `base` (an import of a compacted log's export, a copy of
    /// its window): `state` becomes the base keyframe, whose checksum must be `base.checksum`,
    /// and the next event appended is `base.seq + 1`.
    ///
    /// - Throws: ``EventStoreError/outOfSequence(expected:found:)`` when the log is not empty;
    ///   ``EventStoreError/damaged(_:)`` when `state` does not give the base's checksum.
    package mutating func installBase(_ base: LogBase, state: StateValue) throws {
        guard tip.seq == 0 else { throw EventStoreError.outOfSequence(expected: tip.seq + 1, found: base.firstSeq) }
        let stored = try store.putBase(base, state: state, in: txn)
        guard stored.checksum == base.checksum else {
            throw EventStoreError.damaged("the base after event \(base.seq) has checksum \(RecordCodec.hex(stored.checksum)), not the \(RecordCodec.hex(base.checksum)) it names")
        }
        tip = Tip(seq: base.seq, state: state, progress: KeyframeProgress(stateBytes: stored.bytes))
    }

    /// The writes of an event with `outcome` to apply: only an applied event writes.
    private static func writes(_ writes: [Write], outcome: Outcome) throws(EventStoreError) -> [Write] {
        if case .applied = outcome { return writes }
        guard let first = writes.first else { return [] }
        throw .invalidWrite(StateError(path: first.path, reason: "a \(outcome.name) event writes nothing"))
    }

    /// Applies `writes` to the state, checking the value each replaces; on a mismatch it
    /// reverts them (objects created on the way included), so that a caller who catches the
    /// error keeps the state as it was.
    private mutating func apply(_ writes: [Write]) throws {
        try withUnsafeTemporaryAllocation(of: Int?.self, capacity: writes.count) { createdAt in
            try writes.withUnsafeBufferPointer { writes in
                for index in writes.indices {
                    createdAt.initializeElement(at: index, to: nil)
                    let actual: StateValue?
                    do throws(StateError) {
                        actual = try tip.state.set(writes[index].new, at: writes[index].path, createdAt: &createdAt[index])
                    } catch {
                        revert(writes[..<index], createdAt: createdAt)
                        throw EventStoreError.invalidWrite(error)
                    }
                    guard actual == writes[index].old else {
                        tip.state.revert(writes[index].path, to: actual, createdAt: createdAt[index])
                        revert(writes[..<index], createdAt: createdAt)
                        throw EventStoreError.staleWrite(path: writes[index].path, expected: writes[index].old, actual: actual)
                    }
                }
            }
        }
    }

    private mutating func revert(_ writes: Slice<UnsafeBufferPointer<Write>>, createdAt: UnsafeMutableBufferPointer<Int?>) {
        for index in writes.indices.reversed() {
            tip.state.revert(writes[index].path, to: writes[index].old, createdAt: createdAt[index])
        }
    }

    private func put(_ record: UnsafeRawBufferPointer, seq: UInt64) throws {
        try RecordCodec.withKey(seq) { try Cursor(handle: events, map: map).append(key: $0, value: record) }
    }

    /// Moves the tip past the record just put, and stores a keyframe when the policy calls for one.
    private mutating func advance(recordBytes: Int, stateDelta: Int) throws {
        tip.seq += 1
        guard tip.progress.record(recordBytes, stateDelta: stateDelta, policy: store.keyframePolicy) else { return }
        RecordCodec.encodeKeyframe(tip.state, seq: tip.seq, into: &writer)
        try RecordCodec.withKey(tip.seq) { key in
            try writer.withUnsafeBytes { try Cursor(handle: keyframes, map: map).append(key: key, value: $0) }
        }
        tip.progress.keyframeWritten(writer.count)
    }

    /// Reads a read model kept beside the log, in this transaction (seeing this batch's puts).
    package func get(_ db: Database, key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        try txn.get(db, key: key)
    }

    /// Writes a read model kept beside the log; it commits (or not) with the batch's events.
    package func put(_ db: Database, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        try txn.put(db, key: key, value: value)
    }

    /// Removes an entry of a read model kept beside the log; returns whether it was there.
    @discardableResult
    package func delete(_ db: Database, key: UnsafeRawBufferPointer) throws -> Bool {
        try txn.delete(db, key: key)
    }

    /// Removes every entry of a read model kept beside the log, in this transaction.
    package func empty(_ db: Database) throws {
        try txn.empty(db)
    }

    /// Deletes a read model kept beside the log, when it exists; its handles become invalid.
    package func removeDatabase(named name: String) throws {
        precondition(!["events", "keyframes", "meta"].contains(name), "\(name) is one of the log's own databases")
        guard let db = try txn.openDatabase(named: name) else { return }
        try txn.empty(db, deletingDatabase: true)
    }

    /// Lends a cursor over a read model kept beside the log, in this transaction.
    package func withCursor<R>(_ db: Database, _ body: (borrowing Cursor) throws -> R) throws -> R {
        try txn.withCursor(db, body)
    }
}
