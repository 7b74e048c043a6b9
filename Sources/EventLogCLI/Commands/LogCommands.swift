import EventLog
import Foundation

/// The commands that read, check, export and import the log itself.
enum LogCommands {
    static let all: [CommandSpec] = [info, log, history, watch, show, snapshot, diff, verify, salvage, export, ImportCommand.spec, rebuild, CompactCommand.spec]

    static let info = CommandSpec(
        name: "info",
        summary: "Show the log's id, format version, event count, seq range and size of the database."
    ) { _, context in
        let store = try context.openStore()
        let (last, first, keyframes, logID) = try attempt { (try store.lastSeq(), try store.firstSeq(), try store.keyframeCount(), try store.logID) }
        let (base, retention) = try attempt { (try store.base(), try store.retentionPolicy()) }
        let events = last - (base?.seq ?? 0)
        let id = logID?.uuidString.lowercased()
        let fileBytes = (try? FileManager.default.attributesOfItem(atPath: context.databasePath + "/data.mdb")[.size] as? Int) ?? 0
        if context.json {
            let firstSeq: StateValue = first.map { .int(Int64($0)) } ?? .null
            context.printJSON([
                "base": base.map { $0.jsonValue(state: nil)["base"] ?? .null } ?? .null,
                "database": .string(context.databasePath), "events": .int(Int64(events)),
                "fileBytes": .int(Int64(fileBytes)), "firstSeq": firstSeq,
                "format": .int(Int64(store.format)), "keyframeRatio": .int(Int64(store.keyframePolicy.ratio)),
                "keyframes": .int(Int64(keyframes)), "lastSeq": .int(Int64(last)),
                "logId": id.map(StateValue.string) ?? .null, "mapBytes": .int(Int64(store.environment.mapSize)),
                "retention": retention.map { .string($0.description) } ?? .null,
            ])
        } else {
            context.console.line("""
                database   \(context.databasePath)
                log id     \(id ?? "none yet (given the first time the log is opened for writing)")
                format     \(store.format)
                events     \(events)
                first seq  \(first.map(String.init) ?? "-")
                last seq   \(last)
                base       \(base.map(Self.describe) ?? "none (the log starts at its first event)")
                retention  \(retention.map { "\($0) (writers drop older events as they append)" } ?? "none")
                keyframes  \(keyframes) (one once the records since the last add up to \(store.keyframePolicy.ratio)× its size)
                file size  \(Render.bytes(fileBytes))
                map size   \(Render.bytes(store.environment.mapSize))
                """)
        }
        return .ok
    }

    /// `after event 5000 (checksum …); dropped 5000 events: a 3000, b 2000`.
    private static func describe(_ base: LogBase) -> String {
        let streams = base.dropped.sorted { $0.key < $1.key }.map { "\(Render.escaped($0.key)) \($0.value)" }.joined(separator: ", ")
        return "after event \(base.seq) (checksum \(String(format: "%08x", base.checksum))); dropped \(base.seq) events: \(streams)"
    }

    static let rangeOptions: [CommandSpec.Option] = [
        .init(name: "from", value: "N", help: "The first seq (default: the log's first, 1 unless it was compacted)."),
        .init(name: "to", value: "N", help: "The last seq (default: the newest)."),
    ]

    static let filterOptions: [CommandSpec.Option] = [
        .init(name: "stream", value: "S[,S…]", help: "Only events of these streams."),
        .init(name: "type", value: "T[,T…]", help: "Only events of these types."),
        .init(name: "outcome", value: "O[,O…]", help: "Only these outcomes: applied, skipped, cancelled."),
        .init(name: "hide-noop", value: nil, help: "Leave out events that wrote nothing."),
        .init(name: "touching", value: "PATH", help: "Only events that wrote PATH, under it, or an object holding it."),
    ]

