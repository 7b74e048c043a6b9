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
    /// The counter: its stream recomputed by its rules on replay, `increment`, `tap` and `count`.
    static let counter = EventFamily(name: "counter", commands: [increment, tap, count]) { code in
        code.recompute(by: CounterRules.self)
    }

    static let increment = CommandSpec(name: "increment", summary: "Add one to the counter.", writes: true) { _, context in
        let store = try context.openStore(writable: true)
        try store.transact { batch in
            try CounterRules.append(Event(stream: CounterRules.stream, type: "increment", origin: "cli"), at: store.clock.now(), to: &batch)
        }
        return .ok
    }

    /// An app's taps: each a queued append (`EventStore.enqueue`) that returns before it
    /// commits; the writer thread commits what is queued together.
    static let tap = CommandSpec(
        name: "tap",
        summary: "Add one to the counter N times, an event queued per tap as an app's taps would be.",
        discussion: "Each tap returns before its event commits; every 100th tap waits for its commit and prints its seq.",
        options: [.init(name: "times", value: "N", help: "How many taps (default 1).")],
        writes: true
    ) { arguments, context in
        let times = try arguments.count("times") ?? 1
        let store = try context.openStore(writable: true)
        let clock = store.clock
        for tap in 1...times {
            let queued = store.enqueue { state in
                var event = Event(stream: CounterRules.stream, type: "increment", origin: "tap")
                event.writes = try CounterRules.writes(for: event, in: state, at: clock.now()).get()
                return event
            }
            guard tap % 100 == 0 || tap == times else { continue }
            // The queue commits in order: this one committed, so did every tap before it.
            let record = try queued.committed()
            context.console.line("committed \(record.seq)")
            context.console.flush()
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
