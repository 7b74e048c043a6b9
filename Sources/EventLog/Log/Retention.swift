import Foundation

/// What stands in place of the events a compaction dropped: the state right after the last of
/// them (stored as a keyframe under its seq, with its CRC-32C), how many events each stream
/// lost, and for each compaction the SHA-256 of the dropped records' stored bytes in seq order,
/// so that a copy still holding them (an export, a pulled copy) can prove they are the ones
/// dropped. Seqs never change: the log's first event is `seq + 1`.
public struct LogBase: Sendable, Hashable {
    /// The seq of the last event dropped; the base is the state right after it.
    public var seq: UInt64
    /// The CRC-32C of the base as stored: of its seq's 8 key bytes and the encoded state.
    public var checksum: UInt32
    /// The events dropped, by stream, over every compaction of the log.
    public var dropped: [String: UInt64]
    /// Each compaction's dropped part, oldest first (the steps of a retention policy that
    /// follow one another extend one range); together they cover 1 through `seq`.
    public var digests: [DroppedRange]

    /// A base after event `seq`, as ``EventStore/compact(before:)`` makes one.
    public init(seq: UInt64, checksum: UInt32, dropped: [String: UInt64], digests: [DroppedRange]) {
        self.seq = seq
        self.checksum = checksum
        self.dropped = dropped
        self.digests = digests
    }

    /// The seq of the log's first event.
    public var firstSeq: UInt64 { seq + 1 }
}

/// The events one compaction (or a run of a retention policy's steps) dropped and the SHA-256
/// of their stored bytes, in seq order.
public struct DroppedRange: Sendable, Hashable {
    /// The seqs dropped.
    public var seqs: ClosedRange<UInt64>
    /// SHA-256 over each dropped record's bytes as stored (its checksum included), in seq order.
    public var sha256: [UInt8]

    /// A range of dropped seqs and the digest of their records.
    public init(seqs: ClosedRange<UInt64>, sha256: [UInt8]) {
        self.seqs = seqs
        self.sha256 = sha256
    }

    /// The digest that `records` (the stored bytes of `seqs`, in order) would have; compare it
    /// with `sha256` to prove that a copy holds the events dropped.
    public static func digest(of records: some Sequence<[UInt8]>) -> [UInt8] {
        var hasher = SHA256Hasher()
        for record in records { record.withUnsafeBytes { hasher.update($0) } }
        return hasher.finalize()
    }
}

/// How a base is kept in the meta database (key `base`, format 4):
///
///     fixed64  the seq of the log's first event (the base's seq + 1)
///     fixed32  the base keyframe's CRC-32C
///     varint   streams, then per stream (in name order): string name, varint events dropped
///     varint   ranges, then per range: varint first, varint last, 32 bytes of SHA-256
///     fixed32  CRC-32C of the bytes above
enum BaseCodec {
    static let key = "base"

    static func encode(_ base: LogBase) -> [UInt8] {
        var writer = BinaryWriter()
        writer.fixed64(base.firstSeq)
        writer.fixed32(base.checksum)
        writer.varint(base.dropped.count)
        for (stream, count) in base.dropped.sorted(by: { $0.key < $1.key }) {
            writer.string(stream)
            writer.varint(count)
        }
        writer.varint(base.digests.count)
        for range in base.digests {
            writer.varint(range.seqs.lowerBound)
            writer.varint(range.seqs.upperBound)
            range.sha256.withUnsafeBytes { writer.raw($0) }
        }
        writer.appendChecksum(from: 0, prefix: UnsafeRawBufferPointer(start: nil, count: 0))
        return writer.bytes
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws(EventStoreError) -> LogBase {
        do throws(RecordDecodingError) {
            var (reader, _) = try RecordCodec.verified(bytes, key: UnsafeRawBufferPointer(start: nil, count: 0))
            let first = try reader.fixed64()
            guard first > 1 else { throw RecordDecodingError("a first seq of \(first)") }
            var base = LogBase(seq: first - 1, checksum: try reader.fixed32(), dropped: [:], digests: [])
            for _ in 0..<(try reader.count()) { base.dropped[try reader.string()] = try reader.varint() }
            for _ in 0..<(try reader.count()) {
                let (from, to) = (try reader.varint(), try reader.varint())
                guard from <= to else { throw RecordDecodingError("a dropped range \(from)-\(to)") }
                base.digests.append(DroppedRange(seqs: from...to, sha256: Array(try reader.slice(32))))
            }
            guard reader.isAtEnd else { throw RecordDecodingError("\(reader.remaining) trailing bytes") }
            return base
        } catch {
            throw .damaged("the meta record's base: \(error.reason)")
        }
    }
}

extension EventStore {
    /// Writes a copy of the log into `path`, a directory that must not exist yet, without the
    /// free pages its file holds (LMDB's compacting copy): after ``compact(before:)``, the
    /// space the dropped events took. It reads one snapshot; writers may go on meanwhile.
    ///
    /// - Throws: An ``LMDBError``: `EEXIST` when `path` exists, `ENOSPC` when the disk is
    ///   full (the directory and what was written of the copy are removed again).
    public func copyCompacted(to path: String) throws {
        try Self.makeScratch(at: path)
        do {
            try environment.copyCompacted(to: path)
        } catch {
            Self.removeScratch(at: path)
            throw error
        }
    }

