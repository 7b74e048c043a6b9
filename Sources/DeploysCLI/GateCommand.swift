import Deploys
import EventLog
import EventLogCLI
import Fleet
import FleetCLI
import Foundation

extension DeployCommands {
    /// `deploy gate`: a rollout halted by what the installs that took the update recorded.
    static let gate = FleetCommands.fleetSubcommand(
        "gate", "Halt an update's rollout when more than --max-share of the installs that took it reached --where, as their shipped logs say;"
            + " the decision is an event of this log (--db).",
        discussion: #"""
            An install took the update when its log's deploy.workingUpdate named it after some
            event; it reached --where when that held after the same event or a later one. Each log
            is copied out of the stream into a scratch directory and removed, as fleet stats does.
            The decision (rolloutHalted or rolloutKept, with the counts and the logs that reached
            --where) is appended to --db first; then a tripped gate takes the rollout to 0%, as
            deploy rollout --percent 0 does: installs that have the update keep it until a newer
            one comes. Exit 1 when the share is over --max-share (the rollout is halted, or was
            already), 0 when the rollout may go on, 3 when the fleet cannot be read. A log with
            records missing (a gap) is read up to them, with a warning.
              eventlog deploy gate UPDATE --servers nats://127.0.0.1:4222 --server-dir srv --runtime-version 1 \
                --where 'deploy.phase == "rolledBack"' --max-share 2%
            """#,
        arguments: [.init(name: "UPDATE_ID", help: "The update rolling out.")],
        options: rolloutOptions + [
            .init(name: "where", value: "EXPR", help: "What an install must not reach, as for eventlog bisect --where."),
            .init(name: "max-share", value: "PERCENT", help: "The most of the installs that took the update that may reach it (0 to 100; a trailing % is allowed)."),
            .init(name: "logs", value: "ID[,ID…]", help: "Only these logs."),
        ],
        writes: true
    ) { fleet, arguments, context in
        try gate(arguments.positionals[0], fleet, arguments, context)
    }

    private static func gate(_ update: String, _ fleet: Fleet, _ arguments: ParsedArguments, _ context: CommandContext) throws(CLIError) -> ExitCode {
        guard let serverDirectory = arguments.value("server-dir") else { throw CLIError.usage("deploy gate needs --server-dir SERVER_DIR") }
        guard let runtime = arguments.value("runtime-version") else { throw CLIError.usage("deploy gate needs --runtime-version V") }
        guard let text = arguments.value("where"), let reaching = try FleetCommands.wherePredicate(text) else {
            throw CLIError.usage("deploy gate needs --where EXPR")
        }
        guard let maxShare = try percent(arguments, "max-share") else { throw CLIError.usage("deploy gate needs --max-share PERCENT") }
        let channel = arguments.value("channel")
        let logs = try FleetCommands.requestedLogs(arguments)
        let publisher = DeployPublisher(serverDirectory: serverDirectory)
        let rollout: Rollout
        do throws(DeployError) {
            rollout = try publisher.rolloutUnderWay(of: update, runtimeVersion: runtime, channel: channel)
        } catch {
            throw cliError(error)
        }
        let took: StatePredicate
        do { took = try StatePredicate(parsing: "deploy.workingUpdate == " + StateValue.string(update).json()) } catch {
            throw CLIError.usage("\"\(Render.escaped(update))\" is not an update id")
        }
        // The log before the fleet: a database that cannot be written is found before the reading.
        let store = try context.openStore(writable: true)
        let scratch = try FleetCommands.scratchDirectory()
        defer { rmdir(scratch) }
        let console = context.console
        let members: [Fleet.CohortMember]
        do {
            members = try fleetAttempt {
                try fleet.cohort(entering: took, reaching: reaching, logs: logs, scratch: scratch, progress: { done in console.progress("\(done) logs read") })
            }.sorted { $0.logID.uuidString < $1.logID.uuidString }
        } catch where error.code == .problem {
            // Exit 1 says the gate tripped: a fleet that cannot be read (no such stream or log) is exit 3.
            throw CLIError.unavailable(error.message)
        }
        console.endProgress()
        let reached = members.filter { $0.reached != nil }
        let tripped = GateRules.trips(reached: reached.count, of: members.count, maxShare: maxShare)

        // The decision first, then the change it makes.
        let reachedJSON: [StateValue] = reached.map { member in
            ["logId": .string(member.logID.uuidString.lowercased()), "took": .int(Int64(member.entered.seq)), "reached": .int(Int64(member.reached!.seq))]
        }
        let payload: StateObject = ["update": .string(update), "runtimeVersion": .string(runtime), "channel": StateValue(channel), "where": .string(text),
                                   "took": .int(Int64(members.count)), "reached": .int(Int64(reached.count)), "maxShare": .int(Int64(maxShare)),
                                   "wasPercent": .int(Int64(rollout.percent)), "reachedBy": .array(reachedJSON)]
        let decision = Event(stream: GateRules.stream, type: (tripped ? GateRules.Decision.rolloutHalted : .rolloutKept).rawValue, origin: "gate",
                             payload: .object(payload))
        _ = try attempt(writingTo: context.databasePath) {
            try store.transact { batch in try GateRules.append(decision, at: store.clock.now(), to: &batch) }
        }
        if tripped, rollout.percent > 0 {
            do throws(DeployError) {
                try publisher.rollout(update, runtimeVersion: runtime, channel: channel, percent: 0)
            } catch {
                throw cliError(error)
            }
        }

        if context.json {
            // What was recorded, and what it did.
            var result = payload
            result["halted"] = .bool(tripped)
            result["percent"] = .int(Int64(tripped ? 0 : rollout.percent))
            context.printJSON(.object(result))
            return tripped ? .problem : .ok
        }
        for member in reached {
            let record = member.reached!
            console.line("\(member.logID.uuidString.lowercased())  took it at event \(member.entered.seq); first bad event \(record.seq), \(record.time): "
                         + "\(record.event.stream)/\(Render.stepName(record.event))  cause \(Render.escaped(Fleet.cause(of: record)))")
        }
        let share = members.isEmpty ? 0 : Double(reached.count) * 100 / Double(members.count)
        let counted = "\(reached.count) of \(members.count) install\(members.count == 1 ? "" : "s") that took update \(update) reached \(Render.escaped(text))"
            + " (\(String(format: "%.1f", share))%, \(tripped ? "more than" : "within") the \(maxShare)% allowed)"
        let outcome = !tripped ? "the rollout stays at \(rollout.percent)%"
            : rollout.percent > 0 ? "rollout halted (was \(rollout.percent)%)" : "the rollout was already halted (0%)"
        console.line(counted + ": " + outcome)
        return tripped ? .problem : .ok
    }
}
