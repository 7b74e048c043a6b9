import Foundation
@testable import EventLog
import EventLogTesting
import Testing

/// Whatever the log accepts comes back the same through its JSON form: export → import →
/// export is byte-identical, and every snapshot and query answers the same on both copies.
@Suite struct RoundTripTests {
    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func exportImportExportIsByteIdentical(seed: UInt64) throws {
        var generator = HostileEvents(seed: seed)
        let directory = TemporaryDirectory()
        let original = try EventStore(path: directory.file("a.lmdb"), options: .testing())
        for _ in 0..<60 {
            let (event, time) = generator.next()
            try original.append(contentsOf: [event], at: time)
        }
        let exported = try exportLines(original)
        let copy = try EventStore(path: directory.file("b.lmdb"), options: .testing())
        try copy.transact { batch in
            for line in exported {
                let imported = try ImportedEvent(json: try StateValue(jsonUTF8: Array(line.utf8)))
                try batch.append(imported.event, time: imported.time)
            }
        }
        let reexported = try exportLines(copy)
        #expect(reexported == exported)
        let last = try original.lastSeq()
        for seq in 0...last {
            #expect(try copy.snapshot(after: seq) == original.snapshot(after: seq), "state after \(seq)")
        }
        for path in generator.writtenPaths {
            for text in ["exists(\(path))", "\(path) == null", "!(\(path) != \(generator.literal(for: path)))"] {
                let predicate = try StatePredicate(parsing: text)
                #expect(try copy.firstEvent(where: predicate, linear: true) == original.firstEvent(where: predicate, linear: true), "\(text)")
            }
        }
    }

    @Test func whatJSONCannotCarryIsRefusedNotChanged() throws {
        #expect(throws: JSONSyntaxError.self) { try StateValue(json: "1e400") }
        #expect(throws: JSONSyntaxError.self) { try StateValue(json: "-1e309") }
        #expect(throws: JSONSyntaxError.self) { try StateValue(jsonUTF8: [0x22, 0xC3, 0x28, 0x22]) }
        let directory = TemporaryDirectory()
        let store = try EventStore(path: directory.file("log.lmdb"), options: .testing())
        for bad in [Double.infinity, -.infinity, .nan] {
            #expect(throws: EventStoreError.limitExceeded("the event holds an infinite or NaN number, which JSON cannot carry")) {
                try store.append(Event(stream: "s", type: "t", writes: [Write("x", old: nil, new: .double(bad))]))
            }
        }
        #expect(throws: EventStoreError.self) {
            try store.append(Event(stream: "s", type: "t", payload: ["v": .array([.double(.nan)])]))
        }
        #expect(try store.lastSeq() == 0)
    }

    @Test func aQuotedKeyReadsBackWithItsEscapes() throws {
        for key in ["a\nb", "tab\there", "quote\"d", "back\\slash", "\u{1B}[31m", "x=1", "a(b)", "", "é", "\u{10FFFF}"] {
            let path = StatePath([.key("objects"), .key(key), .index(3)])
            #expect(try StatePath(parsing: path.description) == path, "\(path)")
            let predicate = try StatePredicate(parsing: "\(path) == \(StateValue.string(key).json())")
            var state = StateValue.emptyObject
            try state.set(.array([0, 1, 2, .string(key)]), at: StatePath(Array(path.components.dropLast())))
            #expect(predicate.evaluate(state), "\(predicate)")
        }
    }

    @Test func nestingIsBoundedWhereEventsComeIn() throws {
        let directory = TemporaryDirectory()
        let store = try EventStore(path: directory.file("log.lmdb"), options: .testing())
        func nested(_ levels: Int) -> StateValue { (0..<levels).reduce(StateValue.int(1)) { value, _ in .array([value]) } }
        let deepPath = StatePath((0..<StateLimits.maxDepth - 3).map { .key("k\($0)") })
        // At the limit: the path's components plus the value's levels make exactly the maximum.
        try store.append(Event(stream: "s", type: "t", writes: [Write(deepPath, old: nil, new: nested(3))]))
        try store.append(Event(stream: "s", type: "t", payload: nested(StateLimits.maxDepth)))
        for refused in [
            Event(stream: "s", type: "t", writes: [Write("x", old: nil, new: nested(StateLimits.maxDepth))]),
            Event(stream: "s", type: "t", writes: [Write(deepPath.appending("more"), old: nil, new: nested(3))]),
            Event(stream: "s", type: "t", writes: [Write(StatePath((0..<50_000).map { .key("k\($0 % 7)") }), old: nil, new: 1)]),
            Event(stream: "s", type: "t", payload: nested(StateLimits.maxDepth + 1)),
        ] {
            #expect(throws: EventStoreError.self) { try store.append(refused) }
        }
        // What was accepted folds, verifies and exports as JSON that parses back.
        #expect(try store.verify().isOK)
        for line in try exportLines(store) { _ = try ImportedEvent(json: try StateValue(json: line)) }
        #expect(try store.lastSeq() == 2)
    }

    @Test func aRecordLargerThanTheLimitIsRefused() throws {
        let directory = TemporaryDirectory()
        let store = try EventStore(path: directory.file("log.lmdb"), options: .testing(mapSize: 64 << 20))
        let big = StateValue.string(String(repeating: "x", count: StateLimits.maxRecordBytes))
        #expect(throws: EventStoreError.self) { try store.append(Event(stream: "s", type: "t", payload: big)) }
        #expect(try store.lastSeq() == 0)
    }

    private func exportLines(_ store: EventStore) throws -> [String] {
        var lines: [String] = []
        try store.forEachRecord { lines.append($0.jsonValue.json()); return true }
        return lines
    }
}

