import DemoMessenger
import Effects
import EffectsCLI
import EventLog
import EventLogCLI
import Foundation
import Objects

/// The commands that drive the botmessages demo app through the effects engine, built on
/// EventLogCLI's public API alone, as any app's own commands are.
enum MessengerCommands {
    static let all: [CommandSpec] = [open, routes, capture, testgen, shrink, demo]

    static let regressionOption = CommandSpec.Option.regression(Regression.allCases.map { ($0.rawValue, $0.summary) })

    static let open = CommandSpec(
        name: "open",
        summary: "Run a botmessages:// URL's plan against the database and print its trace.",
        discussion: """
            Each step is one event: applied with its writes, skipped with the reason (a failed guard,
            a no-op, a wait that timed out), or cancelled when a newer plan took over. A step that
            waits (a scroll waiting for its list) holds the plan up to its bound. See 'eventlog routes'.
            """,
        arguments: [.init(name: "URL", help: "A botmessages:// URL, such as botmessages://avatar/aria-7/expanded.")],
        options: [
            .init(name: "origin", value: "ORIGIN", help: "Who opened it: tap, url (default), test or capture."),
            regressionOption,
        ],
        writes: true
    ) { arguments, context in
        let url = arguments.positionals[0]
        let origin = try parseOrigin(arguments.value("origin") ?? "url")
        let model = MessengerModel(regression: try parseRegression(arguments))
        let plan: Plan<MessengerEffect>
        do { plan = try MessengerRouter.plan(for: url) } catch { throw CLIError.badInput("\(error)") }
        let engine = try EffectEngine(store: try context.openStore(writable: true), model: model)
        var run = try engine.run(plan, origin: origin)
        var records = run.records
        while case .waiting(let condition, let deadline) = run.status {
            context.console.progress("waiting until \(condition)")
            let remaining = deadline.microsecondsSince1970 - Timestamp.now().microsecondsSince1970
            usleep(UInt32(max(1_000, min(remaining, 50_000))))
            guard let resumed = try engine.resume() else { break }
            run = resumed
            records += run.records
        }
        context.console.endProgress()
        if context.json {
            context.printJSON(["events": .array(records.map(\.jsonValue)), "plan": .string(run.id),
                               "source": .string(url), "status": .string(statusName(run.status))])
        } else {
            context.console.line("\(run.id)  \(Render.escaped(url))  (\(origin.rawValue))")
            for record in records { context.console.row(Render.traceLine(record)) }
            if run.status == .superseded { context.console.line("superseded by a newer plan") }
        }
        return .ok
    }

    static let routes = CommandSpec(
        name: "routes",
        summary: "List the botmessages:// URL map: each route, what it does, an example and its steps."
    ) { _, context in
        if context.json {
            context.printJSON(.array(MessengerRouter.table.map { entry in
                [
                    "example": .string(MessengerRouter.url(for: entry.example)),
                    "pattern": .string("\(MessengerRouter.scheme)://\(entry.pattern)"),
                    "steps": .array(MessengerRouter.steps(for: entry.example).map { .string($0.description) }),
                    "summary": .string(entry.summary),
                ]
            }))
            return .ok
        }
        for entry in MessengerRouter.table {
            context.console.line("\(MessengerRouter.scheme)://\(entry.pattern)")
            context.console.line("    \(entry.summary)")
            context.console.line("    e.g. \(MessengerRouter.url(for: entry.example))")
            context.console.line("    steps: \(MessengerRouter.steps(for: entry.example).map(\.description).joined(separator: ", "))")
        }
        return .ok
    }

    static let capture = CommandSpec(
        name: "capture",
        summary: "Run a capture script: URLs, waits and capture markers that print the state at that point.",
        discussion: """
            One instruction per line ('#' starts a comment):
              open URL            run the URL's plan with origin capture
              wait DURATION       let time pass (250ms, 1.5s) and re-check a waiting plan
              swipe-back          the system pops one screen
              capture NAME [PATH] print the state (or the value at PATH) after the newest event
            """,
        arguments: [.init(name: "SCRIPT", help: "The script file, or - for stdin.")],
        options: [regressionOption],
        writes: true
    ) { arguments, context in
        let source = arguments.positionals[0]
        let text = try context.console.readText(source, limit: 1 << 20, what: "capture script")
        let script: CaptureScript
        do { script = try CaptureScript(parsing: text) } catch { throw CLIError.badInput("\(source) \(error)") }
        for line in script.lines {
            if case .open(let url) = line.instruction {
                do { _ = try MessengerRouter.route(from: url) } catch { throw CLIError.badInput("\(source) line \(line.number): \(error)") }
            }
        }
        let model = MessengerModel(regression: try parseRegression(arguments))
        let engine = try EffectEngine(store: try context.openStore(writable: true), model: model)
        let captures = try engine.runCapture(script, plan: { try MessengerRouter.plan(for: $0) }, sleep: { usleep(UInt32(clamping: $0)) })
        if context.json {
            context.printJSON(["captures": .array(captures.map {
                ["name": .string($0.name), "seq": .int(Int64($0.seq)), "value": $0.value ?? .null, "found": .bool($0.value != nil)]
            })])
        } else {
            for capture in captures {
                context.console.line("== \(Render.escaped(capture.name)) (after event \(capture.seq)) ==")
                context.console.line(capture.value?.json(pretty: true) ?? "(absent)")
            }
        }
        return .ok
    }

    static let testgen = CommandSpec.testgen(model: MessengerModel(), imports: ["DemoMessenger"],
                                             plan: { try MessengerRouter.plan(for: $0) },
                                             planExpression: { "MessengerRouter.plan(for: \($0))" })

