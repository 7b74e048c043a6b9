import CLMDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A check of an LMDB data file's own structure (format 1, LMDB 0.9), read with `pread` so
/// that no damage (a truncated file, a page number out of range) can fault the process the
/// way reading it through the map would. LMDB keeps no checksums of its pages: this is how a
/// flipped bit in a branch page, a node or a meta page is found before LMDB follows it.
///
/// See `mdb.c` in LMDB for the layouts read here: `MDB_page`, `MDB_node`, `MDB_meta`, `MDB_db`.
enum StorageCheck {
    /// What is wrong with the file, in one line.
    struct Damage: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// The newest intact meta page of the data file at `path`, after checking that the file
    /// holds every page it names. `nil` when there is no file or an empty one beside its
    /// creation marker (a database yet to be created, or whose creation was killed before
    /// LMDB wrote a page), or it is no LMDB file at all (neither meta page is one), which LMDB
    /// reports itself. An empty file without the marker is damage: a log whose file was
    /// emptied is never taken for a new one.
    ///
    /// Another process committing meanwhile can show a torn view (the two meta pages read at
    /// different moments, or a size read before the file grew), so damage is reported only
    /// once it stays put: the check runs again while the file's size and meta pages keep
    /// changing between attempts (up to 50 attempts, 2 ms apart).
    static func checkHeader(path: String) throws(Damage) -> Meta? {
        var previous: [UInt8]?
        var attempts = 0
        while true {
            do {
                return try checkHeaderOnce(path: path)
            } catch {
                let current = headerBytes(path)
                attempts += 1
                if current == previous || attempts == 50 { throw error }
                previous = current
                usleep(2_000)
            }
        }
    }