extension EventStore {
    /// Appends events one transaction each, at the given time.
    fileprivate func append(contentsOf events: [Event], at time: Timestamp) throws {
        try transact { batch in for event in events { try batch.append(event, time: time) } }
    }
}

/// Random events with values at the edges of what the log accepts: control characters and
/// every Unicode plane in strings, keys and names; integers and doubles at their limits;
/// nesting up to the limit; times at both ends of RFC 3339.
struct HostileEvents {
    var rng: SplitMix64
    var state = StateValue.emptyObject
    /// The paths written so far, with the last value written there.
    private(set) var writtenPaths: [StatePath] = []
    private var count = 0

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    /// A literal a predicate can compare the path's value with (a scalar's JSON, else null).
    func literal(for path: StatePath) -> String {
        switch state[path] {
        case .string(let s)?: StateValue.string(s).json()
        case .int(let i)?: String(i)
        case .bool(let b)?: String(b)
        default: "null"
        }
    }

    mutating func next() -> (Event, Timestamp) {
        count += 1
        let outcome: Outcome = switch Int.random(in: 0..<3, using: &rng) {
        case 0: .skipped(reason: string(maxLength: 30))
        case 1: .cancelled
        default: .applied
        }
        // Only an applied event writes.
        var writes: [Write] = []
        if outcome == .applied {
            let path = StatePath([.key("e\(count)"), .key(string(maxLength: 6))])
            let depthLeft = StateLimits.maxDepth - path.components.count
            writes.append(Write(path, old: nil, new: value(depthLeft: Int.random(in: 0..<8, using: &rng) == 0 ? depthLeft : 4)))
            if let earlier = writtenPaths.randomElement(using: &rng), Bool.random(using: &rng) {
                // Overwrite or remove something written before, as the state holds it.
                let old = stateAfter(writes)[earlier]
                writes.append(Write(earlier, old: old, new: Bool.random(using: &rng) ? nil : value(depthLeft: 3)))
            }
            try! state.apply(writes)
            for write in writes where !writtenPaths.contains(write.path) { writtenPaths.append(write.path) }
        }
        var event = Event(stream: string(minLength: 1, maxLength: 8), type: string(minLength: 1, maxLength: 8),
                          origin: origin(), outcome: outcome, payload: value(depthLeft: 6), writes: writes)
        if Bool.random(using: &rng) { event.cause = Cause(id: string(maxLength: 10), step: Int.random(in: 0...1_000, using: &rng), source: string(maxLength: 20)) }
        let range = Timestamp.rfc3339Range
        let time = [range.lowerBound, range.upperBound, Int64.random(in: range, using: &rng)].randomElement(using: &rng)!
        return (event, Timestamp(microsecondsSince1970: time))
    }

