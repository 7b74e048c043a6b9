/// One subcommand: what it is called, what it accepts, and how it runs. Parsing and help are
/// generic over these specs, so every command, the engine's or an app's, behaves alike: an
/// unknown option, a missing or extra argument is a usage error before `run` is called, and
/// `-h`/`--help` anywhere prints the command's help.
///
/// An app adds its own with ``EventLogApp/commands``:
///
///     let show = CommandSpec(name: "count", summary: "Print the counter.") { _, context in
///         let value = try context.openStore().currentState["counter.value"]
///         context.console.line(value?.json() ?? "0")
///         return .ok
///     }
public struct CommandSpec: Sendable {
    /// A positional argument, such as `SEQ`.
    public struct Argument: Sendable {
        /// The placeholder shown in usage and help, such as `SEQ`.
        public var name: String
        /// One line for the help's ARGUMENTS section.
        public var help: String
        /// Whether the command runs without it; optional arguments come after the required ones.
        public var isOptional: Bool

        /// An argument named `name`, required unless `isOptional`.
        public init(name: String, help: String, isOptional: Bool = false) {
            self.name = name
            self.help = help
            self.isOptional = isOptional
        }
    }

    /// A `--name VALUE` option, or a `--name` flag when it takes no value.
    public struct Option: Sendable {
        /// The long name without dashes, such as `from`.
        public var name: String
        /// The value's placeholder, such as `N`; `nil` for a flag.
        public var value: String?
        /// One line for the help's OPTIONS section.
        public var help: String
        /// Names it was given before, still accepted for one release with a one-line note on
        /// stderr saying to use `name`.
        public var formerNames: [String]
        /// Whether the option may be given more than once (read with `ParsedArguments.everyValue`);
        /// any other is an error the second time.
        public var repeatable: Bool

        /// An option that takes a value shown as `value`, or a flag when `value` is `nil`;
        /// `formerNames` are the spellings it replaces.
        public init(name: String, value: String?, help: String, formerNames: [String] = [], repeatable: Bool = false) {
            self.name = name
            self.value = value
            self.help = help
            self.formerNames = formerNames
            self.repeatable = repeatable
        }

        /// `--regression NAME`: one of an app's deliberately faulty variants, listed with their summaries.
        public static func regression(_ variants: [(name: String, summary: String)]) -> Option {
            Option(name: "regression", value: "NAME",
                   help: "Run a deliberately faulty variant: \(variants.map { "\($0.name) (\($0.summary))" }.joined(separator: "; ")).")
        }
    }

    /// What runs the command: it gets the parsed arguments and the context, and returns the exit
    /// code. A thrown ``CLIError`` prints its message and exits with its code; the engine's
    /// errors get theirs (a stale write is bad input, damage a problem found, a log that
    /// cannot be opened or written is unavailable).
    public typealias Run = @Sendable (_ arguments: ParsedArguments, _ context: CommandContext) throws -> ExitCode

    /// The word that selects the command, such as `log`; after parsing, a subcommand's name
    /// is its whole path, such as `deploy check`.
    public var name: String
    /// One line, shown in the overview and at the top of the command's help.
    public var summary: String
    /// Paragraphs for the command's help, between the overview and the usage.
    public var discussion: String?
    /// The positional arguments, required ones first.
    public var arguments: [Argument]
    /// The command's own options; `--db`, `--json` and `--help` come with every command.
    public var options: [Option]
    /// Whether the command opens the database for writing (creating it when missing). A writing
    /// command that fails removes a database it created, if it is still empty.
    public var writes: Bool
    /// The commands under this one, such as `deploy check`: each is parsed, helped and run as
    /// a command of its own (`eventlog help deploy check` is `eventlog deploy check --help`).
    public var subcommands: [CommandSpec]
    /// Runs the command.
    public var run: Run

    /// A command named `name`. Parsing checks the arguments and options against these before
    /// `run` is called.
    public init(name: String, summary: String, discussion: String? = nil, arguments: [Argument] = [], options: [Option] = [],
                writes: Bool = false, run: @escaping Run) {
        self.name = name
        self.summary = summary
        self.discussion = discussion
        self.arguments = arguments
        self.options = options
        self.writes = writes
        subcommands = []
        self.run = run
    }

    /// A group of subcommands, such as `deploy`: given alone, it is a usage error that lists them.
    public init(name: String, summary: String, discussion: String? = nil, subcommands: [CommandSpec]) {
        self.init(name: name, summary: summary, discussion: discussion) { _, _ in
            throw CLIError.usage("\(name) needs a subcommand: \(subcommands.map(\.name).joined(separator: ", "))")
        }
        self.subcommands = subcommands
    }

    /// Options every command accepts.
    static let commonOptions: [Option] = [
        Option(name: "db", value: "PATH", help: "The database directory (default: $EVENTLOG_DB, else ./eventlog.lmdb)."),
        Option(name: "json", value: nil, help: "Print JSON for machines instead of text for people."),
        Option(name: "help", value: nil, help: "Show this help (also -h)."),
    ]

    var allOptions: [Option] { options + Self.commonOptions }

