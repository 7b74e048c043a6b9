import CLMDB
import CSQLite
import EventLog
import Foundation

/// A store the append scenarios drive: one call per batch, durable or in its faster mode.
protocol AppendSubject {
    var name: String { get }
    /// Makes the batch's input (untimed).
    mutating func prepare(_ events: [Event], firstSeq: UInt64)
    /// Commits the prepared batch (timed).
    mutating func commit() throws
    /// Bytes on disk.
    var bytesOnDisk: Int { get }
    /// Releases the handles (the engine's store closes when released).
    func close()
}

/// The engine itself: encoding, write-set checks, keyframes, commit.
struct EngineSubject: AppendSubject {
    let name = "eventlog"
    let store: EventStore
    let path: String
    private var batch: [Event] = []

    init(path: String, fast: Bool) throws {
        var options = EventStore.Options()
        options.durability = fast ? .lastCommitMayBeLost : .full
        options.initialMapSize = 1 << 30
        self.path = path
        store = try EventStore(path: path, options: options)
    }

    mutating func prepare(_ events: [Event], firstSeq: UInt64) { batch = events }

    mutating func commit() throws { try store.append(contentsOf: batch) }

    var bytesOnDisk: Int { fileSize(path) }

    func close() {}
}

/// Raw LMDB through the C API: the same record bytes, appended with `MDB_APPEND` through one
/// cursor per transaction (`mdb_cursor_put`, cheaper than `mdb_put`, which sets up a cursor
/// for every call). The physical limit of the engine's storage.
struct RawLMDBSubject: AppendSubject {
    let name = "raw-lmdb"
    let path: String
    private var env: OpaquePointer?
    private var dbi: MDB_dbi = 0
    private var batch: [(UInt64, [UInt8])] = []

    init(path: String, fast: Bool) throws {
        self.path = path
        mkdir(path, 0o755)
        try lmdb(mdb_env_create(&env))
        try lmdb(mdb_env_set_mapsize(env, 4 << 30))
        try lmdb(mdb_env_set_maxdbs(env, 4))
        try lmdb(mdb_env_open(env, path, UInt32(MDB_NOTLS) | (fast ? UInt32(MDB_NOMETASYNC) : 0), 0o644))
        var txn: OpaquePointer?
        try lmdb(mdb_txn_begin(env, nil, 0, &txn))
        try lmdb(mdb_dbi_open(txn, "events", UInt32(MDB_CREATE), &dbi))
        try lmdb(mdb_txn_commit(txn))
    }

    mutating func prepare(_ events: [Event], firstSeq: UInt64) {
        batch = events.enumerated().map { offset, event in
            let seq = firstSeq + UInt64(offset)
            return (seq, EventRecord.storedBytes(of: event, seq: seq, time: Workload.time(seq)))
        }
    }

    mutating func commit() throws {
        var txn: OpaquePointer?
        var cursor: OpaquePointer?
        try lmdb(mdb_txn_begin(env, nil, 0, &txn))
        try lmdb(mdb_cursor_open(txn, dbi, &cursor))
        for (seq, bytes) in batch {
            var key = seq.bigEndian
            try withUnsafeMutableBytes(of: &key) { keyBytes in
                try bytes.withUnsafeBytes { value in
                    var k = MDB_val(mv_size: 8, mv_data: keyBytes.baseAddress)
                    var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
                    try lmdb(mdb_cursor_put(cursor, &k, &v, UInt32(MDB_APPEND)))
                }
            }
        }
        mdb_cursor_close(cursor)
        try lmdb(mdb_txn_commit(txn))
    }

    /// Reads every record with a cursor, touching each byte once (no decoding).
    func scan() throws -> Int {
        var txn: OpaquePointer?
        var cursor: OpaquePointer?
        try lmdb(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn))
        defer { mdb_txn_abort(txn) }
        try lmdb(mdb_cursor_open(txn, dbi, &cursor))
        defer { mdb_cursor_close(cursor) }
        var k = MDB_val()
        var v = MDB_val()
        var count = 0
        var checksum: UInt8 = 0
        var op = MDB_FIRST
        while mdb_cursor_get(cursor, &k, &v, op) == 0 {
            let bytes = UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
            checksum ^= bytes.last ?? 0
            count += 1
            op = MDB_NEXT
        }
        blackHole(checksum)
        return count
    }

    var bytesOnDisk: Int { fileSize(path) }

    func close() { mdb_env_close(env) }
}

struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
}

func lmdb(_ code: Int32) throws {
    if code != 0 { throw BenchmarkError(description: "LMDB: \(String(cString: mdb_strerror(code)))") }
}

/// SQLite through libsqlite3: WAL, `synchronous=FULL` (durable) or `NORMAL` (fast), one prepared
/// INSERT per event, one transaction per batch, the same record bytes as a BLOB.
struct SQLiteSubject: AppendSubject {
    let name = "sqlite"
    let path: String
    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var batch: [(UInt64, [UInt8])] = []

    init(path: String, fast: Bool) throws {
        self.path = path
        try check(sqlite3_open(path, &db))
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=\(fast ? "NORMAL" : "FULL")")
        try execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        try check(sqlite3_prepare_v2(db, "INSERT INTO events (seq, body) VALUES (?, ?)", -1, &insert, nil))
    }

    mutating func prepare(_ events: [Event], firstSeq: UInt64) {
        batch = events.enumerated().map { offset, event in
            let seq = firstSeq + UInt64(offset)
            return (seq, EventRecord.storedBytes(of: event, seq: seq, time: Workload.time(seq)))
        }
    }

    mutating func commit() throws {
        try execute("BEGIN")
        for (seq, bytes) in batch {
            sqlite3_bind_int64(insert, 1, Int64(seq))
            _ = bytes.withUnsafeBytes { sqlite3_bind_blob(insert, 2, $0.baseAddress, Int32($0.count), nil) }
            guard sqlite3_step(insert) == SQLITE_DONE else { throw BenchmarkError(description: "SQLite insert: \(String(cString: sqlite3_errmsg(db)))") }
            sqlite3_reset(insert)
        }
        try execute("COMMIT")
    }

    /// Reads every record in order.
    func scan() throws -> Int {
        var select: OpaquePointer?
        try check(sqlite3_prepare_v2(db, "SELECT seq, body FROM events ORDER BY seq", -1, &select, nil))
        defer { sqlite3_finalize(select) }
        var count = 0
        var checksum = 0
        while sqlite3_step(select) == SQLITE_ROW {
            checksum ^= Int(sqlite3_column_bytes(select, 1))
            count += 1
        }
        blackHole(checksum)
        return count
    }

    var bytesOnDisk: Int { fileSize(path) + fileSize(path + "-wal") }

    func close() {
        sqlite3_finalize(insert)
        sqlite3_close(db)
    }

    private func execute(_ sql: String) throws { try check(sqlite3_exec(db, sql, nil, nil, nil)) }

    private func check(_ code: Int32) throws {
        if code != SQLITE_OK { throw BenchmarkError(description: "SQLite: \(String(cString: sqlite3_errstr(code)))") }
    }
}

/// A JSON-lines file written with Foundation's `JSONEncoder` (and `fsync` per batch when
/// durable): what a quick hand-written trace would do.
struct JSONLinesSubject: AppendSubject {
    let name = "jsonl"
    let path: String
    let fast: Bool
    private let descriptor: Int32
    private let encoder = JSONEncoder()
    private var batch: [TraceLine] = []

    init(path: String, fast: Bool) {
        self.path = path
        self.fast = fast
        descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    }

    mutating func prepare(_ events: [Event], firstSeq: UInt64) {
        batch = events.enumerated().map { TraceLine($1, seq: firstSeq + UInt64($0)) }
    }

    mutating func commit() throws {
        var data = Data()
        for line in batch {
            data.append(try encoder.encode(line))
            data.append(0x0A)
        }
        _ = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if !fast { fsync(descriptor) }
    }

    var bytesOnDisk: Int { fileSize(path) }

    func close() { Glibc.close(descriptor) }

    /// Decodes every line as a `Line` with `JSONDecoder` and folds the writes into a dictionary.
    static func replay<Line: JSONLine>(_ path: String, as _: Line.Type) throws -> (events: Int, properties: Int) {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let decoder = JSONDecoder()
        var state: [String: String] = [:]
        var events = 0
        for line in data.split(separator: 0x0A) {
            let record = try decoder.decode(Line.self, from: line)
            for change in record.writes { state[change.path] = change.new }
            events += 1
        }
        return (events, state.count)
    }
}

