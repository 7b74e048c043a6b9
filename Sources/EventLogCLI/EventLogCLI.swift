import EventLog
import Foundation

/// The `eventlog` command line: `main.swift` only glues the process to `run`.
public enum EventLogCLI {
    /// For a program: a fault reading a damaged database (LMDB follows its pages unchecked)
    /// ends the process with a one-line error and exit status 1 instead of a signal. Other
    /// faults stay crashes. Process-wide: call it once, from `main`.
    /// - Parameter program: The program's name, in the line that says what to run next.
    public static func reportStorageFaultsAsDamage(program: String = "eventlog") {
        FaultGuard.install(message: "Error: the database is damaged: reading it faulted (LMDB does not check its pages);"
            + " '\(program) verify' says where, '\(program) salvage' copies what is good\n")
    }

    /// A program's whole `main`: reports storage faults as damage, refuses an argument that is
    /// not UTF-8 (Swift would repair it, and a path would silently become another), runs the
    /// command line for `app` with the process's environment and the standard console, and
    /// exits with the command's code (3 when its output could not be written: a full disk).
    public static func main(app: EventLogApp) -> Never {
        reportStorageFaultsAsDamage(program: app.name)
        // A reader that goes away (`| true`, `| head`) is an EPIPE the console handles, never a signal.
        signal(SIGPIPE, SIG_IGN)
        let console = Console.standard()
        var status: Int32
        let notUTF8 = (1..<max(1, Int(CommandLine.argc))).first { index in
            CommandLine.unsafeArgv[index].map { String(validatingCString: $0) == nil } ?? false
        }
        if let index = notUTF8 {
            console.error("Error: argument \(index) is not UTF-8 text; paths and values must be\n")
            status = ExitCode.usage.rawValue
        } else {
            status = run(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment, console: console, app: app)
        }
        console.flush()
        // Output that did not reach its file (a full disk) is no success; a reader that went
        // away (a closed pipe, `| head`) ends the command quietly.
        if let error = console.outputError {
            console.error("Error: cannot write the output: \(String(cString: strerror(error)))\n")
            if status == ExitCode.ok.rawValue { status = ExitCode.unavailable.rawValue }
        }
        exit(status)
    }

    /// This program's version.
    public static let version = "0.9.0"

    /// The commands for `app`: the log's own, the app's, its families', and analysis through its code.
    /// - Throws: a ``CLIError`` naming a command of the app's that has the name of another command.
    static func commands(for app: EventLogApp) throws(CLIError) -> [CommandSpec] {
        let commands = LogCommands.all + app.commands + app.families.flatMap(\.commands) + AnalysisCommands.all(for: app)
        var seen = Set<String>()
        for command in commands where !seen.insert(command.name).inserted {
            throw CLIError.unavailable("\(app.name) declares the command '\(command.name)' twice")
        }
        return commands
    }

    /// Parses `arguments` (without the program name), runs the command and returns its exit
    /// code. Errors print `Error: …` (and for usage errors the usage line) on stderr.
    /// - Parameters:
    ///   - arguments: The command line after the program's name.
    ///   - environment: The process's environment; `EVENTLOG_DB` names the default database.
    ///   - console: Where results (stdout) and errors and progress (stderr) go.
    ///   - app: The app whose code `replay` and `bisect --replay` run, and whose commands join the engine's.
    /// - Returns: The exit code: 0 done, 1 a problem found, 2 bad usage or input, 3 unavailable.
    public static func run(_ arguments: [String], environment: [String: String], console: Console, app: EventLogApp) -> Int32 {
        Program.$name.withValue(app.name) { runCommand(arguments, environment: environment, console: console, app: app) }
    }

    private static func runCommand(_ arguments: [String], environment: [String: String], console: Console, app: EventLogApp) -> Int32 {
        var spec: CommandSpec?
        do throws(CLIError) {
            let commands = try commands(for: app)
            switch try Parser(program: app.name, commands: commands).parse(arguments) {
            case .help(let command):
                console.out(command.map { Help.command($0, program: app.name) } ?? Help.overview(commands, program: app.name))
                return ExitCode.ok.rawValue
            case .version:
                console.line(app.name == "eventlog" ? "eventlog \(version) (storage format \(EventStore.formatVersion))"
                             : "\(app.name), on eventlog \(version) (storage format \(EventStore.formatVersion))")
                return ExitCode.ok.rawValue
            case .run(let command, let parsed):
                spec = command
                for (former, name) in parsed.formerNamesUsed {
                    console.error("warning: --\(former) is now --\(name) for '\(command.name)'; the old name goes in the next release\n")
                }
                let context = CommandContext(arguments: parsed, environment: environment, console: console, app: app)
                // A writing command that fails leaves no database it created behind.
                let created = command.writes ? NewDatabase(at: context.databasePath) : nil
                do { return try command.run(parsed, context).rawValue } catch {
                    created?.removeIfStillEmpty()
                    throw CLIError(classifying: error, writingTo: command.writes ? context.databasePath : nil)
                }
            }
        } catch {
            console.endProgress()
            // One line of a readable length, whatever recorded or typed text the message quotes.
            console.error("Error: \(Render.shortened(Render.escaped(error.message), to: 1_000))\n")
            if error.showUsage {
                let usage = error.usageLine ?? spec?.usage(program: app.name) ?? "\(app.name) <command> [arguments] [--db PATH] [--json]"
                console.error("Usage: \(usage)\n")
            }
            return error.code.rawValue
        }
    }
}
