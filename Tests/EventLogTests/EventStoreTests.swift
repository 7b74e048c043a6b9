import CLMDB
@testable import EventLog
import EventLogTesting
import Foundation
import Synchronization
import Testing

@Suite struct EventStoreTests {
    @Test func sequenceIsDenseFromOneAndPersistsAcrossReopen() throws {
        let dir = TemporaryDirectory()
        var session = RandomSession(seed: 1)
        let events = (0..<100).map { _ in session.next() }
        do {
            let store = try EventStore(path: dir.path, options: .testing())
            #expect(try store.lastSeq() == 0)
            #expect(try store.firstSeq() == nil)
            #expect(try store.append(events[0]).seq == 1)
            #expect(try store.append(contentsOf: events[1...]) == 2...100)
        }
        let reopened = try EventStore(path: dir.path, options: .testing())
        #expect(try reopened.lastSeq() == 100)
        #expect(try reopened.firstSeq() == 1)
        #expect(try reopened.currentState == session.state)
        var seen: [Event] = []
        try reopened.forEachRecord { seen.append($0.event); return true }
        #expect(seen == events)
        #expect(try reopened.record(37)?.event == events[36])
        #expect(try reopened.record(101) == nil)
        #expect(try reopened.keyframeCount() == reopened.keyframeSeqs().count)
        #expect(try reopened.keyframeCount() > 1)
        #expect(try reopened.verify().isOK)
        #expect(try reopened.firstSnapshotMismatch() == nil)
    }