    /// Replaces the log's file in directory `path` by a copy without its free pages, to give
    /// back the space a compaction freed. The copy is written into `path/compacting`, a
    /// directory this call creates (it refuses to run while one is there: a run that was
    /// killed left it, with a copy or the old file in it, for a person to remove), and flushed;
    /// then, while no process has the log open (LMDB's lock on `lock.mdb` is taken, so that
    /// none can open it meanwhile) and nothing was committed since the copy was made, the old
    /// file is kept under a second name in that directory, the copy is renamed over it, the
    /// directory is flushed, and only then is the old file's second name removed. A crash at
    /// any moment leaves `path/data.mdb` the old log or the compacted one.
    ///
    /// Close every store of the log in this process first.
    ///
    /// - Returns: The data file's size before and after, in bytes.
    /// - Throws: ``EventStoreError/busy(_:)`` when `path/compacting` exists, a store of this
    ///   process or another process has the log open, or a writer committed while it was
    ///   copied (nothing is replaced, and the copy is removed); what opening and copying
    ///   throw (an ``LMDBError`` such as `ENOSPC`).
    public static func replaceWithCompactedCopy(at path: String) throws -> (before: Int, after: Int) {
        let scratch = path + "/compacting"
        do { try makeScratch(at: scratch) } catch LMDBError(code: EEXIST) {
            throw EventStoreError.busy("\(scratch) exists: a compaction that was killed left it; remove it (it holds a copy or the old file, never the only one)")
        }
        var keepScratch = false
        defer { if !keepScratch { unlink(scratch + "/data.mdb.old"); removeScratch(at: scratch) } }
        let copied: Int = try {
            var options = Options()
            options.readOnly = true
            let store = try EventStore(path: path, options: options)
            for _ in 0..<8 {
                let before = try store.environment.read { $0.snapshotID }
                try store.environment.copyCompacted(to: scratch)
                if try store.environment.read({ $0.snapshotID }) == before { return before }
                unlink(scratch + "/data.mdb")
            }
            throw EventStoreError.busy("writers kept committing while the log was copied; run it again")
        }()
        guard Environment.isOpenInThisProcess(path: path) == false else {
            throw EventStoreError.busy("a store of this process has the log open; close it first")
        }
        try Environment.flush(scratch + "/data.mdb")
        try Environment.flush(scratch)
        // LMDB takes a lock on the first byte of lock.mdb in every process that opens the log:
        // held exclusively here, no process has it open and none can open it until it is released.
        let lock = open(path + "/lock.mdb", O_RDWR | O_CLOEXEC)
        guard lock >= 0 else { throw LMDBError(code: errno) }
        defer { close(lock) }
        var region = flock()
        region.l_type = Int16(F_WRLCK)
        region.l_whence = Int16(SEEK_SET)
        region.l_len = 1
        guard fcntl(lock, Self.ofdSetLock, &region) == 0 else {
            throw EventStoreError.busy("another process has the log open; run it again when it is closed")
        }
        let meta: StorageCheck.Meta?
        do { meta = try StorageCheck.checkHeader(path: path + "/data.mdb") } catch { throw EventStoreError.damaged(error.description) }
        guard meta?.txnID == copied else { throw EventStoreError.busy("a writer committed after the log was copied; run it again") }
        let before = fileBytes(path + "/data.mdb")
        guard link(path + "/data.mdb", scratch + "/data.mdb.old") == 0 else { throw LMDBError(code: errno) }
        keepScratch = true
        guard rename(scratch + "/data.mdb", path + "/data.mdb") == 0 else { throw LMDBError(code: errno) }
        try Environment.flush(path)
        keepScratch = false
        return (before, fileBytes(path + "/data.mdb"))
    }

