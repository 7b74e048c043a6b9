import CLMDB

/// A pair of borrowed byte views straight from the memory map. Valid only until the
/// transaction that produced it ends; copy what must outlive it.
package struct Entry {
    package let key: UnsafeRawBufferPointer
    package let value: UnsafeRawBufferPointer
}

/// An open LMDB transaction, lent to a closure by `Environment.read` or `write`.
/// It cannot be copied out of that closure.
package struct Transaction: ~Copyable {
    let handle: OpaquePointer
    /// Where the environment's file is mapped: every value borrowed is checked to end inside it.
    let map: MapBounds

    /// Opens the named database; with `create` (write transactions only) it is created when
    /// missing. Returns `nil` when it does not exist. The handle stays valid for the
    /// environment's lifetime once this transaction commits.
    package func openDatabase(named name: String, create: Bool = false) throws -> Database? {
        var dbi: MDB_dbi = 0
        let result = guarded { mdb_dbi_open(handle, name, create ? UInt32(MDB_CREATE) : 0, &dbi) }
        if result == MDB_NOTFOUND { return nil }
        try check(result)
        return Database(id: dbi)
    }

    /// Whether the environment's main database holds nothing (no named database, no key).
    func mainDatabaseIsEmpty() throws -> Bool {
        var dbi: MDB_dbi = 0
        try check(guarded { mdb_dbi_open(handle, nil, 0, &dbi) })
        return try count(Database(id: dbi)) == 0
    }

    /// The id of the snapshot this transaction reads (`mdb_txn_id`).
    var snapshotID: Int { mdb_txn_id(handle) }

    /// The value stored under the UTF-8 bytes of `key`.
    package func get(_ db: Database, key: String) throws -> UnsafeRawBufferPointer? {
        var key = key
        return try key.withUTF8 { try get(db, key: UnsafeRawBufferPointer($0)) }
    }

    /// Stores a little-endian `UInt32` under the UTF-8 bytes of `key`.
    package func put(_ db: Database, key: String, value: UInt32) throws {
        try withUnsafeBytes(of: value.littleEndian) { try put(db, key: key, bytes: $0) }
    }

    /// Stores `bytes` under the UTF-8 bytes of `key`.
    package func put(_ db: Database, key: String, bytes: UnsafeRawBufferPointer) throws {
        var key = key
        try key.withUTF8 { try put(db, key: UnsafeRawBufferPointer($0), value: bytes) }
    }

    /// The value stored under `key`, borrowed from the map, or `nil` when absent.
    package func get(_ db: Database, key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let result = guarded { mdb_get(handle, db.id, &k, &v) }
        if result == MDB_NOTFOUND { return nil }
        try check(result)
        return try map.borrowed(v)
    }

    /// Stores `value` under `key`, replacing what was there. To add keys in increasing order,
    /// `Cursor.append` is cheaper.
    package func put(_ db: Database, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try check(guarded { mdb_put(handle, db.id, &k, &v, 0) })
    }

    /// Removes `key`; returns whether it was there.
    @discardableResult
    package func delete(_ db: Database, key: UnsafeRawBufferPointer) throws -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        let result = guarded { mdb_del(handle, db.id, &k, nil) }
        if result == MDB_NOTFOUND { return false }
        try check(result)
        return true
    }

    /// The number of entries in `db`.
    package func count(_ db: Database) throws -> Int {
        var stat = MDB_stat()
        try check(guarded { mdb_stat(handle, db.id, &stat) })
        return stat.ms_entries
    }

    /// Removes every entry of `db` (`mdb_drop` without deleting the database); with
    /// `deletingDatabase`, the database itself too, after which its handle is invalid.
    package func empty(_ db: Database, deletingDatabase: Bool = false) throws {
        try check(guarded { mdb_drop(handle, db.id, deletingDatabase ? 1 : 0) })
    }

    /// Lends a cursor over `db` to `body` and closes it afterwards.
    package func withCursor<R>(_ db: Database, _ body: (borrowing Cursor) throws -> R) throws -> R {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, db.id, &cursor))
        defer { mdb_cursor_close(cursor) }
        return try body(Cursor(handle: cursor!, map: map))
    }
}

/// A position in a database, moved with `first`, `last`, `next`, `previous` and `seek`.
/// Each move returns the entry it lands on, or `nil` when there is none.
package struct Cursor: ~Copyable {
    let handle: OpaquePointer
    /// The map of the transaction the cursor belongs to.
    let map: MapBounds

    package func first() throws -> Entry? { try move(MDB_FIRST) }
    package func last() throws -> Entry? { try move(MDB_LAST) }
    package func next() throws -> Entry? { try move(MDB_NEXT) }
    package func previous() throws -> Entry? { try move(MDB_PREV) }
    /// The first entry whose key is greater than or equal to `key` (`MDB_SET_RANGE`).
    package func seek(atOrAfter key: UnsafeRawBufferPointer) throws -> Entry? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        return try move(MDB_SET_RANGE, key: &k)
    }

    /// The entry the cursor is at (`MDB_GET_CURRENT`); after `deleteCurrent`, the one that
    /// followed the entry deleted, or `nil` when it was the last.
    package func current() throws -> Entry? { try move(MDB_GET_CURRENT) }

    /// Deletes the entry the cursor is at (`mdb_cursor_del`; write transactions only).
    package func deleteCurrent() throws {
        try check(guarded { mdb_cursor_del(handle, 0) })
    }

    /// Stores `value` under `key`, which must sort after every key of the database
    /// (`MDB_APPEND`, which packs pages full; write transactions only). In a loop this is
    /// cheaper than `Transaction.put`, which sets up a new cursor and searches the tree for
    /// every key.
    package func append(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try check(guarded { mdb_cursor_put(handle, &k, &v, UInt32(MDB_APPEND)) })
    }

    private func move(_ op: MDB_cursor_op) throws -> Entry? {
        var k = MDB_val()
        return try move(op, key: &k)
    }

    private func move(_ op: MDB_cursor_op, key k: inout MDB_val) throws -> Entry? {
        var v = MDB_val()
        let result = guarded { mdb_cursor_get(handle, &k, &v, op) }
        if result == MDB_NOTFOUND { return nil }
        try check(result)
        return Entry(key: try map.borrowed(k), value: try map.borrowed(v))
    }
}

extension MapBounds {
    /// The bytes `value` points at, checked to end inside the map when they begin in it.
    /// - Throws: ``LMDBError/corrupted`` for a size that runs past the map.
    fileprivate func borrowed(_ value: MDB_val) throws(LMDBError) -> UnsafeRawBufferPointer {
        let bytes = UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)
        guard !isOverrun(by: bytes) else { throw .corrupted }
        return bytes
    }
}
