@testable import EventLog
import EventLogTesting
import Foundation
import Testing

/// `StorageCheck` on data files made by hand, page by page, in LMDB's layout (`mdb.c`:
/// `MDB_page`, `MDB_node`, `MDB_meta`, `MDB_db`): a whole file passes, and each kind of damage
/// is named for what it is.
struct StorageCheckTests {
    /// A data file of four 4 KiB pages: the two meta pages, the main database's leaf (naming
    /// `events`), and the `events` leaf holding `keys`. Every field can be spoilt before writing.
    struct HandMadeFile {
        static let pageSize = 4_096
        var keys: [UInt64] = [1, 2, 3]
        /// What each meta page says: its commit, the last page, the main database's root.
        var commits: (Int, Int) = (2, 1)
        var lastPage = 3
        /// The pages the file holds (fewer than four: it is cut short).
        var pages = 4
        var eventsRoot: UInt64 = 3
        var eventsEntries: Int?
        var metaMagic: (UInt32, UInt32) = (0xBEEF_C0DE, 0xBEEF_C0DE)
        /// The `events` leaf's free-space bounds, when spoilt.
        var eventsBounds: (lower: UInt16, upper: UInt16)?

        func bytes() -> [UInt8] {
            var file = [UInt8](repeating: 0, count: Self.pageSize * max(pages, 4))
            func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
                withUnsafeBytes(of: value.littleEndian) { file.replaceSubrange(offset..<offset + MemoryLayout<T>.size, with: $0) }
            }
            /// An `MDB_db` at `offset`.
            func database(at offset: Int, depth: UInt16, leafPages: Int, entries: Int, root: UInt64, pad: UInt32 = 0) {
                put(pad, at: offset)
                put(depth, at: offset + 6)
                put(UInt64(leafPages), at: offset + 16)
                put(UInt64(entries), at: offset + 32)
                put(root, at: offset + 40)
            }
            for (page, (commit, magic)) in [(commits.0, metaMagic.0), (commits.1, metaMagic.1)].enumerated() {
                let at = page * Self.pageSize
                put(UInt64(page), at: at)
                put(UInt16(0x08), at: at + 10) // P_META
                put(magic, at: at + 16)
                put(UInt32(1), at: at + 20) // the data version
                // The free list is empty (no root); its `md_pad` holds the page size.
                database(at: at + 40, depth: 0, leafPages: 0, entries: 0, root: .max, pad: UInt32(Self.pageSize))
                database(at: at + 88, depth: 1, leafPages: 1, entries: 1, root: 2)
                put(UInt64(lastPage), at: at + 136)
                put(UInt64(commit), at: at + 144)
            }
            /// A leaf page of `nodes` (key, flags, data), packed from the page's end down.
            func leaf(_ number: Int, _ nodes: [(key: [UInt8], flags: UInt16, data: [UInt8])], bounds: (UInt16, UInt16)? = nil) {
                let at = number * Self.pageSize
                put(UInt64(number), at: at)
                put(UInt16(0x02), at: at + 10) // P_LEAF
                var upper = Self.pageSize
                for (slot, node) in nodes.enumerated() {
                    let size = 8 + node.key.count + node.data.count
                    upper -= size + size % 2
                    put(UInt16(upper), at: at + 16 + 2 * slot)
                    put(UInt16(node.data.count & 0xFFFF), at: at + upper)
                    put(UInt16(node.data.count >> 16), at: at + upper + 2)
                    put(node.flags, at: at + upper + 4)
                    put(UInt16(node.key.count), at: at + upper + 6)
                    file.replaceSubrange(at + upper + 8..<at + upper + 8 + node.key.count, with: node.key)
                    file.replaceSubrange(at + upper + 8 + node.key.count..<at + upper + size, with: node.data)
                }
                put(bounds?.0 ?? UInt16(16 + 2 * nodes.count), at: at + 12)
                put(bounds?.1 ?? UInt16(upper), at: at + 14)
            }
            // The main database's one node names `events` (F_SUBDATA) and holds its `MDB_db`.
            var events = [UInt8](repeating: 0, count: 48)
            func field<T: FixedWidthInteger>(_ value: T, _ offset: Int) {
                withUnsafeBytes(of: value.littleEndian) { events.replaceSubrange(offset..<offset + MemoryLayout<T>.size, with: $0) }
            }
            field(UInt16(1), 6) // depth
            field(UInt64(1), 16) // leaf pages
            field(UInt64(eventsEntries ?? keys.count), 32)
            field(eventsRoot, 40)
            leaf(2, [(Array("events".utf8), 0x02, events)])
            leaf(3, keys.map { key in (withUnsafeBytes(of: key.bigEndian) { Array($0) }, 0, Array("event \(key)".utf8)) },
                 bounds: eventsBounds)
            return Array(file.prefix(Self.pageSize * pages))
        }