    /// `F_OFD_SETLK` (Linux): a lock owned by the open file, which conflicts with the locks
    /// other processes (and this one's environments) hold on the file.
    private static let ofdSetLock: Int32 = 37

    private static func fileBytes(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }

    /// The base of a compacted log; `nil` for a log that was never compacted (it starts at 1).
    ///
    /// - Throws: ``EventStoreError/damaged(_:)`` when the stored base fails its checksum or
    ///   does not decode; an ``LMDBError`` when the read fails.
    public func base() throws -> LogBase? {
        try environment.read { try base(in: $0) }
    }

    func base(in txn: borrowing Transaction) throws -> LogBase? {
        guard let bytes = try txn.get(meta, key: BaseCodec.key) else { return nil }
        return try BaseCodec.decode(bytes)
    }

    /// The seq of the last event compacted away (0 for a log never compacted): the states after
    /// it and every event after it can be read.
    func baseSeq(in txn: borrowing Transaction) throws -> UInt64 {
        guard let bytes = try txn.get(meta, key: BaseCodec.key) else { return 0 }
        return try BaseCodec.decode(bytes).seq
    }

    /// `from`, or the log's first event when `from` comes before it: where a walk over a
    /// range of events starts.
    func windowStart(_ from: UInt64) throws -> UInt64 {
        Swift.max(from, try environment.read { try baseSeq(in: $0) } + 1)
    }

    /// Drops the events before `seq` and keeps in their place a base: the state right after
    /// `seq - 1`, stored as a checksummed keyframe, with the events dropped per stream and the
    /// SHA-256 of their stored bytes in the meta. All in one write transaction: the log is
    /// either as it was or compacted. Seqs do not change; keyframes before `seq` go, the base
    /// taking their place. The first compaction brings the log to format 4.
    ///
    /// Every dropped record's checksum is checked as it is hashed, and the base is checked
    /// against the old values of event `seq`'s writes; run ``verify(progress:)`` first to check
    /// the events kept too.
    ///
    /// - Parameter seq: The first event to keep: from 2 to ``lastSeq()`` (the log keeps at
    ///   least one event, against which its base is checked). A `seq` at or before the log's
    ///   first event drops nothing and returns the base as it is.
    /// - Returns: The log's base afterwards; `nil` only when nothing was dropped from a log
    ///   never compacted.
    /// - Throws: ``EventStoreError/readOnly`` on a read-only store; ``EventStoreError/noSuchEvent(seq:last:)``
    ///   when `seq` is 0 or past the newest event; ``EventStoreError/corruptRecord(seq:reason:)``
    ///   when a record to drop or to fold fails its checksum or does not decode, or event
    ///   `seq`'s old values disagree with the base; ``EventStoreError/damaged(_:)`` when the
    ///   meta or an old base is damaged; an ``LMDBError`` when the storage fails. Nothing
    ///   changes when it throws.
    @discardableResult
    public func compact(before seq: UInt64) throws -> LogBase? {
        try compact(before: seq, continuingDigest: false)
    }

