import Foundation
@testable import EventLog

/// A clock that starts at a fixed moment and ticks one millisecond per reading.
func steppingClock(start: Int64 = 1_764_468_000_000_000) -> EventClock {
    ManualClock(start: Timestamp(microsecondsSince1970: start), stepMicroseconds: 1_000).clock
}

extension EventStore.Options {
    static func testing(keyframeRatio: UInt32 = 8, mapSize: Int = 1 << 20) -> Self {
        var options = Self()
        options.keyframePolicy = KeyframePolicy(ratio: keyframeRatio, minimumEvents: 4)
        options.initialMapSize = mapSize
        options.clock = steppingClock()
        return options
    }
}

/// Random events whose write sets are consistent with the state they start from: counters
/// incremented, keys added and removed, lists replaced.
struct RandomSession {
    var rng: SplitMix64
    var state = StateValue.emptyObject

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    mutating func next() -> Event {
        let area = ["messenger", "navigation", "objects"].randomElement(using: &rng)!
        let key = "k\(Int.random(in: 0..<20, using: &rng))"
        let path = StatePath([.key(area), .key(key)])
        let old = state[path]
        let new: StateValue?
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: new = nil
        case 1: new = .string("v\(Int.random(in: 0..<1000, using: &rng))")
        case 2: new = .int(Int64.random(in: -5...5, using: &rng))
        case 3: new = ["a": .double(Double.random(in: 0..<1, using: &rng)), "b": [1, 2, .null]]
        default: new = .bool(Bool.random(using: &rng))
        }
        let writes = old == nil && new == nil ? [] : [Write(path, old: old, new: new)]
        try! state.apply(writes)
        return Event(stream: area, type: "set", origin: "test", payload: ["key": .string(key)], writes: writes)
    }
}

extension EventStore {
    /// Appends `count` random events in one batch and returns the state after each seq
    /// (index 0: the empty state before the first).
    func appendRandomSession(seed: UInt64, count: Int) throws -> [StateValue] {
        var session = RandomSession(seed: seed)
        var folded: [StateValue] = [.emptyObject]
        try transact { batch in
            for _ in 0..<count {
                try batch.append(session.next())
                folded.append(session.state)
            }
        }
        return folded
    }

    /// The seqs of the stored keyframes, in order.
    func keyframeSeqs() throws -> [UInt64] {
        try environment.read { txn in
            try txn.withCursor(keyframes) { cursor in
                var seqs: [UInt64] = []
                var entry = try cursor.first()
                while let current = entry {
                    seqs.append(try RecordCodec.seq(fromKey: current.key))
                    entry = try cursor.next()
                }
                return seqs
            }
        }
    }
}