    @Test func rangeReadsAreInclusiveAndCanStopEarly() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.append(contentsOf: (1...20).map { Event(stream: "s", type: "e\($0)") })
        var seqs: [UInt64] = []
        try store.forEachRecord(from: 5, to: 9) { seqs.append($0.seq); return true }
        #expect(seqs == [5, 6, 7, 8, 9])
        seqs = []
        try store.forEachRecord(from: 18) { seqs.append($0.seq); return $0.seq < 19 }
        #expect(seqs == [18, 19])
    }

    /// A clock past year 9999 gives times RFC 3339 cannot write: refused for one event and for a
    /// batch large enough to be encoded on the second thread alike, and nothing is appended.
    @Test func timesRFC3339CannotWriteAreRefusedWhateverTheBatchSize() throws {
        let dir = TemporaryDirectory()
        let late = Timestamp(microsecondsSince1970: 253_402_300_800_000_000) // 10000-01-01
        var options = EventStore.Options.testing()
        options.clock = EventClock { late }
        let store = try EventStore(path: dir.path, options: options)
        for count in [1, EncodingPipeline.minimumEvents * 3] {
            let events = (0..<count).map { Event(stream: "s", type: "e\($0)") }
            #expect(throws: EventStoreError.limitExceeded("time 253402300800000000 µs since 1970 is outside years 0000 to 9999")) {
                try store.append(contentsOf: events)
            }
        }
        #expect(try store.lastSeq() == 0)
    }

    @Test func timesComeFromTheInjectedClock() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.append(contentsOf: [Event(stream: "s", type: "a"), Event(stream: "s", type: "b")])
        #expect(try store.record(1)?.time.microsecondsSince1970 == 1_764_468_000_000_000)
        #expect(try store.record(2)?.time.microsecondsSince1970 == 1_764_468_000_001_000)
    }

    @Test func snapshotAfterRandomEventsEqualsTheFoldFromTheStart() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(keyframeRatio: 4))
        let folded = try store.appendRandomSession(seed: 99, count: 2_000)
        var rng = SplitMix64(seed: 5)
        for _ in 0..<300 {
            let n = UInt64.random(in: 0...2_000, using: &rng)
            #expect(try store.snapshot(after: n) == folded[Int(n)], "after \(n)")
        }
        #expect(throws: EventStoreError.noSuchEvent(seq: 2_001, last: 2_000)) { try store.snapshot(after: 2_001) }
    }

    @Test func forEachStateGivesTheFoldedStateAfterEachEventInRange() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(keyframeRatio: 4))
        let folded = try store.appendRandomSession(seed: 7, count: 500)
        for (from, to) in [(UInt64(1), UInt64.max), (0, 3), (137, 260), (500, 900), (501, 600)] {
            var seqs: [UInt64] = []
            try store.forEachState(from: from, to: to) { seq, state in
                #expect(state == folded[Int(seq)], "after \(seq)")
                seqs.append(seq)
                return true
            }
            #expect(seqs == Array((max(from, 1)...to).prefix { $0 <= 500 }), "from \(from) to \(to)")
        }
        var last: UInt64 = 0
        try store.forEachState(from: 10) { seq, _ in last = seq; return seq < 12 }
        #expect(last == 12)
    }

    @Test func forEachStateNamesTheCorruptRecord() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try EventStore(path: dir.path, options: .testing())
            try store.append(contentsOf: (1...100).map {
                Event(stream: "s", type: "e", payload: .string(String(format: "needle-%06d", $0)),
                      writes: [Write("n", old: $0 == 1 ? nil : .int($0 - 1), new: .int($0))])
            })
        }
        let file = dir.file("data.mdb")
        var data = try Data(contentsOf: URL(fileURLWithPath: file))
        let range = try #require(data.range(of: Data("needle-000042".utf8)))
        data[range.lowerBound + 3] ^= 0x01
        try data.write(to: URL(fileURLWithPath: file))

        let store = try EventStore(path: dir.path, options: .testing())
        var reached: UInt64 = 0
        #expect {
            try store.forEachState { seq, _ in reached = seq; return true }
        } throws: { error in
            guard case EventStoreError.corruptRecord(let seq, let reason) = error else { return false }
            return seq == 42 && reason.hasPrefix("checksum mismatch")
        }
        #expect(reached == 41)
    }

    /// Every snapshot is the fold's state exactly, keys in the same order and strings as
    /// written, even where a write's old value was only equal to the state's (its keys in
    /// another order): a snapshot must never be made from the recorded old values, which a
    /// roll back from the next keyframe would (it was tried, and an outside attack found this).
    @Test(arguments: [UInt64(1), 2, 3])
    func everySnapshotIsTheFoldsStateKeysInOrder(seed: UInt64) throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(keyframeRatio: 4))
        var rng = SplitMix64(seed: seed)
        var state: StateValue = ["list": [0, 0, 0]]
        var folded: [StateValue] = [.emptyObject, state]
        var events = [Event(stream: "s", type: "start", writes: [Write("list", old: nil, new: [0, 0, 0])])]
        for n in 1..<1_500 {
            let key = "k\(Int.random(in: 0..<12, using: &rng))"
            let path: StatePath = n % 7 == 0 ? StatePath([.key("list"), .index(Int.random(in: 0..<3, using: &rng))]) : StatePath([.key("o"), .key(key)])
            let old = state[path]
            // Mostly replacements; one in twenty adds or removes a key (never a list element).
            let new: StateValue? = path.components.first == .key("list") ? .int(Int64(n))
                : old != nil && Int.random(in: 0..<20, using: &rng) == 0 ? nil
                : Int.random(in: 0..<3, using: &rng) == 0 ? ["nested": .int(Int64(n)), "at": .string("e\(n)")] : .string("v\(n)")
            // The old value as the writer spelled it: an object's keys reversed, which equals.
            var spelled = old
            if let object = old?.objectValue {
                var reversed = StateObject()
                for (key, value) in object.reversed() { reversed[key] = value }
                spelled = .object(reversed)
            }
            let writes = old == nil && new == nil ? [] : [Write(path, old: spelled, new: new)]
            try state.apply(writes)
            events.append(Event(stream: "s", type: "set", writes: writes))
            folded.append(state)
        }
        try store.append(contentsOf: events)
        #expect(try store.keyframeCount() > 20)
        for seq in folded.indices {
            let snapshot = try store.snapshot(after: UInt64(seq))
            #expect(snapshot == folded[seq] && snapshot.json() == folded[seq].json(), "after \(seq)")
        }
    }

    /// A batch large enough to be pipelined (its records encoded on a second thread) stores its
    /// keyframes at the seqs, and with the bytes, that appending its events one by one gives.
    @Test func aPipelinedBatchStoresTheKeyframesSingleAppendsDo() throws {
        var session = RandomSession(seed: 9)
        let events = (0..<6_000).map { _ in session.next() }
        func keyframes(_ store: EventStore) throws -> [UInt64: [UInt8]] {
            try store.read { txn in
                try txn.withCursor(store.keyframes) { cursor in
                    var found: [UInt64: [UInt8]] = [:]
                    var entry = try cursor.first()
                    while let current = entry {
                        found[try RecordCodec.seq(fromKey: current.key)] = Array(current.value)
                        entry = try cursor.next()
                    }
                    return found
                }
            }
        }
        let pipelined = TemporaryDirectory(), single = TemporaryDirectory()
        let batch = try EventStore(path: pipelined.path, options: .testing(mapSize: 16 << 20))
        try batch.transact { try $0.append(contentsOf: events) }
        let one = try EventStore(path: single.path, options: .testing(mapSize: 16 << 20))
        try one.transact { batch in for event in events { try batch.append(event) } }
        let stored = try keyframes(batch)
        #expect(stored.count > 50)
        #expect(stored == (try keyframes(one)))
        #expect(try batch.verify().isOK)
        // The batch after it goes on from the same counts.
        let more = (0..<2_000).map { _ in session.next() }
        try batch.transact { try $0.append(contentsOf: more) }
        try one.transact { batch in for event in more { try batch.append(event) } }
        #expect(try keyframes(batch) == (try keyframes(one)))
    }

    @Test func staleWriteIsRefusedAndTheBatchAppendsNothing() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.append(Event(stream: "s", type: "set", writes: [Write("a", old: nil, new: 1)]))
        #expect(throws: EventStoreError.staleWrite(path: "a", expected: 5, actual: 1)) {
            try store.append(contentsOf: [
                Event(stream: "s", type: "ok", writes: [Write("b", old: nil, new: 1)]),
                Event(stream: "s", type: "stale", writes: [Write("a", old: 5, new: 6)]),
            ])
        }
        #expect(try store.lastSeq() == 1)
        #expect(try store.currentState == ["a": 1])
        #expect(throws: EventStoreError.self) {
            try store.append(Event(stream: "s", type: "bad", writes: [Write("a.b", old: nil, new: 1)]))
        }
        #expect(try store.lastSeq() == 1)
    }

    @Test func aRefusedEventInsideABatchLeavesTheBatchStateAsItWas() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.transact { batch in
            try batch.append(Event(stream: "s", type: "t", writes: [Write("a", old: nil, new: 1)]))
            // The first write applies, the second is stale: both must be undone.
            #expect(throws: EventStoreError.self) {
                try batch.append(Event(stream: "s", type: "t", writes: [Write("b", old: nil, new: 2), Write("a", old: 9, new: 3)]))
            }
            #expect(throws: EventStoreError.self) {
                try batch.append(Event(stream: "s", type: "t", writes: [Write("c", old: nil, new: 2), Write("a.x[0]", old: nil, new: 3)]))
            }
            // Writes that create objects on the way take them back too: a stale deep write, and
            // a deep write undone because a later write of its event is stale.
            #expect(throws: EventStoreError.staleWrite(path: "m.n.o", expected: 1, actual: nil)) {
                try batch.append(Event(stream: "s", type: "t", writes: [Write("m.n.o", old: 1, new: 2)]))
            }
            #expect(throws: EventStoreError.self) {
                try batch.append(Event(stream: "s", type: "t", writes: [Write("p.q", old: nil, new: 2), Write("a", old: 9, new: 3)]))
            }
            #expect(batch.state == ["a": 1])
            try batch.append(Event(stream: "s", type: "t", writes: [Write("a", old: 1, new: 4)]))
        }
        #expect(try store.currentState == ["a": 4])
        #expect(try store.lastSeq() == 2)
        #expect(try store.verify().isOK)
    }

    @Test func aMillionEventsGrowAMapThatStartedAtOneMebibyte() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(mapSize: 1 << 20))
        #expect(store.environment.mapSize == 1 << 20)
        for _ in 0..<100 {
            // The batch may run again after the map grows, so it derives everything from itself.
            try store.transact { batch in
                for _ in 0..<10_000 {
                    let counter = Int64(batch.lastSeq) + 1
                    try batch.append(Event(stream: "bench", type: "tick", payload: .int(counter),
                                           writes: [Write("count", old: counter == 1 ? nil : .int(counter - 1), new: .int(counter))]))
                }
            }
        }
        #expect(try store.lastSeq() == 1_000_000)
        #expect(store.environment.mapSize > 1 << 20)
        #expect(store.environment.mapBounds.size == store.environment.mapSize)
        #expect(try store.snapshot(after: 765_432) == ["count": 765_432])
        #expect(try store.verify().eventsChecked == 1_000_000)
    }

    /// The checks of every value read need to know where the map is. It is found in
    /// `/proc/self/maps`, which in a process of many mappings (this one's runs to tens of
    /// KiB) the kernel hands over a page at a time: read in one go, the map was missed.
    @Test func theMapIsFoundInAProcessOfManyMappings() throws {
        let table = String(decoding: try #require(MapBounds.readProcessMaps()), as: UTF8.self)
        #expect(table.utf8.count > 4096)
        #expect(table.contains("[stack]")) // the main thread's stack, near the end of the table
        let dirs = (0..<3).map { _ in TemporaryDirectory() }
        let stores = try dirs.map { try EventStore(path: $0.path, options: .testing()) }
        for store in stores {
            let map = store.environment.mapBounds
            #expect(map.size == store.environment.mapSize)
            #expect(stores.filter { $0.environment.mapBounds == map }.count == 1)
        }
    }

    /// A record's size in its page damaged so that it runs far past the file: reading it
    /// throws (LMDB hands the size over unchecked) instead of faulting outside the map.
    @Test func aSizeThatRunsPastTheMapIsDamageNotAFault() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try EventStore(path: dir.path, options: .testing())
            try store.append(contentsOf: (1...20).map { Event(stream: "s", type: "e", payload: .string("event \($0)")) })
        }
        // A leaf node: data size (low 16 bits, high 16 bits), flags, key size 8, then the key,
        // seq 5 big-endian. Set the size's top byte: the record now claims over 2 GiB.
        let file = dir.file("data.mdb")
        var data = try Data(contentsOf: URL(fileURLWithPath: file))
        let node = try #require(data.range(of: Data([0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 5]))).lowerBound - 4
        data[node + 3] = 0x7F
        try data.write(to: URL(fileURLWithPath: file))
        let store = try EventStore(path: dir.path, options: .testing())
        #expect(throws: LMDBError.corrupted) { try store.forEachRecord { _ in true } }
        #expect(throws: LMDBError.corrupted) { try store.record(5) }
        #expect(try store.record(4)?.event.payload == "event 4")
    }

    /// The page holding the newest events, damaged: salvage of the storage has no gap to see
    /// after the last event it copies, yet says the rest stayed behind (the log records how
    /// many events it holds). Read through LMDB, the same log's export stops with an error
    /// where a damaged page loses events, never quietly short.
    @Test func damageThatLosesTheNewestEventsIsReported() throws {
        let dir = TemporaryDirectory()
        var options = EventStore.Options.testing()
        options.keyframePolicy = KeyframePolicy(ratio: .max, minimumEvents: .max)
        do {
            let store = try EventStore(path: dir.path, options: options)
            try store.append(contentsOf: (1...2_000).map { Event(stream: "s", type: "e", payload: .string("event \($0)")) })
            #expect(try store.keyframeCount() == 0)
        }
        // The leaf holding event 2000 (its node: key size 8, then the seq big-endian) says it is another page.
        let file = dir.file("data.mdb")
        let original = try Data(contentsOf: URL(fileURLWithPath: file))
        let page = try #require(original.range(of: Data([8, 0, 0, 0, 0, 0, 0, 0, 0x07, 0xD0]))).lowerBound / 4096
        var data = original
        data[page * 4096] ^= 0x40
        try data.write(to: URL(fileURLWithPath: file))
        let copy = try EventStore(path: dir.file("copy"), options: .testing())
        let report = try EventStore.salvage(damagedLogAt: dir.path, into: copy)
        let copied = try #require(report.copied)
        #expect(copied.lowerBound == 1 && copied.upperBound < 2_000)
        #expect(report.firstLeftBehind == .init(seq: copied.upperBound + 1, reason: "missing: the log records 2000 events, and its page \(page) could not be read"))
        #expect(report.lastSeq == 2_000)

        // The same page's flags damaged: LMDB finds no events where the log records 2,000.
        data = original
        data[page * 4096 + 10] ^= 0xFF
        try data.write(to: URL(fileURLWithPath: file))
        let damaged = try EventStore(path: dir.path, options: .testing())
        var read: UInt64 = 0
        #expect(throws: EventStoreError.self) { try damaged.forEachRecord { read = $0.seq; return true } }
        #expect(read < 2_000)
    }

    @Test func verifyFindsAFlippedByteWithItsSeq() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try EventStore(path: dir.path, options: .testing())
            try store.append(contentsOf: (1...1_000).map { Event(stream: "s", type: "e", payload: .string(String(format: "needle-%06d", $0))) })
            let report = try store.verify()
            #expect(report.isOK && report.eventsChecked == 1_000)
            #expect(report.keyframesChecked == (try store.keyframeCount()))
        }
        let file = dir.file("data.mdb")
        var data = try Data(contentsOf: URL(fileURLWithPath: file))
        let needle = Data("needle-000500".utf8)
        let range = try #require(data.range(of: needle))
        data[range.lowerBound + 3] ^= 0x01
        try data.write(to: URL(fileURLWithPath: file))

        let store = try EventStore(path: dir.path, options: .testing())
        let report = try store.verify()
        #expect(report.problem?.seq == 500)
        #expect(report.problem?.reason.hasPrefix("checksum mismatch") == true)
        #expect(report.eventsChecked == 499)
        #expect(throws: EventStoreError.self) { try store.record(500) }
    }

    @Test func verifyFindsAKeyframeThatDisagreesWithTheWriteSets() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.append(contentsOf: (1...40).map { i in Event(stream: "s", type: "e", writes: [Write("n", old: i == 1 ? nil : .int(Int64(i - 1)), new: .int(Int64(i)))]) })
        let seqs = try store.keyframeSeqs()
        #expect(seqs.count >= 2)
        // Replace the second keyframe with a well-formed one holding the wrong state.
        let target = seqs[1]
        try store.environment.write { txn in
            var writer = BinaryWriter()
            RecordCodec.encodeKeyframe(["n": .int(Int64(target) - 1)], seq: target, into: &writer)
            try RecordCodec.withKey(target) { key in try writer.bytes.withUnsafeBytes { try txn.put(store.keyframes, key: key, value: $0) } }
        }
        let report = try store.verify()
        #expect(report.problem == .init(seq: target, reason: "keyframe differs from the fold of the write sets at n"))
        #expect(try store.firstSnapshotMismatch() == target)
    }

    @Test func verifyFindsAWriteWhoseOldValueDisagreesWithTheFold() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.append(contentsOf: (1...10).map { i in Event(stream: "s", type: "e", writes: [Write("n", old: i == 1 ? nil : .int(Int64(i - 1)), new: .int(Int64(i)))]) })
        // Replace event 6 with a well-formed record whose write expects the wrong old value.
        try store.environment.write { txn in
            let forged = Event(stream: "s", type: "e", writes: [Write("n", old: 99, new: 6)])
            let bytes = EventRecord.storedBytes(of: forged, seq: 6, time: Timestamp(microsecondsSince1970: 0))
            try RecordCodec.withKey(6) { key in try bytes.withUnsafeBytes { try txn.put(store.events, key: key, value: $0) } }
        }
        let report = try store.verify()
        #expect(report.problem == .init(seq: 6, reason: "write to n expects 99 but the state holds 5"))
        #expect(report.eventsChecked == 5)
    }

    /// A key that is not an 8-byte seq, first or last in the log, is damage, reported as the
    /// store's own error, not a decoding error of its internals.
    @Test func aMalformedFirstOrLastKeyIsDamage() throws {
        for (key, which) in [([UInt8](repeating: 0, count: 3), "oldest"), ([UInt8](repeating: 0xFF, count: 9), "newest")] {
            let dir = TemporaryDirectory()
            let store = try EventStore(path: dir.path, options: .testing())
            try store.append(contentsOf: (1...3).map { _ in Event(stream: "s", type: "e") })
            try store.environment.write { txn in try key.withUnsafeBytes { key in try [UInt8(1)].withUnsafeBytes { try txn.put(store.events, key: key, value: $0) } } }
            let expected = EventStoreError.damaged("the \(which) event's key: key of \(key.count) bytes, expected 8")
            #expect(throws: expected) { try store.firstSeq() == nil || store.lastSeq() == 0 }
            // Salvage copies what comes before a bad newest key, and says where it stopped.
            if which == "newest" {
                let copy = try EventStore(path: dir.file("copy"), options: .testing())
                let report = try store.salvage(into: copy)
                #expect(report == SalvageReport(copied: 1...3, firstLeftBehind: .init(seq: 4, reason: "key of 9 bytes, expected 8"), lastSeq: 4))
            }
        }
    }

    /// Ranges past either end are clamped alike by every search: a `to` past the newest event,
    /// a `from` of 0.
    @Test func searchesClampTheirRangesToTheLog() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.append(contentsOf: (1...10).map { i in Event(stream: "s", type: "e", writes: [Write("n", old: i == 1 ? nil : .int(Int64(i - 1)), new: .int(Int64(i)))]) })
        let predicate = try StatePredicate(parsing: "n >= 7")
        for linear in [false, true] {
            #expect(try store.firstEvent(where: predicate, to: 1_000, linear: linear).firstBad == 7)
            #expect(try store.firstEvent(where: try StatePredicate(parsing: "n > 10"), to: 1_000, linear: linear).firstBad == nil)
        }
        let other = try EventStore(path: dir.file("other"), options: .testing())
        try other.append(contentsOf: (1...3).map { i in Event(stream: "s", type: "e", writes: [Write("n", old: i == 1 ? nil : .int(Int64(i - 1)), new: .int(Int64(i)))]) })
        #expect(try store.firstDifference(from: other, from: 0)?.seq == 4)
        #expect(try store.firstDifference(from: other, from: 0, to: 3) == nil)
    }

    /// Only an applied event writes: a skipped or cancelled one with writes is refused, alone
    /// or in a batch large enough for the second thread, and the state stays as it was.
    @Test func eventsThatAreNotAppliedCannotWrite() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        for outcome in [Outcome.skipped(reason: "guard"), .cancelled] {
            let bad = Event(stream: "s", type: "e", outcome: outcome, writes: [Write("n", old: nil, new: 1)])
            let expected = EventStoreError.invalidWrite(StateError(path: "n", reason: "a \(outcome.name) event writes nothing"))
            #expect(throws: expected) { try store.append(bad) }
            let batch = Array(repeating: Event(stream: "s", type: "e", outcome: outcome), count: EncodingPipeline.minimumEvents) + [bad]
            #expect(throws: expected) { try store.append(contentsOf: batch) }
        }
        #expect(try store.lastSeq() == 0)
        #expect(try store.currentState == .emptyObject)
    }

    @Test func verifyFindsAMissingKeyframe() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.append(contentsOf: (1...40).map { _ in Event(stream: "s", type: "e", payload: "some payload to count") })
        let target = try #require(try store.keyframeSeqs().first)
        try store.environment.write { txn in _ = try RecordCodec.withKey(target) { try txn.delete(store.keyframes, key: $0) } }
        #expect(try store.verify().problem == .init(seq: target, reason: "keyframe missing"))
        #expect(try store.snapshot(after: 40) == .emptyObject)
    }

    @Test func keyframesFollowThePolicyAndStayAFractionOfTheLog() throws {
        let dir = TemporaryDirectory()
        var options = EventStore.Options.testing()
        options.keyframePolicy = KeyframePolicy(ratio: 8, minimumEvents: 1)
        let store = try EventStore(path: dir.path, options: options)
        var recordBytes = 0
        var keyframeBytes = 0
        // A state of 200 entries overwritten in turn: a keyframe every ~8 states' worth of records.
        try store.transact { batch in
            for i in 0..<3_000 {
                let path = StatePath([.key("items"), .key("k\(i % 200)")])
                let record = try batch.append(Event(stream: "s", type: "set", writes: [Write(path, old: batch.state[path], new: .string("value \(i)"))]))
                recordBytes += EventRecord.storedBytes(of: record.event, seq: record.seq, time: record.time).count
            }
        }
        try store.environment.read { txn in
            try txn.withCursor(store.keyframes) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    keyframeBytes += current.value.count
                    entry = try cursor.next()
                }
            }
        }
        #expect(try store.keyframeSeqs().count >= 3)
        #expect(keyframeBytes * 8 <= recordBytes)
        #expect(try store.verify().isOK)
    }

    @Test func aNewerFormatVersionIsRefusedWithAClearMessage() throws {
        let dir = TemporaryDirectory()
        _ = try EventStore(path: dir.path, options: .testing())
        do {
            let environment = try Environment.open(path: dir.path)
            try environment.write { txn in
                let meta = try #require(try txn.openDatabase(named: "meta"))
                try txn.put(meta, key: "format", value: 99)
                try txn.put(meta, key: "checksum", value: EventStore.metaChecksum([99, 8, 4]))
            }
        }
        for readOnly in [false, true] {
            var options = EventStore.Options.testing()
            options.readOnly = readOnly
            #expect(throws: EventStoreError.newerFormat(found: 99, supported: EventStore.formatVersion)) { try EventStore(path: dir.path, options: options) }
        }
        #expect(EventStoreError.newerFormat(found: 99, supported: 2).description
            == "the database has format version 99, newer than the 2 this build reads; upgrade eventlog")
    }

    @Test func readOnlyOpenOfAMissingDatabaseCreatesNothing() throws {
        let dir = TemporaryDirectory()
        var options = EventStore.Options.testing()
        options.readOnly = true
        let path = dir.file("absent.lmdb")
        #expect(throws: EventStoreError.notFound(path: path)) { try EventStore(path: path, options: options) }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// A writer killed between LMDB creating `data.mdb` and writing its meta pages leaves the
    /// file empty beside the creation marker: no log yet, which the next writer makes. The same
    /// empty file without the marker is a log whose file was emptied, and stays damage.
    @Test func anEmptyDataFileIsAnUnfinishedCreationOnlyBesideItsMarker() throws {
        let dir = TemporaryDirectory()
        var readOnly = EventStore.Options.testing()
        readOnly.readOnly = true
        for marked in [true, false] {
            let path = dir.file(marked ? "killed-creating.lmdb" : "emptied.lmdb")
            #expect(mkdir(path, 0o755) == 0)
            #expect(FileManager.default.createFile(atPath: path + "/data.mdb", contents: nil))
            if marked { #expect(FileManager.default.createFile(atPath: path + "/data.mdb.creating", contents: nil)) }
            guard marked else {
                for options in [readOnly, .testing()] {
                    #expect(throws: EventStoreError.damaged("\(path)/data.mdb is empty (0 bytes): the log it held is gone")) {
                        try EventStore(path: path, options: options)
                    }
                }
                continue
            }
            #expect(throws: EventStoreError.notFound(path: path)) { try EventStore(path: path, options: readOnly) }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb")).isEmpty, "a reader wrote")
            try EventStore(path: path, options: .testing()).append(Event(stream: "s", type: "t"))
            #expect(!FileManager.default.fileExists(atPath: path + "/data.mdb.creating"))
            #expect(try EventStore(path: path, options: readOnly).lastSeq() == 1)
        }
    }

    @Test func aNewLogLeavesNoCreationMarker() throws {
        let dir = TemporaryDirectory()
        try EventStore(path: dir.path, options: .testing()).append(Event(stream: "s", type: "t"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["data.mdb", "lock.mdb"])
    }

    @Test func aPlainLMDBEnvironmentIsNotAnEventLog() throws {
        let dir = TemporaryDirectory()
        do {
            let environment = try Environment.open(path: dir.path)
            try environment.write { txn in
                let other = try #require(try txn.openDatabase(named: "other", create: true))
                try txn.put(other, key: "k", value: 1)
            }
        }
        var options = EventStore.Options.testing()
        options.readOnly = true
        #expect(throws: EventStoreError.notAnEventLog(path: dir.path)) { try EventStore(path: dir.path, options: options) }
    }

    @Test func readOnlyStoresRefuseAppends() throws {
        let dir = TemporaryDirectory()
        _ = try EventStore(path: dir.path, options: .testing())
        var options = EventStore.Options.testing()
        options.readOnly = true
        let store = try EventStore(path: dir.path, options: options)
        #expect(throws: EventStoreError.readOnly) { try store.append(Event(stream: "s", type: "t")) }
    }

    @Test func aSecondHandleSeesAppendsMadeThroughTheFirst() throws {
        let dir = TemporaryDirectory()
        let a = try EventStore(path: dir.path, options: .testing())
        let b = try EventStore(path: dir.path, options: .testing())
        // LMDB forbids opening one environment twice in a process: the stores share it.
        #expect(a.environment === b.environment)
        try a.append(Event(stream: "s", type: "t", writes: [Write("x", old: nil, new: 1)]))
        // b's cached state is stale; its write must be checked against the newest state.
        #expect(throws: EventStoreError.self) { try b.append(Event(stream: "s", type: "t", writes: [Write("x", old: nil, new: 2)])) }
        try b.append(Event(stream: "s", type: "t", writes: [Write("x", old: 1, new: 2)]))
        #expect(try a.currentState == ["x": 2])
        #expect(try a.lastSeq() == 2)
    }

    @Test func concurrentWritersInOneProcessLoseNothing() async throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for i in 0..<250 {
                        let path = StatePath([.key("writer\(writer)")])
                        try! store.transact { batch in
                            try batch.append(Event(stream: "s", type: "t", writes: [Write(path, old: i == 0 ? nil : .int(Int64(i - 1)), new: .int(Int64(i)))]))
                        }
                    }
                }
            }
        }
        #expect(try store.lastSeq() == 1_000)
        #expect(try store.currentState == ["writer0": 249, "writer1": 249, "writer2": 249, "writer3": 249])
        #expect(try store.verify().isOK)
    }
}

