import Foundation
import Synchronization

/// The append-only event log in one LMDB environment, and the state its events fold into.
///
/// Guarantees:
/// - Sequence numbers are dense from 1. A batch of appends commits whole or not at all.
/// - Every write's old value matches the state it is applied to, so the state after any
///   event is exactly the fold of the write sets before it; a mismatching write set is
///   refused with nothing appended.
/// - Keyframes (the whole state) are stored as `KeyframePolicy` says, so the state after any
///   event N costs one keyframe decode plus a bounded number of write sets, never a fold
///   from the start.
/// - Every record and keyframe carries a CRC-32C checked on every read.
/// - One writer at a time across threads and processes; readers never block. Appends from
///   another process are picked up at the start of each write transaction.
public final class EventStore: @unchecked Sendable {
    /// The newest storage format this build reads and the one it writes. Format 2 adds
    /// origins stored by name; a format-1 database opened for writing becomes format 2.
    public static let formatVersion: UInt32 = 2

    /// How to open a store.
    public struct Options: Sendable {
        /// Open an existing log for reading only; never creates anything.
        public var readOnly = false
        /// Whether every commit is flushed (the default) or the last may be lost on power loss.
        public var durability: Durability = .full
        /// The map size a new environment starts with; it grows on demand.
        public var initialMapSize = 64 << 20
        /// When keyframes are written; fixed when the database is created.
        public var keyframePolicy = KeyframePolicy()
        /// Where event times come from.
        public var clock: EventClock = .system

        /// The defaults: read-write, `.full` durability, a 64 MiB initial map, `KeyframePolicy()`
        /// and the system clock.
        public init() {}
    }

    /// The LMDB environment, shared with any other store of this process on the same path.
    package let environment: Environment
    /// The storage format of this database (older ones open read-only as they are).
    public let format: UInt32
    /// The directory holding the log.
    public var path: String { environment.path }
    /// Whether this store was opened read-only (its environment may be shared with a writer).
    public let isReadOnly: Bool
    /// When keyframes are written, as stored in the database when it was created.
    public let keyframePolicy: KeyframePolicy
    let events: Database
    let keyframes: Database
    private let meta: Database
    /// Where event times come from.
    public let clock: EventClock

    /// The newest state this process knows of, the seq it follows, and the progress since
    /// the last keyframe. Its lock also serialises this process's writers.
    private let tip = Mutex(Tip.unknown)
    let groupCommitter = GroupCommitter()

    private enum MetaKey {
        static let format = "format"
        static let keyframeRatio = "keyframeRatio"
        static let keyframeMinimumEvents = "keyframeMinimumEvents"
        /// CRC-32C of the three values above, in this order; every format version keeps it.
        static let checksum = "checksum"
        static let checked = [format, keyframeRatio, keyframeMinimumEvents]
        /// The log's id: 16 bytes of a random UUID, then their CRC-32C.
        static let logID = "logId"
    }

