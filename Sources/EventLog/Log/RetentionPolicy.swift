import Foundation

/// How much of the log its writers keep: stored in the meta (``EventStore/setRetention(_:)``,
/// ``EventStore/Options/retention``, `eventlog compact --policy`), and applied after a commit
/// by the writer that made it, in bounded steps of ``EventStore/compact(before:)``'s work.
///
/// A step runs once the log is past the policy by more than its slack (10% of the events, at
/// least 100, or 1% of the days kept), and drops at most ``stepEvents`` records, so that the
/// log stays between the policy and the policy plus its slack without compacting after every
/// append, and no append waits long on a step.
public enum RetentionPolicy: Sendable, Hashable, CustomStringConvertible {
    /// Keep the newest `events` events (at least 1).
    case keepLast(UInt64)
    /// Keep the events recorded in the last `days` days (at least 1), and always the newest one.
    case keepDays(UInt32)

    /// The most records one step drops.
    public static let stepEvents: UInt64 = 10_000

    /// `keep-last=N` or `keep-days=D`, as `eventlog compact --policy` takes it.
    public var description: String {
        switch self {
        case .keepLast(let events): "keep-last=\(events)"
        case .keepDays(let days): "keep-days=\(days)"
        }
    }

    /// How many events past `keepLast` the log may hold before a step runs: a tenth of them,
    /// at least 100, so that a step's fixed cost (its own durable commit, the base rebuilt)
    /// is paid once per that many appended events. 0 for `keepDays`.
    public var slackEvents: UInt64 {
        guard case .keepLast(let events) = self else { return 0 }
        return Swift.max(events / 10, 100)
    }

    /// `keepDays` as microseconds, and how much older than that the oldest event may be
    /// before a step runs (1% of it).
    var spanMicroseconds: (kept: Int64, slack: Int64) {
        guard case .keepDays(let days) = self else { return (0, 0) }
        let kept = Int64(days) * 86_400_000_000
        return (kept, kept / 100)
    }

    /// The meta entry (key `retention`): a byte (1 keep-last, 2 keep-days), a varint, and a
    /// CRC-32C of both. Builds that do not know it pass over it.
    static let key = "retention"

    var encoded: [UInt8] {
        var writer = BinaryWriter()
        switch self {
        case .keepLast(let events): writer.byte(1); writer.varint(events)
        case .keepDays(let days): writer.byte(2); writer.varint(UInt64(days))
        }
        writer.appendChecksum(from: 0, prefix: UnsafeRawBufferPointer(start: nil, count: 0))
        return writer.bytes
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws(EventStoreError) -> RetentionPolicy {
        do throws(RecordDecodingError) {
            var (reader, _) = try RecordCodec.verified(bytes, key: UnsafeRawBufferPointer(start: nil, count: 0))
            let kind = try reader.byte()
            let count = try reader.varint()
            guard reader.isAtEnd else { throw RecordDecodingError("\(reader.remaining) trailing bytes") }
            switch kind {
            case 1 where count > 0: return .keepLast(count)
            case 2 where count > 0 && count <= UInt64(UInt32.max): return .keepDays(UInt32(count))
            default: throw RecordDecodingError("a policy of kind \(kind) and count \(count)")
            }
        } catch {
            throw .damaged("the meta record's retention policy: \(error.reason)")
        }
    }

    /// The policy, trapping on one that keeps nothing (a programmer's error: the CLI refuses it).
    func validated() -> RetentionPolicy {
        switch self {
        case .keepLast(let events): precondition(events > 0, "a retention policy keeps at least one event")
        case .keepDays(let days): precondition(days > 0, "a retention policy keeps at least one day")
        }
        return self
    }
}

/// What a retention policy's steps have hashed so far: the SHA-256 state over the stored bytes
/// of every record from the last dropped range's first seq through `through`, so that the next
/// step goes on hashing and that range keeps one digest, the plain SHA-256 of all it covers,
/// however many steps made it. Kept in the meta (key `baseRunningDigest`: fixed64 `through`,
/// the hasher's saved state, CRC-32C); a compaction made by hand removes it.
struct RunningDigest {
    static let key = "baseRunningDigest"

    var through: UInt64
    var hasher: SHA256Hasher

    var encoded: [UInt8] {
        var writer = BinaryWriter()
        writer.fixed64(through)
        hasher.saved.withUnsafeBytes { writer.raw($0) }
        writer.appendChecksum(from: 0, prefix: UnsafeRawBufferPointer(start: nil, count: 0))
        return writer.bytes
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws(EventStoreError) -> RunningDigest {
        do throws(RecordDecodingError) {
            var (reader, _) = try RecordCodec.verified(bytes, key: UnsafeRawBufferPointer(start: nil, count: 0))
            let through = try reader.fixed64()
            guard let hasher = SHA256Hasher(resuming: try reader.slice(reader.remaining)) else {
                throw RecordDecodingError("a hasher state that does not add up")
            }
            return RunningDigest(through: through, hasher: hasher)
        } catch {
            throw .damaged("the meta record's running digest: \(error.reason)")
        }
    }
}

extension EventStore {
    /// The retention policy stored in the log's meta; `nil` when it has none.
    ///
    /// - Throws: ``EventStoreError/damaged(_:)`` when the stored policy fails its checksum;
    ///   an ``LMDBError`` when the read fails.
    public func retentionPolicy() throws -> RetentionPolicy? {
        try environment.read { try retentionPolicy(in: $0) }
    }