    static let log = CommandSpec(
        name: "log",
        summary: "List events, one line each: seq, time, origin, outcome, stream/type and writes.",
        discussion: """
            With --json, one JSON record per line (NDJSON), as 'export' writes them. The filters
            combine: every one given must hold.
            """,
        options: rangeOptions + filterOptions + [
            .init(name: "follow", value: nil, help: "Then print each new event as it commits, from any process, until Ctrl-C or the reader closes the pipe."),
        ]
    ) { arguments, context in
        let filter = try eventFilter(arguments)
        let store = try context.openStore()
        func print(_ record: EventRecord) {
            guard filter.keeps(record.event) else { return }
            if context.json { context.console.line(record.jsonValue.json()) } else { context.console.row(Render.logLine(record, colors: context.console.usesColors)) }
        }
        guard arguments.flag("follow") else {
            let (from, to) = try arguments.range(in: store)
            guard from <= to else { throw CLIError.badInput("--from \(from) is after --to \(to)") }
            try attempt { try store.forEachRecord(matching: filter, from: from, to: to) { print($0); return true } }
            return .ok
        }
        guard arguments.value("to") == nil else { throw CLIError.usage("--follow has no end: leave out --to") }
        // A reader that goes away must end the command, not kill it.
        signal(SIGPIPE, SIG_IGN)
        let from = try arguments.range(in: store).from
        try attempt {
            try store.follow(after: from - 1, stop: { context.console.isOutputClosed }) { records in
                records.forEach(print)
                context.console.flush()
                return !context.console.isOutputClosed
            }
        }
        return .ok
    }

    static let watch = CommandSpec(
        name: "watch",
        summary: "Print a path's value, then each change to it as events commit, from any process.",
        discussion: """
            Each line is the seq of the event that changed it and the new value (absent when it was
            removed); with --where, whether the expression holds, each time that changes. Runs until
            Ctrl-C or the reader closes the pipe.
            """,
        arguments: [.init(name: "PATH", help: "A state path, such as messenger.listFilter.", isOptional: true)],
        options: [.init(name: "where", value: "EXPR", help: "Watch whether this expression holds instead of a path.")]
    ) { arguments, context in
        let path = try arguments.positionals.first.map { (text) throws(CLIError) in try statePath(text, "PATH") }
        let predicate = try arguments.value("where").map { (text) throws(CLIError) -> StatePredicate in
            do { return try StatePredicate(parsing: text) } catch { throw CLIError.usage("--where: \(error)") }
        }
        guard (path == nil) != (predicate == nil) else { throw CLIError.usage("give a PATH or --where EXPR, one of them") }
        let store = try context.openStore()
        signal(SIGPIPE, SIG_IGN)
        let start = try attempt { try store.lastSeq() }
        let state = try attempt { try store.snapshot(after: start) }
        func show(_ seq: UInt64, _ current: StateValue?) {
            let text = current.map { $0.json() } ?? "(absent)"
            context.console.line(context.json ? StateValue.object(["seq": .int(Int64(seq)), "value": current ?? .null]).json() : "\(seq)  \(text)")
        }
        // A path is followed through write sets alone; an expression needs the whole state.
        var tracker: any Watched = path.map { ObservedValue($0, in: state) as any Watched } ?? ObservedPredicate(predicate!, in: state)
        show(start, tracker.shown)
        context.console.flush()
        try attempt {
            try store.follow(after: start, stop: { context.console.isOutputClosed }) { records in
                for record in records where try tracker.apply(record.event.writes) {
                    show(record.seq, tracker.shown)
                }
                context.console.flush()
                return !context.console.isOutputClosed
            }
        }
        return .ok
    }

    static let history = CommandSpec(
        name: "history",
        summary: "Every event that changed a path or a path under it, with old → new: who wrote it.",
        discussion: """
            A write to an object that holds the path counts when it changed the value at the path
            (the line shows the value at the path before and after). With --json, one line per event:
            its seq, time, origin, stream, type, cause and the writes as seen from the path.
            """,
        arguments: [.init(name: "PATH", help: "A state path, such as messenger.listFilter.")],
        options: rangeOptions
    ) { arguments, context in
        let path = try statePath(arguments.positionals[0], "PATH")
        let store = try context.openStore()
        let (from, to) = try arguments.range(in: store)
        guard from <= to else { throw CLIError.badInput("--from \(from) is after --to \(to)") }
        var changes = 0
        // Write sets are scanned; only the events that changed the path are read whole.
        try attempt { try store.forEachChange(of: path, from: from, to: to) { seq, writes in
            guard let record = try store.record(seq) else { return false }
            changes += 1
            if context.json {
                var line = record.jsonValue.objectValue ?? StateObject()
                line["writes"] = .array(writes.map(\.jsonValue))
                line["payload"] = nil
                context.printJSON(.object(line))
            } else {
                var event = record.event
                event.writes = writes
                var shown = record
                shown.event = event
                context.console.row(Render.logLine(shown, colors: context.console.usesColors))
            }
            return true
        } }
        if !context.json, changes == 0 { context.console.line("no event changed \(Render.escaped(path.description))") }
        return .ok
    }