    /// Opens the event log in directory `path`, creating it unless `options.readOnly`.
    ///
    /// A log damaged near its end still opens, so that its good part can be read, verified and
    /// salvaged; its first write is refused while the damage stands. A log of an older format
    /// opened for writing is brought up to `formatVersion`.
    ///
    /// - Parameters:
    ///   - path: The directory that holds (or is to hold) `data.mdb` and `lock.mdb`.
    ///   - options: Read-only or not, durability, the clock, and for a new log its keyframe policy.
    /// - Throws: ``EventStoreError/notFound(path:)`` when `options.readOnly` and there is no
    ///   `data.mdb`; ``EventStoreError/damaged(_:)`` when the data file is truncated or emptied,
    ///   one of the log's databases is missing, or the meta record fails its checksum;
    ///   ``EventStoreError/notAnEventLog(path:)`` when the environment holds something else;
    ///   ``EventStoreError/newerFormat(found:supported:)`` when a newer build wrote it; an
    ///   ``LMDBError`` when the directory or the environment cannot be opened (its code is the
    ///   `errno`, such as `EBUSY` when this process has the log open read-only and a writer is
    ///   asked for).
    public init(path: String, options: Options = Options()) throws {
        if options.readOnly && !FileManager.default.fileExists(atPath: path + "/data.mdb") {
            throw EventStoreError.notFound(path: path)
        }
        // Before LMDB maps the file: a truncated or emptied file must be reported, not read
        // past its end (a fault) or taken for a new database.
        do { _ = try StorageCheck.checkHeader(path: path + "/data.mdb") } catch { throw EventStoreError.damaged(error.description) }

        var environmentOptions = Environment.Options()
        environmentOptions.readOnly = options.readOnly
        environmentOptions.durability = options.durability
        environmentOptions.mapSize = options.initialMapSize
        environment = try Environment.open(path: path, options: environmentOptions)
        isReadOnly = options.readOnly
        clock = options.clock

        let open = { (txn: borrowing Transaction, writable: Bool) throws -> (Database, Database, Database, KeyframePolicy, UInt32) in
            // Only a brand-new environment becomes a log: one holding anything else (another
            // program's databases) is never written to.
            let isNew = try writable && txn.mainDatabaseIsEmpty()
            let databases = try ["meta", "events", "keyframes"].map { try txn.openDatabase(named: $0, create: isNew) }
            guard let meta = databases[0], let events = databases[1], let keyframes = databases[2] else {
                // None of them: another program's environment. Some: a log that lost a database.
                if databases.allSatisfy({ $0 == nil }) { throw EventStoreError.notAnEventLog(path: path) }
                let missing = zip(["meta", "events", "keyframes"], databases).filter { $0.1 == nil }.map(\.0)
                throw EventStoreError.damaged("the log's database \(missing.joined(separator: " and ")) is missing")
            }
            if isNew {
                let values = [Self.formatVersion, options.keyframePolicy.ratio, options.keyframePolicy.minimumEvents]
                for (key, value) in zip(MetaKey.checked, values) { try txn.put(meta, key: key, value: value) }
                try txn.put(meta, key: MetaKey.checksum, value: Self.metaChecksum(values))
                try Self.putLogID(UUID(), meta: meta, in: txn)
                return (meta, events, keyframes, options.keyframePolicy, Self.formatVersion)
            }
            // A log from before ids gets one the first time it is opened for writing.
            if writable, try txn.get(meta, key: MetaKey.logID) == nil { try Self.putLogID(UUID(), meta: meta, in: txn) }
            let values = try MetaKey.checked.map { key in try txn.get(meta, key: key).map { try Self.readUInt32($0, key) } }
            let checksum = try txn.get(meta, key: MetaKey.checksum).map { try Self.readUInt32($0, MetaKey.checksum) }
            // With a checksum the record is known to be a log's (every format keeps this one),
            // and anything off is damage, a format number included.
            if let checksum, values.contains(nil) || checksum != Self.metaChecksum(values.map { $0 ?? 0 }) {
                throw EventStoreError.damaged("the meta record (format, keyframe policy) fails its checksum")
            }
            if let format = values[0], format > Self.formatVersion {
                throw EventStoreError.newerFormat(found: format, supported: Self.formatVersion)
            }
            guard let format = values[0], let ratio = values[1], let minimum = values[2] else {
                throw EventStoreError.notAnEventLog(path: path)
            }
            // Opened for writing, an older format is brought up to this one (format 1's records
            // are format 2's as they are), and a meta record written before it had a checksum
            // gets one.
            if writable && (format < Self.formatVersion || checksum == nil) {
                try txn.put(meta, key: MetaKey.format, value: Self.formatVersion)
                try txn.put(meta, key: MetaKey.checksum, value: Self.metaChecksum([Self.formatVersion, ratio, minimum]))
                return (meta, events, keyframes, KeyframePolicy(ratio: ratio, minimumEvents: minimum), Self.formatVersion)
            }
            return (meta, events, keyframes, KeyframePolicy(ratio: ratio, minimumEvents: minimum), format)
        }
        let opened = try options.readOnly ? environment.read { try open($0, false) } : environment.write { try open($0, true) }
        (meta, events, keyframes, keyframePolicy, format) = opened
        // A log damaged near its end still opens, so that its good part can be read, verified
        // and salvaged; the first write rebuilds the tip and is refused while the damage stands.
        let known = (try? environment.read { txn in try currentTip(in: txn) }) ?? .unknown
        tip.withLock { $0 = known }
    }

    /// Removes a database directory a call created for its own scratch work: LMDB's two files,
    /// then the directory, only once it is empty (never recursively). Close the store first.
    package static func removeScratch(at path: String) {
        for file in ["data.mdb", "lock.mdb"] { unlink(path + "/" + file) }
        rmdir(path)
    }

