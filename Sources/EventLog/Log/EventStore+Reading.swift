import Foundation

/// Reading the log: records, states after any event, write sets, and the keyframes behind them.
extension EventStore {
    /// The state after the newest event (an empty object for an empty log).
    ///
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` when a record between the
    ///   nearest keyframe and the newest event fails its checksum or does not decode;
    ///   ``EventStoreError/invalidWrite(_:)`` when one of their writes does not fit the state;
    ///   an ``LMDBError`` when the read fails.
    public var currentState: StateValue {
        get throws {
            try environment.read { txn in try state(after: try lastSeq(in: txn), in: txn) }
        }
    }

    /// The sequence number of the newest event; 0 when the log is empty, the base's seq when
    /// a compacted log holds no event after it.
    ///
    /// - Throws: ``EventStoreError/damaged(_:)`` when the newest key is not an 8-byte seq; an
    ///   ``LMDBError`` when the read fails.
    public func lastSeq() throws -> UInt64 {
        try environment.read { try lastSeq(in: $0) }
    }

    /// The sequence number of the oldest event; `nil` when the log is empty.
    ///
    /// - Throws: ``EventStoreError/damaged(_:)`` when the oldest key is not an 8-byte seq; an
    ///   ``LMDBError`` when the read fails.
    public func firstSeq() throws -> UInt64? {
        try environment.read { txn in
            try txn.withCursor(events) { cursor in try cursor.first().map { try Self.seq(ofKey: $0.key, "oldest") } }
        }
    }

    /// The seq the key of the oldest or newest record names; any other key is damage.
    private static func seq(ofKey key: UnsafeRawBufferPointer, _ which: String) throws(EventStoreError) -> UInt64 {
        do { return try RecordCodec.seq(fromKey: key) } catch { throw .damaged("the \(which) event's key: \(error.reason)") }
    }

    /// The number of keyframes stored.
    ///
    /// - Throws: An ``LMDBError`` when the read fails.
    public func keyframeCount() throws -> Int {
        try environment.read { try $0.count(keyframes) }
    }

    /// The record with sequence number `seq`, or `nil` when there is none.
    ///
    /// - Throws: ``EventStoreError/compacted(seq:base:)`` when `seq` was compacted away;
    ///   ``EventStoreError/corruptRecord(seq:reason:)`` when the record fails its
    ///   checksum or does not decode; an ``LMDBError`` when the read fails.
    public func record(_ seq: UInt64) throws -> EventRecord? {
        try environment.read { txn in try record(seq, in: txn) }
    }

    func record(_ seq: UInt64, in txn: borrowing Transaction) throws -> EventRecord? {
        guard let bytes = try RecordCodec.withKey(seq, { try txn.get(events, key: $0) }) else {
            // Not there: past the newest event, or dropped by a compaction.
            let base = try baseSeq(in: txn)
            if seq <= base && seq > 0 { throw EventStoreError.compacted(seq: seq, base: base) }
            return nil
        }
        return try Self.decode(bytes, seq: seq)
    }

    /// Each record from `from` through `to` in order, inside one read transaction: the walk
    /// behind ``forEachRecord(matching:from:to:_:)`` when it filters nothing.
    func forEachRecordInOneRead(from: UInt64, to: UInt64, _ body: (EventRecord) throws -> Bool) throws {
        try nameCaches.using { names in
            try environment.read { txn in
                try forEachStoredRecord(after: max(from, 1) - 1, through: to, in: txn) { seq, bytes in
                    try body(try Self.decode(bytes, seq: seq, names: names))
                }
            }
        }
    }

    /// Calls `body` with each seq from `from` through `to` (clamped to the log, and to its
    /// first event when it was compacted) and the state
    /// right after it, inside one read transaction: one snapshot, then one write set per event,
    /// decoding nothing else (every checksum is still checked). `body` returns `false` to stop.
    ///
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at the first record that is
    ///   missing, fails its checksum or does not decode; ``EventStoreError/invalidWrite(_:)``
    ///   when a write does not fit the state; whatever `body` throws; an ``LMDBError`` when the
    ///   read fails.
    public func forEachState(from: UInt64 = 1, to: UInt64 = .max, _ body: (UInt64, StateValue) throws -> Bool) throws {
        try environment.read { txn in
            let window = try window(in: txn)
            let start = min(max(from, window.base + 1) - 1, window.last)
            var state = try state(after: start, in: txn)
            try foldWriteSets(after: start, through: to, into: &state, in: txn) { seq, folded, _, _ in try body(seq, folded) }
        }
    }

    /// The state right after event `seq` (0 gives the empty state before the first event):
    /// the nearest keyframe at or before it plus the write sets after that keyframe.
    ///
    /// - Throws: ``EventStoreError/noSuchEvent(seq:last:)`` when `seq` is past the newest event;
    ///   ``EventStoreError/compacted(seq:base:)`` when it comes before the base of a compacted
    ///   log (the state after the base's seq is the base itself);
    ///   ``EventStoreError/corruptRecord(seq:reason:)`` when a record between the keyframe and
    ///   `seq` fails its checksum or does not decode; ``EventStoreError/invalidWrite(_:)`` when
    ///   one of their writes does not fit the state; an ``LMDBError`` when the read fails.
    public func snapshot(after seq: UInt64) throws -> StateValue {
        try environment.read { txn in try state(after: seq, in: txn) }
    }

    /// The newest seq, checked against the number of events the database records: the log is
    /// dense from its first event (1, or the one after its base), so the count is the span
    /// unless a page of it is damaged.
    func lastSeq(in txn: borrowing Transaction) throws -> UInt64 {
        try window(in: txn).last
    }

    /// The seq of the base (0 for none) and of the newest event (the base's when none follows
    /// it), checked against the number of events the database records. The base is looked up
    /// in the meta only when the one last seen does not fit that count: a compaction drops at
    /// least one event, so a base that fits the count is the log's.
    func window(in txn: borrowing Transaction) throws -> (base: UInt64, last: UInt64) {
        let newest = try txn.withCursor(events) { cursor in try cursor.last().map { try Self.seq(ofKey: $0.key, "newest") } }
        let stored = UInt64(try txn.count(events))
        let seen = knownBase.load(ordering: .relaxed)
        if let newest, newest >= seen, newest - seen == stored { return (seen, newest) }
        let base = try baseSeq(in: txn)
        knownBase.store(base, ordering: .relaxed)
        let last = newest ?? base
        guard last >= base, last - base == stored else {
            throw EventStoreError.damaged(base == 0 ? "the log records \(stored) events, but the newest it finds is \(last)"
                                          : "the log records \(stored) events after its base at \(base), but the newest it finds is \(last)")
        }
        return (base, last)
    }

    func state(after seq: UInt64, in txn: borrowing Transaction) throws -> StateValue {
        let (base, last) = try window(in: txn)
        guard seq <= last else { throw EventStoreError.noSuchEvent(seq: seq, last: last) }
        guard seq >= base else { throw EventStoreError.compacted(seq: seq, base: base) }
        // The newest state is at hand unless a writer of this process holds it right now.
        if let known = tip.withLockIfAvailable({ $0.seq == seq ? $0.state : nil }), let state = known { return state }
        return try rollForward(from: try keyframe(atOrBefore: seq, base: base, in: txn), to: seq, in: txn).state
    }

    /// The newest state in the database and the keyframe progress since its last keyframe.
    func currentTip(in txn: borrowing Transaction) throws -> Tip {
        let (base, last) = try window(in: txn)
        return try rollForward(from: try keyframe(atOrBefore: last, base: base, in: txn), to: last, in: txn)
    }

    /// Applies the write sets after a keyframe up to `seq`, counting record sizes as it goes.
    private func rollForward(from keyframe: consuming Keyframe, to seq: UInt64, in txn: borrowing Transaction) throws -> Tip {
        var (last, progress) = (keyframe.seq, KeyframeProgress(stateBytes: keyframe.bytes))
        // Taken, not shared: the writes then change the decoded state in place, never a copy.
        var state = StateValue.emptyObject
        swap(&state, &keyframe.state)
        try foldWriteSets(after: keyframe.seq, through: seq, into: &state, in: txn) { applied, _, storedSize, stateDelta in
            _ = progress.record(storedSize, stateDelta: stateDelta, policy: keyframePolicy)
            last = applied
            return true
        }
        return Tip(seq: last, state: state, progress: progress)
    }

    /// Applies the write set of each record after `start` through `end` to `state`, in order,
    /// decoding nothing else, and calls `body` after each with its seq, the state, its stored
    /// size and state delta; `body` returns `false` to stop. After a throw `state` must be
    /// discarded.
    func foldWriteSets(after start: UInt64, through end: UInt64, into state: inout StateValue, in txn: borrowing Transaction,
                       _ body: (_ seq: UInt64, _ state: StateValue, _ storedSize: Int, _ stateDelta: Int) throws -> Bool) throws {
        try nameCaches.using { names in
            try forEachStoredRecord(after: start, through: end, in: txn) { seq, bytes in
                var stateDelta = 0
                do {
                    try RecordCodec.applyWrites(bytes, seq: seq, to: &state, stateDelta: &stateDelta, names: names)
                } catch let error as RecordDecodingError {
                    throw EventStoreError.corruptRecord(seq: seq, reason: error.reason)
                } catch let error as StateError {
                    throw EventStoreError.invalidWrite(error)
                }
                return try body(seq, state, bytes.count, stateDelta)
            }
        }
    }

    /// The write sets of the records after `start` through `end`, in order.
    func writeSets(after start: UInt64, through end: UInt64, in txn: borrowing Transaction) throws -> [[Write]] {
        var writeSets: [[Write]] = []
        try nameCaches.using { names in
            try forEachStoredRecord(after: start, through: end, in: txn) { seq, bytes in
                var stateDelta = 0
                do throws(RecordDecodingError) {
                    writeSets.append(try RecordCodec.decodeWrites(bytes, seq: seq, stateDelta: &stateDelta, names: names))
                } catch {
                    throw EventStoreError.corruptRecord(seq: seq, reason: error.reason)
                }
                return true
            }
        }
        return writeSets
    }

    /// Calls `body` with the seq and the bytes as stored (checksum included) of each record
    /// after `start` through `end`, in one read transaction; `body` returns `false` to stop.
    package func forEachStoredRecord(after start: UInt64, through end: UInt64 = .max,
                                     _ body: (_ seq: UInt64, _ bytes: UnsafeRawBufferPointer) throws -> Bool) throws {
        try environment.read { txn in try forEachStoredRecord(after: start, through: end, in: txn, body) }
    }

    /// Calls `body` with the seq and stored bytes of each record after `start` through `end`,
    /// in order, checking that the seqs are dense; `body` returns `false` to stop.
    func forEachStoredRecord(after start: UInt64, through end: UInt64, in txn: borrowing Transaction,
                                     _ body: (_ seq: UInt64, _ bytes: UnsafeRawBufferPointer) throws -> Bool) throws {
        // The log is dense from its first event: every seq up to the number of events recorded
        // after the base must be found. A start before the base starts at it.
        // The meta's base, not `window(in:)`: the good part of a damaged log still reads.
        let base = try baseSeq(in: txn)
        let start = max(start, base)
        let end = min(end, base + UInt64(try txn.count(events)))
        guard start < end else { return }
        try txn.withCursor(events) { cursor in
            var entry = try RecordCodec.withKey(start + 1) { try cursor.seek(atOrAfter: $0) }
            var expected = start + 1
            while let current = entry, expected <= end {
                let seq: UInt64
                do throws(RecordDecodingError) { seq = try RecordCodec.seq(fromKey: current.key) } catch {
                    throw EventStoreError.corruptRecord(seq: expected, reason: error.reason)
                }
                guard seq == expected else {
                    throw EventStoreError.corruptRecord(seq: expected, reason: "the sequence has a gap before \(expected)")
                }
                guard try body(expected, current.value) else { return }
                expected += 1
                entry = try cursor.next()
            }
            if expected <= end {
                throw EventStoreError.corruptRecord(seq: expected, reason: "missing: the log records \(end) events, but it ends before this one")
            }
        }
    }

    struct Keyframe {
        var seq: UInt64
        var state: StateValue
        /// The stored size, checksum included.
        var bytes: Int
    }

    /// The newest keyframe at or before `seq` that is intact, or the empty state at 0.
    /// Keyframes are a cache: a damaged one (which `verify` reports) is passed over for the
    /// one before it, and the write sets in between make up the difference. A compacted log's
    /// base (at `base`, as `window(in:)` found it; 0 for none) is the last resort: there is
    /// nothing before it, so a damaged base is damage.
    func keyframe(atOrBefore seq: UInt64, base: UInt64, in txn: borrowing Transaction) throws -> Keyframe {
        try txn.withCursor(keyframes) { cursor in
            var entry = try RecordCodec.withKey(seq) { try cursor.seek(atOrAfter: $0) }
            if let found = entry, (try? RecordCodec.seq(fromKey: found.key)) != seq {
                entry = try cursor.previous()
            } else if entry == nil {
                entry = try cursor.last()
            }
            while let current = entry {
                let at = try? RecordCodec.seq(fromKey: current.key)
                if let at, at < base { break }
                if let at, at <= seq, let state = try? RecordCodec.decodeKeyframe(current.value, seq: at) {
                    return Keyframe(seq: at, state: state, bytes: current.value.count)
                }
                if at == base && base > 0 { break }
                entry = try cursor.previous()
            }
            guard base == 0 else { throw EventStoreError.damaged("the base (the state after event \(base)) is missing or fails its checksum") }
            return Keyframe(seq: 0, state: .emptyObject, bytes: KeyframeProgress.emptyStateBytes)
        }
    }

    package static func decode(_ bytes: UnsafeRawBufferPointer, seq: UInt64, names: NameCache? = nil) throws -> EventRecord {
        do throws(RecordDecodingError) { return try RecordCodec.decode(bytes, seq: seq, names: names) } catch { throw EventStoreError.corruptRecord(seq: seq, reason: error.reason) }
    }
}