    /// The `--stream`, `--type`, `--outcome`, `--hide-noop` and `--touching` options.
    static func eventFilter(_ arguments: ParsedArguments) throws(CLIError) -> EventFilter {
        func list(_ name: String) throws(CLIError) -> Set<String>? {
            guard let text = arguments.value(name) else { return nil }
            let items = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !items.isEmpty, !items.contains(where: \.isEmpty) else { throw CLIError.usage("--\(name) needs names separated by commas, not \"\(text)\"") }
            return Set(items)
        }
        let outcomes = try list("outcome")
        if let unknown = outcomes?.subtracting(EventFilter.outcomeNames).sorted().first {
            throw CLIError.usage("--outcome takes applied, skipped or cancelled, not \"\(unknown)\"")
        }
        return EventFilter(streams: try list("stream"), types: try list("type"), outcomes: outcomes, hideNoOps: arguments.flag("hide-noop"),
                           touching: try arguments.value("touching").map { (text) throws(CLIError) in try statePath(text, "--touching") })
    }

    static func statePath(_ text: String, _ what: String) throws(CLIError) -> StatePath {
        do { return try StatePath(parsing: text) } catch { throw CLIError.usage("\(what) \(text): \(error)") }
    }

    static let show = CommandSpec(
        name: "show",
        summary: "Show one event: its record, its write set and the state after it.",
        arguments: [.init(name: "N", help: "The seq of the event.")],
        options: [.init(name: "path", value: "PATH", help: "Show only the state at PATH after the event.")]
    ) { arguments, context in
        let seq = try arguments.seq(at: 0, "N")!
        let path = try arguments.value("path").map { (text) throws(CLIError) in try statePath(text, "--path") }
        let store = try context.openStore()
        var (record, state) = try attempt { () throws -> (EventRecord?, StateValue) in
            guard let record = try store.record(seq) else { return (nil, .null) }
            return (record, try store.snapshot(after: seq))
        }
        guard let record else { throw CLIError.badInput(try attempt { "no event \(seq): the log holds \(try range(store))" }) }
        if let path { state = state[path] ?? .null }
        if context.json {
            context.printJSON(["record": record.jsonValue, "state": state])
            return .ok
        }
        let event = record.event
        var lines = [
            "seq       \(record.seq)",
            "time      \(record.time)",
            "stream    \(Render.escaped(event.stream))",
            "type      \(Render.escaped(event.type))" + (event.version == 1 ? "" : " (version \(event.version))"),
            "origin    \(event.origin.rawValue)",
        ]
        if let cause = event.cause {
            lines.append("cause     \(Render.escaped(cause.id)) step \(cause.step)" + (cause.source.isEmpty ? "" : " (\(Render.escaped(cause.source)))"))
        }
        switch event.outcome {
        case .skipped(let reason): lines.append("outcome   skipped: \(Render.escaped(reason))")
        default: lines.append("outcome   \(event.outcome.name)")
        }
        lines.append("payload   \(event.payload.json())")
        lines.append("checksum  \(String(format: "%08x", record.checksum))")
        lines.append("writes    \(event.writes.isEmpty ? "(none)" : "")")
        lines += event.writes.map { "  " + Render.write($0) }
        lines.append("state after \(record.seq)\(path.map { " at \($0)" } ?? ""):")
        lines.append(state.json(pretty: true))
        context.console.line(lines.joined(separator: "\n"))
        return .ok
    }

    static let snapshot = CommandSpec(
        name: "snapshot",
        summary: "Print the state right after event N (from the nearest keyframe plus write sets).",
        arguments: [.init(name: "N", help: "The seq (default: the newest; 0 is the empty state before the first event).", isOptional: true)],
        options: [.init(name: "path", value: "PATH", help: "Print only the value at PATH, such as messenger.selectedTab.")]
    ) { arguments, context in
        let store = try context.openStore()
        let seq = try arguments.seq(at: 0, "N") ?? attempt { try store.lastSeq() }
        var state = try attempt { try store.snapshot(after: seq) }
        if let text = arguments.value("path") {
            guard let value = state[try statePath(text, "--path")] else { throw CLIError.badInput("nothing at \(text) after event \(seq)") }
            state = value
        }
        context.console.line(state.json(pretty: !context.json))
        return .ok
    }

