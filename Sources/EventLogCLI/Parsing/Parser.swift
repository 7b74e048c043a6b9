/// What the command line asks for.
enum Invocation: Sendable {
    /// Help for one command, or the overview when `nil`.
    case help(CommandSpec?)
    /// `--version`: the program's version and the storage format it reads and writes.
    case version
    case run(CommandSpec, ParsedArguments)
}

/// Turns arguments into an invocation without touching anything: `--opt value` and
/// `--opt=value`, `--` ends options, `-h`/`--help` anywhere asks for help, `eventlog help X`
/// equals `eventlog X --help`, and unknown options or extra arguments are errors.
struct Parser {
    /// The program's name, for usage lines.
    let program: String
    let commands: [CommandSpec]

    func command(named name: String) -> CommandSpec? { commands.first { $0.name == name } }

    func parse(_ arguments: [String]) throws(CLIError) -> Invocation {
        guard let first = arguments.first else { return .help(nil) }
        if first == "-h" || first == "--help" { return .help(nil) }
        if first == "--version" {
            guard arguments.count == 1 else { throw CLIError.usage("--version takes nothing else") }
            return .version
        }
        if first == "help" {
            guard arguments.count > 1, arguments[1] != "help" else { return .help(nil) }
            guard let top = command(named: arguments[1]) else { throw unknownCommand(arguments[1]) }
            let (spec, rest) = try descend(from: top, through: arguments.dropFirst(2))
            guard rest.isEmpty else { throw CLIError.usage("help takes one command, not \(arguments.count - 1) words") }
            return .help(spec)
        }
        guard let top = command(named: first) else {
            if first.hasPrefix("-") { throw CLIError.usage("expected a command before \(first)") }
            throw unknownCommand(first)
        }
        let (spec, rest) = try descend(from: top, through: arguments.dropFirst())
        if rest.prefix(while: { $0 != "--" }).contains(where: { $0 == "-h" || $0 == "--help" }) { return .help(spec) }
        do {
            return .run(spec, try parse(Array(rest), for: spec))
        } catch {
            var error = error
            error.usageLine = spec.usage(program: program)
            throw error
        }
    }

    /// The subcommand the words after `spec` name (`deploy` `check` …), named by its whole
    /// path, and the words after it.
    private func descend(from spec: CommandSpec, through words: ArraySlice<String>) throws(CLIError) -> (CommandSpec, ArraySlice<String>) {
        var spec = spec
        var words = words
        while !spec.subcommands.isEmpty, let word = words.first, !word.hasPrefix("-") {
            guard var subcommand = spec.subcommands.first(where: { $0.name == word }) else {
                var error = CLIError.usage("unknown subcommand '\(word)' for '\(spec.name)'; the subcommands are: "
                                           + spec.subcommands.map(\.name).joined(separator: ", "))
                error.usageLine = spec.usage(program: program)
                throw error
            }
            subcommand.name = spec.name + " " + subcommand.name
            spec = subcommand
            words = words.dropFirst()
        }
        return (spec, words)
    }

    private func unknownCommand(_ name: String) -> CLIError {
        CLIError.usage("unknown command '\(name)'; the commands are: \(commands.map(\.name).joined(separator: ", "))")
    }

