import EventLog
import Foundation

/// `replay` and `bisect`: which event first made the state wrong, which property, and why.
package enum AnalysisCommands {
    static func all(for app: EventLogApp) -> [CommandSpec] { [replay(app), bisect(app), ViewCommand.spec(app)] }

    /// Today's code for the app, or the faulty variant `--regression` names.
    static func projections(_ arguments: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Projections {
        let variant = try variant(arguments, context)
        do { return try context.app.projections(variant) } catch { throw CLIError.badInput("\(error)") }
    }

    /// The faulty variant `--regression` names, one of the app's; `nil` for today's code. A
    /// command declares the option when the app has variants, or always (a family's command,
    /// declared before any app): then it is refused for an app without them.
    package static func variant(_ arguments: ParsedArguments, _ context: CommandContext) throws(CLIError) -> String? {
        let declared = arguments.declared?.contains("regression") ?? true
        guard declared, let variant = arguments.value("regression") else { return nil }
        guard !context.app.variants.isEmpty else { throw CLIError.usage("--regression: \(context.app.name) has no faulty variants") }
        guard context.app.variants.contains(where: { $0.name == variant }) else {
            throw CLIError.usage("unknown regression \"\(Render.escaped(variant))\" (expected \(context.app.variants.map(\.name).joined(separator: ", ")))")
        }
        return variant
    }

    static func replay(_ app: EventLogApp) -> CommandSpec { CommandSpec(
        name: "replay",
        summary: "Fold the log through today's code and print the state; --verify stops at the first divergence.",
        discussion: """
            Every event of a stream the app's code recomputes (for the demo: its effects and navigation
            steps) is recomputed from the state before it; the streams it takes as inputs (plan starts,
            initial states, object saves) replay as recorded, and so, unchecked, do streams it does not
            know. The summary counts each stream's events both ways. With --verify each recomputed step
            must match the recording (the same kind of outcome and the same writes): the first that does
            not is printed with the expected and actual writes and the structural diff, and the exit code
            is 1; so is a stream the code does not know, unless --accept-recorded. A full --verify also
            checks the objects' read model against the replayed state.
            An event recorded at an older version of its type is read through the app's upcasters, and
            --verify proves them: today's code, fed what they make, must write what was recorded. The
            summary counts them by stream, type and version. An old version no upcaster reads stops the
            replay there (exit 1); an event newer than today's code (a log from a newer release) replays
            as recorded, unchecked, and fails --verify unless --accept-recorded.
            """ + whatIfHelp(app),
        options: [
            .init(name: "to", value: "N", help: "Stop after event N (default: the newest)."),
            .init(name: "verify", value: nil, help: "Compare every recomputed event with the recording."),
            .init(name: "accept-recorded", value: nil, help: "With --verify, pass streams the code does not know and newer versions, replayed as recorded."),
        ] + (app.knobs.isEmpty ? [] : [.init(name: "what-if", value: "NAME=VALUE,…", help: "Decide the session again with these settings of the rules changed.")])
          + [app.variantOption].compactMap { $0 }
    ) { arguments, context in
        let projection = try projections(arguments, context)
        if !app.knobs.isEmpty, let settings = arguments.value("what-if") {
            if let option = ["verify", "accept-recorded"].first(where: arguments.flag) {
                throw CLIError.usage("--what-if decides the session again under other rules; leave out --\(option)")
            }
            return try whatIf(settings, through: projection, arguments, context)
        }
        let verify = arguments.flag("verify")
        let store = try context.openStore()
        let to = try arguments.last(in: store)
        let report = try attempt {
            try store.replay(through: projection, to: to, verify: verify) { context.console.progress("replayed \($0) events") }
        }
        context.console.endProgress()
        // Every read model must agree with the replayed newest state.
        var readModelProblem: String?
        if verify, report.divergence == nil, to >= (try attempt { try store.lastSeq() }) {
            readModelProblem = try attempt { try context.app.readModelProblem(in: store, against: report.state) }
        }
        let strict = verify && !arguments.flag("accept-recorded")
        let unknown = strict ? report.unknownStreams : []
        let newer = strict ? report.newer : [:]
        if context.json {
            let divergence: StateValue = report.divergence.map { divergence in
                [
                    "actual": .array(divergence.actual.writes.map(\.jsonValue)),
                    "actualOutcome": .string(divergence.actual.outcome.name),
                    "diff": .array(divergence.diff.map(\.jsonValue)),
                    "expected": .array(divergence.record.event.writes.map(\.jsonValue)),
                    "expectedOutcome": .string(divergence.record.event.outcome.name),
                    "missing": .array(divergence.missing.map(\.jsonValue)),
                    "seq": .int(Int64(divergence.seq)),
                    "type": .string(divergence.record.event.type),
                    "upcast": .array(divergence.upcast.map { event in
                        ["payload": event.payload, "stream": .string(event.stream), "type": .string(event.type), "version": .int(Int64(event.version))]
                    }),
                ]
            } ?? .null
            let unreadable: StateValue = report.unreadable.map { unreadable in
                ["reason": .string(unreadable.reason), "seq": .int(Int64(unreadable.record.seq)), "stream": .string(unreadable.record.event.stream),
                 "type": .string(unreadable.record.event.type), "version": .int(Int64(unreadable.record.event.version))]
            } ?? .null
            var streams = StateObject()
            for (name, count) in report.streams.sorted(by: { $0.key < $1.key }) {
                streams[name] = ["asRecorded": .int(Int64(count.asRecorded)), "recomputed": .int(Int64(count.recomputed)),
                                 "unknown": .int(Int64(count.unknown))]
            }
            context.printJSON(["divergence": divergence, "events": .int(Int64(report.events)), "newer": shapeCounts(report.newer),
                               "readModel": readModelProblem.map { .string($0) } ?? .null, "state": report.state,
                               "streams": .object(streams), "unreadable": unreadable, "upcast": shapeCounts(report.upcast)])
        } else if let unreadable = report.unreadable {
            context.console.line("\(Render.escaped(unreadable.reason)); first at seq \(unreadable.record.seq) (after \(report.events) replayed events)")
        } else if let divergence = report.divergence {
            context.console.line("divergence at event \(divergence.seq) after \(report.events) replayed events:")
            context.console.line(describe(divergence.record, previousSeq: nil).joined(separator: "\n"))
            context.console.line(describe(divergence).joined(separator: "\n"))
        } else if let readModelProblem {
            context.console.line(readModelProblem)
        } else if !newer.isEmpty {
            context.console.line("not verified: " + newer.sorted { $0.key < $1.key }.map { "\($0.value) \(Render.escaped($0.key.description))" }.joined(separator: ", ")
                + " newer than today's code (a log from a newer release), replayed as recorded, unchecked (--accept-recorded passes them)")
        } else if !unknown.isEmpty {
            let events = unknown.map { report.streams[$0]!.unknown }.reduce(0, +)
            context.console.line("not verified: today's code does not know the stream\(unknown.count == 1 ? "" : "s") "
                + unknown.map(Render.escaped).joined(separator: ", ") + "; their \(events) events replayed as recorded, unchecked"
                + " (--accept-recorded passes them)")
        } else {
            context.console.line(report.state.json(pretty: true))
            context.console.line((verify ? "ok: \(report.events) events replayed; today's code agrees with every recomputed step and the read model"
                                         : "replayed \(report.events) events through today's code") + "\n" + streamSummary(report))
        }
        return report.divergence == nil && report.unreadable == nil && readModelProblem == nil && unknown.isEmpty && newer.isEmpty ? .ok : .problem
    } }

    /// The paragraph of `replay --help` on `--what-if`, with the app's knobs; empty without any.
    static func whatIfHelp(_ app: EventLogApp) -> String {
        guard !app.knobs.isEmpty else { return "" }
        let width = app.knobs.map(\.name.count).max() ?? 0
        return """


            With --what-if the session is decided again from its recorded inputs (lookup answers, taps,
            server answers; never a network call) with settings of the rules changed, and replay prints
            how many events that changes against today's code with the rules as recorded, the first of
            them, and what each family counts before and after. The settings:

            """ + app.knobs.map { knob in
                "  \(knob.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(knob.summary)\n"
                    + String(repeating: " ", count: width + 4) + "(\(knob.values))"
            }.joined(separator: "\n")
    }

    /// `replay --what-if NAME=VALUE,…`: the session decided again under changed rules.
    static func whatIf(_ text: String, through code: Projections, _ arguments: ParsedArguments, _ context: CommandContext) throws(CLIError) -> ExitCode {
        let knobs = context.app.knobs
        var settings: [RuleKnob.Setting] = []
        var named: [(String, String)] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false).map(String.init) {
            guard let equals = item.firstIndex(of: "="), equals != item.startIndex else {
                throw CLIError.usage("--what-if takes NAME=VALUE pairs separated by commas, not \"\(Render.escaped(item))\"")
            }
            let name = String(item[..<equals]), value = String(item[item.index(after: equals)...])
            guard let knob = knobs.first(where: { $0.name == name }) else {
                throw CLIError.usage("--what-if: no setting \"\(Render.escaped(name))\"; the settings are \(knobs.map(\.name).joined(separator: ", "))")
            }
            guard !named.contains(where: { $0.0 == name }) else { throw CLIError.usage("--what-if sets \(name) twice") }
            guard let setting = knob.setting(value) else {
                throw CLIError.usage("--what-if \(name) takes \(knob.values), not \"\(Render.escaped(value))\"")
            }
            settings.append(setting)
            named.append((name, value))
        }
        let store = try context.openStore()
        let to = try arguments.last(in: store)
        let report = try attempt { try store.whatIf(through: code, changing: settings, tallies: context.app.families.flatMap(\.tallies), to: to) }
        let title = named.map { "\($0.0)=\(Render.escaped($0.1))" }.joined(separator: ", ")
        if context.json {
            let first: StateValue = report.first.map { difference in
                ["before": ["outcome": .string(difference.before.outcome.name), "writes": .array(difference.before.writes.map(\.jsonValue))],
                 "seq": .int(Int64(difference.record.seq)), "stream": .string(difference.record.event.stream), "type": .string(difference.record.event.type),
                 "whatIf": ["outcome": .string(difference.whatIf.outcome.name), "payload": difference.rewritten.payload,
                            "writes": .array(difference.whatIf.writes.map(\.jsonValue))]]
            } ?? .null
            var whatIf = StateObject()
            for (name, value) in named { whatIf[name] = .string(value) }
            context.printJSON(["changed": .array(report.changed.map { .int(Int64($0)) }), "counts": .array(report.counts.map { count in
                ["before": .int(Int64(count.before)), "name": .string(count.name), "whatIf": .int(Int64(count.whatIf))]
            }), "events": .int(Int64(report.events)), "first": first, "whatIf": .object(whatIf)])
            return .ok
        }
        guard let first = report.first else {
            context.console.line("what if \(title): no event of the \(report.events) would differ")
            return .ok
        }
        var lines = ["what if \(title): \(report.changed.count) of \(report.events) events would differ; the first is \(first.record.seq):"]
        lines += describe(first.record, previousSeq: nil)
        for (label, event) in [("before", first.before), ("what if", first.whatIf)] {
            lines.append("  \(label): \(event.outcome.name)" + (event.writes.isEmpty ? ", no writes" : ", writes " + event.writes.map(Render.write).joined(separator: "; ")))
            if case .skipped(let reason) = event.outcome { lines.append("    because \(Render.escaped(reason))") }
        }
        let width = report.counts.map(\.name.count).max() ?? 0
        lines += report.counts.map { "  \($0.name.padding(toLength: width, withPad: " ", startingAt: 0))  \($0.before) → \($0.whatIf)" }
        context.console.line(lines.joined(separator: "\n"))
        return .ok
    }

    /// `[{"stream": …, "type": …, "version": …, "events": N}, …]`, by shape.
    static func shapeCounts(_ counts: [EventShape: Int]) -> StateValue {
        .array(counts.sorted { $0.key < $1.key }.map { shape, events in
            ["events": .int(Int64(events)), "stream": .string(shape.stream), "type": .string(shape.type), "version": .int(Int64(shape.version))]
        })
    }

    /// A line per stream: `  messenger   201 recomputed`.
    static func streamSummary(_ report: ReplayReport) -> String {
        let width = report.streams.keys.map { Render.escaped($0).count }.max() ?? 0
        let lines = report.streams.sorted { $0.key < $1.key }.map { name, count in
            let parts = [(count.recomputed, "recomputed"), (count.asRecorded, "as recorded"), (count.unknown, "as recorded, unknown to the code")]
                .filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }
            return "  " + Render.escaped(name).padding(toLength: width + 2, withPad: " ", startingAt: 0) + parts.joined(separator: ", ")
        }
        let versions = [(report.upcast, "read through upcasters"), (report.newer, "newer than today's code, as recorded")].flatMap { counts, how in
            counts.sorted { $0.key < $1.key }.map { "  \($1) \(Render.escaped($0.description)) \(how)" }
        }
        return (lines + versions).joined(separator: "\n")
    }

    static func bisect(_ app: EventLogApp) -> CommandSpec { CommandSpec(
        name: "bisect",
        summary: "Find the first bad event: by a predicate, by replay, against another log, or by a command.",
        discussion: """
            Say what "bad" is with exactly one of:
              --where EXPR     the state after the event satisfies EXPR, e.g.
                               'messenger.selectedTab == "bots" && messenger.listFilter != "bots"'
                               (==, !=, <, <=, >, >=, contains, &&, ||, !, parentheses, exists(path),
                               string, number, true, false and null literals; a missing path is null)
              --replay         today's code disagrees with the recorded step (see 'replay --verify')
              --against DB     the state differs from the state after the same event in log DB
              --run CMD        CMD, run by sh with the state as JSON in the file $EVENTLOG_SNAPSHOT and
                               the seq in $EVENTLOG_SEQ, exits 1-127 (but 125); 0 is good, 125 skips the
                               event, anything else aborts, as with 'git bisect run'
            --where and --run binary-search (once bad, the state is taken to stay bad): about log2(range)
            probes, each from the nearest keyframe; --linear scans every event for the exact first one,
            and so does --where when the last event is good. --replay and --against always scan. Exit 0 when a first bad event is found, 1 when every
            event in range is good.
            """,
        options: [
            .init(name: "where", value: "EXPR", help: "Bad when the state after the event satisfies EXPR."),
            .init(name: "replay", value: nil, help: "Bad when today's code disagrees with the recording."),
            .init(name: "against", value: "DB", help: "Bad when the state differs from log DB's after the same event."),
            .init(name: "run", value: "CMD", help: "Bad when CMD exits 1-127 except 125 (skip); 0 is good."),
            .init(name: "from", value: "N", help: "The first event to consider (default 1)."),
            .init(name: "to", value: "N", help: "The last event to consider (default: the newest)."),
            .init(name: "linear", value: nil, help: "Scan every event instead of binary search (--where, --run)."),
        ] + [app.variantOption].compactMap { $0 }
    ) { arguments, context in
        let modes = ["where", "replay", "against", "run"].filter { arguments.value($0) != nil || arguments.flag($0) }
        guard modes.count == 1 else {
            throw CLIError.usage(modes.isEmpty ? "say what bad is with --where, --replay, --against or --run"
                                               : "use only one of " + modes.map { "--\($0)" }.joined(separator: ", "))
        }
        let predicate = try wherePredicate(arguments)
        let projection = try projections(arguments, context)
        let store = try context.openStore()
        let last = try attempt { try store.lastSeq() }
        let (from, asked) = try arguments.range(in: store)
        let to = min(last, asked)
        guard from <= to else {
            throw CLIError.badInput(last == 0 ? "the log is empty" : "nothing to bisect in \(from)-\(to) (the log holds \(try attempt { try LogCommands.range(store) }))")
        }

        var answer = Answer(result: BisectResult(firstBad: nil, probes: 0))
        switch modes[0] {
        case "where":
            answer.result = try attempt { try store.firstEvent(where: predicate!, from: from, to: to, linear: arguments.flag("linear")) }
        case "replay":
            let report = try attempt { try store.replay(through: projection, from: from, to: to, verify: true) }
            answer.result = BisectResult(firstBad: report.unreadable?.record.seq ?? report.divergence?.seq, probes: Int(report.events), scanned: true)
            answer.divergence = report.divergence
            answer.unreadable = report.unreadable?.reason
        case "against":
            let other = try otherLog(arguments.value("against")!)
            let difference = try attempt { try store.firstDifference(from: other, from: from, to: to) }
            answer.result = BisectResult(firstBad: difference?.seq, probes: Int((difference?.seq ?? to) - from + 1), scanned: true)
            answer.against = difference?.diff
        default:
            let command = arguments.value("run")!
            let probe = CommandProbe(command: command, store: store, console: context.console)
            defer { probe.cleanUp() }
            answer.result = try attempt { try Bisection.firstBad(in: from...to, linear: arguments.flag("linear"), probe: probe.verdict) }
        }
        if let predicate, answer.result.firstBad == nil { try warnOfAbsentPaths(predicate, store: store, from: from, to: to, context: context) }
        try report(answer, store: store, context: context)
        return answer.result.firstBad == nil ? .problem : .ok
    } }

    /// `--where EXPR` parsed; a syntax error is bad input naming the column.
    package static func wherePredicate(_ arguments: ParsedArguments) throws(CLIError) -> StatePredicate? {
        try arguments.value("where").map { (text) throws(CLIError) in
            do { return try StatePredicate(parsing: text) } catch { throw CLIError.badInput("--where \(error)") }
        }
    }

    /// The log at `path` (`--against DB`), opened read-only; one that cannot be opened is unavailable.
    static func otherLog(_ path: String) throws(CLIError) -> EventStore {
        var options = EventStore.Options()
        options.readOnly = true
        do { return try EventStore(path: path, options: options) } catch { throw CLIError.unavailable("cannot open \(path): \(error)") }
    }

    /// A path no state in the range holds (a typo such as `messenger.selectedtab`) reads as
    /// null everywhere and answers a question nobody asked: say so on stderr, with the
    /// nearest path the newest state holds.
    static func warnOfAbsentPaths(_ predicate: StatePredicate, store: EventStore, from: UInt64, to: UInt64, context: CommandContext) throws(CLIError) {
        for absent in try absentPaths(predicate, store: store, from: from, to: to) {
            context.console.error(absent.warning(where: "in \(from)-\(to)"))
        }
    }

    /// A path of a predicate that no state searched holds, and the nearest one the newest
    /// state holds, if any is near.
    package struct AbsentPath: Sendable {
        package var path: StatePath
        package var suggestion: StatePath?

        package init(path: StatePath, suggestion: StatePath?) {
            self.path = path
            self.suggestion = suggestion
        }

        /// The warning line, `where` saying which states were searched ("in 1-300").
        package func warning(where states: String) -> String {
            "warning: no state \(states) holds \(path), which reads as null\(suggestion.map { "; did you mean \($0)?" } ?? "")\n"
        }
    }

    /// The paths of `predicate` that no state in `from`-`to` of `store` holds, in the
    /// predicate's order.
    package static func absentPaths(_ predicate: StatePredicate, store: EventStore, from: UInt64, to: UInt64) throws(CLIError) -> [AbsentPath] {
        var absent: [AbsentPath] = []
        for path in predicate.paths {
            let everPresent = try attempt { () throws -> Bool in
                var found = false
                try store.forEachState(from: from, to: to) { _, state in
                    found = state[path] != nil
                    return !found
                }
                return found
            }
            guard !everPresent else { continue }
            let newest = try attempt { try store.snapshot(after: to) }
            absent.append(AbsentPath(path: path, suggestion: PathSuggestion.nearest(to: path, in: newest)))
        }
        return absent
    }

    /// What bisect found, with the extras of its mode.
    struct Answer {
        var result: BisectResult
        var divergence: Divergence?
        /// Why today's code cannot read the first bad event (`--replay`).
        var unreadable: String?
        var against: [Write]?
    }

    static func report(_ answer: Answer, store: EventStore, context: CommandContext) throws(CLIError) {
        let found: (record: EventRecord, diff: [Write])? = try attempt {
            guard let seq = answer.result.firstBad, let record = try store.record(seq) else { return nil }
            return (record, try store.snapshot(after: seq - 1).diff(to: try store.snapshot(after: seq)))
        }
        if context.json {
            var object: [(String, StateValue)] = [
                ("candidates", .array(answer.result.candidates.map { .int(Int64($0)) })),
                ("diff", .array((found?.diff ?? []).map(\.jsonValue))),
                ("event", found?.record.jsonValue ?? .null),
                ("firstBad", found.map { .int(Int64($0.record.seq)) } ?? .null),
                ("probes", .int(Int64(answer.result.probes))),
                ("scanned", .bool(answer.result.scanned)),
                ("writes", .array((found?.record.event.writes ?? []).map(\.jsonValue))),
            ]
            if let divergence = answer.divergence {
                object.append(("actual", .array(divergence.actual.writes.map(\.jsonValue))))
                object.append(("missing", .array(divergence.missing.map(\.jsonValue))))
            }
            if let unreadable = answer.unreadable { object.append(("unreadable", .string(unreadable))) }
            if let against = answer.against { object.append(("against", .array(against.map(\.jsonValue)))) }
            var sorted = StateObject()
            for (key, value) in object.sorted(by: { $0.0 < $1.0 }) { sorted[key] = value }
            context.printJSON(.object(sorted))
            return
        }
        guard let found else {
            if !answer.result.candidates.isEmpty {
                context.console.line("only skipped events are left; the first bad event is one of: "
                                     + answer.result.candidates.map(String.init).joined(separator: ", ")
                                     + " (\(answer.result.probes) probes)")
            } else {
                context.console.line("no bad event in range (\(answer.result.probes) probes)")
            }
            return
        }
        context.console.line("first bad event: \(found.record.seq) (\(answer.result.probes) probes\(answer.result.scanned ? ", scanning every event" : ""))")
        context.console.line(describe(found.record, previousSeq: found.record.seq - 1, diff: found.diff).joined(separator: "\n"))
        if let divergence = answer.divergence { context.console.line(describe(divergence).joined(separator: "\n")) }
        if let unreadable = answer.unreadable { context.console.line("  today's code cannot read it: \(Render.escaped(unreadable))") }
        if let against = answer.against {
            context.console.line("  this log against the other after \(found.record.seq):")
            context.console.line(Render.diff(against, colors: context.console.usesColors).map { "    " + $0 }.joined(separator: "\n"))
        }
    }

    /// The event, its origin and cause, its writes, and optionally its diff.
    package static func describe(_ record: EventRecord, previousSeq: UInt64?, diff: [Write] = []) -> [String] {
        let event = record.event
        var lines = ["  event   \(Render.escaped(event.stream))/\(Render.stepName(event))  \(event.outcome.name)  (origin \(event.origin.rawValue), \(record.time))"]
        if let cause = event.cause {
            lines.append("  cause   \(Render.escaped(cause.id)) step \(cause.step)" + (cause.source.isEmpty ? "" : ": \(Render.escaped(cause.source))"))
        }
        if case .skipped(let reason) = event.outcome { lines.append("  reason  \(Render.escaped(reason))") }
        lines.append("  writes  " + (event.writes.isEmpty ? "(none)" : event.writes.map(Render.write).joined(separator: "; ")))
        if let previousSeq {
            lines.append("  diff against the state after \(previousSeq):")
            lines += diff.isEmpty ? ["    (none)"] : Render.diff(diff).map { "    " + $0 }
        }
        return lines
    }

    /// Today's code against the recording at a divergence.
    package static func describe(_ divergence: Divergence) -> [String] {
        var lines = divergence.upcast.map { "  upcast  \(Render.escaped(EventShape($0).description)) \(Render.escaped($0.payload.json()))" }
        lines += ["  today's code: \(divergence.actual.outcome.name)"
                     + (divergence.actual.writes.isEmpty ? ", no writes" : ", writes " + divergence.actual.writes.map(Render.write).joined(separator: "; "))]
        if case .skipped(let reason) = divergence.actual.outcome { lines.append("    because \(Render.escaped(reason))") }
        for write in divergence.missing { lines.append("  missing write: \(Render.write(write))") }
        for write in divergence.unexpected { lines.append("  unexpected write: \(Render.write(write))") }
        lines.append("  recorded state against today's after \(divergence.seq):")
        lines += Render.diff(divergence.diff).map { "    " + $0 }
        return lines
    }
}

