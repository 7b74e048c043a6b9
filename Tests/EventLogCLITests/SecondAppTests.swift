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
    /// (as inputs) only when `knowsTodo`; and two commands of its own.
    func app(knowsTodo: Bool) -> EventLogApp {
        var app = EventLogApp(name: "counter-log", variants: [("double-step", "increments by two")]) { variant in
            var code = Projections()
            code.recompute(["counter"], with: CounterCode(step: variant == "double-step" ? 2 : 1))
            if knowsTodo { code.takeAsRecorded(["todo"]) }
            return code
        }
        app.commands = [Self.increment, Self.show]
        return app
    }

    /// `increment [--times N] [--expect N]`: appends `increment` events, each written as today's
    /// code computes it; `--expect` writes from a stale value, which the log refuses.
    static let increment = CommandSpec(
        name: "increment", summary: "Add one to the counter, N times.",
        options: [.init(name: "times", value: "N", help: "How many increments (default 1)."),
                  .init(name: "expect", value: "N", help: "The value the counter should hold now.")],
        writes: true
    ) { arguments, context in
        let times = try arguments.count("times") ?? 1
        let store = try context.openStore(writable: true)
        try store.transact { batch in
            for _ in 0..<times {
                let old = try arguments.seq("expect").map { StateValue.int(Int64($0)) } ?? batch.state["counter.value"]
                try batch.append(Event(stream: "counter", type: "increment", origin: "cli",
                                       writes: [Write("counter.value", old: old, new: .int((old?.intValue ?? 0) + 1))]))
            }
        }
        return .ok
    }

    /// `count`: prints the counter, or `{"value": N}` with `--json`.
    static let show = CommandSpec(name: "count", summary: "Print the counter.") { _, context in
        let value = try context.openStore().currentState["counter.value"] ?? 0
        if context.json { context.printJSON(["value": value]) } else { context.console.line(value.json()) }
        return .ok
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

    @Test func theAppsOwnCommandsRunBesideTheEnginesAndFailAsTheyDo() throws {
        let db = try record()
        let counter = app(knowsTodo: true)
        let help = run(["--help"], app: counter)
        #expect(help.code == 0 && help.out.contains("USAGE: counter-log <command>") && help.out.contains("  increment "), "\(help.out)")
        #expect(run(["increment", "--help"], app: counter).out.contains("USAGE: counter-log increment [--times N] [--expect N] [--db PATH] [--json]"))
        #expect(run(["increment", "--times", "3", "--db", db], app: counter).code == 0)
        #expect(run(["count", "--db", db], app: counter).out == "28\n")
        #expect(run(["count", "--json", "--db", db], app: counter).out == "{\"value\":28}\n")
        // What the command appended is what today's code computes.
        #expect(run(["replay", "--verify", "--db", db], app: counter).code == 0)

        // Bad usage is refused before the command runs, with the app's usage line.
        let bad = run(["increment", "--times", "0", "--db", db], app: counter)
        #expect(bad.code == 2)
        #expect(bad.err == "Error: --times must be a positive whole number, not \"0\"\n"
            + "Usage: counter-log increment [--times N] [--expect N] [--db PATH] [--json]\n")
        // The engine's errors thrown by the app's command are reported as the engine's commands report them.
        let stale = run(["increment", "--expect", "3", "--db", db], app: counter)
        #expect(stale.code == 2 && stale.err.hasPrefix("Error: ") && stale.err.contains("counter.value"), "\(stale.err)")
        #expect(run(["count", "--db", db], app: counter).out == "28\n")
        // A writing command that fails leaves no database it created.
        let fresh = dir.file("fresh.lmdb")
        #expect(run(["increment", "--expect", "3", "--db", fresh], app: counter).code == 2)
        #expect(!FileManager.default.fileExists(atPath: fresh))

        // A command named like one of the engine's is refused, whatever is asked.
        var clashing = counter
        clashing.commands.append(CommandSpec(name: "log", summary: "Not the log.") { _, _ in .ok })
        let clash = run(["count", "--db", db], app: clashing)
        #expect(clash.code == 3 && clash.err == "Error: counter-log declares the command 'log' twice\n", "\(clash.err)")
    }

    /// `counter-log` (Sources/counter-log) lists one family of its own: its command line is
    /// the engine's and the counter's, and its binary links none of the other families' libraries.
    @Test func anAppServesOnlyTheFamiliesItListsAndLinksTheCoreAlone() throws {
        let help = try runEventlog(["--help"], executable: "counter-log")
        #expect(help.code == 0, "\(help.err)")
        let listed = Set(help.out.split(separator: "\n").filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) })
        for command in ["increment", "count", "log", "show", "verify", "import", "replay", "bisect"] {
            #expect(listed.contains(command), "\(command) missing from \(help.out)")
        }
        for command in ["deploy", "objects", "fleet", "ship", "pull", "update-check", "testgen", "open", "demo"] {
            #expect(!listed.contains(command), "\(command) in \(help.out)")
        }
        // Help names the app, not eventlog.
        let verifyHelp = try runEventlog(["help", "verify"], executable: "counter-log")
        #expect(verifyHelp.out.contains("'counter-log rebuild'") && !verifyHelp.out.contains("'eventlog "), "\(verifyHelp.out)")
        // Its own family works end to end: recorded, verified by replaying its code.
        let db = dir.file("counter-cli.lmdb")
        for _ in 0..<3 { #expect(try runEventlog(["increment", "--db", db], executable: "counter-log").code == 0) }
        #expect(try runEventlog(["count", "--db", db], executable: "counter-log").out == "3\n")
        let replay = try runEventlog(["replay", "--verify", "--db", db], executable: "counter-log")
        #expect(replay.code == 0 && replay.out.contains("counter  3 recomputed"), "\(replay.out)\(replay.err)")
        // An app without the fleet ships nothing, so nothing is dropped as shipped.
        let shipped = try runEventlog(["compact", "--shipped", "--db", db], executable: "counter-log")
        #expect(shipped.code == 2 && shipped.err.hasPrefix("Error: --shipped: no family of counter-log ships logs\n"), "\(shipped.err)")

        func linked(_ executable: String) throws -> String {
            let ldd = Process()
            ldd.executableURL = URL(fileURLWithPath: "/usr/bin/ldd")
            ldd.arguments = [builtExecutable(executable).path]
            let output = Pipe()
            ldd.standardOutput = output
            try ldd.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            ldd.waitUntilExit()
            return text
        }
        let counter = try linked("counter-log")
        #expect(counter.contains("liblmdb"), "\(counter)")
        for library in ["libnats", "libcrypto", "libcurl"] { #expect(!counter.contains(library), "\(counter)") }
        // The check sees what a family brings: the demo lists all four.
        let demo = try linked("eventlog")
        for library in ["libnats", "libcrypto", "libcurl"] { #expect(demo.contains(library), "\(demo)") }
    }

    /// SIGKILL at random moments of `counter-log tap --times 5000`, whose taps are queued
    /// appends committed together by a writer thread, at least 40 times (of 100 rounds,
    /// `killRounds`) within 150 s: afterwards the log verifies, holds every tap the command printed
    /// as committed, and its counter equals its last seq (every event whole: a commit takes a
    /// batch entirely or not at all).
    @Test func killedWhileTappingNothingAcknowledgedIsLostAndEveryCommitIsWhole() throws {
        var outcomes = (killed: 0, finished: 0)
        let total = killRounds(100)
        let deadline = Date().addingTimeInterval(150)
        try killAtRandomMoments(rounds: 0...total, until: deadline) { round, runAndKill in
            let db = dir.file("taps-\(round).lmdb")
            let printed = dir.file("taps-\(round).out")
            #expect(FileManager.default.createFile(atPath: printed, contents: nil))
            let process = try spawnEventlog(["tap", "--times", "5000", "--db", db], executable: "counter-log")
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: printed))
            try runAndKill(process)
            let finished = process.terminationReason == .exit && process.terminationStatus == 0
            if finished { outcomes.finished += 1 } else { outcomes.killed += 1 }
            let acknowledged = try String(contentsOfFile: printed, encoding: .utf8).split(separator: "\n")
                .compactMap { $0.hasPrefix("committed ") ? Int64($0.dropFirst("committed ".count)) : nil }.max() ?? 0
            // Killed before it made the log (at most LMDB's empty environment, or an empty
            // data.mdb beside its creation marker): nothing was acknowledged, reading finds no
            // log, and the next writer makes it.
            let verified = try runEventlog(["verify", "--db", db], executable: "counter-log")
            guard !verified.err.contains("no event log at") else {
                #expect(acknowledged == 0, "round \(round): \(acknowledged) acknowledged and no log")
                #expect(try runEventlog(["tap", "--db", db], executable: "counter-log").code == 0, "round \(round)")
                #expect(try runEventlog(["count", "--db", db], executable: "counter-log").out == "1\n", "round \(round)")
                try? FileManager.default.removeItem(atPath: db)
                return
            }
            #expect(verified.code == 0, "round \(round): \(verified.out)\(verified.err)")
            let last = try StateValue(json: try runEventlog(["info", "--json", "--db", db], executable: "counter-log").out)["lastSeq"]?.intValue ?? 0
            #expect(last >= acknowledged && (!finished || last == 5_000), "round \(round): \(last) events, \(acknowledged) acknowledged")
            #expect(try runEventlog(["count", "--db", db], executable: "counter-log").out == "\(last)\n", "round \(round)")
            try FileManager.default.removeItem(atPath: db)
        }
        #expect(outcomes.killed >= total * 2 / 5, "\(outcomes)")
        #expect(outcomes.finished > 0, "\(outcomes)")
    }

}