    static let diff = CommandSpec(
        name: "diff",
        summary: "Show the structural diff between the states after events A and B.",
        discussion: "Lines read '~ path: old → new', '+ path: new' (added) and '- path: old' (removed).",
        arguments: [.init(name: "A", help: "The seq of the older state."), .init(name: "B", help: "The seq of the newer state.")],
        options: [.init(name: "path", value: "PATH", help: "Only the differences at PATH or under it.")]
    ) { arguments, context in
        let a = try arguments.seq(at: 0, "A")!
        let b = try arguments.seq(at: 1, "B")!
        let path = try arguments.value("path").map { (text) throws(CLIError) in try statePath(text, "--path") }
        let store = try context.openStore()
        var writes = try attempt { try store.snapshot(after: a).diff(to: try store.snapshot(after: b)) }
        if let path { writes = writes.compactMap { $0.seen(from: path) } }
        if context.json {
            context.printJSON(["from": .int(Int64(a)), "to": .int(Int64(b)), "writes": .array(writes.map(\.jsonValue))])
        } else if writes.isEmpty {
            context.console.line("no differences between the states after \(a) and \(b)")
        } else {
            context.console.line(Render.diff(writes, colors: context.console.usesColors).joined(separator: "\n"))
        }
        return .ok
    }

    static let verify = CommandSpec(
        name: "verify",
        summary: "Check every checksum, the dense sequence, every keyframe and the read models against the log.",
        discussion: """
            Stops at the first problem and prints its seq; exits 1 when it finds one. The objects'
            read model must equal the objects of the newest state, entry by checksummed entry
            ('eventlog rebuild' makes it anew).
            """
    ) { _, context in
        let report: VerificationReport
        do throws(CLIError) {
            report = try verification(context)
        } catch {
            // Damage found on opening (a truncated file, a broken meta page) is a finding too.
            guard error.code == .problem else { throw error }
            report = VerificationReport(problem: .init(seq: 0, reason: error.message))
        }
        if context.json {
            let problem: StateValue = report.problem.map { ["reason": .string($0.reason), "seq": .int(Int64($0.seq))] } ?? .null
            context.printJSON(["events": .int(Int64(report.eventsChecked)), "keyframes": .int(Int64(report.keyframesChecked)),
                               "ok": .bool(report.isOK), "problem": problem])
        } else if let problem = report.problem, problem.seq == 0 {
            context.console.line("problem in the storage: \(Render.escaped(problem.reason))")
        } else if let problem = report.problem {
            context.console.line("problem at seq \(problem.seq): \(Render.escaped(problem.reason)) (\(report.eventsChecked) events good before it)")
        } else {
            let base = try attempt { try context.openStore().base() }
            let events = base.map { "events \($0.firstSeq)-\(report.eventsChecked) from the base after \($0.seq)" } ?? "\(report.eventsChecked) events"
            context.console.line("ok: \(events) and \(report.keyframesChecked) keyframes verified")
        }
        return report.isOK ? .ok : .problem
    }

    static let export = CommandSpec(
        name: "export",
        summary: "Write events as JSON lines (one record per line) to stdout, for 'import' or other tools.",
        discussion: """
            A compacted log's export starts with its base on a line of its own ({"base": …}: the state
            after the last event dropped, its checksum, the events dropped per stream and their digests),
            unless --from starts after the log's first event; 'import' makes the same log of it.
            """,
        options: rangeOptions
    ) { arguments, context in
        let store = try context.openStore()
        if let base = try attempt({ try store.base() }), try arguments.range(in: store).from == base.firstSeq {
            context.console.line(try attempt { base.jsonValue(state: try store.snapshot(after: base.seq)).json() })
        }
        try forEachRecord(in: store, arguments) { context.console.line($0.jsonValue.json()) }
        return .ok
    }

    /// The log's own checks, then its read models against it.
    private static func verification(_ context: CommandContext) throws(CLIError) -> VerificationReport {
        if let damage = try attempt({ try EventStore.verifyStorage(at: context.databasePath) }) {
            return VerificationReport(problem: damage)
        }
        let store = try context.openStore()
        var report = try attempt { try store.verify { context.console.progress("verified \($0) events") } }
        context.console.endProgress()
        if report.isOK, let problem = try attempt({ try context.app.readModelProblem(in: store) }) {
            report.problem = .init(seq: report.eventsChecked, reason: problem)
        }
        return report
    }