/// Runs a bisect command for one event: the snapshot goes to a file named by
/// `$EVENTLOG_SNAPSHOT`, the seq to `$EVENTLOG_SEQ`, and the exit code is the verdict.
final class CommandProbe {
    let command: String
    let store: EventStore
    let console: Console
    let file = NSTemporaryDirectory() + "eventlog-snapshot-\(UUID().uuidString).json"

    init(command: String, store: EventStore, console: Console) {
        self.command = command
        self.store = store
        self.console = console
    }

    /// Verdicts given so far: a scan after a binary search runs no event twice.
    private var verdicts: [UInt64: Verdict] = [:]

    func verdict(_ seq: UInt64) throws -> Verdict {
        if let known = verdicts[seq] { return known }
        let verdict = try run(seq)
        verdicts[seq] = verdict
        return verdict
    }

    private func run(_ seq: UInt64) throws -> Verdict {
        try store.snapshot(after: seq).json().write(toFile: file, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        process.environment = ProcessInfo.processInfo.environment.merging(["EVENTLOG_SNAPSHOT": file, "EVENTLOG_SEQ": String(seq)]) { $1 }
        process.standardOutput = FileHandle.standardError
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { throw CLIError.badInput("cannot run /bin/sh: \(error)") }
        process.waitUntilExit()
        let status = process.terminationStatus
        console.progress("event \(seq): exit \(status)")
        switch (process.terminationReason, status) {
        case (.exit, 0): return .good
        case (.exit, 125): return .skip
        case (.exit, 1...127): return .bad
        default:
            throw CLIError.badInput("bisect aborted: '\(command)' \(process.terminationReason == .exit ? "exited \(status)" : "was killed by signal \(status)") at event \(seq)")
        }
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: file) }
}

/// The path a mistyped one most likely meant, among those a state holds.
enum PathSuggestion {
    /// The path of `state` nearest to `path`: one that differs only in case, else the one
    /// fewest edits away (and closer than half its length); `nil` when none is near.
    static func nearest(to path: StatePath, in state: StateValue) -> StatePath? {
        let wanted = path.description
        var best: (path: StatePath, distance: Int)?
        var visited = 0
        func visit(_ value: StateValue, at current: StatePath) {
            guard visited < 100_000, current.components.count <= path.components.count else { return }
            visited += 1
            if !current.isRoot {
                let text = current.description
                let distance = text.lowercased() == wanted.lowercased() ? 0 : editDistance(text, wanted)
                if distance < (best?.distance ?? wanted.count / 2 + 1) { best = (current, distance) }
            }
            switch value {
            case .object(let object): for (key, child) in object { visit(child, at: current.appending(key)) }
            case .array(let elements): for (index, child) in elements.enumerated() { visit(child, at: current.appending(index: index)) }
            default: break
            }
        }
        visit(state, at: .root)
        return best?.path
    }

    /// Levenshtein distance over characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1...max(b.count, 1) where !b.isEmpty {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return row[b.count]
    }
}