@Suite struct EnvironmentTests {
    @Test func writeGrowsTheMapAndRetries() throws {
        let dir = TemporaryDirectory()
        var options = Environment.Options()
        options.mapSize = 64 << 10
        let environment = try Environment.open(path: dir.path, options: options)
        let db = try environment.write { try #require(try $0.openDatabase(named: "d", create: true)) }
        let value = [UInt8](repeating: 7, count: 4096)
        var attempts = 0
        try environment.write { txn in
            attempts += 1
            try txn.withCursor(db) { cursor in
                for i in 0..<200 {
                    try RecordCodec.withKey(UInt64(i)) { key in try value.withUnsafeBytes { try cursor.append(key: key, value: $0) } }
                }
            }
        }
        #expect(attempts > 1)
        #expect(try environment.read { try $0.count(db) } == 200)
    }

    @Test func errorsCarryTheCodeAndLMDBsText() throws {
        let dir = TemporaryDirectory()
        let environment = try Environment.open(path: dir.path)
        let db = try environment.write { try #require(try $0.openDatabase(named: "d", create: true)) }
        do {
            try environment.write { txn in
                try txn.withCursor(db) { cursor in
                    try RecordCodec.withKey(5) { try cursor.append(key: $0, value: $0) }
                    try RecordCodec.withKey(4) { try cursor.append(key: $0, value: $0) }
                }
            }
            Issue.record("out-of-order append succeeded")
        } catch LMDBError.keyExists {
            #expect(LMDBError.keyExists.message.contains("MDB_KEYEXIST"))
        }
        #expect(try environment.read { try $0.count(db) } == 0)
        #expect(LMDBError.mapFull.description == "\(LMDBError.mapFull.message) (LMDB code \(MDB_MAP_FULL))")
        // LMDB turns a short write (a full disk) into EIO, so that code says what it may mean.
        #expect(LMDBError(code: EIO).description == "Input/output error (LMDB code 5: a write failed or came up short; is the disk full?)")
    }

    @Test func aCursorAppendsInOrderAndRefusesAKeyThatDoesNotSortLast() throws {
        let dir = TemporaryDirectory()
        let environment = try Environment.open(path: dir.path)
        let db = try environment.write { try #require(try $0.openDatabase(named: "d", create: true)) }
        try environment.write { txn in
            try txn.withCursor(db) { cursor in
                for seq: UInt64 in 1...1_000 { try RecordCodec.withKey(seq) { try cursor.append(key: $0, value: $0) } }
                #expect(throws: LMDBError.keyExists) {
                    try RecordCodec.withKey(1_000) { try cursor.append(key: $0, value: $0) }
                }
            }
        }
        let (count, last) = try environment.read { txn in
            (try txn.count(db), try txn.withCursor(db) { try $0.last().map { try RecordCodec.seq(fromKey: $0.key) } })
        }
        #expect(count == 1_000)
        #expect(last == 1_000)
    }

    @Test func cursorsWalkBothWaysAndSeek() throws {
        let dir = TemporaryDirectory()
        let environment = try Environment.open(path: dir.path)
        let db = try environment.write { try #require(try $0.openDatabase(named: "d", create: true)) }
        try environment.write { txn in
            for seq: UInt64 in [10, 20, 30] { try RecordCodec.withKey(seq) { try txn.put(db, key: $0, value: $0) } }
        }
        let seqs = try environment.read { txn in
            try txn.withCursor(db) { cursor -> [UInt64] in
                var out: [UInt64] = []
                func seq(_ entry: Entry?) throws -> UInt64 { try RecordCodec.seq(fromKey: entry!.key) }
                out.append(try seq(try cursor.first()))
                out.append(try seq(try cursor.next()))
                out.append(try seq(try cursor.last()))
                out.append(try seq(try cursor.previous()))
                out.append(try seq(try RecordCodec.withKey(11) { try cursor.seek(atOrAfter: $0) }))
                #expect(try RecordCodec.withKey(31) { try cursor.seek(atOrAfter: $0) } == nil)
                return out
            }
        }
        #expect(seqs == [10, 20, 30, 20, 20])
    }

    @Test func mdbStatReadsTheDatabase() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.append(contentsOf: (1...50).map { _ in Event(stream: "s", type: "t") })
        let tool = ["/usr/bin/mdb_stat", "/usr/local/bin/mdb_stat"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let path = try #require(tool, "mdb_stat from Debian's lmdb-utils is not installed")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-s", "events", dir.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(output.contains("Entries: 50"))
    }
}

@Suite struct GroupCommitTests {
    @Test func concurrentProducersShareCommitsAndLoseNothing() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        let producers = 8
        let perProducer = 100
        let done = DispatchGroup()
        let failures = Atomic<Int>(0)
        for producer in 0..<producers {
            done.enter()
            Thread {
                let path = StatePath([.key("producer\(producer)")])
                for i in 0..<perProducer {
                    let event = Event(stream: "s", type: "tick", writes: [Write(path, old: i == 0 ? nil : .int(Int64(i - 1)), new: .int(Int64(i)))])
                    if (try? store.appendGrouped(event)) == nil { failures.add(1, ordering: .relaxed) }
                }
                done.leave()
            }.start()
        }
        done.wait()
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(try store.lastSeq() == UInt64(producers * perProducer))
        let state = try store.currentState
        for producer in 0..<producers { #expect(state[StatePath([.key("producer\(producer)")])] == .int(Int64(perProducer - 1))) }
        #expect(try store.verify().isOK)
    }

    @Test func aRefusedEventFailsAloneInItsGroup() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        try store.appendGrouped(Event(stream: "s", type: "t", writes: [Write("a", old: nil, new: 1)]))
        #expect(throws: EventStoreError.staleWrite(path: "a", expected: 7, actual: 1)) {
            try store.appendGrouped(Event(stream: "s", type: "t", writes: [Write("a", old: 7, new: 8)]))
        }
        try store.appendGrouped(Event(stream: "s", type: "t", writes: [Write("a", old: 1, new: 2)]))
        #expect(try store.currentState == ["a": 2])
        #expect(try store.lastSeq() == 2)
    }
}
