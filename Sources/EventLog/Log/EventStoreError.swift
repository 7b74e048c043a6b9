/// Why the event store refused an operation. Each case describes itself in one line.
public enum EventStoreError: Error, Hashable, CustomStringConvertible {
    /// No database exists at the path (read-only opens never create one).
    case notFound(path: String)
    /// The path holds an LMDB environment that is not an event log.
    case notAnEventLog(path: String)
    /// The database was written by a newer version of EventLog.
    case newerFormat(found: UInt32, supported: UInt32)
    /// The storage itself is damaged: a truncated or emptied file, a broken LMDB page, a
    /// meta record that fails its checksum. `verify` says where; `salvage` copies what it can.
    case damaged(String)
    /// A stored record failed its checksum or could not be decoded.
    case corruptRecord(seq: UInt64, reason: String)
    /// A write's old value is not what the state holds: the write set was computed against
    /// another state. Nothing was appended.
    case staleWrite(path: StatePath, expected: StateValue?, actual: StateValue?)
    /// A write does not fit the shape of the state. Nothing was appended.
    case invalidWrite(StateError)
    /// The event breaks one of `StateLimits` (nesting, size, numbers JSON cannot hold).
    /// Nothing was appended.
    case limitExceeded(String)
    /// The sequence number is outside the log.
    case noSuchEvent(seq: UInt64, last: UInt64)
    /// The event was dropped by a compaction: the log starts after its base, at `base + 1`.
    case compacted(seq: UInt64, base: UInt64)
    /// Another process or store is using the log in a way this operation cannot run beside;
    /// nothing was changed.
    case busy(String)
    /// The store was opened read-only.
    case readOnly
    /// A record copied from another store is not the next one. Nothing was appended.
    case outOfSequence(expected: UInt64, found: UInt64)
    /// The database belongs to another log than the one asked for.
    case otherLog(String)

    public var description: String {
        switch self {
        case .notFound(let path): "no event log at \(path)"
        case .notAnEventLog(let path): "\(path) is an LMDB environment but not an event log"
        case .newerFormat(let found, let supported):
            "the database has format version \(found), newer than the \(supported) this build reads; upgrade eventlog"
        case .damaged(let reason): "the database is damaged: \(reason)"
        case .corruptRecord(let seq, let reason): "record \(seq) is corrupt: \(reason)"
        case .staleWrite(let path, let expected, let actual):
            "stale write at \(path): the write set expects \(expected?.json() ?? "absent") but the state holds \(actual?.json() ?? "absent")"
        case .invalidWrite(let error): "invalid write: \(error)"
        case .limitExceeded(let reason): reason
        case .noSuchEvent(let seq, let last):
            last == 0 ? "no event \(seq): the log is empty" : "no event \(seq): the log holds 1-\(last)"
        case .compacted(let seq, let base):
            "event \(seq) was compacted away; the log starts after event \(Self.grouped(base)) from its base"
        case .busy(let reason): reason
        case .readOnly: "the event log is open read-only"
        case .outOfSequence(let expected, let found): "record \(found) does not follow: the log's next seq is \(expected)"
        case .otherLog(let reason): "another log's database: \(reason)"
        }
    }

    /// `5000` as `5,000`.
    private static func grouped(_ value: UInt64) -> String {
        var digits = Array(String(value))
        var index = digits.count - 3
        while index > 0 {
            digits.insert(",", at: index)
            index -= 3
        }
        return String(digits)
    }
}
