import Deploys
import EventLog
import EventLogCLI
import Foundation
import HTTPFetch

/// `eventlog deploy SUBCOMMAND`: the deploy client of one app install, and the publisher.
enum DeployCommands {
    static let all: [CommandSpec] = [deploy]

    static let deploy = CommandSpec(
        name: "deploy",
        summary: "Ship web bundles into an app directory over Expo Updates v1; every transition is an event.",
        discussion: """
            The app directory holds updates/ID/ (complete updates), holding and working (links to
            them) and pending; a crash at any point leaves the old or the new working bundle whole,
            and the next command finishes or undoes the swap and records which (installRecovered).
            Every other change (rollback, confirm, reload, holding) is recorded before it is made:
            a log that cannot take it (a full disk) changes nothing, and the next command finishes
            one a crash cut short. After deliver and confirm, the update directories this client
            downloaded and no longer needs (all but working, holding, the pending install's two and
            the one before the newest install) are reaped, recorded as updatesReaped. Ctrl-C,
            SIGTERM or SIGHUP stops a download, takes back what it made and records downloadFailed
            (cancelled); any other step ends first; the exit status is then 128 + the signal.
            A refused update (hash mismatch, an asset key escaping the directory, a wrong content
            type, another runtime version, an HTTP error, a timeout, a signature that does not check
            out when certificates are trusted) is recorded with its reason,
            leaves working untouched, and exits 1. The project token (--project-token, else
            $EVENTLOG_PROJECT_TOKEN) is sent as "Authorization: Bearer TOKEN".
            """,
        subcommands: [
            lifecycle("check", "Ask the server for a newer update (newDeployAvailable, noNewDeploy, checkFailed, signatureInvalid).",
                      options: retryOptions, needsServer: true, createsAppDirectory: true) { client in try client.check(); return nil },
            lifecycle("download", "Download the checked (or newest) update into holding, each asset's SHA-256 checked as it streams to disk.",
                      options: retryOptions, needsServer: true, createsAppDirectory: true) { client in try client.download(); return nil },
            lifecycle("install", "Swap holding into working in one rename; the install is pending until confirm.",
                      needsServer: false, createsAppDirectory: false) { client in
                try client.install() == nil && client.state()["phase"] != "installFailed" ? "holding is empty: nothing to install" : nil
            },
            lifecycle("deliver", "An app launch: roll back an install still pending, install holding, then the launch behaviour"
                      + " (default reloadNewDeploy: check, download, install, reload).",
                      options: [behaviorOption("launch-behavior", "none, checkNewDeploy, downloadNewDeploy or reloadNewDeploy (default).")] + retryOptions,
                      needsServer: true, createsAppDirectory: true) { client in try client.deliver(); return nil },
            lifecycle("foreground", "Entering the foreground: the foreground behaviour (default checkNewDeploy) once a day has passed since the last check.",
                      options: [behaviorOption("foreground-behavior", "The same choices as --launch-behavior (default checkNewDeploy).")] + retryOptions,
                      needsServer: true, createsAppDirectory: true) { client in try client.enterForeground(); return nil },
            lifecycle("confirm", "The app launched the new install well: it is no longer pending (unless later than --ready-timeout: launchConfirmedTooLate).",
                      options: [.init(name: "ready-timeout", value: "SECONDS",
                                      help: "A confirmation later than this after the launch counts as a failed launch, rolled back at the next start.")],
                      needsServer: false, createsAppDirectory: false) { client in try client.confirmLaunch(); return nil },
            lifecycle("status", "The deploy state and the app directory's links (finishing a change a crash cut short).",
                      needsServer: false, createsAppDirectory: false, showsStatus: true) { client in try client.recover(); return nil },
            publish,
            rollout,
            gate,
        ]
    )