    func retentionPolicy(in txn: borrowing Transaction) throws -> RetentionPolicy? {
        try txn.get(meta, key: RetentionPolicy.key).map { try RetentionPolicy.decode($0) }
    }

    /// Stores `policy` in the log's meta (`nil` removes it), for every writer of the log to
    /// apply after its commits from then on (writers of other processes included, which read
    /// it in each write transaction). It drops nothing itself: the next append does, in steps.
    ///
    /// - Precondition: A policy keeps at least 1 event or 1 day.
    /// - Throws: ``EventStoreError/readOnly`` on a read-only store; an ``LMDBError`` when the
    ///   write fails.
    public func setRetention(_ policy: RetentionPolicy?) throws {
        guard !isReadOnly else { throw EventStoreError.readOnly }
        try environment.write { txn in try Self.putRetention(policy?.validated(), meta: meta, in: txn) }
        retentionFailure.withLock { $0 = nil }
    }

    static func putRetention(_ policy: RetentionPolicy?, meta: Database, in txn: borrowing Transaction) throws {
        if let policy {
            try policy.encoded.withUnsafeBytes { try txn.put(meta, key: RetentionPolicy.key, bytes: $0) }
        } else {
            _ = try Array(RetentionPolicy.key.utf8).withUnsafeBytes { try txn.delete(meta, key: $0) }
        }
    }

    /// Why the last retention step of this store failed (the log is as it was before that
    /// step; the appends were committed). While it is set this store runs no more steps; a
    /// ``setRetention(_:)`` or a new store of the log tries again. `nil` when none failed.
    public var retentionError: (any Error)? { retentionFailure.withLock { $0 } }

    /// The policy to apply after this write transaction commits, if the log is past it by more
    /// than its slack: one meta read, and for `keepDays` the time of the oldest event.
    func retentionStepDue(in txn: borrowing Transaction) throws -> RetentionPolicy? {
        guard let policy = try retentionPolicy(in: txn) else { return nil }
        let (base, last) = try window(in: txn)
        switch policy {
        case .keepLast(let events):
            return last - base > events + policy.slackEvents ? policy : nil
        case .keepDays:
            guard last > base + 1, let oldest = try RecordCodec.withKey(base + 1, { try txn.get(events, key: $0) }) else { return nil }
            let span = policy.spanMicroseconds
            return try Self.recordedTime(oldest, seq: base + 1) < clock.now().microsecondsSince1970 - span.kept - span.slack ? policy : nil
        }
    }

    /// One retention step, after a commit on the committing thread: finds the cut (at most
    /// ``RetentionPolicy/stepEvents`` records on) and compacts before it in a write transaction
    /// of its own, carrying the running digest on. A failure is kept in ``retentionError``,
    /// never thrown: the append it follows was committed.
    func applyRetention(_ policy: RetentionPolicy) {
        guard retentionFailure.withLock({ $0 == nil }) else { return }
        do {
            guard let cut = try retentionCut(policy) else { return }
            _ = try compact(before: cut, continuingDigest: true)
        } catch {
            retentionFailure.withLock { $0 = error }
        }
    }

    /// The first event a step of `policy` keeps, or `nil` when it would drop nothing; never
    /// past the retention hold.
    func retentionCut(_ policy: RetentionPolicy) throws -> UInt64? {
        // Asked before the read: the hold reads the store in a transaction of its own.
        let hold = try retentionHold?(self)
        return try environment.read { txn in
            let (base, last) = try window(in: txn)
            // The log keeps at least one event; a step drops at most `stepEvents`.
            let furthest = Swift.min(last, base + 1 + RetentionPolicy.stepEvents)
            var cut = furthest
            switch policy {
            case .keepLast(let events):
                guard last > events else { return nil }
                cut = Swift.min(last - events + 1, furthest)
            case .keepDays:
                let since = clock.now().microsecondsSince1970 - policy.spanMicroseconds.kept
                try forEachStoredRecord(after: base, through: furthest - 1, in: txn) { seq, bytes in
                    guard try Self.recordedTime(bytes, seq: seq) >= since else { return true }
                    cut = seq
                    return false
                }
            }
            if let hold, hold < cut { cut = hold + 1 }
            return cut > base + 1 ? cut : nil
        }
    }

    /// The time stored in record `seq`'s bytes, its checksum checked.
    static func recordedTime(_ bytes: UnsafeRawBufferPointer, seq: UInt64) throws -> Int64 {
        do throws(RecordDecodingError) {
            var (reader, _) = try RecordCodec.verified(bytes, seq: seq)
            return try reader.signed()
        } catch {
            throw EventStoreError.corruptRecord(seq: seq, reason: error.reason)
        }
    }

    /// What is wrong with the running digest a policy's steps keep, if anything: it must follow
    /// the base and give the last dropped range's SHA-256.
    func runningDigestProblem(_ base: LogBase?, in txn: borrowing Transaction) -> String? {
        let running: RunningDigest
        do {
            guard let bytes = try txn.get(meta, key: RunningDigest.key) else { return nil }
            running = try RunningDigest.decode(bytes)
        } catch {
            return "\(error)"
        }
        guard let base, let range = base.digests.last, range.seqs.upperBound == running.through, base.seq == running.through else {
            return "the running digest of the dropped events follows event \(running.through), not the base's \(base?.seq ?? 0)"
        }
        return running.hasher.finalize() == range.sha256 ? nil : "the running digest of events \(range.seqs.lowerBound)-\(range.seqs.upperBound) is not the SHA-256 their range records"
    }
}
