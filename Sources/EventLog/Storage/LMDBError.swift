import CLMDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error reported by LMDB: the C result code and the text `mdb_strerror` gives for it.
///
/// Conditions of the world (map full, readers full, I/O errors) are thrown as this type;
/// "not found" is never thrown by this wrapper, it is an optional result. Match named codes
/// in `catch`: `catch LMDBError.mapFull { … }`.
public struct LMDBError: Error, Hashable, CustomStringConvertible {
    /// The C result code: one of the `MDB_*` codes or an `errno` value.
    public let code: Int32

    /// The error of result `code`: an `MDB_*` code or an `errno` value.
    public init(code: Int32) { self.code = code }

    /// `mdb_strerror(code)`: LMDB's own text, or the system's for `errno` values.
    public var message: String { String(cString: mdb_strerror(code)) }

    public var description: String {
        // LMDB reports a write that came up short, as on a full disk, as EIO.
        switch code {
        case EIO: "\(message) (LMDB code \(code): a write failed or came up short; is the disk full?)"
        case MDB_BAD_TXN: "\(message) (LMDB code \(code): a page read failed earlier in the transaction; the file is damaged)"
        default: "\(message) (LMDB code \(code))"
        }
    }

    /// `MDB_KEYEXIST`: the key/data pair already exists (or an `MDB_APPEND` key is out of order).
    public static let keyExists = LMDBError(code: MDB_KEYEXIST)
    /// `MDB_NOTFOUND`: no matching key; the wrapper turns it into `nil` where it is expected.
    public static let notFound = LMDBError(code: MDB_NOTFOUND)
    /// `MDB_CORRUPTED`: a page has the wrong type.
    public static let corrupted = LMDBError(code: MDB_CORRUPTED)
    /// `MDB_PANIC`: a fatal error occurred earlier and the environment must be closed.
    public static let panic = LMDBError(code: MDB_PANIC)
    /// `MDB_PAGE_NOTFOUND`: a page the tree names is not in the file.
    public static let pageNotFound = LMDBError(code: MDB_PAGE_NOTFOUND)

    /// `MDB_BAD_TXN`: the transaction met an error earlier and can only be aborted.
    public static let badTransaction = LMDBError(code: MDB_BAD_TXN)

    /// Whether LMDB found its own file damaged (`MDB_CORRUPTED`, `MDB_PAGE_NOTFOUND`), or
    /// reports a transaction it failed earlier (`MDB_BAD_TXN`): this code never uses a
    /// transaction past an error, and a meta page naming too few pages makes LMDB fail a page
    /// read silently and answer the next call so.
    public var isDamage: Bool { self == .corrupted || self == .pageNotFound || self == .badTransaction }
    /// `MDB_VERSION_MISMATCH`: the environment was written by an incompatible LMDB version.
    public static let versionMismatch = LMDBError(code: MDB_VERSION_MISMATCH)
    /// `MDB_INVALID`: the file is not an LMDB file.
    public static let invalid = LMDBError(code: MDB_INVALID)
    /// `MDB_MAP_FULL`: the environment's map size was reached; `Environment.write` grows it and retries.
    public static let mapFull = LMDBError(code: MDB_MAP_FULL)
    /// `MDB_DBS_FULL`: more named databases than `maxDatabases` were opened.
    public static let databasesFull = LMDBError(code: MDB_DBS_FULL)
    /// `MDB_READERS_FULL`: every reader slot of the lock table is taken.
    public static let readersFull = LMDBError(code: MDB_READERS_FULL)
    /// `MDB_TXN_FULL`: the transaction has too many dirty pages.
    public static let transactionFull = LMDBError(code: MDB_TXN_FULL)
    /// `MDB_MAP_RESIZED`: another process grew the map; the wrapper adopts the new size and retries.
    public static let mapResized = LMDBError(code: MDB_MAP_RESIZED)
    /// `MDB_INCOMPATIBLE`: the operation does not fit the database's flags.
    public static let incompatible = LMDBError(code: MDB_INCOMPATIBLE)
    /// `MDB_BAD_VALSIZE`: a key or value has an unsupported size.
    public static let badValueSize = LMDBError(code: MDB_BAD_VALSIZE)

    /// Lets `catch LMDBError.mapFull` match any thrown error carrying that code.
    public static func ~= (pattern: LMDBError, value: any Error) -> Bool {
        (value as? LMDBError) == pattern
    }
}

/// Calls an `mdb_*` function and throws its non-zero result as an `LMDBError`.
@inline(__always)
func check(_ result: Int32) throws(LMDBError) {
    if result != MDB_SUCCESS { throw LMDBError(code: result) }
}