    /// The options every lifecycle subcommand takes.
    static let clientOptions: [CommandSpec.Option] = [
        .init(name: "server", value: "URL|DIR", help: "The manifest URL of an Expo Updates v1 server, or a published directory."),
        .init(name: "app-dir", value: "DIR", help: "The app install's directory (default ./app)."),
        .init(name: "runtime-version", value: "V", help: "The native app's runtime version: only updates for it are offered."),
        .init(name: "platform", value: "P", help: "ios (default) or android."),
        channelOption("Ask for the updates of this channel (sent as expo-channel-name; default the server's default channel)."),
        .init(name: "embedded-update-id", value: "UUID", help: "The id of the update embedded in the app: sent as expo-embedded-update-id, and as the current one while it runs."),
        .init(name: "project-token", value: "TOKEN", help: "Sent as Authorization: Bearer TOKEN."),
        .init(name: "timeout", value: "SECONDS", help: "How long the server may stay silent (default 30)."),
        .init(name: "deadline", value: "SECONDS", help: "How long a manifest request, or an update's whole download, may take (default 600)."),
        .init(name: "certificate", value: "[KEYID=]CERT.pem",
              help: "Require manifests signed by this PEM certificate's key, named KEYID (default main); repeatable. APP_DIR/certificates/KEYID.pem are trusted too.",
              repeatable: true),
    ]

    /// The options of the subcommands that check: whether an update rolled back after a
    /// launch never confirmed may be offered again.
    static let retryOptions: [CommandSpec.Option] = [
        .init(name: "retry-rejected-after", value: "DURATION",
              help: "Offer an update rolled back after an unconfirmed launch again once this long has passed (90s, 30m, 24h, 7d; default never)."),
        .init(name: "retry-attempts", value: "N", help: "How many times such an update is offered again (default 1); with --retry-rejected-after."),
    ]

    static func behaviorOption(_ name: String, _ help: String) -> CommandSpec.Option {
        CommandSpec.Option(name: name, value: "B", help: help)
    }

    /// A subcommand that runs one call of the client's lifecycle, prints the events it
    /// recorded (or the status), and exits 1 when one of them is a refusal.
    /// - Parameter call: Makes the call; returns a failure to report as bad input, or `nil`.
    static func lifecycle(_ name: String, _ summary: String, options: [CommandSpec.Option] = [], needsServer: Bool,
                          createsAppDirectory: Bool, showsStatus: Bool = false,
                          call: @escaping @Sendable (DeployClient) throws -> String?) -> CommandSpec {
        CommandSpec(name: name, summary: summary, options: clientOptions + options, writes: true) { arguments, context in
            let client = try makeClient(arguments, context, needsServer: needsServer, createsAppDirectory: createsAppDirectory,
                                        declared: options.map(\.name))
            // Ctrl-C, SIGTERM or SIGHUP stops a download (taken back, recorded); any other step
            // is short, and ends first.
            let signals = InterruptSignals()
            defer { signals.stop() }
            client.isCancelled = { signals.received != 0 }
            let first = try attempt { try client.store.lastSeq() } + 1
            let failure = try attempt(writingTo: context.databasePath) { () throws -> String? in
                do { return try call(client) } catch let error as DeployError { throw cliError(error) }
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
                if showsStatus || records.isEmpty {
                    context.console.line("phase \(Render.escaped(state["phase"]?.stringValue ?? "none"))  working \(Render.escaped(links[AppDirectory.working]?.stringValue ?? "embedded"))  holding \(Render.escaped(links[AppDirectory.holding]?.stringValue ?? "empty"))  pending \(Render.escaped(links["pending"]?.stringValue ?? "none"))")
                }
            }
            if signals.received != 0 {
                InterruptSignals.exit(saying: "the step under way was finished, or undone and recorded; the log and the app directory agree",
                                      signal: signals.received)
            }
            if let failure { throw CLIError.badInput(failure) }
            // Any refusal in this run is its result, even when later steps went on (a launch still reloads).
            if let failure = records.last(where: { record in
                record.event.stream == DeployRules.stream && DeployRules.Transition(rawValue: record.event.type).map(DeployRules.Transition.failures.contains) == true
            }) {
                throw CLIError.problem("\(failure.event.type): \(failure.event.payload["reason"]?.stringValue ?? "")")
            }
            return .ok
        }
    }