    static let salvage = CommandSpec(
        name: "salvage",
        summary: "Copy every good event of a damaged log into a new database, and say what stays behind.",
        discussion: """
            Copies the events from 1 up to the first one that is damaged (its record does not read
            back, or its writes do not match the state), with their seqs, times and contents; each
            event builds on the ones before it, so the first damaged one and all after it stay
            behind. The new database gets its own keyframes and read models. Exits 1 when
            something stayed behind.
            """,
        options: [.init(name: "into", value: "NEW_DB", help: "The database to create (it must not hold events).", formerNames: ["to"])]
    ) { arguments, context in
        guard let targetPath = arguments.value("into") else { throw CLIError.usage("missing --into NEW_DB") }
        guard URL(fileURLWithPath: targetPath).standardizedFileURL.resolvingSymlinksInPath()
                != URL(fileURLWithPath: context.databasePath).standardizedFileURL.resolvingSymlinksInPath() else {
            throw CLIError.usage("--into must name a new database, not the damaged one (--db)")
        }
        // A log whose storage is damaged is read from its file, never through LMDB.
        let damage = try attempt { try EventStore.verifyStorage(at: context.databasePath) }
        let store = damage == nil ? try context.openStore() : nil
        let newDatabase = NewDatabase(at: targetPath)
        var targetContext = context
        targetContext.databasePath = targetPath
        let target = try targetContext.openStore(writable: true)
        guard try attempt({ try target.lastSeq() }) == 0 else {
            throw CLIError.badInput("\(targetPath) already holds events; salvage into a new database")
        }
        let report = try attempt(writingTo: targetPath) {
            let progress = { (copied: UInt64) in context.console.progress("copied \(copied) events") }
            let report = try store?.salvage(into: target, progress: progress)
                ?? EventStore.salvage(damagedLogAt: context.databasePath, into: target, progress: progress)
            for readModel in try context.app.readModels(for: target) { try readModel.rebuild() }
            return report
        }
        context.console.endProgress()
        if report.copied == nil { newDatabase.removeIfStillEmpty() }
        if context.json {
            let copied: StateValue = report.copied.map { .int(Int64($0.upperBound)) } ?? 0
            let left: StateValue = report.firstLeftBehind.map { ["firstSeq": .int(Int64($0.seq)), "lastSeq": .int(Int64(report.lastSeq)),
                                                                 "reason": .string($0.reason)] } ?? .null
            context.printJSON(["copied": copied, "leftBehind": left, "to": .string(targetPath)])
        } else {
            context.console.line(report.copied.map { "copied events \($0.lowerBound)-\($0.upperBound) into \(targetPath)" } ?? "copied no event")
            if let left = report.firstLeftBehind {
                let rest = report.lastSeq > left.seq ? " and the \(report.lastSeq - left.seq) events after it (to \(report.lastSeq))" : ""
                context.console.line("left behind: event \(left.seq) (\(Render.escaped(left.reason)))\(rest)")
            }
        }
        return report.firstLeftBehind == nil ? .ok : .problem
    }

    static let rebuild = CommandSpec(
        name: "rebuild",
        summary: "Make the read models (such as the objects' current versions) anew from the log.",
        discussion: "For a read model that 'verify' found damaged; the log itself is not changed.",
        writes: true
    ) { _, context in
        guard EventStore.exists(at: context.databasePath) else {
            throw CLIError.unavailable("cannot open \(context.databasePath): no event log at \(context.databasePath)")
        }
        let store = try context.openStore(writable: true)
        let rebuilt = try attempt(writingTo: context.databasePath) {
            try context.app.readModels(for: store).map { (model: $0, count: try $0.rebuild()) }
        }
        if context.json {
            var counts = StateObject()
            for (model, count) in rebuilt { counts[model.entries] = .int(Int64(count)) }
            context.printJSON(.object(counts))
        } else if rebuilt.isEmpty {
            context.console.line("\(context.app.name) keeps no read models: nothing to rebuild")
        } else {
            for (model, count) in rebuilt { context.console.line("rebuilt \(model.name): \(count) \(model.entries)") }
        }
        return .ok
    }

    /// Calls `body` for each record in the --from/--to range.
    static func forEachRecord(in store: EventStore, _ arguments: ParsedArguments, _ body: (EventRecord) -> Void) throws(CLIError) {
        let (from, to) = try arguments.range(in: store)
        guard from <= to else { throw CLIError.badInput("--from \(from) is after --to \(to)") }
        try attempt { try store.forEachRecord(from: from, to: to) { body($0); return true } }
    }

    static func range(_ store: EventStore) throws -> String {
        let (last, first) = (try store.lastSeq(), try store.firstSeq())
        return first.map { "\($0)-\(last)" } ?? "no events"
    }
}

/// What `watch` prints of a tracked value.
protocol Watched: StateTracker {
    var shown: StateValue? { get }
}

extension ObservedValue: Watched {
    var shown: StateValue? { value }
}

extension ObservedPredicate: Watched {
    var shown: StateValue? { .bool(value) }
}