    /// `compact(before:)`, and for a retention policy's step (`continuingDigest`) the dropped
    /// records hashed on from the running digest the last step left, so that they extend the
    /// last dropped range instead of adding one; a compaction by hand starts a range of its
    /// own and removes the running digest.
    func compact(before seq: UInt64, continuingDigest: Bool) throws -> LogBase? {
        guard !isReadOnly else { throw EventStoreError.readOnly }
        return try tip.withLock { tip throws in
            // The tip's progress counts from the newest keyframe: if that one goes, the next
            // writer rebuilds the tip.
            var keepsTip = false
            defer { if !keepsTip { tip = .unknown } }
            return try environment.write { txn in
                let old = try base(in: txn)
                let last = try lastSeq(in: txn)
                guard seq > 0, seq <= last else { throw EventStoreError.noSuchEvent(seq: seq, last: last) }
                let oldSeq = old?.seq ?? 0
                keepsTip = true
                guard seq > oldSeq + 1 else { return old }
                let cut = seq - 1
                let state = try state(after: cut, in: txn)
                try checkBase(state, againstEventAfter: cut, in: txn)
                var base = old ?? LogBase(seq: 0, checksum: 0, dropped: [:], digests: [])
                var hasher = SHA256Hasher()
                var first = oldSeq + 1
                if continuingDigest, let bytes = try txn.get(meta, key: RunningDigest.key), let range = base.digests.last,
                   case let running = try RunningDigest.decode(bytes), running.through == oldSeq, range.seqs.upperBound == oldSeq {
                    hasher = running.hasher
                    first = range.seqs.lowerBound
                    base.digests.removeLast()
                }
                try dropRecords(through: cut, into: &hasher, counting: &base.dropped, in: txn)
                if continuingDigest {
                    try RunningDigest(through: cut, hasher: hasher).encoded.withUnsafeBytes { try txn.put(meta, key: RunningDigest.key, bytes: $0) }
                } else {
                    _ = try Array(RunningDigest.key.utf8).withUnsafeBytes { try txn.delete(meta, key: $0) }
                }
                base.digests.append(DroppedRange(seqs: first...cut, sha256: hasher.finalize()))
                base.seq = cut
                keepsTip = try txn.withCursor(keyframes) { cursor in
                    while let entry = try cursor.first(), let at = try? RecordCodec.seq(fromKey: entry.key), at <= cut {
                        try cursor.deleteCurrent()
                    }
                    return try cursor.last() != nil
                }
                base.checksum = try putBase(base, state: state, in: txn).checksum
                return base
            }
        }
    }

    /// Refuses a base that disagrees with the old values of the writes of the event after it.
    private func checkBase(_ state: StateValue, againstEventAfter seq: UInt64, in txn: borrowing Transaction) throws {
        guard let writes = try writeSets(after: seq, through: seq + 1, in: txn).first else { return }
        var folded = state
        for write in writes {
            let actual: StateValue?
            do throws(StateError) { actual = try folded.set(write.new, at: write.path) } catch { throw EventStoreError.invalidWrite(error) }
            guard actual == write.old else {
                throw EventStoreError.corruptRecord(seq: seq + 1, reason: "write to \(write.path) expects \(write.old?.json() ?? "absent") but the state before it holds \(actual?.json() ?? "absent")")
            }
        }
    }

    /// Deletes the records through `cut`, checking each one's checksum, counting it by stream
    /// and hashing its stored bytes into `hasher`, in seq order.
    private func dropRecords(through cut: UInt64, into hasher: inout SHA256Hasher, counting dropped: inout [String: UInt64],
                             in txn: borrowing Transaction) throws {
        try txn.withCursor(events) { cursor in
            var entry = try cursor.first()
            var expected = try baseSeq(in: txn) + 1
            while let current = entry, expected <= cut {
                let stream: String
                do throws(RecordDecodingError) {
                    guard try RecordCodec.seq(fromKey: current.key) == expected else { throw RecordDecodingError("the sequence has a gap before \(expected)") }
                    var (reader, _) = try RecordCodec.verified(current.value, seq: expected)
                    _ = try reader.varint()
                    stream = try reader.string()
                } catch {
                    throw EventStoreError.corruptRecord(seq: expected, reason: error.reason)
                }
                expected += 1
                hasher.update(current.value)
                dropped[stream, default: 0] += 1
                try cursor.deleteCurrent()
                entry = try cursor.current()
            }
        }
    }

    /// Stores `state` as the base keyframe at `base.seq` and the base in the meta, with the
    /// keyframe's checksum (whatever `base.checksum` says), and brings the format to 4; returns
    /// that checksum and the keyframe's stored size.
    func putBase(_ base: LogBase, state: StateValue, in txn: borrowing Transaction) throws -> (checksum: UInt32, bytes: Int) {
        var writer = BinaryWriter()
        RecordCodec.encodeKeyframe(state, seq: base.seq, into: &writer)
        var stored = base
        stored.checksum = writer.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: $0.count - 4, as: UInt32.self)) }
        try RecordCodec.withKey(base.seq) { key in try writer.withUnsafeBytes { try txn.put(keyframes, key: key, value: $0) } }
        try BaseCodec.encode(stored).withUnsafeBytes { try txn.put(meta, key: BaseCodec.key, bytes: $0) }
        try putFormat(Self.formatVersion, in: txn)
        return (stored.checksum, writer.count)
    }

    /// The first event recorded at or after `time`, or `nil` when every event is older: where
    /// `compact --older-than` cuts (events are in the order they were appended, so the first
    /// one at or after the cut ends the dropped part even if an older time follows it).
    ///
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at a record that fails its
    ///   checksum or does not decode; an ``LMDBError`` when the read fails.
    public func firstEvent(recordedAtOrAfter time: Timestamp) throws -> UInt64? {
        var found: UInt64?
        try forEachStoredRecord(after: 0) { seq, bytes in
            if try Self.recordedTime(bytes, seq: seq) >= time.microsecondsSince1970 { found = seq }
            return found == nil
        }
        return found
    }
}