    static let publish = CommandSpec(
        name: "publish",
        summary: "Write a web bundle (hidden files left out) as an update into a server directory.",
        discussion: "Serve the directory with tools/update-server.py, or give the directory itself to the client as --server.",
        arguments: [.init(name: "BUNDLE_DIR", help: "The web bundle to publish.")],
        options: [
            .init(name: "server-dir", value: "SERVER_DIR", help: "The server directory to write into.", formerNames: ["to"]),
            .init(name: "runtime-version", value: "V", help: "The native runtime version the update is for."),
            .init(name: "id", value: "ID", help: "The update id (default a new UUID)."),
            .init(name: "launch-asset", value: "PATH", help: "The page the web view loads (default index.html)."),
            .init(name: "sign-with", value: "KEY.pem", help: "From now on the server signs manifests with this PEM RSA private key (its path is recorded, the key is not copied)."),
            .init(name: "key-id", value: "ID", help: "The key id the signatures name (default main); with --sign-with."),
            channelOption("The channel to publish on (default the default channel)."),
            .init(name: "rollout", value: "PERCENT", help: "Do not make it current: offer it to PERCENT (0 to 100) of the channel's installs; change it with deploy rollout."),
        ]
    ) { arguments, context in
        try publish(arguments.positionals[0], arguments, context)
    }

    static let rollout = CommandSpec(
        name: "rollout",
        summary: "Raise, lower or revert (0) the share of installs offered an update; 100 makes it the channel's current.",
        discussion: """
            An install is offered the update when a stable hash of its id (APP_DIR/install-id, sent as
            eas-client-id) and the update's id falls under the percent: the same installs every time,
            and raising the percent keeps them. Lowering it or reverting does not take the update back
            from installs that have it; they keep it until a newer update comes. One rollout at a time
            per channel: finish (100) or revert (0) one before starting another.
            """,
        arguments: [.init(name: "UPDATE_ID", help: "A published update of the runtime version.")],
        options: rolloutOptions + [
            .init(name: "percent", value: "N", help: "The share of the channel's installs, 0 to 100 (a trailing % is allowed)."),
        ]
    ) { arguments, context in
        guard let serverDirectory = arguments.value("server-dir") else { throw CLIError.usage("deploy rollout needs --server-dir SERVER_DIR") }
        guard let runtime = arguments.value("runtime-version") else { throw CLIError.usage("deploy rollout needs --runtime-version V") }
        guard let percent = try percent(arguments, "percent") else { throw CLIError.usage("deploy rollout needs --percent N") }
        let id = arguments.positionals[0]
        let channel = arguments.value("channel")
        let previous: Rollout?
        do throws(DeployError) {
            previous = try DeployPublisher(serverDirectory: serverDirectory).rollout(id, runtimeVersion: runtime, channel: channel, percent: percent)
        } catch {
            throw cliError(error)
        }
        let was = previous.flatMap { $0.update == id ? $0.percent : nil }
        if context.json {
            context.printJSON(["update": .string(id), "channel": StateValue(channel), "percent": .int(Int64(percent)),
                               "previousPercent": was.map { .int(Int64($0)) } ?? .null])
        } else {
            context.console.line("update \(id) offered to \(percent)% of channel \(Render.escaped(channel ?? "default")) of runtime version \(Render.escaped(runtime))"
                                 + (was.map { " (was \($0)%)" } ?? "") + (percent == 100 ? ": it is the channel's current update" : ""))
        }
        return .ok
    }

    /// The options that name an update's rollout: where it is published, for which runtime
    /// version, on which channel.
    static let rolloutOptions: [CommandSpec.Option] = [
        .init(name: "server-dir", value: "SERVER_DIR", help: "The server directory the update is published in."),
        .init(name: "runtime-version", value: "V", help: "The runtime version it is published for."),
        channelOption("The channel (default the default channel)."),
    ]

    static func channelOption(_ help: String) -> CommandSpec.Option {
        CommandSpec.Option(name: "channel", value: "NAME", help: help)
    }

