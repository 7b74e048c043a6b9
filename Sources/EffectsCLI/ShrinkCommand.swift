import Effects
import EventLog
import EventLogCLI
import Foundation

extension CommandSpec {
    /// `shrink --where EXPR | --replay [--regression NAME] [--testgen NAME]`: the fewest of a
    /// session's inputs (its entry-point calls) that still make it fail, found by driving the
    /// effects app's code again on scratch logs with fewer and fewer of them (``Shrinking``).
    /// - Parameters:
    ///   - variants: The app's faulty variants, each with a line saying what is wrong.
    ///   - model: The code to drive: today's for `nil`, else the variant named.
    ///   - imports: The modules a generated test needs besides EventLog, Effects,
    ///     EventLogTesting and Testing.
    ///   - plan: The plan a recorded source (a URL) runs.
    ///   - planExpression: The Swift expression for that plan, given the source as a Swift
    ///     string literal.
    public static func shrink<Model: EffectModel>(variants: [(name: String, summary: String)],
                                                  model: @escaping @Sendable (_ variant: String?) -> Model, imports: [String],
                                                  plan: @escaping @Sendable (String) throws -> Plan<Model.Effect>,
                                                  planExpression: @escaping @Sendable (String) -> String) -> CommandSpec {
        CommandSpec(
            name: "shrink",
            summary: "Find the fewest inputs of the session that still make it fail, and optionally a test of them.",
            discussion: """
                The inputs are the session's entry-point calls, taken from the log: plans started by a tap,
                a URL, a test or a capture; steps applied outside a plan; waiting plans resumed; and the
                events no entry point makes: those of a family with rules (an update check with its
                recorded lookup answer, a deploy transition) decided again by them, the others (object
                saves) appended as recorded.
                Each run drives a subset of them, in order and at their recorded times, from the log's
                first state through the code on a scratch log, and keeps the subset when it still fails:
                  --where EXPR   the state after some event satisfies EXPR (as 'bisect --where')
                  --replay       today's code disagrees with the driven log (as 'replay --verify') at an
                                 event of the stream it first disagreed at on the whole session
                The code driven is today's, or the faulty variant --regression names (the code that
                recorded a log --replay finds wrong); a fault in reading old events (an upcaster's) is
                not reproduced, since what is driven is recorded at today's versions. Delta debugging (ddmin) halves, then narrows, the
                inputs; run to the end, the result is 1-minimal: leaving out any one of them makes the
                failure go away. It prints the inputs, the runs it took and the first bad event of the
                shrunk session; --testgen NAME prints instead a Swift Testing test of the shrunk session
                as today's code drives it (the summary goes to stderr), which fails on the regression.
                Ctrl-C, --max-runs and --timeout stop it with the smallest failing inputs found so far.
                Scratch logs live in the temporary directory and are removed by the call.
                Exit 0 when shrunk, 1 when the session does not fail as said.
                """,
            options: [
                .init(name: "where", value: "EXPR", help: "Failing when the state after some event satisfies EXPR."),
                .init(name: "replay", value: nil, help: "Failing when today's code disagrees with the driven log."),
                .init(name: "testgen", value: "NAME", help: "Print a Swift Testing test named NAME of the shrunk session."),
                .init(name: "max-runs", value: "N", help: "Stop after N runs (default 5000)."),
                .init(name: "timeout", value: "SECONDS", help: "Stop after SECONDS (at most 3600; default: none)."),
            ] + (variants.isEmpty ? [] : [.regression(variants)])
        ) { arguments, context in
            let modes = ["where", "replay"].filter { arguments.value($0) != nil || arguments.flag($0) }
            guard modes.count == 1 else {
                throw CLIError.usage(modes.isEmpty ? "say what failing is with --where or --replay" : "use only one of --where, --replay")
            }
            let predicate = try AnalysisCommands.wherePredicate(arguments)
            let variant = variants.isEmpty ? nil : arguments.value("regression")
            if let variant, !variants.contains(where: { $0.name == variant }) {
                throw CLIError.usage("unknown regression \"\(Render.escaped(variant))\" (expected \(variants.map(\.name).joined(separator: ", ")))")
            }
            let testName = arguments.value("testgen")
            if let testName {
                guard !context.json else { throw CLIError.usage("--testgen prints a Swift test; leave out --json") }
                try TestGenerator<Model>.checkName(testName, option: "testgen", imports: imports, planExpression: planExpression)
            }
            let maxRuns = try arguments.count("max-runs") ?? 5_000
            let began = Date()
            let deadline = try arguments.seconds("timeout").map { began.addingTimeInterval($0) }

            let store = try context.openStore()
            let (records, before) = try attempt { () throws -> ([EventRecord], StateValue) in
                let first = (try store.base()?.firstSeq) ?? 1
                var records: [EventRecord] = []
                try store.forEachRecord(from: first) { records.append($0); return true }
                return (records, try store.snapshot(after: first - 1))
            }
            guard let start = records.first?.time else { throw CLIError.badInput("the log is empty: nothing to shrink") }
            let today = try attempt { try context.app.projections(nil) }
            let session = try readThroughUpcasters(records, through: today)

            // Ctrl-C from here on ends the call with what it found, and its scratch logs gone.
            let signals = InterruptSignals()
            defer { signals.stop() }
            let scratch = try ScratchLogs()
            defer { scratch.removeAll() }
            func endIfInterrupted(saying text: String) {
                guard signals.received != 0 else { return }
                scratch.removeAll()
                context.console.flush()
                InterruptSignals.exit(saying: text, signal: signals.received)
            }
            let driver = SessionDriver(model: model(variant), plan: plan, rules: try attempt { try context.app.projections(variant) })
            let inputs = try scratch.attempting { try driver.inputs(of: session, before: before, scratch: try scratch.make()) }
            endIfInterrupted(saying: "nothing was shrunk")
            guard !inputs.isEmpty else { throw CLIError.badInput("the log holds no input to shrink: nothing but the initial state") }

            // What fails, on a log driven with some of the inputs; for --replay, at the stream the
            // whole session first disagrees at, so that another disagreement (an object save
            // appended as recorded next to code that no longer agrees with it) is not taken for it.
            var failingStream: String?
            func failure(in log: EventStore) throws -> Failure? {
                if let predicate {
                    guard let seq = try log.firstEvent(where: predicate, linear: true).firstBad, let record = try log.record(seq) else { return nil }
                    return Failure(record: record, divergence: nil)
                }
                let report = try log.replay(through: OnlyStream(code: today, stream: failingStream), verify: true)
                guard let divergence = report.divergence else { return nil }
                failingStream = failingStream ?? divergence.record.event.stream
                return Failure(record: divergence.record, divergence: divergence)
            }
            func drive(_ inputs: [SessionDriver<Model>.Input], through driver: SessionDriver<Model>) throws -> (path: String, failure: Failure?) {
                let path = try scratch.make()
                do {
                    let log = try driver.drive(inputs, before: before, start: start, at: path)
                    return (path, try failure(in: log))
                } catch let error as EventStoreError {
                    // Inputs that cannot be made without the ones left out (a write where the
                    // state has no room for it) do not fail as the session does.
                    switch error {
                    case .invalidWrite, .staleWrite, .limitExceeded: return (path, nil)
                    default: throw error
                    }
                }
            }

            var shrinking = Shrinking(inputs, maxRuns: maxRuns)
            shrinking.shouldStop = { signals.received != 0 || deadline.map { Date() >= $0 } == true }
            shrinking.progress = { best in context.console.progress("shrinking: \(best.runs) runs, \(best.inputs.count) of \(inputs.count) inputs fail") }
            let outcome = try scratch.attempting {
                try shrinking.run { subset in
                    let run = try drive(subset, through: driver)
                    scratch.remove(run.path)
                    return run.failure != nil
                }
            }
            context.console.endProgress()
            let seconds = Date().timeIntervalSince(began)
            guard let (result, stopped) = outcome else {
                endIfInterrupted(saying: "nothing was shrunk")
                throw CLIError.problem(predicate.map { "nothing to shrink: \($0.description) holds after no event of the session driven again" }
                    ?? "nothing to shrink: today's code agrees with the session driven again"
                       + (variant.map { " through \($0)" } ?? " (say which code recorded it with --regression)"))
            }
            // The shrunk session once more, for its first bad event.
            let shrunk = try scratch.attempting { () throws -> Failure? in
                let run = try drive(result.inputs, through: driver)
                defer { scratch.remove(run.path) }
                return run.failure
            }
            let interrupted = signals.received
            let stop: String? = switch stopped {
            case nil: nil
            case .maxRuns: "--max-runs \(maxRuns)"
            case .asked: interrupted != 0 ? "an interruption" : "--timeout"
            }

            if context.json {
                context.printJSON([
                    "firstBad": shrunk.map { .int(Int64($0.record.seq)) } ?? .null,
                    "inputs": .array(result.inputs.map { input in ["seq": .int(Int64(input.seq)), "input": .string(input.summary)] }),
                    "of": .int(Int64(inputs.count)), "oneMinimal": .bool(result.isOneMinimal), "runs": .int(Int64(result.runs)),
                    "seconds": .double((seconds * 1_000).rounded() / 1_000), "stoppedBy": stop.map { .string($0) } ?? .null,
                ])
            } else {
                var lines = ["shrunk \(inputs.count) inputs to \(result.inputs.count) in \(result.runs) runs (\(String(format: "%.1f", seconds)) s); "
                    + (result.isOneMinimal ? "leaving out any one of them makes the failure go away:"
                                           : "stopped by \(stop ?? "") before trying to leave out each one:")]
                lines += result.inputs.map { "  #\($0.seq)  \($0.summary)" }
                if let shrunk {
                    lines.append("first bad event of the shrunk session: \(shrunk.record.seq)")
                    lines += AnalysisCommands.describe(shrunk.record, previousSeq: nil)
                    if let divergence = shrunk.divergence { lines += AnalysisCommands.describe(divergence) }
                }
                let text = lines.joined(separator: "\n")
                if testName == nil { context.console.line(text) } else { context.console.error(text + "\n") }
            }
            if testName != nil, result.inputs.isEmpty {
                context.console.error("shrink: the failure needs no input (it holds in the state the log starts from): there is no test to write\n")
            } else if let testName {
                let todays = SessionDriver(model: model(nil), plan: plan, rules: today)
                let generator = TestGenerator(model: model(nil), imports: imports, plan: plan, planExpression: planExpression)
                let command = "\(context.app.name) shrink " + (predicate.map { "--where \($0.description)" } ?? "--replay")
                    + (variant.map { " --regression \($0)" } ?? "") + " --testgen \(testName)"
                let output = try scratch.attempting {
                    try scratch.log(of: result.inputs, driver: todays, before: before, start: start) { log in
                        // Past the event that seeds a scratch log with the log's base: the test writes its own.
                        var records: [EventRecord] = []
                        try log.forEachRecord(from: SessionDriver<Model>.seeds(before).isEmpty ? 1 : 2) { records.append($0); return true }
                        return try generator.generate(records, before: before, name: testName, command: command, scratch: try scratch.make())
                    }
                }
                context.console.out(output.source)
                for divergence in output.divergences {
                    context.console.error("shrink: today's code differs from the shrunk session at \(divergence); the test fails there\n")
                }
            }
            endIfInterrupted(saying: "the smallest failing inputs found so far are above")
            return .ok
        }
    }
}

