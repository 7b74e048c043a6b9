@testable import EventLog
import EventLogTesting
import Foundation
import Testing

@Suite struct RetentionTests {
    /// A log of `count` random events, and the states after each (index 0: before the first).
    func seeded(_ dir: TemporaryDirectory, count: Int = 200, seed: UInt64 = 7) throws -> (EventStore, [StateValue]) {
        let store = try EventStore(path: dir.path, options: .testing())
        var session = RandomSession(seed: seed)
        var states = [session.state]
        for _ in 0..<count {
            try store.append(session.next())
            states.append(session.state)
        }
        return (store, states)
    }

    @Test func compactKeepsTheWindowItsBaseAndTheSeqs() throws {
        let dir = TemporaryDirectory()
        let (store, states) = try seeded(dir)
        var dropped: [[UInt8]] = []
        try store.forEachStoredRecord(after: 0, through: 119) { _, bytes in dropped.append(Array(bytes)); return true }
        var streams: [String: UInt64] = [:]
        try store.forEachRecord(to: 119) { streams[$0.event.stream, default: 0] += 1; return true }
        let tail = try (120...200).map { try store.record($0)! }
        #expect(store.format == EventStore.uncompactedFormatVersion)

        let base = try #require(try store.compact(before: 120))
        #expect(base.seq == 119 && base.firstSeq == 120)
        #expect(base.dropped == streams)
        #expect(base.digests == [DroppedRange(seqs: 1...119, sha256: DroppedRange.digest(of: dropped))])

        let reopened = try EventStore(path: dir.path, options: .testing())
        #expect(reopened.format == EventStore.formatVersion)
        #expect(try reopened.base() == base)
        #expect(try reopened.firstSeq() == 120 && reopened.lastSeq() == 200)
        #expect(try (120...200).map { try reopened.record($0)! } == tail)
        #expect(try reopened.snapshot(after: 119) == states[119])
        for seq in [120, 150, 200] { #expect(try reopened.snapshot(after: UInt64(seq)) == states[seq]) }
        #expect(throws: EventStoreError.compacted(seq: 118, base: 119)) { try reopened.snapshot(after: 118) }
        #expect(throws: EventStoreError.compacted(seq: 5, base: 119)) { try reopened.record(5) }
        #expect("\(EventStoreError.compacted(seq: 12, base: 5_000))" == "event 12 was compacted away; the log starts after event 5,000 from its base")
        var seqs: [UInt64] = []
        try reopened.forEachRecord { seqs.append($0.seq); return true }
        #expect(seqs == Array(120...200))
        #expect(try reopened.verify().isOK)
        #expect(try reopened.keyframeSeqs().first == 119)
        // Appending goes on from the window, with the keyframes verify expects.
        var session = RandomSession(seed: 99)
        session.state = states[200]
        for _ in 0..<100 { try reopened.append(session.next()) }
        #expect(try reopened.lastSeq() == 300 && reopened.currentState == session.state)
        #expect(try reopened.verify().isOK)
    }

    @Test func compactingTwiceAddsARangeAndCounts() throws {
        let dir = TemporaryDirectory()
        let (store, states) = try seeded(dir)
        let first = try #require(try store.compact(before: 50))
        let second = try #require(try store.compact(before: 180))
        #expect(second.digests.map(\.seqs) == [1...49, 50...179])
        #expect(second.digests[0] == first.digests[0])
        #expect(second.dropped.values.reduce(0, +) == 179)
        #expect(try store.snapshot(after: 179) == states[179])
        #expect(try store.verify().isOK)
        // At or before the first event: nothing to drop, the base stays.
        #expect(try store.compact(before: 100) == second)
        #expect(try store.compact(before: 180) == second)
    }

    @Test func badCutsChangeNothing() throws {
        let dir = TemporaryDirectory()
        let (store, _) = try seeded(dir, count: 30)
        let before = try dataFile(dir)
        #expect(throws: EventStoreError.noSuchEvent(seq: 0, last: 30)) { try store.compact(before: 0) }
        #expect(throws: EventStoreError.noSuchEvent(seq: 31, last: 30)) { try store.compact(before: 31) }
        #expect(try store.compact(before: 1) == nil)
        #expect(try dataFile(dir) == before)
        #expect(try store.base() == nil)
    }

    @Test func verifyNamesABaseThatDisagreesWithItsFirstEvent() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        for i in 0..<10 { try store.append(Event(stream: "s", type: "t", writes: [Write("n", old: i == 0 ? nil : .int(Int64(i - 1)), new: .int(Int64(i)))])) }
        let base = try #require(try store.compact(before: 6))
        // Replace the base by a state that is checksummed right but is not the fold.
        try store.environment.write { txn in
            var wrong = base
            wrong.checksum = try store.putBase(base, state: ["n": 42], in: txn).checksum
            try BaseCodec.encode(wrong).withUnsafeBytes { try txn.put(store.meta, key: BaseCodec.key, bytes: $0) }
        }
        let report = try store.verify()
        #expect(report.problem == .init(seq: 6, reason: "the base disagrees with the event after it: write to n expects 4 but the base holds 42"))
        // A base whose checksum is not the one the meta records.
        try store.environment.write { txn in
            try BaseCodec.encode(base).withUnsafeBytes { try txn.put(store.meta, key: BaseCodec.key, bytes: $0) }
        }
        #expect(try store.verify().problem?.reason.hasPrefix("the base's checksum is ") == true)
    }

