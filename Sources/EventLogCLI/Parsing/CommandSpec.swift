/// The shape of one `eventlog` subcommand: what it is called, what it accepts, and how it
/// runs. Parsing and help are generic over these specs, so every command behaves alike.
struct CommandSpec: Sendable {
    struct Argument: Sendable {
        var name: String
        var help: String
        var isOptional = false
    }

    struct Option: Sendable {
        /// The long name without dashes, such as `from`.
        var name: String
        /// The value's placeholder, such as `N`; `nil` for a flag.
        var value: String?
        var help: String

        /// `--regression NAME`: one of an app's deliberately faulty variants.
        static func regression(_ variants: [(name: String, summary: String)]) -> Option {
            Option(name: "regression", value: "NAME",
                   help: "Run a deliberately faulty variant: \(variants.map { "\($0.name) (\($0.summary))" }.joined(separator: "; ")).")
        }
    }

    var name: String
    var summary: String
    var discussion: String?
    var arguments: [Argument] = []
    var options: [Option] = []
    /// Whether the command opens the database for writing (creating it when missing).
    var writes = false
    var run: @Sendable (ParsedArguments, Context) throws -> ExitCode

    /// Options every command accepts.
    static let commonOptions: [Option] = [
        Option(name: "db", value: "PATH", help: "The database directory (default: $EVENTLOG_DB, else ./eventlog.lmdb)."),
        Option(name: "json", value: nil, help: "Print JSON for machines instead of text for people."),
        Option(name: "help", value: nil, help: "Show this help (also -h)."),
    ]

    var allOptions: [Option] { options + Self.commonOptions }

    var usage: String {
        var parts = ["eventlog", name]
        for argument in arguments { parts.append(argument.isOptional ? "[\(argument.name)]" : argument.name) }
        for option in allOptions where option.name != "help" {
            parts.append(option.value.map { "[--\(option.name) \($0)]" } ?? "[--\(option.name)]")
        }
        return parts.joined(separator: " ")
    }
}

/// The exit codes of every command, documented in `--help` and the README.
enum ExitCode: Int32, Sendable {
    /// The command did what was asked.
    case ok = 0
    /// A check found a problem (verify found corruption, bisect found nothing bad, …).
    case problem = 1
    /// The command line or an input was malformed; nothing was changed (but the batches an
    /// `import --batch` committed before the bad line, which its message names).
    case usage = 2
    /// The database could not be opened or written.
    case unavailable = 3

    static let help = """
        EXIT CODES:
          0  success
          1  a check found a problem
          2  usage error or bad input (nothing was changed; an import --batch keeps
             the batches before the bad line, and says which)
          3  the database could not be opened or written
        """
}

/// A command line split into positional arguments and options, checked against a spec.
struct ParsedArguments: Sendable {
    var positionals: [String] = []
    var values: [String: String] = [:]
    var flags: Set<String> = []

    func flag(_ name: String) -> Bool { flags.contains(name) }
    func value(_ name: String) -> String? { values[name] }

    /// The option's value as a whole number (a seq, a seed), or `nil` when the option was not given.
    func seq(_ name: String) throws(CLIError) -> UInt64? {
        try values[name].map { (text) throws(CLIError) in try Self.seq(text, what: "--\(name)") }
    }

    /// The positional at `index` as a sequence number.
    func seq(at index: Int, _ what: String) throws(CLIError) -> UInt64? {
        guard index < positionals.count else { return nil }
        return try Self.seq(positionals[index], what: what)
    }

    static func seq(_ text: String, what: String) throws(CLIError) -> UInt64 {
        guard let value = UInt64(text) else { throw CLIError.usage("\(what) must be a whole number (0 or more), not \"\(text)\"") }
        return value
    }

    /// The option's value as a positive count.
    func count(_ name: String) throws(CLIError) -> Int? {
        guard let text = values[name] else { return nil }
        guard let value = Int(text), value > 0 else { throw CLIError.usage("--\(name) must be a positive whole number, not \"\(text)\"") }
        return value
    }

    /// The option's value as a duration in seconds, above 0 and at most an hour.
    func seconds(_ name: String) throws(CLIError) -> Double? {
        guard let text = values[name] else { return nil }
        guard let seconds = Double(text), seconds > 0, seconds <= 3_600 else {
            throw CLIError.usage("--\(name) must be a number of seconds above 0 and at most 3600, not \"\(text)\"")
        }
        return seconds
    }
}

/// What a command reports as failure: a message for stderr and the exit code.
struct CLIError: Error, Sendable {
    var message: String
    var code: ExitCode
    /// Whether the usage line follows the message.
    var showUsage = false
    /// The usage line of the command concerned, when known.
    var usageLine: String?

    static func usage(_ message: String) -> CLIError { CLIError(message: message, code: .usage, showUsage: true) }
    static func badInput(_ message: String) -> CLIError { CLIError(message: message, code: .usage) }
    static func problem(_ message: String) -> CLIError { CLIError(message: message, code: .problem) }
    static func unavailable(_ message: String) -> CLIError { CLIError(message: message, code: .unavailable) }
}