/// Where a driven log fails: the event, and for `--replay` the disagreement.
private struct Failure {
    var record: EventRecord
    var divergence: Divergence?
}

/// Today's code, recomputing only `stream` (every stream while it is `nil`); the other
/// streams replay as recorded.
private struct OnlyStream: Projection {
    var code: Projections
    var stream: String?

    func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
        stream == nil || record.event.stream == stream ? code.recompute(record, in: state) : nil
    }
    func knows(stream: String) -> Bool { code.knows(stream: stream) }
    func upcasting(_ event: Event) -> Upcast { code.upcasting(event) }
    func versions(in stream: String) -> [String: Int] { code.versions(in: stream) }
}

/// The scratch logs of one `shrink`, each in a directory of its own under one made for the
/// call in the temporary directory; everything it made is removed, and nothing else.
private final class ScratchLogs {
    let root = NSTemporaryDirectory() + "eventlog-shrink-\(UUID().uuidString)"
    private var made = 0
    private var live: Set<String> = []

    init() throws(CLIError) {
        do { try EventStore.makeScratch(at: root) } catch {
            throw CLIError.unavailable("cannot make the scratch directory \(root) (TMPDIR): \(error)")
        }
    }

    /// `attempt`, with an error of a scratch log's storage named as the scratch's: a full or
    /// read-only temporary directory is not the database's fault.
    func attempting<R>(_ body: () throws -> R) throws(CLIError) -> R {
        try attempt {
            do { return try body() } catch let error as LMDBError {
                throw CLIError.unavailable("a scratch log under \(root) (TMPDIR) failed: \(error)")
            }
        }
    }

    /// A new empty directory for a log.
    func make() throws -> String {
        made += 1
        let path = root + "/\(made)"
        try EventStore.makeScratch(at: path)
        live.insert(path)
        return path
    }

    /// Removes the log at `path` (closed first).
    func remove(_ path: String) {
        EventStore.removeScratch(at: path)
        live.remove(path)
    }

    /// Drives `inputs` on a new log, hands it to `body`, and removes it.
    func log<Model, R>(of inputs: [SessionDriver<Model>.Input], driver: SessionDriver<Model>, before: StateValue,
                       start: Timestamp, _ body: (EventStore) throws -> R) throws -> R {
        let path = try make()
        defer { remove(path) }
        return try body(try driver.drive(inputs, before: before, start: start, at: path))
    }

    /// Removes every log left, then the directory.
    func removeAll() {
        for path in live { EventStore.removeScratch(at: path) }
        live.removeAll()
        rmdir(root)
    }
}
