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
    /// The newest storage format this build reads, and the one a compacted log has. Format 2
    /// adds origins stored by name, format 3 events' versions, format 4 a base (the state
    /// before the first event kept, ``compact(before:)``). A log that was never compacted
    /// stays at ``uncompactedFormatVersion``, which builds that cannot read a base read as before.
    public static let formatVersion: UInt32 = 4

    /// The format a writer brings a log without a base to: an older database opened for
    /// writing becomes format 3, its records unchanged (they read as they are).
    public static let uncompactedFormatVersion: UInt32 = 3

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
        /// A retention policy to store in the log's meta when a writer opens it (replacing the
        /// one stored); `nil`, the default, leaves the meta's as it is (``EventStore/setRetention(_:)``
        /// removes one). Writers apply the stored policy after their commits. A policy keeps at
        /// least 1 event or 1 day; one of 0 traps.
        public var retention: RetentionPolicy?
        /// The newest seq a retention step may drop, asked before each step: `nil` (the
        /// default, or as the function's answer) holds nothing back. A family that ships logs
        /// holds back what was not shipped (`Shipper.shippedThrough`), so that a policy never
        /// drops an event the fleet has not got.
        public var retentionHold: (@Sendable (_ store: EventStore) throws -> UInt64?)?

        /// The defaults: read-write, `.full` durability, a 64 MiB initial map, `KeyframePolicy()`,
        /// the system clock, the retention policy the log has, and no hold on it.
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
    let meta: Database
    /// Where event times come from.
    public let clock: EventClock

    /// The newest state this process knows of, the seq it follows, and the progress since
    /// the last keyframe. Its lock also serialises this process's writers.
    let tip = Locked(Tip.unknown)
    /// Name caches for this store's reads.
    let nameCaches = NameCaches()
    /// The seq of the base last read from the meta (0: none), for `window(in:)`.
    let knownBase = Atomic<UInt64>(0)
    let groupCommitter = GroupCommitter()
    let appendQueue = AppendQueue()
    /// The newest seq a retention step may drop (``Options/retentionHold``).
    let retentionHold: (@Sendable (EventStore) throws -> UInt64?)?
    /// Why this store's last retention step failed; while set, it runs no more.
    let retentionFailure = Locked<(any Error)?>(nil)

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

    /// Whether `path` holds a log, or what is left of one (it may be damaged): a `data.mdb`
    /// that is not a creation killed before LMDB wrote its first page. Looks only at the
    /// file's size and the creation marker beside it.
    public static func exists(at path: String) -> Bool {
        FileManager.default.fileExists(atPath: path + "/data.mdb") && !StorageCheck.isUnfinishedCreation(dataFile: path + "/data.mdb")
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
    ///   `data.mdb`, or it holds an empty environment or none yet (a writer stopped before it
    ///   made the log; the next writer makes it); ``EventStoreError/damaged(_:)`` when the data
    ///   file is truncated or emptied,
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
        // A creation killed before LMDB wrote a page: no log yet, which a writer makes.
        if options.readOnly && StorageCheck.isUnfinishedCreation(dataFile: path + "/data.mdb") {
            throw EventStoreError.notFound(path: path)
        }

        var environmentOptions = Environment.Options()
        environmentOptions.readOnly = options.readOnly
        environmentOptions.durability = options.durability
        environmentOptions.mapSize = options.initialMapSize
        environment = try Environment.open(path: path, options: environmentOptions)
        isReadOnly = options.readOnly
        clock = options.clock
        retentionHold = options.retentionHold

        let open = { (txn: borrowing Transaction, writable: Bool) throws -> (Database, Database, Database, KeyframePolicy, UInt32) in
            // Only a brand-new environment becomes a log: one holding anything else (another
            // program's databases) is never written to.
            let isNew = try writable && txn.mainDatabaseIsEmpty()
            let databases = try ["meta", "events", "keyframes"].map { try txn.openDatabase(named: $0, create: isNew) }
            guard let meta = databases[0], let events = databases[1], let keyframes = databases[2] else {
                // Nothing at all: a writer was stopped between LMDB making the environment and
                // making the log (the next writer makes it). None of them beside something
                // else: another program's environment. Some: a log that lost a database.
                if try txn.mainDatabaseIsEmpty() { throw EventStoreError.notFound(path: path) }
                if databases.allSatisfy({ $0 == nil }) { throw EventStoreError.notAnEventLog(path: path) }
                let missing = zip(["meta", "events", "keyframes"], databases).filter { $0.1 == nil }.map(\.0)
                throw EventStoreError.damaged("the log's database \(missing.joined(separator: " and ")) is missing")
            }
            if writable, let policy = options.retention {
                try Self.putRetention(policy.validated(), meta: meta, in: txn)
            }
            if isNew {
                let values = [Self.uncompactedFormatVersion, options.keyframePolicy.ratio, options.keyframePolicy.minimumEvents]
                for (key, value) in zip(MetaKey.checked, values) { try txn.put(meta, key: key, value: value) }
                try txn.put(meta, key: MetaKey.checksum, value: Self.metaChecksum(values))
                try Self.putLogID(UUID(), meta: meta, in: txn)
                return (meta, events, keyframes, options.keyframePolicy, Self.uncompactedFormatVersion)
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
            // A base is what format 4 adds: one without it, or it without one, is damage.
            if (format == Self.formatVersion) != (try txn.get(meta, key: BaseCodec.key) != nil) {
                throw EventStoreError.damaged(format == Self.formatVersion ? "the meta record says format 4 but holds no base" : "the meta record holds a base but says format \(format)")
            }
            // Opened for writing, an older format is brought up to 3 (format 1's records are
            // format 2's as they are), and a meta record written before it had a checksum gets one.
            if writable && (format < Self.uncompactedFormatVersion || checksum == nil) {
                let upgraded = Swift.max(format, Self.uncompactedFormatVersion)
                try txn.put(meta, key: MetaKey.format, value: upgraded)
                try txn.put(meta, key: MetaKey.checksum, value: Self.metaChecksum([upgraded, ratio, minimum]))
                return (meta, events, keyframes, KeyframePolicy(ratio: ratio, minimumEvents: minimum), upgraded)
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

    /// Creates the directory `path` for a call's own scratch database; one already there is
    /// refused (`EEXIST`), so that `removeScratch` only ever removes what this call made.
    /// - Throws: An ``LMDBError`` holding the `errno` of a failed `mkdir`.
    package static func makeScratch(at path: String) throws {
        guard mkdir(path, 0o700) == 0 else { throw LMDBError(code: errno) }
    }

    /// Removes a database directory `makeScratch` created: LMDB's two files, then the
    /// directory, only once it is empty (never recursively). Close the store first.
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

    /// Stores `format` as the meta record's format, with its checksum.
    func putFormat(_ format: UInt32, in txn: borrowing Transaction) throws {
        try txn.put(meta, key: MetaKey.format, value: format)
        try txn.put(meta, key: MetaKey.checksum, value: Self.metaChecksum([format, keyframePolicy.ratio, keyframePolicy.minimumEvents]))
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
    /// When the log's ``retentionPolicy()`` is due after the commit (the log is past it by more
    /// than its slack), one step of it runs on this thread before this returns: a write
    /// transaction of its own dropping at most ``RetentionPolicy/stepEvents`` records. Its
    /// failure is never this call's (the appends are committed): see ``retentionError``.
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
        var due: RetentionPolicy?
        try tip.withLock { tip throws in
            var newTip = Tip.unknown
            result = try environment.write { txn in
                // Hand the tip over to the batch rather than share it, so that the batch's state is
                // uniquely referenced and its writes mutate in place: a shared state would be copied
                // on the first write, which for a state of 100,000 objects costs milliseconds.
                var start = Tip.unknown
                swap(&start, &tip)
                if try lastSeq(in: txn) != start.seq { start = try currentTip(in: txn) }
                let result = try txn.withCursor(events) { eventsCursor in
                    try txn.withCursor(keyframes) { keyframesCursor in
                        // Moved through a local: a variable captured by a closure cannot be consumed.
                        var batchTip = Tip.unknown
                        swap(&batchTip, &start)
                        var batch = AppendBatch(store: self, transaction: txn, events: eventsCursor,
                                                keyframes: keyframesCursor, tip: consume batchTip)
                        let result = try body(&batch)
                        newTip = batch.tip
                        return result
                    }
                }
                // A policy that cannot be read leaves the appends alone; verify reports it.
                due = (try? retentionStepDue(in: txn)) ?? nil
                return result
            }
            // On failure the tip stays unknown and the next use rebuilds it from a keyframe.
            tip = newTip
        }
        if let due { applyRetention(due) }
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
}

/// The newest state a writer knows, the seq it follows, and the keyframe progress.
struct Tip: Sendable {
    var seq: UInt64
    var state: StateValue
    var progress: KeyframeProgress

    /// No tip: the next writer rebuilds it from the database.
    static let unknown = Tip(seq: .max, state: .null, progress: KeyframeProgress())
}