    /// `text` as a duration in microseconds: a whole number with `s`, `m`, `h` or `d` (seconds
    /// without one), from 0 to 365 days.
    private static func duration(_ text: String, _ name: String) throws(CLIError) -> Int64 {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        let unit = text.last.flatMap { units[$0] }
        let digits = unit == nil ? Substring(text) : text.dropLast()
        guard !digits.isEmpty, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let value = Int64(digits), value <= 365 * 86_400, value * (unit ?? 1) <= 365 * 86_400 else {
            throw CLIError.usage("--\(name) must be a whole number of seconds, or of minutes, hours or days with m, h or d (at most 365 days), not \"\(text)\"")
        }
        return value * (unit ?? 1) * 1_000_000
    }

    /// Option `name` as a percent, 0 to 100 (`10` or `10%`), or `nil` when it was not given.
    static func percent(_ arguments: ParsedArguments, _ name: String) throws(CLIError) -> Int? {
        guard let text = arguments.value(name) else { return nil }
        let digits = text.hasSuffix("%") ? String(text.dropLast()) : text
        guard digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let value = Int(digits), value <= 100 else {
            throw CLIError.usage("--\(name) must be a whole percent, 0 to 100, not \"\(text)\"")
        }
        return value
    }

    private static func publish(_ bundle: String, _ arguments: ParsedArguments, _ context: CommandContext) throws(CLIError) -> ExitCode {
        guard let serverDirectory = arguments.value("server-dir") else { throw CLIError.usage("deploy publish needs --server-dir SERVER_DIR") }
        guard let runtime = arguments.value("runtime-version") else { throw CLIError.usage("deploy publish needs --runtime-version V") }
        let rolloutPercent = try percent(arguments, "rollout")
        // Interrupted, the publish stops and takes back what it added before the process ends.
        let signals = InterruptSignals()
        defer { signals.stop() }
        var publisher = DeployPublisher(serverDirectory: serverDirectory)
        if let key = arguments.value("sign-with") {
            publisher.signing = (key, arguments.value("key-id") ?? TrustedCertificates.defaultKeyID)
        } else if arguments.value("key-id") != nil {
            throw CLIError.usage("--key-id names the key of --sign-with KEY.pem")
        }
        publisher.isCancelled = { signals.received != 0 }
        // What a killed publish left stays; a person is told where, to remove it.
        let console = context.console
        publisher.leftovers = { paths in
            let directories = paths.reduce(into: [String]()) { directories, path in
                let directory = (path as NSString).deletingLastPathComponent
                if !directories.contains(directory) { directories.append(directory) }
            }
            console.error("warning: \(paths.count) temporary file\(paths.count == 1 ? "" : "s") of a killed publish "
                          + "(.incoming-UUID, *.next-UUID) left in \(directories.map(Render.escaped).joined(separator: " and ")); "
                          + "remove \(paths.count == 1 ? "it" : "them") while no publish is under way\n")
        }
        let manifest: UpdateManifest
        do {
            manifest = try publisher.publish(bundle: bundle, runtimeVersion: runtime, launchAsset: arguments.value("launch-asset") ?? "index.html",
                                             id: arguments.value("id") ?? UUID().uuidString.lowercased(),
                                             channel: arguments.value("channel"), rolloutPercent: rolloutPercent)
        } catch .cancelled {
            InterruptSignals.exit(saying: "nothing was published", signal: signals.received)
        } catch {
            throw cliError(error)
        }
        if context.json {
            context.printJSON(manifest.json)
        } else {
            let channel = arguments.value("channel").map { " on channel \(Render.escaped($0))" } ?? ""
            let offered = rolloutPercent.map { ", offered to \($0)% of the installs" } ?? ""
            context.console.line("published update \(manifest.id) for runtime version \(Render.escaped(runtime))\(channel) into \(Render.escaped(serverDirectory)): \(manifest.allAssets.count) assets\(offered)")
        }
        return .ok
    }

    /// Bad input is exit 2; an app directory another client holds, or one that cannot be
    /// written, exit 3; a refused update is recorded and exits 1 after the run.
    static func cliError(_ error: DeployError) -> CLIError {
        switch error {
        case .usage(let reason): CLIError.usage(reason)
        case .busy, .filesystem: CLIError.unavailable("\(error)")
        default: CLIError.badInput("\(error)")
        }
    }

