import EventLog
import EventLogTesting
import Foundation
import Testing

/// `EventStore.enqueue`: appends that return before they commit, committed together in the
/// order queued, each refused alone, none lost once acknowledged.
@Suite struct QueuedAppendTests {
    func tick(_ key: String, _ old: Int?, _ new: Int) -> Event {
        Event(stream: "s", type: "tick", writes: [Write(StatePath([.key(key)]), old: old.map { .int(Int64($0)) }, new: .int(Int64(new)))])
    }

    @Test func eventsQueuedOneAtATimeCommitInTheOrderQueued() throws {
        let log = try TemporaryEventStore()
        let queued = (0..<5_000).map { i in log.store.enqueue(tick("a", i == 0 ? nil : i - 1, i)) }
        log.store.flush()
        for (index, append) in queued.enumerated() {
            #expect(try append.outcome?.get().seq == UInt64(index + 1))
        }
        #expect(try queued.last?.committed().seq == 5_000)
        #expect(try log.store.currentState["a"] == 4_999)
        #expect(try log.store.verify().isOK)
    }

    @Test func anEventMadeFromTheStateSeesEveryEventQueuedBeforeIt() throws {
        let log = try TemporaryEventStore()
        for _ in 0..<3_000 {
            log.store.enqueue { state in
                let old = state["counter"]
                return Event(stream: "s", type: "increment", writes: [Write("counter", old: old, new: .int((old?.intValue ?? 0) + 1))])
            }
        }
        log.store.flush()
        #expect(try log.store.lastSeq() == 3_000)
        #expect(try log.store.currentState["counter"] == 3_000)
    }

    @Test func aRefusedEventFailsAloneAndTheOthersOfItsBatchCommit() throws {
        struct Refused: Error {}
        let log = try TemporaryEventStore()
        let first = log.store.enqueue(tick("a", nil, 1))
        let stale = log.store.enqueue(tick("a", nil, 2))
        let thrown = log.store.enqueue(making: { _ in throw Refused() })
        let last = log.store.enqueue(tick("b", nil, 1))
        #expect(try last.committed().seq == 2)
        #expect(try first.committed().seq == 1)
        #expect(throws: EventStoreError.self) { try stale.committed() }
        #expect(throws: Refused.self) { try thrown.committed() }
        #expect(try log.store.currentState == ["a": 1, "b": 1])
    }

    @Test func aReadOnlyStoreRefusesEveryQueuedEvent() throws {
        let log = try TemporaryEventStore()
        try log.store.append(tick("a", nil, 0))
        var options = EventStore.Options()
        options.readOnly = true
        let reader = try EventStore(path: log.path, options: options)
        let queued = reader.enqueue(tick("a", 0, 1))
        #expect(throws: EventStoreError.readOnly) { try queued.committed() }
        #expect(try log.store.lastSeq() == 1)
    }

    /// A store let go with events still queued is held by its writer until they commit.
    @Test func aStoreLetGoWithEventsQueuedCommitsThemFirst() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("db")
        var last: QueuedAppend?
        do {
            let store = try EventStore(path: path)
            for i in 0..<2_000 { last = store.enqueue(tick("a", i == 0 ? nil : i - 1, i)) }
        }
        #expect(try last?.committed().seq == 2_000)
        #expect(try EventStore(path: path).lastSeq() == 2_000)
    }

    @Test func threadsQueuingAtOnceKeepEachOnesOrder() throws {
        let log = try TemporaryEventStore()
        let store = log.store
        let done = DispatchGroup()
        for thread in 0..<4 {
            done.enter()
            Thread {
                for i in 0..<1_000 { store.enqueue(tick("t\(thread)", i == 0 ? nil : i - 1, i)) }
                done.leave()
            }.start()
        }
        done.wait()
        store.flush()
        #expect(try store.lastSeq() == 4_000)
        #expect(try store.currentState == ["t0": 999, "t1": 999, "t2": 999, "t3": 999])
        #expect(try store.verify().isOK)
    }

    /// Rules that count `add` events and refuse any other type.
    enum Counter: EventRules {
        static let stream = "counter"
        static func writes(for event: Event, in state: StateValue, at time: Timestamp) -> Result<[Write], RuleError> {
            guard event.type == "add" else { return .failure(RuleError("only add")) }
            let old = state["counter"]?["total"]
            return .success([Write("counter.total", old: old, new: .int((old?.intValue ?? 0) + 1)),
                             Write("counter.at", old: state["counter"]?["at"], new: .string(time.description))])
        }
    }

    @Test func rulesQueueAnEventWithTheWritesTheyGiveAtItsCommit() throws {
        let log = try TemporaryEventStore()
        let added = (0..<500).map { _ in Counter.enqueue(Event(stream: Counter.stream, type: "add"), to: log.store) }
        let refused = Counter.enqueue(Event(stream: Counter.stream, type: "remove"), to: log.store)
        log.store.flush()
        #expect(throws: RuleError("only add")) { try refused.committed() }
        let last = try #require(try added.last?.committed())
        #expect(last.seq == 500)
        #expect(try log.store.currentState["counter"]?["total"] == 500)
        // The time the rules were given is the record's own: replay recomputes the same writes.
        #expect(try log.store.currentState["counter"]?["at"] == .string(last.time.description))
        #expect(try log.store.verify().isOK)
    }

    @Test func anEventQueuedAfterOneThatFailedIsRefusedWithItsError() throws {
        let log = try TemporaryEventStore()
        let first = Counter.enqueue(Event(stream: Counter.stream, type: "add"), to: log.store)
        let refused = Counter.enqueue(Event(stream: Counter.stream, type: "remove"), after: first, to: log.store)
        #expect(throws: RuleError("only add")) { try refused.committed() }
        let next = Counter.enqueue(Event(stream: Counter.stream, type: "add"), after: refused, to: log.store)
        #expect(throws: RuleError("only add")) { try next.committed() }
        #expect(try first.committed().seq == 1)
        #expect(try log.store.lastSeq() == 1)
    }
}