    func parse(_ arguments: [String], for spec: CommandSpec) throws(CLIError) -> ParsedArguments {
        var parsed = ParsedArguments()
        parsed.declared = Set(spec.allOptions.map(\.name))
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" || Int(argument) != nil {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" { optionsEnded = true; continue }
            guard argument.hasPrefix("--") else { throw CLIError.usage("unknown option '\(argument)'") }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let option = spec.allOptions.first(where: { $0.name == name || $0.formerNames.contains(name) }) else {
                throw CLIError.usage("unknown option '--\(name)' for '\(spec.name)'")
            }
            if option.name != name { parsed.formerNamesUsed.append((former: name, name: option.name)) }
            name = option.name
            guard option.repeatable || (!parsed.flags.contains(name) && parsed.values[name] == nil) else { throw CLIError.usage("--\(name) is given twice") }
            if option.value == nil {
                guard inlineValue == nil else { throw CLIError.usage("--\(name) takes no value") }
                parsed.flags.insert(name)
            } else if let inlineValue {
                parsed.values[name, default: []].append(inlineValue)
            } else {
                // The next word is the value, unless it is another option (`--from --db x`); a
                // value that starts with "--" can still be given as `--name=--value`.
                guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                    throw CLIError.usage("--\(name) needs a value (\(option.value!))")
                }
                parsed.values[name, default: []].append(arguments[index])
                index += 1
            }
        }
        if parsed.values["db"] == [""] { throw CLIError.usage("--db needs a directory, not an empty path") }
        let required = spec.arguments.filter { !$0.isOptional }.count
        if parsed.positionals.count < required {
            throw CLIError.usage("missing \(spec.arguments[parsed.positionals.count].name)")
        }
        if parsed.positionals.count > spec.arguments.count {
            throw CLIError.usage("unexpected argument '\(parsed.positionals[spec.arguments.count])'")
        }
        return parsed
    }
}

/// Help text in the sections swift-argument-parser users know.
enum Help {
    static func overview(_ commands: [CommandSpec], program: String) -> String {
        let width = commands.map(\.name.count).max() ?? 0
        var text = """
            OVERVIEW: Record, inspect and check an event log: the append-only history of an
            app's state, with the state after every event.

            USAGE: \(program) <command> [arguments] [--db PATH] [--json]
                   \(program) --version

            SUBCOMMANDS:

            """
        for command in commands {
            text += "  " + command.name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + command.summary + "\n"
        }
        text += """

            See '\(program) help <command>' (or '\(program) <command> --help') for each command.
            The database is --db PATH, else $EVENTLOG_DB, else ./eventlog.lmdb.

            \(ExitCode.help)

            """
        return text
    }

    static func command(_ spec: CommandSpec, program: String) -> String {
        var text = "OVERVIEW: \(spec.summary)\n"
        if let discussion = spec.discussion { text += "\n\(named(discussion, program))\n" }
        text += "\nUSAGE: \(spec.usage(program: program))\n"
        if !spec.subcommands.isEmpty {
            text += "\nSUBCOMMANDS:\n" + table(spec.subcommands.map { ($0.name, $0.summary) })
            text += "\nSee '\(program) help \(spec.name) <subcommand>' (or '\(program) \(spec.name) <subcommand> --help') for each.\n"
            text += "\n\(ExitCode.help)\n"
            return text
        }
        if !spec.arguments.isEmpty {
            text += "\nARGUMENTS:\n" + table(spec.arguments.map { ($0.name, $0.help) })
        }
        text += "\nOPTIONS:\n" + table(spec.allOptions.map { option in
            let name = option.name == "help" ? "-h, --help" : "--\(option.name)" + (option.value.map { " \($0)" } ?? "")
            return (name, option.help)
        })
        text += "\n\(ExitCode.help)\n"
        return text
    }

    /// `text` with the commands it quotes (`'eventlog verify'`) and its example lines
    /// (`  eventlog ship …`) naming `program`, so that an app's help names the app.
    static func named(_ text: String, _ program: String) -> String {
        guard program != "eventlog" else { return text }
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            var line = String(line).replacingOccurrences(of: "'eventlog ", with: "'\(program) ")
            if let start = line.firstIndex(where: { $0 != " " }), line[start...].hasPrefix("eventlog ") {
                line.replaceSubrange(start..<line.index(start, offsetBy: "eventlog".count), with: program)
            }
            return line
        }.joined(separator: "\n")
    }

    private static func table(_ rows: [(String, String)]) -> String {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { "  " + $0.0.padding(toLength: width + 2, withPad: " ", startingAt: 0) + $0.1 }.joined(separator: "\n") + "\n"
    }
}
