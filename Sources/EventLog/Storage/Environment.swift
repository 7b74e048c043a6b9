import CLMDB
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How commits reach the disk.
public enum Durability: Sendable {
    /// Every commit is flushed (data and meta page) before it returns. The default.
    case full
    /// `MDB_NOMETASYNC`: the meta page is flushed with the next commit. A power loss may
    /// lose the last commit, but the database is never corrupted. Roughly halves fsyncs.
    case lastCommitMayBeLost
}

/// An LMDB environment: one memory-mapped file holding named databases. Package-internal,
/// like everything in Storage/: a caller can never write around the log's checks.
///
/// Guarantees:
/// - Every transaction runs inside a synchronous, non-escaping closure; it commits when the
///   closure returns and aborts when it throws. No `MDB_txn` or borrowed `MDB_val` outlives it.
/// - A write transaction that hits `MDB_MAP_FULL` is aborted, the map is doubled, and the
///   closure runs again from the start, so write closures must be re-runnable.
/// - A map grown by another process (`MDB_MAP_RESIZED`) is adopted transparently.
/// - Reader slots left by dead processes are cleared on opening and before growing the map,
///   so that a reader killed mid-read does not stop the file from reusing its free pages.
/// - Safe to share between threads (`MDB_NOTLS`); LMDB serialises writers across threads and
///   processes, and readers never block writers.
///
/// See http://www.lmdb.tech/doc/group__mdb.html for the C API behind each call.
package final class Environment: @unchecked Sendable {
    /// How to open an environment.
    package struct Options: Sendable {
        /// Initial map size in bytes; it grows on demand.
        package var mapSize: Int = 64 << 20
        /// The number of named databases the environment may hold.
        package var maxDatabases: UInt32 = 8
        /// Open with `MDB_RDONLY`: no writes, nothing created.
        package var readOnly = false
        /// Whether every commit is flushed (the default) or the meta page waits for the next.
        package var durability: Durability = .full
        /// Create the directory when it does not exist (ignored when read-only).
        package var createIfMissing = true

        package init() {}
    }

    let handle: OpaquePointer
    /// The directory holding `data.mdb` and `lock.mdb`.
    package let path: String
    package let isReadOnly: Bool
    /// Held shared by every transaction of this process and exclusively while the map is
    /// resized: `mdb_env_set_mapsize` requires that no transaction of the process is active.
    private let resizeLock: UnsafeMutablePointer<pthread_rwlock_t>
    /// Where `FaultGuard` keeps this environment's map (which moves when the map grows).
    private let faultGuardSlot = FaultGuard.takeSlot()
    /// Where the map is, handed to every transaction; changes only under the exclusive `resizeLock`.
    private(set) var mapBounds = MapBounds.unknown

    /// Opens the environment in directory `path`, which must exist unless read-only. Every
    /// failure closes what was opened before throwing. Reach it through `open(path:options:)`,
    /// which never opens one directory twice.
    private init(path: String, options: Options) throws {
        var env: OpaquePointer?
        try check(mdb_env_create(&env))
        guard let env else { throw LMDBError(code: ENOMEM) }
        do {
            try check(mdb_env_set_maxdbs(env, options.maxDatabases))
            try check(mdb_env_set_mapsize(env, options.mapSize))
            // An assertion LMDB fails on a damaged page: with the fault guard installed, its one
            // line instead of LMDB's text and an abort.
            try check(mdb_env_set_assert(env) { _, _ in FaultGuard.lmdbAssertionFailed() })
            var flags = UInt32(MDB_NOTLS)
            if options.readOnly { flags |= UInt32(MDB_RDONLY) }
            if options.durability == .lastCommitMayBeLost { flags |= UInt32(MDB_NOMETASYNC) }
            try check(mdb_env_open(env, path, flags, 0o644))
        } catch {
            mdb_env_close(env)
            throw error
        }
        self.handle = env
        self.path = path
        self.isReadOnly = options.readOnly
        self.resizeLock = .allocate(capacity: 1)
        pthread_rwlock_init(resizeLock, nil)
        clearStaleReaders()
        recordMap()
    }

    /// Finds where the map is now (it moves when it grows), for the checks of every borrowed
    /// value (`mapBounds`) and for `FaultGuard`. Runs where no transaction of the process is active.
    private func recordMap() {
        // Not found: nothing is checked, and the guard forgets the map that was (now unmapped).
        mapBounds = MapBounds.find(mappingOf: path + "/data.mdb") ?? .unknown
        FaultGuard.setMap(faultGuardSlot, base: UnsafeRawPointer(bitPattern: mapBounds.start), size: mapBounds.size)
    }

    /// Clears the reader slots of processes that died inside a read transaction. LMDB keeps
    /// every page such a reader could see for as long as its slot stands, which (while any
    /// other process keeps the environment open) stops the file from reusing free pages.
    /// Best effort: a failure here leaves the slots for the next opener.
    private func clearStaleReaders() {
        var cleared: Int32 = 0
        _ = mdb_reader_check(handle, &cleared)
    }

    /// LMDB forbids opening one environment twice in a process (closing either would drop the
    /// other's file locks), so handles are shared: the open environments, by directory.
    private static let opened = Locked<[String: WeakEnvironment]>([:])

    private struct WeakEnvironment {
        weak var environment: Environment?
    }

    /// Opens the environment in directory `path` (creating it unless read-only), or returns
    /// the one this process already has open there; the first opener's options win. A
    /// read-only environment is not shared with a caller who wants to write (`EBUSY`).
    package static func open(path: String, options: Options = Options()) throws -> Environment {
        var created: [String] = []
        if !options.readOnly && options.createIfMissing {
            if mkdir(path, 0o755) == 0 { created.append(path) } else if errno != EEXIST { throw LMDBError(code: errno) }
        }
        // Files this call creates are removed again (never recursively) if opening fails, so
        // that a failure leaves nothing behind, least of all an empty data.mdb that later
        // reads as a damaged log.
        let exists = { (file: String) in access(file, F_OK) == 0 }
        let marker = StorageCheck.creationMarker(ofDataFile: path + "/data.mdb")
        var cleanup = [path + "/data.mdb", path + "/lock.mdb", marker].filter { !exists($0) }
        do {
            if !options.readOnly {
                if !exists(path + "/data.mdb") { try markCreation(marker, in: path) }
                try allocateLockFile(path + "/lock.mdb")
            }
            let environment = try opening(path: path, options: options)
            // LMDB has written the meta pages: the file is no longer being created, whichever
            // writer marked it (the engine's own file, never a user's).
            if !options.readOnly { unlink(marker) }
            return environment
        } catch {
            cleanup.removeAll { !exists($0) }
            for file in cleanup { unlink(file) }
            for directory in created { rmdir(directory) }
            throw error
        }
    }

    /// Writes the marker that stands beside a `data.mdb` being created, and flushes the
    /// directory so that the marker reaches the disk before the file LMDB creates: a kill
    /// between LMDB creating the file and writing its meta pages leaves it empty, and the
    /// marker tells that emptiness (a creation to start again) from a log whose file was
    /// emptied (damage). See `StorageCheck.checkHeader(path:)`.
    private static func markCreation(_ marker: String, in directory: String) throws {
        let fd = Glibc.open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw LMDBError(code: errno) }
        close(fd)
        try flush(directory)
    }

    /// Flushes the file or directory at `path` to the disk (`fsync`).
    /// - Throws: An ``LMDBError`` holding the `errno` of a failed `open` or `fsync`.
    static func flush(_ path: String) throws {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LMDBError(code: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw LMDBError(code: errno) }
    }

    /// LMDB sizes the lock file with `ftruncate` and writes its reader table through a map:
    /// on a full disk the writes to a hole fault (`SIGBUS`). Allocating its blocks first
    /// turns that into an error (`ENOSPC`). 8 KiB is the size LMDB gives it for 126 readers.
    private static func allocateLockFile(_ path: String) throws {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw LMDBError(code: errno) }
        defer { close(fd) }
        let result = posix_fallocate(fd, 0, 8192)
        guard result == 0 || result == EOPNOTSUPP || result == EINVAL else { throw LMDBError(code: result) }
    }

    private static func opening(path: String, options: Options) throws -> Environment {
        let key = URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
        return try opened.withLock { opened throws -> Environment in
            if let existing = opened[key]?.environment, options.readOnly || !existing.isReadOnly {
                return existing
            }
            if opened[key]?.environment != nil {
                throw LMDBError(code: EBUSY) // open read-only in this process; close it first
            }
            let environment = try Environment(path: path, options: options)
            opened[key] = WeakEnvironment(environment: environment)
            return environment
        }
    }

    /// Whether an environment of this process is open in directory `path`.
    package static func isOpenInThisProcess(path: String) -> Bool {
        let key = URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
        return opened.withLock { $0[key]?.environment != nil }
    }

    deinit {
        FaultGuard.releaseSlot(faultGuardSlot)
        mdb_env_close(handle)
        pthread_rwlock_destroy(resizeLock)
        resizeLock.deallocate()
    }

    /// The current map size in bytes.
    package var mapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(handle, &info)
        return info.me_mapsize
    }

    /// Runs `body` in a read-only snapshot of the database. Database handles opened inside
    /// it stay valid afterwards (the transaction is committed, which for readers only ends it).
    package func read<R>(_ body: (borrowing Transaction) throws -> R) throws -> R {
        try withTransaction(flags: UInt32(MDB_RDONLY), body)
    }

    /// Runs `body` in a write transaction: commits when it returns, aborts when it throws.
    /// On `MDB_MAP_FULL` the map is doubled and `body` runs again from the start.
    package func write<R>(_ body: (borrowing Transaction) throws -> R) throws -> R {
        while true {
            do {
                return try withTransaction(flags: 0, body)
            } catch LMDBError.mapFull {
                try grow(from: mapSize)
            }
        }
    }

    /// Writes a copy of the environment into the existing, empty directory `path`, leaving
    /// out its free pages (`mdb_env_copy2` with `MDB_CP_COMPACT`): the file a log of the
    /// same contents needs, no larger. It reads one snapshot; writers go on meanwhile.
    package func copyCompacted(to path: String) throws {
        try check(guarded { mdb_env_copy2(handle, path, UInt32(MDB_CP_COMPACT)) })
    }

    /// Flushes buffers to disk; useful after commits made with `.lastCommitMayBeLost`.
    package func sync() throws {
        try check(mdb_env_sync(handle, 1))
    }

    private func withTransaction<R>(flags: UInt32, _ body: (borrowing Transaction) throws -> R) throws -> R {
        pthread_rwlock_rdlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        var txn: OpaquePointer?
        var result = guarded { mdb_txn_begin(handle, nil, flags, &txn) }
        if result == MDB_MAP_RESIZED {
            // Another process grew the map. Adopting its size needs no transaction of this
            // process active, so step out of the shared lock, adopt exclusively, and retry.
            pthread_rwlock_unlock(resizeLock)
            adoptForeignMapSize()
            pthread_rwlock_rdlock(resizeLock)
            result = guarded { mdb_txn_begin(handle, nil, flags, &txn) }
        }
        try check(result)
        let transaction = Transaction(handle: txn!, map: mapBounds)
        let value: R
        do {
            value = try body(transaction)
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try check(guarded { mdb_txn_commit(txn) })
        return value
    }

    private func adoptForeignMapSize() {
        pthread_rwlock_wrlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        mdb_env_set_mapsize(handle, 0)
        recordMap()
    }

    /// Grows the map, when needed, so that at least `bytes` more can be written without
    /// `MDB_MAP_FULL`: for a write transaction that cannot run again (one that streams its
    /// input). The map only reserves address space; the file grows as pages are written.
    package func reserve(_ bytes: Int) throws {
        var stat = MDB_stat()
        var info = MDB_envinfo()
        try check(mdb_env_stat(handle, &stat))
        try check(mdb_env_info(handle, &info))
        let used = (info.me_last_pgno + 1) * Int(stat.ms_psize)
        let (needed, overflow) = used.addingReportingOverflow(bytes)
        guard !overflow else { throw LMDBError(code: ENOMEM) }
        var size = info.me_mapsize
        while size < needed { size *= 2 }
        if size > info.me_mapsize { try grow(from: info.me_mapsize, to: size) }
    }

    private func grow(from size: Int, to newSize: Int? = nil) throws {
        pthread_rwlock_wrlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        // Another thread may have grown it already while we waited for the lock.
        if mapSize > size { return }
        clearStaleReaders()
        try check(mdb_env_set_mapsize(handle, newSize ?? size * 2))
        recordMap()
    }
}

/// A named database inside an environment (an `MDB_dbi`).
package struct Database: Sendable, Hashable {
    let id: MDB_dbi
}
