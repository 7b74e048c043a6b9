import EventLog
import EventLogCLI
import EventLogTesting
import Foundation
import Testing

/// An app that is not the demo builds its own command line through the public API alone
/// (this file imports nothing with @testable): a counter, and a to-do list its code does not
/// know.
@Suite struct SecondAppTests {
    let dir = TemporaryDirectory()

    /// Today's counter code: `increment` adds `step` to `counter.value`; `set` is an input.
    struct CounterCode: Projection {
        var step: Int64 = 1

        func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
            guard record.event.type == "increment" else { return nil }
            let old = state["counter.value"]
            return Recomputed(outcome: .applied, writes: [Write("counter.value", old: old, new: .int((old?.intValue ?? 0) + step))])
        }
    }

    /// The app: the counter recomputed, faulty when asked for `double-step`; `todo` is known
    /// (as inputs) only when `knowsTodo`.
    func app(knowsTodo: Bool) -> EventLogApp {
        EventLogApp(name: "counter-log", variants: [("double-step", "increments by two")]) { variant in
            var code = Projections()
            code.recompute(["counter"], with: CounterCode(step: variant == "double-step" ? 2 : 1))
            if knowsTodo { code.takeAsRecorded(["todo"]) }
            return code
        }
    }

    /// A log recorded by the correct counter: a `set`, 20 increments, and to-do items between.
    func record() throws -> String {
        let path = dir.file("counter.lmdb")
        let store = try EventStore(path: path)
        try store.transact { batch in
            try batch.append(Event(stream: "counter", type: "set", writes: [Write("counter.value", old: nil, new: 5)]))
            for index in 0..<20 {
                let old = batch.state["counter.value"]
                try batch.append(Event(stream: "counter", type: "increment", origin: "button",
                                       writes: [Write("counter.value", old: old, new: .int(old!.intValue! + 1))]))
                if index % 5 == 0 {
                    let item = StatePath([.key("todo"), .key("item-\(index)")])
                    try batch.append(Event(stream: "todo", type: "add", writes: [Write(item, old: nil, new: .string("water the plants"))]))
                }
            }
        }
        return path
    }

    func run(_ arguments: [String], app: EventLogApp) -> (code: Int32, out: String, err: String) {
        let out = Captured()
        let err = Captured()
        let code = EventLogCLI.run(arguments, environment: [:], console: Console(stdout: out.append, stderr: err.append), app: app)
        return (code, out.text, err.text)
    }

    @Test func replayVerifiesWhatTheAppsCodeKnowsAndSaysWhatItDoesNot() throws {
        let db = try record()
        let unknown = run(["replay", "--verify", "--db", db], app: app(knowsTodo: false))
        #expect(unknown.code == 1)
        #expect(unknown.out == "not verified: today's code does not know the stream todo; their 4 events replayed as recorded, unchecked"
            + " (--accept-recorded passes them)\n")
        let accepted = run(["replay", "--verify", "--accept-recorded", "--db", db], app: app(knowsTodo: false))
        #expect(accepted.code == 0)
        #expect(accepted.out.hasSuffix("\n  counter  20 recomputed, 1 as recorded\n  todo     4 as recorded, unknown to the code\n"), "\(accepted.out)")
        let known = run(["replay", "--verify", "--db", db], app: app(knowsTodo: true))
        #expect(known.code == 0)
        #expect(known.out.hasSuffix("\n  counter  20 recomputed, 1 as recorded\n  todo     4 as recorded\n"), "\(known.out)")
        // The demo's commands are the demo's: this app has none of them.
        #expect(run(["open", "botmessages://bots?filter=unread", "--db", db], app: app(knowsTodo: true)).code == 2)
    }

    @Test func replayAndBisectFindTheFaultyVariantsFirstStep() throws {
        let db = try record()
        let replay = run(["replay", "--verify", "--regression", "double-step", "--db", db], app: app(knowsTodo: true))
        #expect(replay.code == 1)
        #expect(replay.out.hasPrefix("divergence at event 2 after 2 replayed events:\n"), "\(replay.out)")
        #expect(replay.out.contains("missing write: counter.value: 5 → 6"), "\(replay.out)")
        let bisect = run(["bisect", "--replay", "--regression", "double-step", "--db", db], app: app(knowsTodo: true))
        #expect(bisect.code == 0)
        #expect(bisect.out.hasPrefix("first bad event: 2 "), "\(bisect.out)")
        let unknownVariant = run(["replay", "--regression", "nope", "--db", db], app: app(knowsTodo: true))
        #expect(unknownVariant.code == 2 && unknownVariant.err.hasPrefix("Error: unknown regression \"nope\" (expected double-step)"))
    }
}
