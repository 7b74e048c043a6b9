import EventLog

/// The `eventlog` command line: `main.swift` only glues the process to `run`.
public enum EventLogCLI {
    /// For a program: a fault reading a damaged database (LMDB follows its pages unchecked)
    /// ends the process with a one-line error and exit status 1 instead of a signal. Other
    /// faults stay crashes. Process-wide: call it once, from `main`.
    public static func reportStorageFaultsAsDamage() {
        FaultGuard.install(message: "Error: the database is damaged: reading it faulted (LMDB does not check its pages);"
            + " 'eventlog verify' says where, 'eventlog salvage' copies what is good\n")
    }

    /// This program's version.
    public static let version = "0.9.0"

    /// The commands for `app`: the log's own, the app's, objects, and analysis through its code.
    static func commands(for app: EventLogApp) -> [CommandSpec] {
        LogCommands.all + app.commands + ObjectCommands.all + UpdateCommands.all + DeployCommands.all + FleetCommands.all + AnalysisCommands.all(for: app)
    }

    /// Parses `arguments` (without the program name), runs the command and returns its exit
    /// code. Errors print `Error: …` (and for usage errors the usage line) on stderr.
    public static func run(_ arguments: [String], environment: [String: String], console: Console, app: EventLogApp = .demo) -> Int32 {
        let commands = commands(for: app)
        let parser = Parser(commands: commands)
        var spec: CommandSpec?
        do {
            switch try parser.parse(arguments) {
            case .help(let command):
                console.out(command.map(Help.command) ?? Help.overview(commands))
                return ExitCode.ok.rawValue
            case .version:
                console.line("eventlog \(version) (storage format \(EventStore.formatVersion))")
                return ExitCode.ok.rawValue
            case .run(let command, let parsed):
                spec = command
                let context = Context(arguments: parsed, environment: environment, console: console, app: app)
                // A writing command that fails leaves no database it created behind.
                let created = command.writes ? NewDatabase(at: context.databasePath) : nil
                do { return try command.run(parsed, context).rawValue } catch {
                    created?.removeIfStillEmpty()
                    throw error
                }
            }
        } catch let error as CLIError {
            console.endProgress()
            // One line of a readable length, whatever recorded or typed text the message quotes.
            console.error("Error: \(Render.shortened(Render.escaped(error.message), to: 1_000))\n")
            if error.showUsage {
                let usage = error.usageLine ?? spec?.usage ?? "eventlog <command> [arguments] [--db PATH] [--json]"
                console.error("Usage: \(usage)\n")
            }
            return error.code.rawValue
        } catch {
            console.error("Error: \(error)\n")
            return ExitCode.unavailable.rawValue
        }
    }
}