/// The objects peer a Swift app would pick: SQLite in WAL mode with `synchronous=NORMAL`
/// (no flush per commit, as the engine's object store under `lastCommitMayBeLost`), a table
/// for the type (`id` primary key, `version`, `createdAt`, `updatedAt`, the object's fields
/// as a BLOB), an update that reads the row's version and writes under it
/// (`WHERE id = ? AND version = ?`, the conflict check the engine makes), one transaction a
/// batch.
final class SQLiteObjects {
    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var readVersion: OpaquePointer?
    private var update: OpaquePointer?
    private var remove: OpaquePointer?
    private var select: OpaquePointer?

    init(path: String) throws {
        try check(sqlite3_open(path, &db))
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=NORMAL")
        try execute("CREATE TABLE BlogPost (id TEXT PRIMARY KEY, version INTEGER NOT NULL, createdAt INTEGER NOT NULL, updatedAt INTEGER NOT NULL, fields BLOB NOT NULL)")
        try check(sqlite3_prepare_v2(db, "INSERT INTO BlogPost (id, version, createdAt, updatedAt, fields) VALUES (?, 1, ?, ?, ?)", -1, &insert, nil))
        try check(sqlite3_prepare_v2(db, "SELECT version FROM BlogPost WHERE id = ?", -1, &readVersion, nil))
        try check(sqlite3_prepare_v2(db, "UPDATE BlogPost SET version = version + 1, updatedAt = ?, fields = ? WHERE id = ? AND version = ?", -1, &update, nil))
        try check(sqlite3_prepare_v2(db, "DELETE FROM BlogPost WHERE id = ?", -1, &remove, nil))
        try check(sqlite3_prepare_v2(db, "SELECT version, createdAt, updatedAt, fields FROM BlogPost WHERE id = ?", -1, &select, nil))
    }

    deinit {
        for statement in [insert, readVersion, update, remove, select] { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    /// Runs `body` for 0..<count, 1,000 calls per transaction.
    func inTransactionsOf1000(_ count: Int, _ body: (Int) throws -> Void) throws {
        for start in stride(from: 0, to: count, by: 1_000) {
            try execute("BEGIN")
            for i in start..<min(count, start + 1_000) { try body(i) }
            try execute("COMMIT")
        }
    }

    func create(id: String, fields: [UInt8]) throws {
        let now = Timestamp.now().microsecondsSince1970
        bind(insert, 1, id)
        sqlite3_bind_int64(insert, 2, now)
        sqlite3_bind_int64(insert, 3, now)
        bind(insert, 4, fields)
        try run(insert, "insert")
    }

    /// Writes `fields` over the object's under the version it has; a row that changed in
    /// between (or is missing) is an error, as a conflict is in the engine.
    func update(id: String, fields: [UInt8]) throws {
        bind(readVersion, 1, id)
        guard sqlite3_step(readVersion) == SQLITE_ROW else { sqlite3_reset(readVersion); throw BenchmarkError(description: "SQLite: no object \(id)") }
        let version = sqlite3_column_int64(readVersion, 0)
        sqlite3_reset(readVersion)
        sqlite3_bind_int64(update, 1, Timestamp.now().microsecondsSince1970)
        bind(update, 2, fields)
        bind(update, 3, id)
        sqlite3_bind_int64(update, 4, version)
        try run(update, "update")
        guard sqlite3_changes(db) == 1 else { throw BenchmarkError(description: "SQLite: object \(id) changed under its update") }
    }

    func delete(id: String) throws {
        bind(remove, 1, id)
        try run(remove, "delete")
        guard sqlite3_changes(db) == 1 else { throw BenchmarkError(description: "SQLite: no object \(id) to delete") }
    }

    /// The object's fields as stored, with its version and dates; `nil` when there is none.
    func fetch<T>(id: String, _ read: (UnsafeRawBufferPointer, _ version: Int64, _ createdAt: Int64, _ updatedAt: Int64) throws -> T) throws -> T? {
        bind(select, 1, id)
        defer { sqlite3_reset(select) }
        guard sqlite3_step(select) == SQLITE_ROW else { return nil }
        let fields = UnsafeRawBufferPointer(start: sqlite3_column_blob(select, 3), count: Int(sqlite3_column_bytes(select, 3)))
        return try read(fields, sqlite3_column_int64(select, 0), sqlite3_column_int64(select, 1), sqlite3_column_int64(select, 2))
    }

    private func bind(_ statement: OpaquePointer?, _ index: Int32, _ text: String) {
        // SQLITE_TRANSIENT: SQLite copies the text before the call returns.
        sqlite3_bind_text(statement, index, text, -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
    }

    private func bind(_ statement: OpaquePointer?, _ index: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self)) }
    }

