import EventLog
import Foundation

/// A fresh directory under the system's temporary directory, removed with everything in it
/// when the value is released, unless `keep()` was called. Each test makes its own: no shared
/// state between tests.
public final class TemporaryDirectory: @unchecked Sendable {
    /// The directory's absolute path; it exists once `init` returns.
    public let path: String
    private var kept = false

    /// `name` only makes the directory easy to recognise; it defaults to the calling function.
    public init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        path = NSTemporaryDirectory() + "eventlog-\(safe)-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Leaves the directory in place when the value is released: for a failed test's log.
    public func keep() { kept = true }

    deinit {
        if !kept { try? FileManager.default.removeItem(atPath: path) }
    }
}

/// An event store in its own temporary directory with a clock the test moves by hand: the
/// embedded, deterministic engine for tests (nothing global, nothing shared).
public final class TemporaryEventStore: @unchecked Sendable {
    /// The temporary directory the database lives in; `keep()` it to look at the log later.
    public let directory: TemporaryDirectory
    /// The store's clock, moved by hand.
    public let clock: ManualClock
    /// The event store, open for writing.
    public let store: EventStore

    /// 2025-11-30T02:05:40.123456Z, the default start of test clocks.
    public static let defaultStart = Timestamp(microsecondsSince1970: 1_764_468_340_123_456)

    /// Opens a store whose clock starts at `start` and moves `stepMicroseconds` at every reading.
    /// - Throws: The errors of `EventStore.init(path:options:)` (`EventStoreError`,
    ///   `LMDBError`) when the store cannot be created.
    public init(start: Timestamp = defaultStart, stepMicroseconds: Int64 = 1_000,
                keyframePolicy: KeyframePolicy = KeyframePolicy(), name: String = #function) throws {
        directory = TemporaryDirectory(name)
        clock = ManualClock(start: start, stepMicroseconds: stepMicroseconds)
        var options = EventStore.Options()
        options.clock = clock.clock
        options.keyframePolicy = keyframePolicy
        store = try EventStore(path: directory.file("log.lmdb"), options: options)
    }

    /// The database directory, to reopen it or hand it to the CLI.
    public var path: String { store.environment.path }
}

extension EventStore {
    /// Checks the snapshot after every event against the fold of the write sets from the start
    /// and returns the first seq where they differ, or `nil` when every snapshot agrees.
    /// - Throws: `StateError` when an event's writes do not apply to the fold; `EventStoreError`
    ///   (`.corruptRecord` among them) or `LMDBError` when the log cannot be read.
    public func firstSnapshotMismatch() throws -> UInt64? {
        var folded = StateValue.emptyObject
        var mismatch: UInt64?
        try forEachRecord { record in
            try folded.apply(record.event.writes)
            if try snapshot(after: record.seq) != folded { mismatch = record.seq }
            return mismatch == nil
        }
        return mismatch
    }
}
