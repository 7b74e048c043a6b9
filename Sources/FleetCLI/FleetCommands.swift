import EventLog
import EventLogCLI
import Fleet
import Foundation

/// `eventlog ship`, `pull` and `fleet`: logs of many installs in NATS JetStream.
package enum FleetCommands {
    static let all: [CommandSpec] = [ship, pull, fleet]

    static let streamOption = CommandSpec.Option(name: "stream", value: "NAME", help: "The JetStream stream (default EVENTLOG).")
    static let timeoutOption = CommandSpec.Option(name: "timeout", value: "SECONDS", help: "How long the server may take to answer (default 5).")

    /// `--servers URLS`, which `ship` called `--to` and `pull` and `fleet` called `--from`.
    static func serversOption(formerly former: String) -> CommandSpec.Option {
        CommandSpec.Option(name: "servers", value: "URLS", help: "The NATS servers: nats://host:port, several comma-separated (else $EVENTLOG_NATS).",
                           formerNames: [former])
    }

    static let ship = CommandSpec(
        name: "ship",
        summary: "Publish the log's records that the stream does not hold yet to NATS JetStream.",
        discussion: """
            Records go as stored (checksum included) to the subject eventlog.<log id>, in runs of
            as many as a message carries (at most 1,024), each with message id
            <log id>:<first>-<last> and the subject's expected last sequence: a shipper killed at
            any point and run again neither loses nor duplicates a record, and a gap is refused.
            Where the stream stands is asked of the stream at every start, and kept beside the log;
            another copy of the log that went its own way (a fork) is refused, even shipping at the
            same time, and so is a stream that lost records of the log. The stream (subjects
            eventlog.>, file storage) is created when missing, with --replicas copies; an existing
            one whose limits would drop acknowledged records (max_msgs_per_subject, max_age,
            max_msgs or max_bytes with discard old, interest or work-queue retention, memory
            storage) is refused.
            A record over the server's max_payload stops the shipping there, saying so. A server
            that cannot be reached exits 3; shipping again resumes.
              eventlog ship --servers nats://127.0.0.1:4222 --follow
            """,
        options: [
            serversOption(formerly: "to"),
            streamOption,
            .init(name: "replicas", value: "N", help: "The copies a new stream keeps (default 1; 3 on a cluster of three)."),
            .init(name: "follow", value: nil, help: "Then ship each new event as it commits, until Ctrl-C."),
            timeoutOption,
        ],
        writes: true
    ) { arguments, context in
        let store = try context.openStore(writable: true)
        var shipper = Shipper(store: store, servers: try servers(arguments))
        shipper.stream = try stream(arguments)
        shipper.replicas = try arguments.count("replicas") ?? 1
        guard shipper.replicas <= 5 else { throw CLIError.usage("--replicas must be at most 5 (JetStream's limit), not \(shipper.replicas)") }
        shipper.timeout = try arguments.seconds("timeout") ?? 5
        let report = try fleetAttempt(writingTo: context.databasePath) {
            try shipper.ship(follow: arguments.flag("follow"), stop: { context.console.isOutputClosed }) { report in
                context.console.progress("shipped \(report.shipped) (through seq \(report.through))")
            }
        }
        context.console.endProgress()
        if context.json {
            context.printJSON(["logId": .string(report.logID.uuidString.lowercased()), "shipped": .int(Int64(report.shipped)),
                               "through": .int(Int64(report.through)), "stream": .string(shipper.stream)])
        } else {
            context.console.line("shipped \(report.shipped) events of log \(report.logID.uuidString.lowercased()) to \(shipper.stream); it holds 1-\(report.through)")
        }
        return .ok
    }

    static let pull = CommandSpec(
        name: "pull",
        summary: "Copy one log out of NATS JetStream into the database, record for record, byte for byte.",
        discussion: """
            The database must be new or an earlier copy of the same log: a second pull copies only
            what is new, and only when the copy's newest record is the stream's record of that seq,
            byte for byte (another history of the log, a fork, is refused, changing nothing). Every
            record's checksum is checked, seqs must follow on without a gap, and writes are checked
            against the state; the copy exports byte for byte as the original.
              eventlog pull --servers nats://127.0.0.1:4222 --log 3f2a…-… --db ./install-42.lmdb
            """,
        options: [
            serversOption(formerly: "from"),
            .init(name: "log", value: "ID", help: "The log's id (eventlog fleet list; eventlog info shows a log's own)."),
            streamOption,
            .init(name: "follow", value: nil, help: "Then copy each new record as it arrives, until Ctrl-C."),
            timeoutOption,
        ],
        writes: true
    ) { arguments, context in
        guard let text = arguments.value("log") else { throw CLIError.usage("pull needs --log ID (see eventlog fleet list)") }
        guard let logID = UUID(uuidString: text) else { throw CLIError.usage("--log must be a log id (a UUID), not \"\(Render.escaped(text))\"") }
        var puller = Puller(servers: try servers(arguments))
        puller.stream = try stream(arguments)
        puller.timeout = try arguments.seconds("timeout") ?? 5
        let store = try context.openStore(writable: true)
        let report = try fleetAttempt(writingTo: context.databasePath) {
            try puller.pull(logID, into: store, follow: arguments.flag("follow"), stop: { context.console.isOutputClosed }) { report in
                context.console.progress("pulled \(report.pulled) (through seq \(report.through))")
            }
        }
        context.console.endProgress()
        if context.json {
            context.printJSON(["logId": .string(logID.uuidString.lowercased()), "pulled": .int(Int64(report.pulled)),
                               "through": .int(Int64(report.through))])
        } else {
            context.console.line("pulled \(report.pulled) events of log \(logID.uuidString.lowercased()); the copy holds 1-\(report.through)")
        }
        return .ok
    }

    static let fleet = CommandSpec(
        name: "fleet",
        summary: "The logs in a NATS JetStream stream: list them, bisect them all by a predicate or by replay, or count how they ended.",
        discussion: """
            A message on a log's subject that is not one of its records is reported on stderr (log,
            stream seq) and skipped; the other logs are listed and searched all the same.
            """,
        subcommands: [
            fleetSubcommand("list", "Every log in the stream: its id, events, newest event's time, and where copies refused as forks differ.") { fleet, _, context in
                try list(fleet, context)
            },
            fleetSubcommand("bisect", "Copy each log (--logs, else all) into a scratch directory and find the first event after which"
                            + " --where holds, or, with --replay, the first today's code disagrees with, as many logs at once as"
                            + " there are cores; then how many logs went wrong, the earliest, and the commonest cause.",
                            discussion: #"""
                                  eventlog fleet bisect --servers nats://127.0.0.1:4222 --where 'messenger.selectedTab == "bots" && messenger.listFilter == null'
                                  eventlog fleet bisect --servers nats://127.0.0.1:4222 --replay
                                """#,
                            options: [.init(name: "where", value: "EXPR", help: "The bad state, as for eventlog bisect --where."),
                                      .init(name: "replay", value: nil, help: "Bad when the app's code disagrees with the recording, as for eventlog bisect --replay."),
                                      .init(name: "regression", value: "NAME", help: "With --replay, replay through the app's faulty variant NAME (see eventlog bisect --help)."),
                                      .init(name: "logs", value: "ID[,ID…]", help: "Only these logs.")]) { fleet, arguments, context in
                try bisect(fleet, arguments, context)
            },
            fleetSubcommand("stats", "Copy each log (--logs, else all) and count the logs by the value PATH holds after their newest event:"
                            + " how many, how many reached --where, and the commonest cause of that; memory holds a group per value,"
                            + " whatever the number of logs.",
                            discussion: #"  eventlog fleet stats --servers nats://127.0.0.1:4222 --group-by deploy.workingUpdate --where 'exists(deploy.rejectedUpdates)'"#,
                            options: [.init(name: "group-by", value: "PATH", help: "Group the logs by the value at PATH after their newest event."),
                                      .init(name: "where", value: "EXPR", help: "Count the logs that reached EXPR, as for eventlog bisect --where."),
                                      .init(name: "logs", value: "ID[,ID…]", help: "Only these logs.")]) { fleet, arguments, context in
                try stats(fleet, arguments, context)
            },
        ]
    )

    /// A command that reads the fleet (a `fleet` subcommand, `deploy gate`): the fleet its
    /// servers, stream and timeout describe, handed to `run`.
    package static func fleetSubcommand(_ name: String, _ summary: String, discussion: String? = nil, arguments positionals: [CommandSpec.Argument] = [],
                                        options: [CommandSpec.Option] = [], writes: Bool = false,
                                        run: @escaping @Sendable (Fleet, ParsedArguments, CommandContext) throws -> ExitCode) -> CommandSpec {
        CommandSpec(name: name, summary: summary, discussion: discussion, arguments: positionals,
                    options: [serversOption(formerly: "from"), streamOption] + options + [timeoutOption], writes: writes) { arguments, context in
            var fleet = Fleet(servers: try servers(arguments))
            fleet.stream = try stream(arguments)
            fleet.timeout = try arguments.seconds("timeout") ?? 5
            let console = context.console
            fleet.foreign = { notice in console.error("warning: \(notice)\n") }
            return try run(fleet, arguments, context)
        }
    }

    private static func list(_ fleet: Fleet, _ context: CommandContext) throws(CLIError) -> ExitCode {
        let logs = try fleetAttempt { try fleet.logs() }
        if context.json {
            context.printJSON(["logs": .array(logs.map {
                ["logId": .string($0.logID.uuidString.lowercased()), "events": .int(Int64($0.events)),
                 "lastSeq": .int(Int64($0.lastSeq)), "lastTime": .string($0.lastTime.description),
                 "forkedAt": .array($0.forkedAt.map { .int(Int64($0)) })]
            })])
        } else {
            for log in logs {
                context.console.line("\(log.logID.uuidString.lowercased())  \(Render.column(String(log.events), 9))events  last \(log.lastTime)"
                    + (log.forkedAt.isEmpty ? "" : "  forked: a copy refused from seq " + log.forkedAt.map(String.init).joined(separator: ", ")))
            }
            context.console.line("\(logs.count) log\(logs.count == 1 ? "" : "s") in \(fleet.stream)")
        }
        return .ok
    }

    private static func bisect(_ fleet: Fleet, _ arguments: ParsedArguments, _ context: CommandContext) throws(CLIError) -> ExitCode {
        let text = arguments.value("where"), replaying = arguments.flag("replay")
        guard (text != nil) != replaying else {
            throw CLIError.usage(replaying ? "use only one of --where, --replay" : "say what bad is with --where EXPR or --replay")
        }
        guard replaying || arguments.value("regression") == nil else { throw CLIError.usage("--regression goes with --replay") }
        let predicate = try wherePredicate(text)
        let variant = try AnalysisCommands.variant(arguments, context)
        let logs = try requestedLogs(arguments)
        let scratch = try scratchDirectory()
        defer { rmdir(scratch) }
        let console = context.console
        let progress: @Sendable (Int) -> Void = { done in console.progress("\(done) logs bisected") }
        // The predicate's paths no state of a log holds, with their suggestions, by log: asked,
        // as bisect --where asks, of a log that never reaches the state.
        let absent = AbsentPaths()
        let findings = try fleetAttempt {
            guard let predicate else {
                let app = context.app
                return try fleet.bisect(replayingThrough: { try app.projections(variant) }, logs: logs, scratch: scratch, progress: progress)
            }
            return try fleet.bisect(where: predicate, logs: logs, scratch: scratch, examine: { copy, finding in
                guard finding.events > 0, finding.firstBad == nil else { return }
                absent.add(try AnalysisCommands.absentPaths(predicate, store: copy, from: 1, to: finding.events))
            }, progress: progress)
        }
        context.console.endProgress()
        // When no log reached the state, a path no log's state holds is a typo as surely as in
        // bisect --where.
        let searched = findings.filter { $0.events > 0 }.count
        for path in absent.inEvery(searched) {
            context.console.error(path.warning(where: "of the \(searched) log\(searched == 1 ? "" : "s") searched"))
        }
        let bad = findings.filter { $0.firstBad != nil }
        let causes = Dictionary(grouping: bad, by: { Fleet.cause(of: $0.firstBad!) }).mapValues(\.count)
        let commonest = causes.max { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }
        let earliest = bad.min { $0.firstBad!.time < $1.firstBad!.time }
        if context.json {
            context.printJSON([
                "logs": .array(findings.map { finding in
                    var entry: StateObject = ["logId": .string(finding.logID.uuidString.lowercased()), "events": .int(Int64(finding.events))]
                    entry["firstBad"] = finding.firstBad.map(\.jsonValue) ?? .null
                    if let divergence = finding.divergence {
                        entry["actual"] = .array(divergence.actual.writes.map(\.jsonValue))
                        entry["missing"] = .array(divergence.missing.map(\.jsonValue))
                    }
                    if let unreadable = finding.unreadable { entry["unreadable"] = .string(unreadable) }
                    return .object(entry)
                }),
                "reached": .int(Int64(bad.count)), "total": .int(Int64(findings.count)),
                "earliest": earliest.map { .string($0.logID.uuidString.lowercased()) } ?? .null,
                "commonestCause": commonest.map { .string($0.key) } ?? .null,
            ])
        } else {
            for finding in findings {
                let id = finding.logID.uuidString.lowercased()
                guard let record = finding.firstBad else {
                    context.console.line("\(id)  never (\(finding.events) events)")
                    continue
                }
                context.console.line("\(id)  first bad event \(record.seq) of \(finding.events), \(record.time): \(record.event.stream)/\(Render.stepName(record.event))  cause \(Render.escaped(Fleet.cause(of: record)))")
                for write in record.event.writes { context.console.line("      \(Render.write(write))") }
                if let divergence = finding.divergence {
                    context.console.line(AnalysisCommands.describe(divergence).map { "    " + $0 }.joined(separator: "\n"))
                }
                if let unreadable = finding.unreadable { context.console.line("      today's code cannot read it: \(Render.escaped(unreadable))") }
            }
            context.console.line("\(bad.count) of \(findings.count) logs " + (text.map { "reached \($0)" } ?? "disagree with " + (variant.map { "the code of --regression \($0)" } ?? "today's code"))
                + (earliest.map { "; earliest \($0.logID.uuidString.lowercased()) at \($0.firstBad!.time)" } ?? "")
                + (commonest.map { "; commonest cause \(Render.escaped($0.key)) (\($0.value))" } ?? ""))
        }
        return bad.isEmpty ? .problem : .ok
    }

    /// `--where EXPR` parsed; a syntax error is a usage error naming the column.
    package static func wherePredicate(_ text: String?) throws(CLIError) -> StatePredicate? {
        try text.map { (text) throws(CLIError) -> StatePredicate in
            do { return try StatePredicate(parsing: text) } catch { throw CLIError.usage("--where: \(error)") }
        }
    }

    private static func stats(_ fleet: Fleet, _ arguments: ParsedArguments, _ context: CommandContext) throws(CLIError) -> ExitCode {
        let path = try arguments.value("group-by").map { (text) throws(CLIError) -> StatePath in
            do { return try StatePath(parsing: text) } catch { throw CLIError.usage("--group-by: \(error)") }
        }
        let text = arguments.value("where")
        let predicate = try wherePredicate(text)
        let logs = try requestedLogs(arguments)
        let scratch = try scratchDirectory()
        defer { rmdir(scratch) }
        let console = context.console
        let groups = try fleetAttempt {
            try fleet.stats(groupingBy: path, reaching: predicate, logs: logs, scratch: scratch, progress: { done in console.progress("\(done) logs counted") })
        }
        context.console.endProgress()
        let total = groups.map(\.logs).reduce(0, +), reached = groups.map(\.reached).reduce(0, +)
        if context.json {
            context.printJSON([
                "groups": .array(groups.map { group in
                    var causes = StateObject()
                    for (cause, count) in group.causes { causes[cause] = .int(Int64(count)) }
                    return ["causes": .object(causes), "commonestCause": group.commonestCause.map { .string($0) } ?? .null,
                     "logs": .int(Int64(group.logs)), "reached": .int(Int64(group.reached)), "value": group.value ?? .null, "absent": .bool(group.value == nil)]
                }),
                "logs": .int(Int64(total)), "reached": predicate == nil ? .null : .int(Int64(reached)),
            ])
            return .ok
        }
        let heading = arguments.value("group-by").map(Render.escaped) ?? ""
        let rows = groups.map { group in (path == nil ? "all logs" : group.value.map { Render.escaped($0.json()) } ?? "(absent)", group) }
        let width = max(heading.count, rows.map(\.0.count).max() ?? 0)
        func right(_ number: Int, _ width: Int) -> String { String(repeating: " ", count: max(1, width - String(number).count)) + String(number) }
        context.console.line(heading.padding(toLength: width, withPad: " ", startingAt: 0) + "   logs" + (predicate == nil ? "" : "  reached  commonest cause"))
        for (value, group) in rows {
            context.console.line(value.padding(toLength: width, withPad: " ", startingAt: 0) + right(group.logs, 7)
                + (predicate == nil ? "" : right(group.reached, 9) + (group.commonestCause.map { "  \(Render.escaped($0)) (\(group.causes[$0]!))" } ?? "")))
        }
        context.console.line("\(total) log\(total == 1 ? "" : "s")" + (text.map { "; \(reached) reached \(Render.escaped($0))" } ?? ""))
        return .ok
    }

    /// `--logs ID,…`, or `nil` for every log.
    package static func requestedLogs(_ arguments: ParsedArguments) throws(CLIError) -> [UUID]? {
        try arguments.value("logs").map { (list) throws(CLIError) -> [UUID] in
            try list.split(separator: ",").map { (id) throws(CLIError) -> UUID in
                guard let logID = UUID(uuidString: String(id)) else { throw CLIError.usage("--logs: \"\(Render.escaped(String(id)))\" is not a log id") }
                return logID
            }
        }
    }

    /// A directory this call creates for the copies, to be removed (empty) once they are.
    package static func scratchDirectory() throws(CLIError) -> String {
        let scratch = NSTemporaryDirectory() + "eventlog-fleet-\(UUID().uuidString)"
        guard mkdir(scratch, 0o700) == 0 else { throw CLIError.unavailable("cannot create \(scratch): \(String(cString: strerror(errno)))") }
        return scratch
    }

    /// The paths absent from each log's states, gathered from the threads of a fleet bisect.
    private final class AbsentPaths: Sendable {
        private let found = Locked<[[AnalysisCommands.AbsentPath]]>([])

        /// One log's absent paths.
        func add(_ paths: [AnalysisCommands.AbsentPath]) { found.withLock { $0.append(paths) } }

        /// The paths absent from every one of `count` logs, in the predicate's order, with the
        /// first log's suggestion that has one; none unless `count` logs were added.
        func inEvery(_ count: Int) -> [AnalysisCommands.AbsentPath] {
            found.withLock { found in
                guard count > 0, found.count == count else { return [] }
                return found[0].compactMap { first in
                    let all = found.compactMap { $0.first { $0.path == first.path } }
                    guard all.count == count else { return nil }
                    return AnalysisCommands.AbsentPath(path: first.path, suggestion: all.lazy.compactMap(\.suggestion).first)
                }
            }
        }
    }

    private static func servers(_ arguments: ParsedArguments) throws(CLIError) -> String {
        guard let servers = arguments.value("servers") ?? ProcessInfo.processInfo.environment["EVENTLOG_NATS"], !servers.isEmpty else {
            throw CLIError.usage("give the NATS servers with --servers nats://host:port (or $EVENTLOG_NATS)")
        }
        for url in servers.split(separator: ",") {
            guard let parsed = URLComponents(string: String(url)), ["nats", "tls"].contains(parsed.scheme ?? ""), parsed.host?.isEmpty == false,
                  (parsed.port ?? 4222) > 0, (parsed.port ?? 4222) <= 65_535 else {
                throw CLIError.usage("--servers: \"\(Render.escaped(String(url)))\" is not a NATS server URL (nats://host:port)")
            }
        }
        return servers
    }

    private static func stream(_ arguments: ParsedArguments) throws(CLIError) -> String {
        let name = arguments.value("stream") ?? "EVENTLOG"
        // JetStream's rule for stream names: no spaces, dots, wildcards or path separators.
        guard !name.isEmpty, name.utf8.count <= 255, !name.unicodeScalars.contains(where: { " .*>/\\\t\r\n".unicodeScalars.contains($0) || $0.value < 0x20 }) else {
            throw CLIError.usage("--stream must be a name without spaces, dots, '*', '>' or slashes, not \"\(Render.escaped(name))\"")
        }
        return name
    }
}

/// Runs fleet code and turns its errors into the CLI's: an unreachable server is exit 3, a
/// refusal (a gap, another log's records, a damaged record) exit 1; the log's own errors as
/// `attempt` turns them.
package func fleetAttempt<R>(writingTo database: String? = nil, _ body: () throws -> R) throws(CLIError) -> R {
    try attempt(writingTo: database) {
        do {
            return try body()
        } catch let error as FleetError {
            switch error.kind {
            case .unavailable: throw CLIError.unavailable(error.description)
            case .refused: throw CLIError.problem(error.description)
            }
        }
    }
}