    /// The client a lifecycle subcommand's arguments describe; `declared` are the options of
    /// its own it declares besides `clientOptions`.
    private static func makeClient(_ arguments: ParsedArguments, _ context: CommandContext, needsServer: Bool,
                                   createsAppDirectory: Bool, declared: [String]) throws(CLIError) -> DeployClient {
        guard let runtime = arguments.value("runtime-version") else { throw CLIError.usage("deploy needs --runtime-version V") }
        let serverText = arguments.value("server")
        if needsServer, serverText == nil { throw CLIError.usage("deploy needs --server URL|DIR") }
        if let serverText, case .server(let url) = DeploySource(serverText), let problem = HTTPFetch.problem(with: url) {
            throw CLIError.usage("--server: \(problem)")
        }
        func behavior(_ name: String) throws(CLIError) -> DeployBehavior? {
            guard declared.contains(name) else { return nil }
            return try arguments.value(name).map { (text) throws(CLIError) in
                guard let behavior = DeployBehavior(rawValue: text) else {
                    throw CLIError.usage("--\(name) must be one of \(DeployBehavior.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(text)\"")
                }
                return behavior
            }
        }
        let launch = try behavior("launch-behavior")
        let foreground = try behavior("foreground-behavior")
        let timeout = try arguments.seconds("timeout")
        let readyTimeout = declared.contains("ready-timeout") ? try arguments.seconds("ready-timeout") : nil
        var retry: DeployClient.RejectedRetry?
        if declared.contains("retry-rejected-after") {
            let attempts = try arguments.count("retry-attempts")
            if let text = arguments.value("retry-rejected-after") {
                retry = DeployClient.RejectedRetry(delay: try duration(text, "retry-rejected-after"), maxRetries: attempts ?? 1)
            } else if attempts != nil {
                throw CLIError.usage("--retry-attempts needs --retry-rejected-after DURATION")
            }
        }
        let deadline = try arguments.seconds("deadline")
        let token = arguments.value("project-token") ?? ProcessInfo.processInfo.environment["EVENTLOG_PROJECT_TOKEN"]
        var certificates = TrustedCertificates()
        do throws(DeployError) {
            for text in arguments.everyValue("certificate") {
                // KEYID=PATH when what comes before the first "=" is a key id; else a path alone.
                let pair = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let (keyID, file) = pair.count == 2 && TrustedCertificates.isValidKeyID(pair[0]) ? (pair[0], pair[1]) : (TrustedCertificates.defaultKeyID, text)
                guard !certificates.keyIDs.contains(keyID) else { throw .usage("--certificate: key id \(keyID) is given twice") }
                try certificates.trust(file, keyID: keyID)
            }
        } catch {
            throw cliError(error)
        }
        let target: DeployTarget
        let directory: AppDirectory
        do {
            target = try DeployTarget(runtimeVersion: runtime, platform: arguments.value("platform") ?? "ios", projectToken: token,
                                      channel: arguments.value("channel"), embeddedUpdateID: arguments.value("embedded-update-id"))
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
        do { try certificates.trustShipped(in: directory) } catch { throw cliError(error) }
        let client = DeployClient(store: store, directory: directory, source: DeploySource(serverText ?? "."), target: target)
        client.certificates = certificates
        if let launch { client.launchBehavior = launch }
        if let foreground { client.foregroundBehavior = foreground }
        if let timeout { client.timeout = timeout }
        if let deadline { client.deadline = deadline }
        client.rejectedRetry = retry
        client.readyTimeout = readyTimeout.map { Int64($0 * 1_000_000) }
        // For crash tests: die at once after the named install or reap step, as a power cut would.
        if let step = ProcessInfo.processInfo.environment["EVENTLOG_DEPLOY_CRASH_AFTER"] {
            client.installStepHook = { if $0.rawValue == step { kill(getpid(), SIGKILL) } }
            client.reapStepHook = { if $0.rawValue == step { kill(getpid(), SIGKILL) } }
        }
        return client
    }
}