    static let shrink = CommandSpec.shrink(variants: Regression.allCases.map { ($0.rawValue, $0.summary) },
                                           model: { MessengerModel(regression: $0.flatMap(Regression.init(rawValue:))) },
                                           imports: ["DemoMessenger"], plan: { try MessengerRouter.plan(for: $0) },
                                           planExpression: { "MessengerRouter.plan(for: \($0))" })

    static let demo = CommandSpec(
        name: "demo",
        summary: "Record a realistic botmessages session of a few hundred steps into the database.",
        discussion: """
            Taps, deep links, a test and capture scripts run through the one apply step, with guards
            skipping unknown ids, no-op clears, and scrolls that wait, time out or are interrupted;
            between them the bots publish, read and delete BlogPost objects, and the app checks the
            App Store for updates: optional prompts declined up to the cap, the store down once, an
            update resetting the count, a forced prompt that comes back after "Update"; and web bundles
            are deployed: good updates installed and confirmed, a corrupted asset refused, an update
            launched and never confirmed rolled back (in PATH.deploy-demo, removed at the end).
            Its clock is simulated from 2026-01-05T09:00:00Z, so the same --seed records the same bytes.
            Refuses a database that holds events unless --force.
            """,
        options: [
            .init(name: "plans", value: "N", help: "How many plans (URLs, taps) to run (default 80)."),
            .init(name: "seed", value: "N", help: "The session's random seed (default 1)."),
            .init(name: "force", value: nil, help: "Replace a database that already holds events."),
            regressionOption,
        ],
        writes: true
    ) { arguments, context in
        let plans = try arguments.count("plans") ?? 80
        let seed = try arguments.seq("seed") ?? 1
        let regression = try parseRegression(arguments)
        let path = context.databasePath
        if EventStore.exists(at: path) {
            let existing = try context.openStore().lastSeq()
            if existing > 0 {
                guard arguments.flag("force") else {
                    throw CLIError.badInput("\(path) already holds \(existing) events; pass --force to replace it, or --db for another database")
                }
                // Only the log's own two files: whatever else the directory holds stays.
                for file in ["data.mdb", "lock.mdb"] where unlink(path + "/" + file) != 0 && errno != ENOENT {
                    throw CLIError.unavailable("cannot replace \(path)/\(file): \(String(cString: strerror(errno)))")
                }
            }
        }
        // Simulated time from a fixed start, so that the same seed records the same bytes.
        let clock = ManualClock(start: MessengerCommands.demoStart, stepMicroseconds: 12_000)
        // The deploys' server and app directories, next to the database for the length of the demo.
        let deployDirectory = path + ".deploy-demo"
        guard mkdir(deployDirectory, 0o755) == 0 else {
            throw CLIError.badInput("cannot create \(deployDirectory) for the demo's deploys: \(String(cString: strerror(errno)))"
                                    + (errno == EEXIST ? " (left by an interrupted demo? remove it)" : ""))
        }
        defer { try? FileManager.default.removeItem(atPath: deployDirectory) }
        let store = try context.openStore(writable: true, clock: clock.clock)
        let first = try store.lastSeq() + 1
        let engine = try EffectEngine(store: store, model: MessengerModel(regression: regression))
        var summary = try DemoSession(plans: plans, seed: seed).record(into: engine, objects: try ObjectStore(store: store), updatePrompts: true,
                                                                       deploys: DemoDeploys(directory: deployDirectory), clock: clock)
        summary.firstSeq = first // include the initial state the engine records
        if context.json {
            context.printJSON(["applied": .int(Int64(summary.applied)), "cancelled": .int(Int64(summary.cancelled)),
                               "database": .string(path), "events": .int(Int64(summary.events)),
                               "firstSeq": .int(Int64(summary.firstSeq)), "lastSeq": .int(Int64(summary.lastSeq)),
                               "objectEvents": .int(Int64(summary.objectEvents)), "updateEvents": .int(Int64(summary.updateEvents)), "deployEvents": .int(Int64(summary.deployEvents)),
                               "plans": .int(Int64(summary.plans)), "skipped": .int(Int64(summary.skipped))])
        } else {
            context.console.line("recorded \(summary.plans) plans into \(path) as events \(summary.firstSeq)-\(summary.lastSeq):")
            context.console.line("  \(summary.applied) applied, \(summary.skipped) skipped, \(summary.cancelled) cancelled; \(summary.objectEvents) BlogPost saves and deletes; \(summary.updateEvents) update-check events; \(summary.deployEvents) deploy events"
                + (regression.map { "; regression \($0.rawValue) on" } ?? ""))
        }
        return .ok
    }

    /// When the demo's simulated session starts: 2026-01-05T09:00:00Z.
    static let demoStart = Timestamp(microsecondsSince1970: 1_767_603_600_000_000)

    static func parseOrigin(_ text: String) throws(CLIError) -> Origin {
        guard let origin = Origin(rawValue: text), Origin.entryPoints.contains(origin) else {
            throw CLIError.usage("--origin must be tap, url, test or capture, not \"\(text)\"")
        }
        return origin
    }

    static func parseRegression(_ arguments: ParsedArguments) throws(CLIError) -> Regression? {
        guard let name = arguments.value("regression") else { return nil }
        guard let regression = Regression(rawValue: name) else {
            throw CLIError.usage("unknown regression \"\(name)\" (expected \(Regression.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        return regression
    }

    static func statusName(_ status: EffectEngine<MessengerModel>.Status) -> String {
        switch status {
        case .finished: "finished"
        case .waiting: "waiting"
        case .superseded: "superseded"
        }
    }
}
