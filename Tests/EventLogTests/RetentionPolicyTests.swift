@testable import EventLog
import EventLogTesting
import Foundation
import Testing

/// Retention policies that writers apply after their commits, in bounded steps.
@Suite struct RetentionPolicyTests {
    /// `count` events of a counter at `counter`, continuing from `start`.
    func ticks(_ count: Int, from start: Int) -> [Event] {
        (start..<start + count).map { (i: Int) -> Event in
            let old: StateValue? = i == 0 ? nil : .int(Int64(i - 1))
            return Event(stream: i % 3 == 0 ? "a" : "b", type: "tick", writes: [Write("counter", old: old, new: .int(Int64(i)))])
        }
    }

    /// The number of events the log holds.
    func held(_ store: EventStore) throws -> UInt64 {
        try store.lastSeq() - (store.base()?.seq ?? 0)
    }

    @Test func appendingUnderKeepLastStaysWithinTheSlackAndOneDigestCoversEveryStep() throws {
        let dir = TemporaryDirectory()
        var options = EventStore.Options.testing(mapSize: 8 << 20)
        options.retention = .keepLast(1_000)
        let store = try EventStore(path: dir.path, options: options)
        var stored: [[UInt8]] = []
        var most: UInt64 = 0
        for batch in 0..<2_000 {
            let seqs = try #require(try store.append(contentsOf: ticks(10, from: batch * 10)))
            try store.forEachStoredRecord(after: seqs.lowerBound - 1, through: seqs.upperBound) { _, bytes in stored.append(Array(bytes)); return true }
            most = max(most, try held(store))
        }
        #expect(try store.lastSeq() == 20_000)
        let count = try held(store)
        #expect(count >= 1_000 && count <= 1_100, "\(count)")
        // A commit that takes the log past the slack is followed by its step before it returns.
        #expect(most <= 1_100, "\(most)")
        #expect(store.retentionError == nil)
        let base = try #require(try store.base())
        // Many steps, one range, whose digest is the SHA-256 of every record dropped.
        #expect(base.digests.count == 1)
        #expect(base.digests[0].seqs == 1...base.seq)
        #expect(base.digests[0].sha256 == DroppedRange.digest(of: stored[..<Int(base.seq)]))
        // Event N (index N - 1) is of stream a when N - 1 is a multiple of 3.
        let inA = UInt64((1...base.seq).filter { ($0 - 1) % 3 == 0 }.count)
        #expect(base.dropped == ["a": inA, "b": base.seq - inA])
        #expect(try store.snapshot(after: base.seq) == ["counter": .int(Int64(base.seq - 1))])
        #expect(try store.currentState == ["counter": 19_999])
        #expect(try store.verify().isOK)
    }

    @Test func thePolicySurvivesReopenAndRemovingItStopsIt() throws {
        let dir = TemporaryDirectory()
        var options = EventStore.Options.testing()
        options.retention = .keepLast(200)
        do {
            let store = try EventStore(path: dir.path, options: options)
            try store.append(contentsOf: ticks(100, from: 0))
            #expect(try store.base() == nil)
        }
        // Reopened without the option: the meta's policy holds.
        let store = try EventStore(path: dir.path, options: .testing())
        #expect(try store.retentionPolicy() == .keepLast(200))
        for i in 100..<500 { try store.append(ticks(1, from: i)[0]) }
        let count = try held(store)
        #expect(count >= 200 && count <= 300, "\(count)")
        try store.setRetention(nil)
        #expect(try store.retentionPolicy() == nil)
        let before = try held(store)
        try store.append(contentsOf: ticks(400, from: 500))
        for i in 900..<1_000 { try store.append(ticks(1, from: i)[0]) }
        #expect(try held(store) == before + 500)
        #expect(try store.verify().isOK)
        // An option given to a writer replaces what the meta holds.
        options.retention = .keepDays(30)
        #expect(try EventStore(path: dir.path, options: options).retentionPolicy() == .keepDays(30))
    }