    private func run(_ statement: OpaquePointer?, _ what: String) throws {
        defer { sqlite3_reset(statement) }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw BenchmarkError(description: "SQLite \(what): \(String(cString: sqlite3_errmsg(db)))") }
    }

    private func execute(_ sql: String) throws { try check(sqlite3_exec(db, sql, nil, nil, nil)) }

    private func check(_ code: Int32) throws {
        if code != SQLITE_OK { throw BenchmarkError(description: "SQLite: \(String(cString: sqlite3_errstr(code)))") }
    }
}

/// The objects in raw LMDB, the floor under the engine's read model: a key per object
/// (`BlogPost`, a zero byte, the id) holding its version, dates and JSON fields, written with
/// `mdb_put` and `mdb_del` in transactions of 1,000, each flushed as the engine's objects
/// store flushes its own (`MDB_NOMETASYNC`), and no log beside them.
final class RawLMDBObjects {
    private var env: OpaquePointer?
    private var dbi: MDB_dbi = 0
    private var txn: OpaquePointer?

    init(path: String) throws {
        mkdir(path, 0o755)
        try lmdb(mdb_env_create(&env))
        try lmdb(mdb_env_set_mapsize(env, 4 << 30))
        try lmdb(mdb_env_open(env, path, UInt32(MDB_NOTLS) | UInt32(MDB_NOMETASYNC), 0o644))
        try lmdb(mdb_txn_begin(env, nil, 0, &txn))
        try lmdb(mdb_dbi_open(txn, nil, 0, &dbi))
        try lmdb(mdb_txn_commit(txn))
        txn = nil
    }

    deinit { mdb_env_close(env) }

    /// Runs `body` for 0..<count, 1,000 calls per transaction.
    func inTransactionsOf1000(_ count: Int, _ body: (Int) throws -> Void) throws {
        for start in stride(from: 0, to: count, by: 1_000) {
            try lmdb(mdb_txn_begin(env, nil, 0, &txn))
            do {
                for i in start..<min(count, start + 1_000) { try body(i) }
            } catch {
                mdb_txn_abort(txn)
                txn = nil
                throw error
            }
            try lmdb(mdb_txn_commit(txn))
            txn = nil
        }
    }

    func create(id: String, fields: [UInt8]) throws {
        let now = Timestamp.now().microsecondsSince1970
        try put(id: id, version: 1, createdAt: now, fields: fields)
    }

    /// Writes `fields` over the object's, one version on; a missing object is an error.
    func update(id: String, fields: [UInt8]) throws {
        let (version, createdAt) = try withKey(id) { key -> (Int64, Int64) in
            var k = key, v = MDB_val()
            try lmdb(mdb_get(txn, dbi, &k, &v))
            let header = UnsafeRawBufferPointer(start: v.mv_data, count: 16)
            return (header.loadUnaligned(as: Int64.self), header.loadUnaligned(fromByteOffset: 8, as: Int64.self))
        }
        try put(id: id, version: version + 1, createdAt: createdAt, fields: fields)
    }

    func delete(id: String) throws {
        try withKey(id) { key in
            var k = key
            try lmdb(mdb_del(txn, dbi, &k, nil))
        }
    }

    /// The version, created and updated times (8 bytes each) and then the fields.
    private func put(id: String, version: Int64, createdAt: Int64, fields: [UInt8]) throws {
        var value = [UInt8]()
        value.reserveCapacity(24 + fields.count)
        for number in [version, createdAt, Timestamp.now().microsecondsSince1970] { withUnsafeBytes(of: number) { value += $0 } }
        value += fields
        try withKey(id) { key in
            try value.withUnsafeMutableBytes { bytes in
                var k = key, v = MDB_val(mv_size: bytes.count, mv_data: bytes.baseAddress)
                try lmdb(mdb_put(txn, dbi, &k, &v, 0))
            }
        }
    }

    private func withKey<R>(_ id: String, _ body: (MDB_val) throws -> R) throws -> R {
        var key = Array("BlogPost".utf8) + [0] + Array(id.utf8)
        return try key.withUnsafeMutableBytes { try body(MDB_val(mv_size: $0.count, mv_data: $0.baseAddress)) }
    }
}