/// The JSON form of a base: the first line of a compacted log's export, which `import` reads.
extension LogBase {
    /// `{"base": {"checksum", "digests": [{"from", "sha256", "to"}], "dropped": {stream: count},
    /// "seq", "state"}}`, with `state` the state after `seq` (left out when `nil`);
    /// ``parse(json:)`` reads it back.
    public func jsonValue(state: StateValue?) -> StateValue {
        var dropped = StateObject()
        for (stream, count) in self.dropped.sorted(by: { $0.key < $1.key }) { dropped[stream] = .int(Int64(count)) }
        let digests = self.digests.map { range -> StateValue in
            ["from": .int(Int64(range.seqs.lowerBound)), "sha256": .string(range.sha256.map { String(format: "%02x", $0) }.joined()),
             "to": .int(Int64(range.seqs.upperBound))]
        }
        var base: StateObject = ["checksum": .string(RecordCodec.hex(checksum)), "digests": .array(digests), "dropped": .object(dropped),
                                 "seq": .int(Int64(seq))]
        base["state"] = state
        return ["base": .object(base)]
    }

    /// Whether `json` is a base's line rather than an event's: an object whose only key is `base`.
    public static func isBase(_ json: StateValue) -> Bool {
        json.objectValue.map { $0.keys.count == 1 && $0["base"] != nil } ?? false
    }

    /// Reads what ``jsonValue(state:)`` writes: the base and the state after it.
    ///
    /// - Throws: ``RecordFormatError`` when a key is missing, unknown or of the wrong kind.
    public static func parse(json: StateValue) throws(RecordFormatError) -> (base: LogBase, state: StateValue) {
        let outer = try RecordFormatError.object(json, "base line")
        try RecordFormatError.onlyKeys(outer, ["base"], in: "base line")
        let object = try RecordFormatError.object(outer["base"] ?? .null, "base")
        try RecordFormatError.onlyKeys(object, ["checksum", "digests", "dropped", "seq", "state"], in: "base")
        func number(_ value: StateValue?, _ what: String) throws(RecordFormatError) -> UInt64 {
            guard let value = value?.intValue, value > 0 else { throw RecordFormatError("base \(what) must be a positive integer") }
            return UInt64(value)
        }
        guard let text = object["checksum"]?.stringValue, text.utf8.count == 8, let checksum = UInt32(text, radix: 16) else {
            throw RecordFormatError("base \"checksum\" must be 8 hex digits")
        }
        guard let state = object["state"] else { throw RecordFormatError("base needs a \"state\"") }
        var base = LogBase(seq: try number(object["seq"], "\"seq\""), checksum: checksum, dropped: [:], digests: [])
        for (stream, count) in try RecordFormatError.object(object["dropped"] ?? .null, "base \"dropped\"") {
            base.dropped[stream] = try number(count, "count of \(stream)")
        }
        guard let digests = object["digests"]?.arrayValue else { throw RecordFormatError("base \"digests\" must be an array") }
        for digest in digests {
            let fields = try RecordFormatError.object(digest, "base digest")
            try RecordFormatError.onlyKeys(fields, ["from", "sha256", "to"], in: "base digest")
            let (from, to) = (try number(fields["from"], "digest \"from\""), try number(fields["to"], "digest \"to\""))
            guard from <= to, let hex = fields["sha256"]?.stringValue, hex.utf8.count == 64 else {
                throw RecordFormatError("base digest needs \"from\" ≤ \"to\" and a \"sha256\" of 64 hex digits")
            }
            var bytes: [UInt8] = []
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                guard let byte = UInt8(hex[index..<next], radix: 16) else { throw RecordFormatError("base digest \"sha256\" must be hex digits") }
                bytes.append(byte)
                index = next
            }
            base.digests.append(DroppedRange(seqs: from...to, sha256: bytes))
        }
        return (base, state)
    }
}