        /// Writes the file into `directory` and returns its path.
        func write(in directory: TemporaryDirectory) throws -> String {
            let path = directory.file("data-\(UUID().uuidString).mdb")
            try Data(bytes()).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    let directory = TemporaryDirectory("storage-check")

    /// The damage `StorageCheck` finds walking the newest commit of `file`, or `nil`.
    func damage(of file: HandMadeFile) throws -> String? {
        let path = try file.write(in: directory)
        do {
            guard let meta = try StorageCheck.checkHeader(path: path) else { return "no meta page" }
            #expect(try StorageCheck.walk(path: path, txnID: meta.txnID))
            return nil
        } catch {
            return error.description
        }
    }

    @Test func aWholeFileHandMadePasses() throws {
        let path = try HandMadeFile().write(in: directory)
        let meta = try #require(try StorageCheck.checkHeader(path: path))
        #expect(meta.pageSize == 4_096 && meta.lastPage == 3 && meta.txnID == 2)
        #expect(try StorageCheck.walk(path: path, txnID: 2))
        // A snapshot that is no longer either meta page's: the caller starts again.
        #expect(try !StorageCheck.walk(path: path, txnID: 7))
        var entries: [UInt64] = []
        let unread = try StorageCheck.forEachReadableEntry(path: path, database: "events") { key, value in
            entries.append(key.reduce(0) { $0 << 8 | UInt64($1) })
            #expect(String(decoding: value, as: UTF8.self) == "event \(entries.last!)")
            return true
        }
        #expect(entries == [1, 2, 3] && unread.recordedEntries == 3 && unread.damagedPages.isEmpty)
    }

    /// A kind of damage a hand-made file can be given, and what the check must call it.
    enum Spoilt: String, CaseIterable, Sendable {
        case keysOutOfOrder, countThatDiffers, pageNobodyOwns, childOutOfRange, pageReachedTwice, impossibleBounds,
             truncatedFile, commitsThatCannotBothBe, brokenMetaPage

        func spoil(_ file: inout HandMadeFile) {
            switch self {
            case .keysOutOfOrder: file.keys = [1, 3, 2]
            case .countThatDiffers: file.eventsEntries = 5
            case .pageNobodyOwns: (file.lastPage, file.pages) = (4, 5)
            case .childOutOfRange: file.eventsRoot = 9
            case .pageReachedTwice: file.eventsRoot = 2
            case .impossibleBounds: file.eventsBounds = (4_000, 100)
            case .truncatedFile: file.pages = 3
            case .commitsThatCannotBothBe: file.commits = (2, 5)
            case .brokenMetaPage: file.metaMagic = (0xBEEF_C0DE, 0xDEAD_BEEF)
            }
        }

        var expected: String {
            switch self {
            case .keysOutOfOrder: "page 3 of database \"events\": key 2 is out of order"
            case .countThatDiffers: "database \"events\" records 5 entries"
            case .pageNobodyOwns: "page 4 is neither in use nor free"
            case .childOutOfRange: "database \"events\" points at page 9, outside the file's 2…3"
            case .pageReachedTwice: "page 2 is reached twice (in database \"events\")"
            case .impossibleBounds: "page 3 of database \"events\": free space bounds 4000…100 are impossible"
            case .truncatedFile: "is truncated: 12288 bytes, but its newest commit uses 16384"
            case .commitsThatCannotBothBe: "name commits 2 and 5, which cannot both be"
            case .brokenMetaPage: "meta page 1 of"
            }
        }
    }

    @Test("each kind of damage is named", arguments: Spoilt.allCases)
    func eachKindOfDamageIsNamed(_ kind: Spoilt) throws {
        var file = HandMadeFile()
        kind.spoil(&file)
        let found = try damage(of: file)
        #expect(found?.contains(kind.expected) == true, "\(kind): \(found ?? "no damage found")")
    }

    @Test func salvageReadsPastADamagedLeafAndSaysWhichItLost() throws {
        var file = HandMadeFile()
        file.eventsBounds = (4_000, 100)
        let path = try file.write(in: directory)
        var read = 0
        let unread = try StorageCheck.forEachReadableEntry(path: path, database: "events") { _, _ in read += 1; return true }
        #expect(read == 0 && unread.recordedEntries == 3 && unread.damagedPages == [3])
    }

    @Test func whatIsNoDataFileIsSaidPlainly() throws {
        // No file: a database yet to be created. Bytes of no LMDB file: LMDB's own refusal.
        #expect(try StorageCheck.checkHeader(path: directory.file("missing.mdb")) == nil)
        let garbage = directory.file("garbage.mdb")
        try Data(repeating: 0x5A, count: 8_192).write(to: URL(fileURLWithPath: garbage))
        #expect(try StorageCheck.checkHeader(path: garbage) == nil)
        #expect(throws: StorageCheck.Damage.self) { try StorageCheck.checkHeader(path: directory.path) }
        let empty = directory.file("empty.mdb")
        try Data().write(to: URL(fileURLWithPath: empty))
        do {
            _ = try StorageCheck.checkHeader(path: empty)
            Issue.record("an empty data file passed")
        } catch {
            #expect(error.description.contains("is empty (0 bytes)"))
        }
    }
}
