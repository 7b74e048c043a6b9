import Deploys
import EventLog
import EventLogCLI
import Foundation
import HTTPFetch

/// `eventlog deploy ACTION`: the deploy client of one app install, and the publisher.
enum DeployCommands {
    static let all: [CommandSpec] = [deploy]

    static let deploy = CommandSpec(
        name: "deploy",
        summary: "Ship web bundles into an app directory over Expo Updates v1; every transition is an event.",
        discussion: """
            Actions:
              check         ask the server for a newer update (newDeployAvailable, noNewDeploy, checkFailed)
              download      download the checked (or newest) update into holding, each asset's SHA-256
                            checked while it streams to disk
              install       swap holding into working in one rename; the install is pending until confirm
              deliver       an app launch: roll back an install still pending, install holding, then the
                            launch behaviour (default reloadNewDeploy: check, download, install, reload)
              foreground    entering the foreground: the foreground behaviour (default checkNewDeploy) once
                            a day has passed since the last check
              confirm       the app launched the new install well: it is no longer pending
              status        the deploy state and the app directory's links
              publish DIR   write the bundle DIR (hidden files left out) as an update into --to SERVER_DIR
                            (serve it with tools/update-server.py, or give the directory itself as --server)
            The app directory holds updates/ID/ (complete updates), holding and working (links to
            them) and pending; a crash at any point leaves the old or the new working bundle whole,
            and the next command finishes or undoes the swap and records which (installRecovered).
            Every other change (rollback, confirm, reload, holding) is recorded before it is made:
            a log that cannot take it (a full disk) changes nothing, and the next command finishes
            one a crash cut short.
            A refused update (hash mismatch, an asset key escaping the directory, a wrong content
            type, another runtime version, an HTTP error, a timeout) is recorded with its reason,
            leaves working untouched, and exits 1. The project token (--project-token, else
            $EVENTLOG_PROJECT_TOKEN) is sent as "Authorization: Bearer TOKEN".
            """,
        arguments: [
            .init(name: "ACTION", help: "check, download, install, deliver, foreground, confirm, status or publish."),
            .init(name: "BUNDLE_DIR", help: "publish: the web bundle to publish.", isOptional: true),
        ],
        options: [
            .init(name: "server", value: "URL|DIR", help: "The manifest URL of an Expo Updates v1 server, or a published directory."),
            .init(name: "app-dir", value: "DIR", help: "The app install's directory (default ./app)."),
            .init(name: "runtime-version", value: "V", help: "The native app's runtime version: only updates for it are offered."),
            .init(name: "platform", value: "P", help: "ios (default) or android."),
            .init(name: "project-token", value: "TOKEN", help: "Sent as Authorization: Bearer TOKEN."),
            .init(name: "launch-behavior", value: "B", help: "deliver: none, checkNewDeploy, downloadNewDeploy or reloadNewDeploy (default)."),
            .init(name: "foreground-behavior", value: "B", help: "foreground: the same choices (default checkNewDeploy)."),
            .init(name: "timeout", value: "SECONDS", help: "How long the server may stay silent (default 30)."),
            .init(name: "deadline", value: "SECONDS", help: "How long a manifest request, or an update's whole download, may take (default 600)."),
            .init(name: "to", value: "SERVER_DIR", help: "publish: the server directory to write into."),
            .init(name: "id", value: "ID", help: "publish: the update id (default a new UUID)."),
            .init(name: "launch-asset", value: "PATH", help: "publish: the page the web view loads (default index.html)."),
        ],
        writes: true
    ) { arguments, context in
        let action = arguments.positionals[0]
        let bundle = arguments.positionals.count > 1 ? arguments.positionals[1] : nil
        if action != "publish", let bundle { throw CLIError.usage("unexpected argument '\(bundle)'") }
        switch action {
        case "publish":
            return try publish(bundle, arguments, context)
        case "check", "download", "install", "deliver", "foreground", "confirm", "status":
            let client = try makeClient(arguments, context, needsServer: !["install", "confirm", "status"].contains(action),
                                        createsAppDirectory: ["check", "download", "deliver", "foreground"].contains(action))
            let first = try attempt { try client.store.lastSeq() } + 1
            var failure: String?
            try attempt(writingTo: context.databasePath) {
                do {
                    switch action {
                    case "check": try client.check()
                    case "download": try client.download()
                    case "install": if try client.install() == nil, try client.state()["phase"] != "installFailed" { failure = "holding is empty: nothing to install" }
                    case "deliver": try client.deliver()
                    case "foreground": try client.enterForeground()
                    case "confirm": try client.confirmLaunch()
                    default: try client.recover()
                    }
                } catch let error as DeployError {
                    throw cliError(error)
                }
            }
            let records = try attempt { () throws -> [EventRecord] in
                var records: [EventRecord] = []
                try client.store.forEachRecord(from: first) { records.append($0); return true }
                return records
            }
            let state = try attempt { try client.state() }
            let links = try attempt { () throws -> StateObject in
                [AppDirectory.working: StateValue(try client.directory.target(of: AppDirectory.working)),
                 AppDirectory.holding: StateValue(try client.directory.target(of: AppDirectory.holding)),
                 "pending": StateValue(try client.directory.pending()?.update)]
            }
            if context.json {
                context.printJSON(["events": .array(records.map(\.jsonValue)), "deploy": state, "appDirectory": .object(links)])
            } else {
                for record in records { context.console.row(Render.logLine(record, colors: context.console.usesColors)) }
                if action == "status" || records.isEmpty {
                    context.console.line("phase \(Render.escaped(state["phase"]?.stringValue ?? "none"))  working \(Render.escaped(links[AppDirectory.working]?.stringValue ?? "embedded"))  holding \(Render.escaped(links[AppDirectory.holding]?.stringValue ?? "empty"))  pending \(Render.escaped(links["pending"]?.stringValue ?? "none"))")
                }
            }
            if let failure { throw CLIError.badInput(failure) }
            // Any refusal in this run is its result, even when later steps went on (a launch still reloads).
            if let failure = records.last(where: { record in
                record.event.stream == DeployRules.stream && DeployRules.Transition(rawValue: record.event.type).map(DeployRules.Transition.failures.contains) == true
            }) {
                throw CLIError.problem("\(failure.event.type): \(failure.event.payload["reason"]?.stringValue ?? "")")
            }
            return .ok
        default:
            throw CLIError.usage("unknown action '\(action)'; the actions are check, download, install, deliver, foreground, confirm, status, publish")
        }
    }

