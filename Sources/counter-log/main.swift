// A second app on the engine, as small as one can be: a family of its own (a counter: its
// rules and its commands) and nothing else. It links the core alone: no deploys, objects or
// fleet in its help, no libcurl, libcrypto or libnats in its binary (SecondAppTests checks both).
import EventLog
import EventLogCLI

/// The counter's rules, the same when a command records an event and when replay recomputes
/// it: `increment` adds one to `counter.value`.
enum CounterRules: EventRules {
    static let stream = "counter"

    static func writes(for event: Event, in state: StateValue, at time: Timestamp) -> Result<[Write], RuleError> {
        guard event.type == "increment" else { return .failure(RuleError("unknown counter event \"\(event.type)\"")) }
        let old = state["counter.value"]
        return .success([Write("counter.value", old: old, new: .int((old?.intValue ?? 0) + 1))])
    }
}

extension EventFamily {
    /// The counter: its stream recomputed by its rules on replay, `increment` and `count`.
    static let counter = EventFamily(name: "counter", commands: [increment, count]) { code in
        code.recompute(by: CounterRules.self)
    }

    static let increment = CommandSpec(name: "increment", summary: "Add one to the counter.", writes: true) { _, context in
        let store = try context.openStore(writable: true)
        try store.transact { batch in
            try CounterRules.append(Event(stream: CounterRules.stream, type: "increment", origin: "cli"), at: store.clock.now(), to: &batch)
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