    /// The usage line, such as `eventlog show SEQ [--db PATH] [--json]`.
    func usage(program: String) -> String {
        if !subcommands.isEmpty { return "\(program) \(name) <subcommand> [arguments] [--db PATH] [--json]" }
        var parts = [program, name]
        for argument in arguments { parts.append(argument.isOptional ? "[\(argument.name)]" : argument.name) }
        for option in allOptions where option.name != "help" {
            parts.append((option.value.map { "[--\(option.name) \($0)]" } ?? "[--\(option.name)]") + (option.repeatable ? "..." : ""))
        }
        return parts.joined(separator: " ")
    }
}

/// The exit codes of every command, documented in `--help` and `docs/cli.md`.
public enum ExitCode: Int32, Sendable {
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

/// A command line split into positional arguments and options, checked against a spec: every
/// option is one the command declares, given once, and the positionals are as many as it takes.
public struct ParsedArguments: Sendable {
    /// The positional arguments, in order.
    public internal(set) var positionals: [String] = []
    /// The values of each option given, in order: one, unless it is repeatable.
    var values: [String: [String]] = [:]
    var flags: Set<String> = []
    /// The options the command declares (`nil`: any, for arguments made by hand).
    var declared: Set<String>?
    /// Former spellings given, with the names that replace them.
    var formerNamesUsed: [(former: String, name: String)] = []

    /// Whether the flag `--name` was given. Asking for an option the command does not declare
    /// is a programmer's error: it traps, so that a misspelt name fails the first test that
    /// runs it instead of reading as never given.
    public func flag(_ name: String) -> Bool { checkDeclared(name); return flags.contains(name) }
    /// The value of `--name VALUE`, or `nil` when the option was not given. Asking for an
    /// option the command does not declare traps, as ``flag(_:)`` does.
    public func value(_ name: String) -> String? { checkDeclared(name); return values[name]?.last }
    /// Every value of a repeatable option, in the order given; empty when it was not given.
    public func everyValue(_ name: String) -> [String] { checkDeclared(name); return values[name] ?? [] }

    private func checkDeclared(_ name: String) {
        precondition(declared?.contains(name) ?? true, "the command reads --\(name), which it does not declare")
    }

    /// The option's value as a whole number (a seq, a seed), or `nil` when the option was not given.
    /// - Throws: a usage ``CLIError`` when the value is not a whole number.
    public func seq(_ name: String) throws(CLIError) -> UInt64? {
        checkDeclared(name)
        return try values[name]?.last.map { (text) throws(CLIError) in try Self.seq(text, what: "--\(name)") }
    }

    /// The positional at `index` as a sequence number.
    func seq(at index: Int, _ what: String) throws(CLIError) -> UInt64? {
        guard index < positionals.count else { return nil }
        return try Self.seq(positionals[index], what: what)
    }

    static func seq(_ text: String, what: String) throws(CLIError) -> UInt64 {
        guard text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let value = UInt64(text) else {
            throw CLIError.usage("\(what) must be a whole number (0 or more), not \"\(text)\"")
        }
        return value
    }

    /// The option's value as a positive count, or `nil` when the option was not given.
    /// - Throws: a usage ``CLIError`` when the value is not a whole number above 0.
    public func count(_ name: String) throws(CLIError) -> Int? {
        checkDeclared(name)
        guard let text = values[name]?.last else { return nil }
        guard let value = Int(text), value > 0 else { throw CLIError.usage("--\(name) must be a positive whole number, not \"\(text)\"") }
        return value
    }

    /// The option's value as a duration in seconds, above 0 and at most an hour, or `nil` when
    /// the option was not given.
    /// - Throws: a usage ``CLIError`` for any other value.
    public func seconds(_ name: String) throws(CLIError) -> Double? {
        checkDeclared(name)
        guard let text = values[name]?.last else { return nil }
        guard let seconds = Double(text), seconds > 0, seconds <= 3_600 else {
            throw CLIError.usage("--\(name) must be a number of seconds above 0 and at most 3600, not \"\(text)\"")
        }
        return seconds
    }
}

/// What a command reports as failure: `Error: MESSAGE` on stderr, one line, and the exit code.
public struct CLIError: Error, Sendable {
    /// The message, without the `Error: ` prefix.
    public var message: String
    /// The process's exit code.
    public var code: ExitCode
    /// Whether the usage line follows the message.
    var showUsage = false
    /// The usage line of the command concerned, when known.
    var usageLine: String?

    /// The command line is malformed (exit 2); the command's usage line follows the message.
    public static func usage(_ message: String) -> CLIError { CLIError(message: message, code: .usage, showUsage: true) }
    /// An input (a file, a JSON value, an id) is bad and nothing was changed (exit 2).
    public static func badInput(_ message: String) -> CLIError { CLIError(message: message, code: .usage) }
    /// A check found a problem (exit 1).
    public static func problem(_ message: String) -> CLIError { CLIError(message: message, code: .problem) }
    /// The database, a server or a file could not be reached or written (exit 3).
    public static func unavailable(_ message: String) -> CLIError { CLIError(message: message, code: .unavailable) }
}
