// A second app on the engine, as small as one can be: a family of its own (a counter, its code
// and its commands) and nothing else. It links the core alone: no deploys, objects or fleet in
// its help, no libcurl, libcrypto or libnats in its binary (SecondAppTests checks both).
import EventLog
import EventLogCLI

/// The counter's one rule, the same when a command records an increment and when replay
/// recomputes one: an increment adds one to `counter.value`.
enum CounterRule {
    static func increment(in state: StateValue) -> [Write] {
        let old = state["counter.value"]
        return [Write("counter.value", old: old, new: .int((old?.intValue ?? 0) + 1))]
    }
}

/// Today's counter code for replay.
struct CounterProjection: Projection {
    func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
        record.event.type == "increment" ? Recomputed(outcome: .applied, writes: CounterRule.increment(in: state)) : nil
    }
}

extension EventFamily {
    /// The counter: its stream recomputed on replay, `increment` and `count`.
    static let counter = EventFamily(name: "counter", commands: [increment, count]) { code in
        code.recompute(["counter"], with: CounterProjection())
    }

    static let increment = CommandSpec(name: "increment", summary: "Add one to the counter.", writes: true) { _, context in
        let store = try context.openStore(writable: true)
        try store.transact { batch in
            try batch.append(Event(stream: "counter", type: "increment", origin: "cli", writes: CounterRule.increment(in: batch.state)))
        }
        return .ok
    }

    static let count = CommandSpec(name: "count", summary: "Print the counter.") { _, context in
        let value = try context.openStore().currentState["counter.value"] ?? 0
        if context.json { context.printJSON(["value": value]) } else { context.console.line(value.json()) }
        return .ok
    }
}

EventLogCLI.main(app: EventLogApp(name: "counter-log", families: [.counter]) { _ in Projections() })