    @Test func aLogWithoutBaseOpensAsBeforeAndAFormat4WithoutBaseIsDamage() throws {
        let dir = TemporaryDirectory()
        let (store, _) = try seeded(dir, count: 20)
        #expect(try store.base() == nil && store.format == 3)
        try store.environment.write { txn in try store.putFormat(4, in: txn) }
        #expect(throws: EventStoreError.damaged("the meta record says format 4 but holds no base")) {
            var options = EventStore.Options.testing()
            options.readOnly = true
            _ = try EventStore(path: dir.path, options: options)
        }
    }

    @Test func salvageAndACopyKeepTheBase() throws {
        let dir = TemporaryDirectory()
        let (store, states) = try seeded(dir)
        let base = try #require(try store.compact(before: 100))
        let target = try EventStore(path: dir.file("salvaged"), options: .testing())
        let report = try store.salvage(into: target)
        #expect(report.copied == 100...200 && report.firstLeftBehind == nil)
        #expect(try target.base() == base && target.currentState == states[200] && target.verify().isOK)
        // Read from the file's pages (as for a log whose storage is damaged), the same.
        let fromPages = try EventStore(path: dir.file("from-pages"), options: .testing())
        let pagesReport = try EventStore.salvage(damagedLogAt: dir.path, into: fromPages)
        #expect(pagesReport.copied == 100...200 && pagesReport.firstLeftBehind == nil, "\(pagesReport)")
        #expect(try fromPages.base() == base && fromPages.currentState == states[200] && fromPages.verify().isOK)
        try store.copyCompacted(to: dir.file("copy"))
        let copy = try EventStore(path: dir.file("copy"), options: .testing())
        #expect(try copy.base() == base && copy.lastSeq() == 200 && copy.verify().isOK)
        #expect(throws: LMDBError.self) { try store.copyCompacted(to: dir.file("copy")) }
    }

    @Test func theFirstEventAtOrAfterATime() throws {
        let dir = TemporaryDirectory()
        let (store, _) = try seeded(dir, count: 10)
        let times = try (1...10).map { try store.record($0)!.time }
        #expect(try store.firstEvent(recordedAtOrAfter: times[4]) == 5)
        #expect(try store.firstEvent(recordedAtOrAfter: Timestamp(microsecondsSince1970: times[9].microsecondsSince1970 + 1)) == nil)
    }

    @Test func theDigestIsSHA256() {
        func hex(_ chunks: [String]) -> String {
            var hasher = SHA256Hasher()
            for chunk in chunks { Array(chunk.utf8).withUnsafeBytes { hasher.update($0) } }
            return hasher.finalize().map { String(format: "%02x", $0) }.joined()
        }
        #expect(hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(["abc"]) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let long = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(hex([long]) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // Fed in uneven chunks across block boundaries, the same digest.
        #expect(hex(long.map { String($0) }) == hex([long]))
        #expect(hex([String(repeating: "a", count: 1_000_000)]) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func theFileIsReplacedByASmallerCopyWithTheSameLog() throws {
        let dir = TemporaryDirectory()
        let exported: [EventRecord]
        do {
            let (store, _) = try seeded(dir, count: 3_000)
            try store.compact(before: 2_990)
            exported = try (2_990...3_000).map { try store.record($0)! }
            // A store of this process still has it open: refused, nothing changed.
            #expect(throws: EventStoreError.busy("a store of this process has the log open; close it first")) {
                try EventStore.replaceWithCompactedCopy(at: dir.path)
            }
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/compacting"))
        let sizes = try EventStore.replaceWithCompactedCopy(at: dir.path)
        #expect(sizes.after < sizes.before / 4, "\(sizes)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["data.mdb", "lock.mdb"])
        let reopened = try EventStore(path: dir.path, options: .testing())
        #expect(try (2_990...3_000).map { try reopened.record($0)! } == exported)
        #expect(try reopened.verify().isOK && reopened.base()?.seq == 2_989)
        // A directory left by a killed run is never removed, and stops the next.
        try FileManager.default.createDirectory(atPath: dir.path + "/compacting", withIntermediateDirectories: false)
        #expect(throws: EventStoreError.self) { try EventStore.replaceWithCompactedCopy(at: dir.path) }
        #expect(FileManager.default.fileExists(atPath: dir.path + "/compacting"))
    }

    private func dataFile(_ dir: TemporaryDirectory) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: dir.path + "/data.mdb"))
    }
}