    /// This log's stable id: random, made once when the log is created (or, for a log from
    /// before ids, the first time it is opened for writing), and kept by copies of the log that
    /// `eventlog pull` makes. `nil` only for such an older log opened read-only.
    ///
    /// - Throws: ``EventStoreError/damaged(_:)`` when the stored id fails its checksum; an
    ///   ``LMDBError`` when the read fails.
    public var logID: UUID? {
        get throws { try environment.read { txn in try logID(in: txn) } }
    }

    private func logID(in txn: borrowing Transaction) throws -> UUID? {
        guard let bytes = try txn.get(meta, key: MetaKey.logID) else { return nil }
        guard bytes.count == 20,
              CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<16])) == UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt32.self)) else {
            throw EventStoreError.damaged("the meta record's log id fails its checksum")
        }
        return UUID(uuid: bytes.loadUnaligned(as: uuid_t.self))
    }

    /// Gives an empty log the id of the log it is about to copy (`eventlog pull`). A log that
    /// holds events keeps its id: this throws unless the id is already `id`.
    package func adoptLogID(_ id: UUID) throws {
        try environment.write { txn in
            let current = try logID(in: txn)
            guard current != id else { return }
            guard try lastSeq(in: txn) == 0 else {
                throw EventStoreError.otherLog("it holds events of log \(current?.uuidString.lowercased() ?? "(no id)")")
            }
            try Self.putLogID(id, meta: meta, in: txn)
        }
    }

    private static func putLogID(_ id: UUID, meta: Database, in txn: borrowing Transaction) throws {
        var bytes = withUnsafeBytes(of: id.uuid) { Array($0) }
        let checksum = bytes.withUnsafeBytes { CRC32C.checksum($0) }
        withUnsafeBytes(of: checksum.littleEndian) { bytes += $0 }
        try bytes.withUnsafeBytes { try txn.put(meta, key: MetaKey.logID, bytes: $0) }
    }

    private static func readUInt32(_ bytes: UnsafeRawBufferPointer, _ key: String) throws -> UInt32 {
        guard bytes.count == 4 else {
            throw EventStoreError.damaged("the meta record's \"\(key)\" holds \(bytes.count) bytes where a 4-byte number belongs")
        }
        return UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self))
    }

    static func metaChecksum(_ values: [UInt32]) -> UInt32 {
        values.map(\.littleEndian).withUnsafeBytes { CRC32C.checksum($0) }
    }

    // MARK: Appending

    /// Appends one event and returns it as stored; it is committed when this returns.
    ///
    /// - Throws: ``EventStoreError/readOnly`` on a read-only store; what
    ///   ``AppendBatch/append(_:time:)`` throws for an event it refuses
    ///   (``EventStoreError/staleWrite(path:expected:actual:)``, ``EventStoreError/invalidWrite(_:)``,
    ///   ``EventStoreError/limitExceeded(_:)``); ``EventStoreError/corruptRecord(seq:reason:)``
    ///   when the newest state cannot be rebuilt from a log damaged near its end; an
    ///   ``LMDBError`` when the storage fails. Nothing is appended when it throws.
    @discardableResult
    public func append(_ event: Event) throws -> EventRecord {
        try transact { try $0.append(event) }
    }

    /// Appends events in one transaction and returns their sequence numbers: all of them are
    /// appended or none is.
    ///
    /// - Returns: The seqs the events got; `nil` when `events` is empty.
    /// - Throws: What ``append(_:)`` throws, for the first event refused; nothing is appended.
    @discardableResult
    public func append(contentsOf events: some Sequence<Event>) throws -> ClosedRange<UInt64>? {
        try transact { batch in
            let first = batch.lastSeq + 1
            try batch.append(contentsOf: Array(events))
            return batch.lastSeq >= first ? first...batch.lastSeq : nil
        }
    }

    /// Runs `body` inside one write transaction with a batch that sees the newest state:
    /// compute write sets from `batch.state`, append, and everything commits together when
    /// `body` returns (or nothing does, if it throws).
    ///
    /// `body` may run more than once (when the map must grow), so it must not have side
    /// effects outside the batch.
    ///
    /// - Returns: What `body` returns.
    /// - Throws: ``EventStoreError/readOnly`` on a read-only store (`body` does not run);
    ///   whatever `body` throws, such as an append it lets through, with nothing committed;
    ///   ``EventStoreError/corruptRecord(seq:reason:)`` or ``EventStoreError/invalidWrite(_:)``
    ///   when the newest state cannot be rebuilt from a log damaged near its end; an
    ///   ``LMDBError`` when the storage fails.
    @discardableResult
    public func transact<R>(_ body: (inout AppendBatch) throws -> R) throws -> R {
        guard !isReadOnly else { throw EventStoreError.readOnly }
        var result: R?
        try tip.withLock { tip throws in
            var newTip = Tip.unknown
            result = try environment.write { txn in
                // Hand the tip over to the batch rather than share it, so that the batch's state is
                // uniquely referenced and its writes mutate in place: a shared state would be copied
                // on the first write, which for a state of 100,000 objects costs milliseconds.
                var start = Tip.unknown
                swap(&start, &tip)
                if try lastSeq(in: txn) != start.seq { start = try currentTip(in: txn) }
                return try txn.withCursor(events) { eventsCursor in
                    try txn.withCursor(keyframes) { keyframesCursor in
                        // Moved through a local: a variable captured by a closure cannot be consumed.
                        var batchTip = Tip.unknown
                        swap(&batchTip, &start)
                        var batch = AppendBatch(store: self, transaction: txn.handle, events: eventsCursor.handle,
                                                keyframes: keyframesCursor.handle, tip: consume batchTip)
                        let result = try body(&batch)
                        newTip = batch.tip
                        return result
                    }
                }
            }
            // On failure the tip stays unknown and the next use rebuilds it from a keyframe.
            tip = newTip
        }
        return result!
    }

    /// Makes room for at least `bytes` more in the database before a `transact` whose body
    /// cannot run again (one that streams its input, which a map growth would have to re-read).
    ///
    /// - Throws: ``EventStoreError/readOnly`` on a read-only store; an ``LMDBError`` when the map
    ///   cannot grow (`ENOMEM` when the size needed overflows).
    public func reserveCapacity(_ bytes: Int) throws {
        guard !isReadOnly else { throw EventStoreError.readOnly }
        try environment.reserve(bytes)
    }

    /// Opens a named database of the same environment, for read models kept beside the log
    /// and updated in the same transactions (`AppendBatch.put`). With `create` (not on a
    /// read-only store) it is created when missing; otherwise `nil` when missing.
    package func openDatabase(named name: String, create: Bool) throws -> Database? {
        guard !["events", "keyframes", "meta"].contains(name) else {
            preconditionFailure("\(name) is one of the log's own databases")
        }
        if create && !isReadOnly {
            return try environment.write { try $0.openDatabase(named: name, create: true) }
        }
        return try environment.read { try $0.openDatabase(named: name) }
    }

    /// Runs `body` in a read-only snapshot, for read models kept beside the log.
    package func read<R>(_ body: (borrowing Transaction) throws -> R) throws -> R {
        try environment.read(body)
    }

    // MARK: Reading

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

    /// The sequence number of the newest event; 0 when the log is empty.
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
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` when the record fails its
    ///   checksum or does not decode; an ``LMDBError`` when the read fails.
    public func record(_ seq: UInt64) throws -> EventRecord? {
        try environment.read { txn in try record(seq, in: txn) }
    }

    func record(_ seq: UInt64, in txn: borrowing Transaction) throws -> EventRecord? {
        guard let bytes = try RecordCodec.withKey(seq, { try txn.get(events, key: $0) }) else { return nil }
        return try Self.decode(bytes, seq: seq)
    }

    /// Calls `body` with each record from `from` through `to` (inclusive, clamped to the log),
    /// in order, inside one read transaction; `body` returns `false` to stop early. A gap in
    /// the sequence is a corrupt record, as is a bad checksum.
    ///
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at the first record that is
    ///   missing, fails its checksum or does not decode (`body` has seen the ones before it);
    ///   whatever `body` throws; an ``LMDBError`` when the read fails.
    public func forEachRecord(from: UInt64 = 1, to: UInt64 = .max, _ body: (EventRecord) throws -> Bool) throws {
        let names = NameCache()
        try environment.read { txn in
            try forEachStoredRecord(after: max(from, 1) - 1, through: to, in: txn) { seq, bytes in
                try body(try Self.decode(bytes, seq: seq, names: names))
            }
        }
    }

    /// Calls `body` with each seq from `from` through `to` (clamped to the log) and the state
    /// right after it, inside one read transaction: one snapshot, then one write set per event,
    /// decoding nothing else (every checksum is still checked). `body` returns `false` to stop.
    ///
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at the first record that is
    ///   missing, fails its checksum or does not decode; ``EventStoreError/invalidWrite(_:)``
    ///   when a write does not fit the state; whatever `body` throws; an ``LMDBError`` when the
    ///   read fails.
    public func forEachState(from: UInt64 = 1, to: UInt64 = .max, _ body: (UInt64, StateValue) throws -> Bool) throws {
        try environment.read { txn in
            let start = min(max(from, 1) - 1, try lastSeq(in: txn))
            var state = try state(after: start, in: txn)
            try foldWriteSets(after: start, through: to, into: &state, in: txn) { seq, folded, _, _ in try body(seq, folded) }
        }
    }

    /// The state right after event `seq` (0 gives the empty state before the first event):
    /// the nearest keyframe at or before it plus the write sets after that keyframe.
    ///
    /// - Throws: ``EventStoreError/noSuchEvent(seq:last:)`` when `seq` is past the newest event;
    ///   ``EventStoreError/corruptRecord(seq:reason:)`` when a record between the keyframe and
    ///   `seq` fails its checksum or does not decode; ``EventStoreError/invalidWrite(_:)`` when
    ///   one of their writes does not fit the state; an ``LMDBError`` when the read fails.
    public func snapshot(after seq: UInt64) throws -> StateValue {
        try environment.read { txn in try state(after: seq, in: txn) }
    }

    func lastSeq(in txn: borrowing Transaction) throws -> UInt64 {
        try txn.withCursor(events) { cursor in try cursor.last().map { try Self.seq(ofKey: $0.key, "newest") } ?? 0 }
    }

    func state(after seq: UInt64, in txn: borrowing Transaction) throws -> StateValue {
        let last = try lastSeq(in: txn)
        guard seq <= last else { throw EventStoreError.noSuchEvent(seq: seq, last: last) }
        // The newest state is at hand unless a writer of this process holds it right now.
        if let known = tip.withLockIfAvailable({ $0.seq == seq ? $0.state : nil }), let state = known { return state }
        return try rollForward(from: try keyframe(atOrBefore: seq, in: txn), to: seq, in: txn).state
    }

    /// The newest state in the database and the keyframe progress since its last keyframe.
    func currentTip(in txn: borrowing Transaction) throws -> Tip {
        let last = try lastSeq(in: txn)
        return try rollForward(from: try keyframe(atOrBefore: last, in: txn), to: last, in: txn)
    }

    /// Applies the write sets after a keyframe up to `seq`, counting record sizes as it goes.
    private func rollForward(from keyframe: Keyframe, to seq: UInt64, in txn: borrowing Transaction) throws -> Tip {
        var state = keyframe.state
        var (last, progress) = (keyframe.seq, KeyframeProgress(stateBytes: keyframe.bytes))
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
        let names = NameCache()
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

    /// The write sets of the records after `start` through `end`, in order.
    func writeSets(after start: UInt64, through end: UInt64, in txn: borrowing Transaction) throws -> [[Write]] {
        let names = NameCache()
        var writeSets: [[Write]] = []
        try forEachStoredRecord(after: start, through: end, in: txn) { seq, bytes in
            var stateDelta = 0
            do throws(RecordDecodingError) {
                writeSets.append(try RecordCodec.decodeWrites(bytes, seq: seq, stateDelta: &stateDelta, names: names))
            } catch {
                throw EventStoreError.corruptRecord(seq: seq, reason: error.reason)
            }
            return true
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
    private func forEachStoredRecord(after start: UInt64, through end: UInt64, in txn: borrowing Transaction,
                                     _ body: (_ seq: UInt64, _ bytes: UnsafeRawBufferPointer) throws -> Bool) throws {
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
    /// one before it, and the write sets in between make up the difference.
    func keyframe(atOrBefore seq: UInt64, in txn: borrowing Transaction) throws -> Keyframe {
        try txn.withCursor(keyframes) { cursor in
            var entry = try RecordCodec.withKey(seq) { try cursor.seek(atOrAfter: $0) }
            if let found = entry, (try? RecordCodec.seq(fromKey: found.key)) != seq {
                entry = try cursor.previous()
            } else if entry == nil {
                entry = try cursor.last()
            }
            while let current = entry {
                if let at = try? RecordCodec.seq(fromKey: current.key), at <= seq,
                   let state = try? RecordCodec.decodeKeyframe(current.value, seq: at) {
                    return Keyframe(seq: at, state: state, bytes: current.value.count)
                }
                entry = try cursor.previous()
            }
            return Keyframe(seq: 0, state: .emptyObject, bytes: KeyframeProgress.emptyStateBytes)
        }
    }

    package static func decode(_ bytes: UnsafeRawBufferPointer, seq: UInt64, names: NameCache? = nil) throws -> EventRecord {
        do throws(RecordDecodingError) { return try RecordCodec.decode(bytes, seq: seq, names: names) } catch { throw EventStoreError.corruptRecord(seq: seq, reason: error.reason) }
    }
}

/// The newest state a writer knows, the seq it follows, and the keyframe progress.
struct Tip: Sendable {
    var seq: UInt64
    var state: StateValue
    var progress: KeyframeProgress

    /// No tip: the next writer rebuilds it from the database.
    static let unknown = Tip(seq: .max, state: .null, progress: KeyframeProgress())
}

/// The appends of one write transaction, lent by `EventStore.transact`.
public struct AppendBatch: ~Copyable {
    private let store: EventStore
    private let transaction: OpaquePointer
    /// Cursors that append to the log's databases, open for the batch's lifetime.
    private let events: OpaquePointer
    private let keyframes: OpaquePointer
    private var writer = BinaryWriter(capacity: 512)
    private(set) var tip: Tip

    /// The sequence number of the newest event, including those appended by this batch.
    public var lastSeq: UInt64 { tip.seq }
    /// The state after `lastSeq`, including this batch's writes.
    public var state: StateValue { tip.state }

    init(store: EventStore, transaction: OpaquePointer, events: OpaquePointer, keyframes: OpaquePointer, tip: Tip) {
        self.store = store
        self.transaction = transaction
        self.events = events
        self.keyframes = keyframes
        self.tip = tip
    }

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
        try apply(Self.writes(of: event))
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
            try apply(Self.writes(of: events[index]))
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

    /// The writes of `event` to apply: only an applied event writes.
    private static func writes(of event: borrowing Event) throws(EventStoreError) -> [Write] {
        if case .applied = event.outcome { return event.writes }
        guard let first = event.writes.first else { return [] }
        throw .invalidWrite(StateError(path: first.path, reason: "a \(event.outcome.name) event writes nothing"))
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
        try RecordCodec.withKey(seq) { try Cursor(handle: events).append(key: $0, value: record) }
    }

    /// Moves the tip past the record just put, and stores a keyframe when the policy calls for one.
    private mutating func advance(recordBytes: Int, stateDelta: Int) throws {
        tip.seq += 1
        guard tip.progress.record(recordBytes, stateDelta: stateDelta, policy: store.keyframePolicy) else { return }
        RecordCodec.encodeKeyframe(tip.state, seq: tip.seq, into: &writer)
        try RecordCodec.withKey(tip.seq) { key in
            try writer.withUnsafeBytes { try Cursor(handle: keyframes).append(key: key, value: $0) }
        }
        tip.progress.keyframeWritten(writer.count)
    }

    /// Reads a read model kept beside the log, in this transaction (seeing this batch's puts).
    package func get(_ db: Database, key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        try Transaction(handle: transaction).get(db, key: key)
    }

    /// Writes a read model kept beside the log; it commits (or not) with the batch's events.
    package func put(_ db: Database, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        try Transaction(handle: transaction).put(db, key: key, value: value)
    }

    /// Removes an entry of a read model kept beside the log; returns whether it was there.
    @discardableResult
    package func delete(_ db: Database, key: UnsafeRawBufferPointer) throws -> Bool {
        try Transaction(handle: transaction).delete(db, key: key)
    }

    /// Removes every entry of a read model kept beside the log, in this transaction.
    package func empty(_ db: Database) throws {
        try Transaction(handle: transaction).empty(db)
    }

    /// Deletes a read model kept beside the log, when it exists; its handles become invalid.
    package func removeDatabase(named name: String) throws {
        precondition(!["events", "keyframes", "meta"].contains(name), "\(name) is one of the log's own databases")
        let txn = Transaction(handle: transaction)
        guard let db = try txn.openDatabase(named: name) else { return }
        try txn.empty(db, deletingDatabase: true)
    }

    /// Lends a cursor over a read model kept beside the log, in this transaction.
    package func withCursor<R>(_ db: Database, _ body: (borrowing Cursor) throws -> R) throws -> R {
        try Transaction(handle: transaction).withCursor(db, body)
    }
}