    /// One of format 1's coded origins, or a name of any Unicode (written out, format 2).
    private mutating func origin() -> Origin {
        let coded: [Origin] = ["tap", "url", "test", "capture", .system]
        return Bool.random(using: &rng) ? coded.randomElement(using: &rng)! : Origin(rawValue: "o" + string(maxLength: 10).filter { !$0.isASCII || $0.isLetter }) ?? "other"
    }

    private func stateAfter(_ writes: [Write]) -> StateValue {
        var next = state
        try! next.apply(writes)
        return next
    }

    mutating func value(depthLeft: Int) -> StateValue {
        let kinds = depthLeft > 0 ? 8 : 6
        switch Int.random(in: 0..<kinds, using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int([Int64.min, Int64.max, 0, -1, Int64.random(in: .min ... .max, using: &rng)].randomElement(using: &rng)!)
        case 3: return .double(double())
        case 4, 5: return .string(string(maxLength: 12))
        case 6:
            // Sometimes one deep chain, to reach the nesting limit exactly.
            let width = depthLeft > 8 ? 1 : Int.random(in: 0...3, using: &rng)
            return .array((0..<width).map { _ in value(depthLeft: depthLeft - 1) })
        default:
            var object = StateObject()
            for _ in 0..<(depthLeft > 8 ? 1 : Int.random(in: 0...3, using: &rng)) {
                object[string(maxLength: 6)] = value(depthLeft: depthLeft - 1)
            }
            return .object(object)
        }
    }

    private mutating func double() -> Double {
        let edges: [Double] = [0, -0.0, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude,
                               .leastNormalMagnitude, 1e308, 0.1, 1.0 / 3]
        if Bool.random(using: &rng) { return edges.randomElement(using: &rng)! }
        while true {
            let candidate = Double(bitPattern: rng.next())
            if candidate.isFinite { return candidate }
        }
    }

    /// A string of scalars drawn from control characters, JSON's and paths' punctuation, and
    /// every plane of Unicode.
    mutating func string(minLength: Int = 0, maxLength: Int) -> String {
        var text = ""
        for _ in 0..<Int.random(in: minLength...maxLength, using: &rng) {
            let value: UInt32
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: value = UInt32.random(in: 0..<0x20, using: &rng)
            case 1: value = Array("\"\\.[]()!=<>&| \u{7F}").randomElement(using: &rng)!.unicodeScalars.first!.value
            case 2: value = UInt32.random(in: 0x20..<0x7F, using: &rng)
            case 3: value = UInt32.random(in: 0x80..<0xD800, using: &rng)
            case 4: value = UInt32.random(in: 0xE000...0xFFFF, using: &rng)
            default: value = UInt32.random(in: 0x10000...0x10FFFF, using: &rng)
            }
            text.unicodeScalars.append(Unicode.Scalar(value)!)
        }
        return text
    }
}

/// Keyframes are a cache: a damaged one is reported by `verify` and passed over by reads.
@Suite struct DamagedKeyframeTests {
    @Test func aDamagedKeyframeIsSkippedAndReported() throws {
        let directory = TemporaryDirectory()
        let store = try EventStore(path: directory.file("log.lmdb"), options: .testing())
        let folded = try store.appendRandomSession(seed: 7, count: 300)
        let last = try #require(try store.keyframeSeqs().last)
        try store.environment.write { txn in
            try RecordCodec.withKey(last) { key in
                var bytes = Array(try #require(try txn.get(store.keyframes, key: key)))
                bytes[bytes.count / 2] ^= 0x01
                try bytes.withUnsafeBytes { try txn.put(store.keyframes, key: key, value: $0) }
            }
        }
        // A new store (as a new process) rebuilds its state from the keyframe before.
        let reopened = try EventStore(path: directory.file("log.lmdb"), options: .testing())
        for seq in [last - 1, last, 300] {
            #expect(try reopened.snapshot(after: seq) == folded[Int(seq)])
        }
        let report = try reopened.verify()
        #expect(report.problem?.seq == last)
        #expect(report.problem?.reason.hasPrefix("keyframe: checksum mismatch") == true)
        try reopened.append(Event(stream: "s", type: "t"))
        #expect(try reopened.lastSeq() == 301)
    }
}