    /// The file's size and its first 8 KiB (both meta pages at the usual page size), to tell a
    /// file that a writer is changing from one that stays as it is.
    private static func headerBytes(_ path: String) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return [] }
        var bytes = withUnsafeBytes(of: info.st_size) { Array($0) }
        var page = [UInt8](repeating: 0, count: 8_192)
        let count = pread(fd, &page, page.count, 0)
        bytes += page.prefix(max(0, count))
        return bytes
    }

    private static func checkHeaderOnce(path: String) throws(Damage) -> Meta? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        // Before opening it: a FIFO would block the open, a device never ends.
        guard info.st_mode & S_IFMT == S_IFREG else { throw Damage("\(path) is not a regular file") }
        let fd = open(path, O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // Another process creating the database leaves the file empty until LMDB writes its
        // meta pages, which it does holding the exclusive lock on `lock.mdb`: an empty file is
        // damage only once it stays empty with no creator at work (a second to take the lock,
        // then as long as a creator holds it, up to 30 s on a loaded machine).
        var waits = 0
        while info.st_size == 0, waits < 600, fstat(fd, &info) == 0, info.st_size == 0 {
            guard waits < 20 || isBeingCreated(dataFile: path) else { break }
            usleep(50_000)
            waits += 1
        }
        let size = Int(info.st_size)
        guard size > 0 else {
            if access(creationMarker(ofDataFile: path), F_OK) == 0 { return nil }
            throw Damage("\(path) is empty (0 bytes): the log it held is gone")
        }
        let metas = [Meta(fd: fd, page: 0, pageSize: nil), Meta(fd: fd, page: 1, pageSize: Meta(fd: fd, page: 0, pageSize: nil)?.pageSize)]
        // Neither page is a meta page: this is no LMDB file, which LMDB reports.
        guard let newest = metas.compactMap({ $0 }).max(by: { $0.txnID < $1.txnID }) else { return nil }
        if let broken = metas.firstIndex(where: { $0 == nil }) {
            throw Damage("meta page \(broken) of \(path) is damaged (LMDB would refuse the file)")
        }
        // Commits alternate between the two pages: commit N writes page N % 2, so the two
        // hold consecutive commits. Anything else is a damaged commit number, which would
        // make LMDB read an older snapshot (or a broken one) as the newest.
        let ids = metas.map { $0!.txnID }
        guard ids[0] % 2 == 0, ids[1] % 2 == 1 || ids[1] == 0, abs(ids[0] - ids[1]) == 1 || ids == [0, 0] else {
            throw Damage("the meta pages of \(path) name commits \(ids[0]) and \(ids[1]), which cannot both be")
        }
        let needed = (newest.lastPage + 1) * newest.pageSize
        guard size >= needed else {
            throw Damage("\(path) is truncated: \(size) bytes, but its newest commit uses \(needed)")
        }
        return newest
    }

    /// The file a writer creates beside `dataFile` before LMDB creates it, and removes once
    /// LMDB has written its meta pages (`Environment.open`).
    static func creationMarker(ofDataFile dataFile: String) -> String { dataFile + ".creating" }

    /// Whether `dataFile` is empty beside its creation marker: a creation killed before LMDB
    /// wrote a page, which holds no log yet and which the next writer creates again.
    static func isUnfinishedCreation(dataFile: String) -> Bool {
        var info = stat()
        return stat(dataFile, &info) == 0 && info.st_size == 0 && access(creationMarker(ofDataFile: dataFile), F_OK) == 0
    }

    /// Whether another process holds LMDB's exclusive lock on the `lock.mdb` beside
    /// `dataFile`, as the process creating the environment does until its meta pages are
    /// written. Only asked while the data file is empty, when this process cannot have the
    /// environment open: closing a descriptor of the lock file would drop its own locks.
    private static func isBeingCreated(dataFile: String) -> Bool {
        guard dataFile.hasSuffix("data.mdb") else { return false }
        let fd = open(String(dataFile.dropLast("data.mdb".count)) + "lock.mdb", O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_RDLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 1
        // F_GETLK reports a lock that would block a shared one: an exclusive lock.
        return fcntl(fd, F_GETLK, &lock) == 0 && lock.l_type == Int16(F_WRLCK)
    }

    /// Walks every page of the snapshot that transaction `txnID` reads: both meta pages, every
    /// database's tree (page numbers in range, each page reached once, flags, node bounds,
    /// keys in order within and across pages, overflow pages, the counts and depth each
    /// database records) and the free list; every page must be in a tree or free. Returns
    /// `false` when the snapshot is no longer the newest on disk (a writer committed twice
    /// since it began), so that the caller can start again.
    static func walk(path: String, txnID: Int) throws(Damage) -> Bool {
        guard let meta = try checkHeader(path: path) else { throw Damage("\(path) has no intact meta page") }
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw Damage("cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let metas = [Meta(fd: fd, page: 0, pageSize: meta.pageSize), Meta(fd: fd, page: 1, pageSize: meta.pageSize)]
        guard let current = metas.first(where: { $0?.txnID == txnID }) ?? nil else { return false }
        var walker = Walker(fd: fd, pageSize: current.pageSize, lastPage: current.lastPage)
        try walker.walk(current.free, name: "the free list", isFreeList: true)
        try walker.walk(current.main, name: "the main database")
        for (name, record) in walker.namedDatabases { try walker.walk(record, name: "database \"\(name)\"") }
        if let stray = (2...max(2, current.lastPage)).first(where: { $0 <= current.lastPage && walker.owner[$0] == .unused }) {
            throw Damage("page \(stray) is neither in use nor free")
        }
        return true
    }

    /// An `MDB_meta`: the page size, the two root databases, the last page and the commit.
    struct Meta {
        var pageSize: Int
        var free: DatabaseRecord
        var main: DatabaseRecord
        var lastPage: Int
        var txnID: Int

        /// Reads meta page `page`; `nil` unless it is one (its number, flags, magic, version,
        /// page size).
        init?(fd: Int32, page: Int, pageSize: Int?) {
            let guess = pageSize ?? Int(sysconf(Int32(_SC_PAGESIZE)))
            var bytes = [UInt8](repeating: 0, count: 160)
            guard pread(fd, &bytes, bytes.count, off_t(page * guess)) == bytes.count else { return nil }
            let read = Bytes(bytes)
            guard read.u64(0) == UInt64(page), read.u16(10) & Flags.meta != 0, read.u32(16) == 0xBEEF_C0DE, read.u32(20) == 1 else { return nil }
            self.pageSize = Int(read.u32(40))
            guard self.pageSize >= 512, self.pageSize <= 1 << 16, self.pageSize.nonzeroBitCount == 1,
                  pageSize == nil || pageSize == self.pageSize else { return nil }
            free = DatabaseRecord(read, at: 40)
            main = DatabaseRecord(read, at: 88)
            lastPage = read.int(136)
            txnID = read.int(144)
            guard lastPage >= 1, lastPage < Int(Int32.max) else { return nil }
        }
    }

    /// An `MDB_db`: what a database records of its tree.
    struct DatabaseRecord {
        var flags: UInt16
        var depth: Int
        var branchPages: Int
        var leafPages: Int
        var overflowPages: Int
        var entries: Int
        var root: UInt64

        init(_ bytes: Bytes, at offset: Int) {
            flags = bytes.u16(offset + 4)
            depth = Int(bytes.u16(offset + 6))
            branchPages = bytes.int(offset + 8)
            leafPages = bytes.int(offset + 16)
            overflowPages = bytes.int(offset + 24)
            entries = bytes.int(offset + 32)
            root = bytes.u64(offset + 40)
        }

        static let size = 48
    }

    enum Flags {
        static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04, meta: UInt16 = 0x08
        static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02, dupData: UInt16 = 0x04
        static let integerKey: UInt16 = 0x08
    }

    /// Little-endian reads from a page, never past its end (callers check offsets first).
    struct Bytes {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        func u16(_ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * $1) } }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
        func int(_ at: Int) -> Int { Int(truncatingIfNeeded: u64(at)) }
    }

    /// A tree page's nodes, after checking its header and each node's bounds.
    struct ParsedPage {
        struct Node {
            var key: [UInt8]
            var flags: UInt16
            var low: UInt16
            var high: UInt16
            /// Where the node's data begins in the page.
            var dataAt: Int
            /// A branch node's child page.
            var child: UInt64 { UInt64(low) | UInt64(high) << 16 | UInt64(flags) << 32 }
            /// A leaf node's data size.
            var dataSize: Int { Int(low) | Int(high) << 16 }
        }

        var isBranch: Bool
        var nodes: [Node] = []

        init(_ page: Bytes, number: UInt64, pageSize: Int) throws(Damage) {
            guard page.u64(0) == number else { throw Damage("it says it is page \(page.u64(0))") }
            let flags = page.u16(10) & ~0xC000 // P_LOOSE and P_KEEP are bookkeeping of a writer
            isBranch = flags == Flags.branch
            guard isBranch || flags == Flags.leaf else { throw Damage("flags \(page.u16(10)) are neither a branch's nor a leaf's") }
            let lowerBound = Int(page.u16(12)), upperBound = Int(page.u16(14))
            guard lowerBound >= 16, lowerBound <= upperBound, upperBound <= pageSize, (lowerBound - 16) % 2 == 0 else {
                throw Damage("free space bounds \(lowerBound)…\(upperBound) are impossible")
            }
            // Each node: offset, then (size low, size high, flags, key size), key, data.
            for slot in 0..<(lowerBound - 16) / 2 {
                let at = Int(page.u16(16 + 2 * slot))
                guard at >= upperBound, at + 8 <= pageSize else { throw Damage("node \(slot) at \(at) is outside the page's nodes") }
                let keySize = Int(page.u16(at + 6))
                guard at + 8 + keySize <= pageSize else { throw Damage("node \(slot)'s key runs past the page") }
                nodes.append(Node(key: Array(page.bytes[at + 8..<at + 8 + keySize]), flags: page.u16(at + 4), low: page.u16(at),
                                  high: page.u16(at + 2), dataAt: at + 8 + keySize))
            }
        }
    }

    /// What `forEachReadableEntry` could not read of a database.
    struct Unread {
        /// How many entries the database records it holds.
        var recordedEntries: Int
        /// The pages passed over as damaged (their entries lost), in the order met.
        var damagedPages: [UInt64] = []
    }

    /// For salvage: calls `body` with the key and value of each entry of database `name` that
    /// can still be read, in the tree's order, passing over pages that are damaged (whose
    /// entries are lost) instead of stopping; `body` returns `false` to stop. Reads the file
    /// alone, never through LMDB. Returns what it could not read.
    @discardableResult
    static func forEachReadableEntry(path: String, database name: String,
                                     _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws -> Unread {
        guard let meta = try checkHeader(path: path) else { throw Damage("\(path) has no intact meta page") }
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw Damage("cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var seen = Set<UInt64>()
        func read(_ page: UInt64, count: Int = 1) -> Bytes? {
            guard page >= 2, page + UInt64(count) - 1 <= UInt64(meta.lastPage) else { return nil }
            var bytes = [UInt8](repeating: 0, count: meta.pageSize * count)
            guard pread(fd, &bytes, bytes.count, off_t(Int(page) * meta.pageSize)) == bytes.count else { return nil }
            return Bytes(bytes)
        }
        var damagedPages: [UInt64] = []
        /// Visits a subtree; returns `false` once `body` asked to stop.
        func visit(_ number: UInt64, level: Int, _ leaf: (ParsedPage.Node, Bytes) throws -> Bool) rethrows -> Bool {
            guard level <= 32, seen.insert(number).inserted, let page = read(number),
                  let parsed = try? ParsedPage(page, number: number, pageSize: meta.pageSize) else {
                damagedPages.append(number)
                return true
            }
            for node in parsed.nodes {
                if parsed.isBranch {
                    guard try visit(node.child, level: level + 1, leaf) else { return false }
                } else {
                    guard try leaf(node, page) else { return false }
                }
            }
            return true
        }
        var record: DatabaseRecord?
        _ = visit(meta.main.root, level: 1) { node, page in
            guard node.flags & Flags.subData != 0, String(decoding: node.key, as: UTF8.self) == name,
                  node.dataAt + DatabaseRecord.size <= meta.pageSize else { return true }
            record = DatabaseRecord(Bytes(Array(page.bytes[node.dataAt..<node.dataAt + DatabaseRecord.size])), at: 0)
            return false
        }
        guard let record else { throw Damage("the main database no longer names \"\(name)\"") }
        damagedPages = []
        if record.root != UInt64.max {
            _ = try visit(record.root, level: 1) { node, page in
                let size = node.dataSize
                if node.flags & Flags.bigData != 0 {
                    let pages = (16 + size + meta.pageSize - 1) / meta.pageSize
                    guard node.dataAt + 8 <= meta.pageSize, let overflow = read(page.u64(node.dataAt), count: pages),
                          overflow.u16(10) & Flags.overflow != 0 else {
                        damagedPages.append(node.dataAt + 8 <= meta.pageSize ? page.u64(node.dataAt) : page.u64(0))
                        return true
                    }
                    return try body(node.key, Array(overflow.bytes[16..<16 + size]))
                }
                guard node.flags == 0, node.dataAt + size <= meta.pageSize else {
                    damagedPages.append(page.u64(0))
                    return true
                }
                return try body(node.key, Array(page.bytes[node.dataAt..<node.dataAt + size]))
            }
        }
        return Unread(recordedEntries: record.entries, damagedPages: damagedPages)
    }

    private struct Walker {
        enum Owner: UInt8 { case unused, tree, free }

        let fd: Int32
        let pageSize: Int
        let lastPage: Int
        var owner: [Owner]
        /// The named databases the main database lists, in its order.
        var namedDatabases: [(String, DatabaseRecord)] = []
        private var counts = (entries: 0, branch: 0, leaf: 0, overflow: 0, leafDepth: nil as Int?)
        private var freePages: [Int] = []

        init(fd: Int32, pageSize: Int, lastPage: Int) {
            self.fd = fd
            self.pageSize = pageSize
            self.lastPage = lastPage
            owner = [Owner](repeating: .unused, count: lastPage + 1)
            owner[0] = .tree
            owner[1] = .tree
        }

        mutating func walk(_ record: DatabaseRecord, name: String, isFreeList: Bool = false) throws(Damage) {
            counts = (0, 0, 0, 0, nil)
            freePages = []
            if record.root != UInt64.max {
                guard record.depth >= 1, record.depth <= 32 else { throw Damage("\(name) records a depth of \(record.depth)") }
                try visit(page: record.root, level: 1, lower: nil, upper: nil, name: name, record: record, isFreeList: isFreeList)
            }
            let found = (counts.entries, counts.branch, counts.leaf, counts.overflow, counts.leafDepth ?? 0)
            let recorded = (record.entries, record.branchPages, record.leafPages, record.overflowPages, record.root == UInt64.max ? 0 : record.depth)
            guard found == recorded else {
                throw Damage("\(name) records \(recorded.0) entries, \(recorded.1) branch, \(recorded.2) leaf and \(recorded.3) overflow pages"
                    + " and depth \(recorded.4), but holds \(found.0), \(found.1), \(found.2), \(found.3) and \(found.4)")
            }
            for page in freePages {
                guard page >= 2, page <= lastPage else { throw Damage("the free list names page \(page), outside the file's 0…\(lastPage)") }
                guard owner[page] == .unused else { throw Damage("page \(page) is both free and in use") }
                owner[page] = .free
            }
        }

        private mutating func claim(_ page: UInt64, count: Int = 1, name: String) throws(Damage) -> Int {
            guard page >= 2, page <= UInt64(lastPage), count >= 1, Int(page) + count - 1 <= lastPage else {
                throw Damage("\(name) points at page \(page), outside the file's 2…\(lastPage)")
            }
            for index in Int(page)..<Int(page) + count {
                guard owner[index] == .unused else { throw Damage("page \(index) is reached twice (in \(name))") }
                owner[index] = .tree
            }
            return Int(page)
        }

        private func read(_ page: Int, count: Int = 1) throws(Damage) -> Bytes {
            var bytes = [UInt8](repeating: 0, count: pageSize * count)
            guard pread(fd, &bytes, bytes.count, off_t(page * pageSize)) == bytes.count else {
                throw Damage("cannot read page \(page): \(String(cString: strerror(errno)))")
            }
            return Bytes(bytes)
        }

        private mutating func visit(page number: UInt64, level: Int, lower: [UInt8]?, upper: [UInt8]?, name: String,
                                    record: DatabaseRecord, isFreeList: Bool) throws(Damage) {
            let index = try claim(number, name: name)
            let page = try read(index)
            func damage(_ reason: String) -> Damage { Damage("page \(index) of \(name): \(reason)") }
            let parsed: ParsedPage
            do { parsed = try ParsedPage(page, number: number, pageSize: pageSize) } catch { throw damage(error.description) }
            let (isBranch, nodes) = (parsed.isBranch, parsed.nodes)
            guard level <= record.depth else { throw damage("deeper than the depth of \(record.depth) its database records") }
            guard !nodes.isEmpty || level == 1 && !isBranch else { throw damage("it holds no node") }
            if isBranch { counts.branch += 1 } else {
                counts.leaf += 1
                if let depth = counts.leafDepth, depth != level { throw damage("a leaf at depth \(level), others at \(depth)") }
                counts.leafDepth = level
            }
            let integerKeys = record.flags & Flags.integerKey != 0
            func ordered(_ a: [UInt8], _ b: [UInt8]) -> Bool {
                guard integerKeys else { return a.lexicographicallyPrecedes(b) }
                let value = { (key: [UInt8]) in key.reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
                return a.count == b.count ? value(a) < value(b) : a.count < b.count
            }
            // A branch's first key is the implicit lowest; every other key lies in the bounds
            // its parent gives this page and follows the one before.
            for (slot, node) in nodes.enumerated() where !(isBranch && slot == 0) {
                if let lower, ordered(node.key, lower) { throw damage("key \(slot) sorts before the page's lower bound") }
                if let upper, !ordered(node.key, upper) { throw damage("key \(slot) does not sort before the page's upper bound") }
                if slot > (isBranch ? 1 : 0), !ordered(nodes[slot - 1].key, node.key) { throw damage("key \(slot) is out of order") }
            }
            if isBranch {
                for (slot, node) in nodes.enumerated() {
                    try visit(page: node.child, level: level + 1, lower: slot == 0 ? lower : node.key,
                              upper: slot + 1 < nodes.count ? nodes[slot + 1].key : upper, name: name, record: record, isFreeList: isFreeList)
                }
                return
            }
            for (slot, node) in nodes.enumerated() {
                counts.entries += 1
                let size = node.dataSize
                guard node.flags & ~(Flags.bigData | Flags.subData) == 0 else { throw damage("node \(slot) has flags \(node.flags)") }
                var data: [UInt8]
                if node.flags & Flags.bigData != 0 {
                    guard node.dataAt + 8 <= pageSize else { throw damage("node \(slot)'s overflow page number runs past the page") }
                    let first = page.u64(node.dataAt)
                    let pages = (16 + size + pageSize - 1) / pageSize
                    let start = try claim(first, count: pages, name: name)
                    let overflow = try read(start, count: pages)
                    guard overflow.u64(0) == first, overflow.u16(10) & Flags.overflow != 0, Int(overflow.u32(12)) == pages else {
                        throw damage("node \(slot)'s overflow page \(first) is not \(pages) overflow pages")
                    }
                    counts.overflow += pages
                    data = isFreeList ? Array(overflow.bytes[16..<16 + size]) : []
                } else {
                    guard node.dataAt + size <= pageSize else { throw damage("node \(slot)'s data runs past the page") }
                    data = Array(page.bytes[node.dataAt..<node.dataAt + size])
                }
                if node.flags & Flags.subData != 0 {
                    guard !isFreeList, level >= 1, name == "the main database", size == DatabaseRecord.size else {
                        throw damage("node \(slot) names a database where none can be")
                    }
                    let databaseName = String(decoding: node.key, as: UTF8.self)
                    namedDatabases.append((databaseName, DatabaseRecord(Bytes(data), at: 0)))
                }
                if isFreeList {
                    // An IDL: its length, then that many page numbers.
                    let list = Bytes(data)
                    guard data.count >= 8, data.count % 8 == 0, list.int(0) == data.count / 8 - 1 else {
                        throw damage("free-list entry \(slot) is malformed")
                    }
                    for item in 1..<data.count / 8 { freePages.append(list.int(8 * item)) }
                }
            }
        }
    }
}