    private static func publish(_ bundle: String?, _ arguments: ParsedArguments, _ context: CommandContext) throws(CLIError) -> ExitCode {
        guard let bundle else { throw CLIError.usage("deploy publish needs the bundle directory") }
        guard let serverDirectory = arguments.value("to") else { throw CLIError.usage("deploy publish needs --to SERVER_DIR") }
        guard let runtime = arguments.value("runtime-version") else { throw CLIError.usage("deploy publish needs --runtime-version V") }
        // Interrupted, the publish stops and takes back what it added before the process ends.
        let signals = InterruptSignals()
        defer { signals.stop() }
        var publisher = DeployPublisher(serverDirectory: serverDirectory)
        publisher.isCancelled = { signals.received != 0 }
        let manifest: UpdateManifest
        do {
            manifest = try publisher.publish(bundle: bundle, runtimeVersion: runtime, launchAsset: arguments.value("launch-asset") ?? "index.html",
                                             id: arguments.value("id") ?? UUID().uuidString.lowercased())
        } catch .cancelled {
            InterruptSignals.exit(saying: "nothing was published", signal: signals.received)
        } catch {
            throw cliError(error)
        }
        if context.json {
            context.printJSON(manifest.json)
        } else {
            context.console.line("published update \(manifest.id) for runtime version \(Render.escaped(runtime)) into \(Render.escaped(serverDirectory)): \(manifest.allAssets.count) assets")
        }
        return .ok
    }

    /// Bad input is exit 2; an app directory another client holds, or one that cannot be
    /// written, exit 3; a refused update is recorded and exits 1 after the run.
    private static func cliError(_ error: DeployError) -> CLIError {
        switch error {
        case .usage(let reason): CLIError.usage(reason)
        case .busy, .filesystem: CLIError.unavailable("\(error)")
        default: CLIError.badInput("\(error)")
        }
    }

    private static func makeClient(_ arguments: ParsedArguments, _ context: CommandContext, needsServer: Bool,
                                   createsAppDirectory: Bool) throws(CLIError) -> DeployClient {
        guard let runtime = arguments.value("runtime-version") else { throw CLIError.usage("deploy needs --runtime-version V") }
        let serverText = arguments.value("server")
        if needsServer, serverText == nil { throw CLIError.usage("deploy needs --server URL|DIR") }
        if let serverText, case .server(let url) = DeploySource(serverText), let problem = HTTPFetch.problem(with: url) {
            throw CLIError.usage("--server: \(problem)")
        }
        func behavior(_ name: String) throws(CLIError) -> DeployBehavior? {
            try arguments.value(name).map { (text) throws(CLIError) in
                guard let behavior = DeployBehavior(rawValue: text) else {
                    throw CLIError.usage("--\(name) must be one of \(DeployBehavior.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(text)\"")
                }
                return behavior
            }
        }
        let launch = try behavior("launch-behavior")
        let foreground = try behavior("foreground-behavior")
        let timeout = try arguments.seconds("timeout")
        let deadline = try arguments.seconds("deadline")
        let token = arguments.value("project-token") ?? ProcessInfo.processInfo.environment["EVENTLOG_PROJECT_TOKEN"]
        let target: DeployTarget
        let directory: AppDirectory
        do {
            target = try DeployTarget(runtimeVersion: runtime, platform: arguments.value("platform") ?? "ios", projectToken: token)
        } catch {
            throw cliError(error)
        }
        // The log first: a database that cannot be opened leaves no app directory behind.
        let store = try context.openStore(writable: true)
        do {
            directory = try AppDirectory(path: arguments.value("app-dir") ?? "./app", create: createsAppDirectory)
        } catch {
            throw cliError(error)
        }
        let client = DeployClient(store: store, directory: directory, source: DeploySource(serverText ?? "."), target: target)
        if let launch { client.launchBehavior = launch }
        if let foreground { client.foregroundBehavior = foreground }
        if let timeout { client.timeout = timeout }
        if let deadline { client.deadline = deadline }
        // For crash tests: die at once after the named install step, as a power cut would.
        if let step = ProcessInfo.processInfo.environment["EVENTLOG_DEPLOY_CRASH_AFTER"].flatMap(DeployClient.InstallStep.init(rawValue:)) {
            client.installStepHook = { if $0 == step { kill(getpid(), SIGKILL) } }
        }
        return client
    }
}
