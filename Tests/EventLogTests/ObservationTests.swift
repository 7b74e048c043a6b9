import EventLog
import EventLogTesting
import Testing

/// `observe`: the value at a path from write sets alone, distinct values only.
struct ObservationTests {
    @Test func anObservedValueFollowsWritesAtAboveAndUnderItsPath() {
        var observed = ObservedValue("a.b", in: ["a": ["b": 1]])
        let steps: [(Write, changed: Bool, value: StateValue?)] = [
            (Write("a.c", old: nil, new: 2), false, 1),
            (Write("a.b", old: 1, new: 2), true, 2),
            (Write("a", old: ["b": 2], new: ["b": ["x": 1]]), true, ["x": 1]),
            (Write("a.b.y", old: nil, new: true), true, ["x": 1, "y": true]),
            (Write("a.b.y", old: true, new: true), false, ["x": 1, "y": true]),
            (Write("a", old: ["b": ["x": 1, "y": true]], new: nil), true, nil),
        ]
        for (write, changed, value) in steps {
            let didChange = observed.apply([write])
            #expect(didChange == changed, "\(write)")
            #expect(observed.value == value, "\(write)")
        }
    }

    @Test func observingAPredicateDeliversWhetherItHoldsEachTimeThatChanges() async throws {
        let temporary = try TemporaryEventStore()
        let store = temporary.store
        try store.append(Event(stream: "t", type: "set", writes: [Write("v", old: nil, new: 1)]))
        let observation = try store.observe(try StatePredicate(parsing: "v >= 3"))
        let collector = Task {
            var seen: [String] = []
            for try await (seq, holds) in observation {
                seen.append("\(seq):\(holds)")
                if seen.count == 3 { break }
            }
            return seen
        }
        // 1 → 2 (still false), 3 (true), 4 (still true), 0 (false).
        for (old, new) in [(1, 2), (2, 3), (3, 4), (4, 0)] as [(Int64, Int64)] {
            try store.append(Event(stream: "t", type: "set", writes: [Write("v", old: .int(old), new: .int(new))]))
        }
        #expect(try await collector.value == ["1:false", "3:true", "5:false"])
    }

    @Test func observeDeliversTheStartThenEachChange() async throws {
        let temporary = try TemporaryEventStore()
        let store = temporary.store
        try store.append(Event(stream: "t", type: "set", writes: [Write("v", old: nil, new: 1)]))
        let observation = try store.observe("v")
        let collector = Task {
            var seen: [String] = []
            for try await (seq, value) in observation {
                seen.append("\(seq):\(value?.json() ?? "-")")
                if seen.count == 3 { break }
            }
            return seen
        }
        for (old, new) in [(1, 1), (1, 2), (2, 2)] as [(Int64, Int64)] {
            try store.append(Event(stream: "t", type: "set", writes: [Write("v", old: .int(old), new: .int(new))]))
        }
        try store.append(Event(stream: "t", type: "unset", writes: [Write("v", old: 2, new: nil)]))
        #expect(try await collector.value == ["1:1", "3:2", "5:-"])
    }
}