    @Test func aStepDropsAtMostStepEvents() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(mapSize: 8 << 20))
        try store.append(contentsOf: ticks(25_000, from: 0))
        try store.setRetention(.keepLast(100))
        try store.append(ticks(1, from: 25_000)[0])
        #expect(try store.base()?.seq == RetentionPolicy.stepEvents)
        try store.append(ticks(1, from: 25_001)[0])
        #expect(try store.base()?.seq == 2 * RetentionPolicy.stepEvents)
        try store.append(ticks(1, from: 25_002)[0])
        #expect(try store.firstSeq() == 25_003 - 100 + 1 && held(store) == 100)
        #expect(try store.base()?.digests.count == 1 && store.verify().isOK)
    }

    @Test func keepDaysDropsWhatIsOlderThanTheDaysKept() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock(start: Timestamp(microsecondsSince1970: 1_700_000_000_000_000))
        var options = EventStore.Options.testing()
        options.clock = clock.clock
        options.retention = .keepDays(10)
        let store = try EventStore(path: dir.path, options: options)
        let day: Int64 = 86_400_000_000
        // One event an hour for 12 days.
        for i in 0..<288 {
            try store.append(ticks(1, from: i)[0])
            clock.advance(microseconds: day / 24)
        }
        // The oldest is past 10 days by more than the slack (2.4 hours): dropped to 10 days.
        let first = try #require(try store.firstSeq())
        #expect(first > 1)
        let oldest = try #require(try store.record(first)).time.microsecondsSince1970
        let newest = try #require(try store.record(288)).time.microsecondsSince1970
        // The last append (an hour ago) left it within the slack: 1% of 10 days.
        #expect(oldest >= clock.now.microsecondsSince1970 - 10 * day - 10 * day / 100 - day / 24, "\(first)")
        #expect(newest - oldest >= 9 * day, "\(first)")
        #expect(try store.verify().isOK)
    }

    @Test func aCompactionByHandStartsARangeAndVerifyChecksTheRunningDigest() throws {
        let dir = TemporaryDirectory()
        var options = EventStore.Options.testing()
        options.retention = .keepLast(100)
        let store = try EventStore(path: dir.path, options: options)
        try store.append(contentsOf: ticks(250, from: 0))
        try store.append(ticks(1, from: 250)[0])
        #expect(try store.base()?.digests.map(\.seqs) == [1...150])
        try store.compact(before: 200)
        #expect(try store.base()?.digests.map(\.seqs) == [1...150, 151...199])
        try store.append(contentsOf: ticks(300, from: 251))
        try store.append(ticks(1, from: 551)[0])
        // The steps after it hash a range of their own.
        #expect(try store.base()?.digests.map(\.seqs) == [1...150, 151...199, 200...451])
        #expect(try store.verify().isOK)
        // A running digest that does not give the last range's SHA-256 is reported.
        try store.environment.write { txn in
            var hasher = SHA256Hasher()
            [UInt8](repeating: 1, count: 70).withUnsafeBytes { hasher.update($0) }
            try RunningDigest(through: 451, hasher: hasher).encoded.withUnsafeBytes { try txn.put(store.meta, key: RunningDigest.key, bytes: $0) }
        }
        #expect(try store.verify().problem == .init(seq: 451, reason: "the running digest of events 200-451 is not the SHA-256 their range records"))
    }

    /// FIPS 180-4's examples, and the CPU's SHA instructions (where this machine has them)
    /// against the Swift compression on every length around a block and odd chunkings.
    @Test func theHasherGivesSHA256BothWays() throws {
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        func digest(_ chunks: [[UInt8]], hardware: Bool) -> [UInt8] {
            var hasher = SHA256Hasher(hardware: hardware)
            for chunk in chunks { chunk.withUnsafeBytes { hasher.update($0) } }
            return hasher.finalize()
        }
        let examples: [([UInt8], String)] = [
            ([], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (Array("abc".utf8), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            ([UInt8](repeating: 0x61, count: 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
        ]
        for (message, expected) in examples {
            #expect(hex(digest([message], hardware: false)) == expected)
            #expect(hex(digest([message], hardware: true)) == expected)
        }
        var rng = SystemRandomNumberGenerator()
        for length in Array(0...200) + [1_000, 4_095, 4_096, 65_537] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let cut = length == 0 ? 0 : Int.random(in: 0...length, using: &rng)
            let chunks = [Array(bytes[..<cut]), Array(bytes[cut...])]
            #expect(digest(chunks, hardware: true) == digest([bytes], hardware: false), "\(length) bytes cut at \(cut)")
        }
    }

    @Test func aSavedHasherGoesOnAsIfNeverStopped() throws {
        let bytes = (0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for split in [0, 1, 63, 64, 65, 500, 1_000] {
            var first = SHA256Hasher()
            bytes[..<split].withUnsafeBytes { first.update($0) }
            var resumed = try #require(first.saved.withUnsafeBytes { SHA256Hasher(resuming: $0) })
            bytes[split...].withUnsafeBytes { resumed.update($0) }
            #expect(resumed.finalize() == DroppedRange.digest(of: [bytes]), "\(split)")
        }
        #expect([UInt8](repeating: 0, count: 41).withUnsafeBytes { SHA256Hasher(resuming: $0) } == nil)
    }
}
