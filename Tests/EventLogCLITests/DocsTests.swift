import DemoCLI
import Foundation
import Testing
@testable import EventLogCLI

/// Keeps the documentation true to the command line: every command of the demo's app has its
/// section in docs/cli.md, whose pasted help is the program's, and every `eventlog …` example
/// in a `sh` block of docs/cli.md and README.md parses as the built program would parse it.
@Suite struct DocsTests {
    /// The repository's root, from this file's place in it.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func text(_ relativePath: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(relativePath), encoding: .utf8)
    }

    @Test func everyCommandHasItsHeadingInTheReference() throws {
        let headings = Set(try Self.text("docs/cli.md").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        let missing = missingHeadings(for: try EventLogCLI.commands(for: .demo), in: headings)
        #expect(missing.isEmpty, "docs/cli.md has no heading for: \(missing.joined(separator: "; "))")
    }

    @Test func everyExampleParses() throws {
        let parser = Parser(program: "eventlog", commands: try EventLogCLI.commands(for: .demo))
        var checked = 0
        for file in ["docs/cli.md", "README.md"] {
            for (line, command) in shellExamples(in: try Self.text(file)) {
                checked += 1
                let words: [String]
                do {
                    words = try shellWords(command)
                } catch {
                    Issue.record("\(file):\(line): cannot split into words: \(command)")
                    continue
                }
                do {
                    _ = try parser.parse(Array(words.dropFirst()))
                } catch {
                    Issue.record("\(file):\(line): \(error.message): \(command)")
                }
            }
        }
        #expect(checked > 20, "found only \(checked) examples: is the sh-block scan still right?")
    }

    /// Every `$ eventlog help CMD` block of docs/cli.md is what the program prints for it
    /// (without the exit codes every command shares, which the page has once).
    @Test func everyPastedHelpIsTheProgramsOwn() throws {
        let reference = try Self.text("docs/cli.md")
        let blocks = reference.components(separatedBy: "```text\n$ eventlog help ").dropFirst()
        #expect(blocks.count > 20, "found only \(blocks.count) pasted helps: is the scan still right?")
        for block in blocks {
            guard let end = block.range(of: "\n```") else { Issue.record("an unclosed help block: \(block.prefix(60))"); continue }
            let lines = block[..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            let command = lines[0].split(separator: " ").map(String.init)
            let printed = eventlog(["help"] + command).out
            let own = printed.components(separatedBy: "\nEXIT CODES:\n")[0].trimmingCharacters(in: .newlines)
            #expect(lines.dropFirst().joined(separator: "\n") == own, "docs/cli.md's help of '\(command.joined(separator: " "))' is not the program's")
        }
    }

    @Test func theWordSplitterHonoursQuotes() throws {
        #expect(try shellWords(#"eventlog bisect --where 'a == "b"' --to 3"#) == ["eventlog", "bisect", "--where", #"a == "b""#, "--to", "3"])
        #expect(try shellWords(#"eventlog objects save T "{\"a\":1}"  # a comment"#) == ["eventlog", "objects", "save", "T", #"{"a":1}"#])
        #expect(try shellWords("eventlog show 'it''s'") == ["eventlog", "show", "its"])
        #expect(throws: (any Error).self) { try shellWords("eventlog open 'unclosed") }
    }

    @Test func theExampleScanSkipsWhatItCannotCheck() {
        let markdown = """
        ```sh
        eventlog info   # the log
        eventlog log | grep x
        eventlog export > f
        eventlog ship &
        eventlog show $(cat n)
        eventlog open \\
          'botmessages://bots'
        echo eventlog info
        ```
        eventlog outside
        ```swift
        eventlog inside swift
        ```
        """
        #expect(shellExamples(in: markdown).map(\.command) == ["eventlog info   # the log"])
    }
}

/// The headings `## eventlog NAME` (and `### eventlog NAME SUB` for subcommands, a level
/// deeper for each) that `headings` lacks.
private func missingHeadings(for commands: [CommandSpec], in headings: Set<String>, prefix: String = "", level: Int = 2) -> [String] {
    commands.flatMap { command -> [String] in
        let path = prefix + command.name
        let heading = String(repeating: "#", count: level) + " eventlog " + path
        let own = headings.contains(heading) ? [] : [heading]
        return own + missingHeadings(for: command.subcommands, in: headings, prefix: path + " ", level: level + 1)
    }
}

/// The lines of `sh` blocks that run `eventlog` alone: trimmed, starting with `eventlog `, and
/// holding no pipe, redirection, background `&`, command substitution or line continuation.
private func shellExamples(in markdown: String) -> [(line: Int, command: String)] {
    var examples: [(line: Int, command: String)] = []
    var inShell = false
    var inOtherBlock = false
    var continued = false
    for (index, raw) in markdown.components(separatedBy: "\n").enumerated() {
        let line = raw.trimmingCharacters(in: .whitespaces)
        if line.hasPrefix("```") {
            if inShell || inOtherBlock {
                inShell = false
                inOtherBlock = false
            } else if line == "```sh" {
                inShell = true
            } else {
                inOtherBlock = true
            }
            continued = false
            continue
        }
        guard inShell else { continue }
        defer { continued = line.hasSuffix("\\") }
        if continued || line.hasSuffix("\\") || !line.hasPrefix("eventlog ") { continue }
        if ["|", ">", "&", "$("].contains(where: { line.contains($0) }) { continue }
        examples.append((line: index + 1, command: line))
    }
    return examples
}

/// A line that a shell would not split into words: an unclosed quote.
private struct UnclosedQuote: Error {}

/// Splits a command line into words as a shell does, without expansions: single quotes keep
/// everything, double quotes keep all but `\"`, `\\`, `\$` and `` \` ``, a backslash outside
/// quotes escapes the next character, and an unquoted `#` starting a word ends the line.
private func shellWords(_ line: String) throws -> [String] {
    var words: [String] = []
    var word = ""
    var inWord = false
    var characters = Array(line)[...]
    while let c = characters.popFirst() {
        switch c {
        case " ", "\t":
            if inWord { words.append(word); word = ""; inWord = false }
        case "#" where !inWord:
            characters = []
        case "'":
            inWord = true
            guard let end = characters.firstIndex(of: "'") else { throw UnclosedQuote() }
            word += String(characters[..<end])
            characters = characters[(end + 1)...]
        case "\"":
            inWord = true
            var closed = false
            while let d = characters.popFirst() {
                if d == "\"" { closed = true; break }
                if d == "\\", let next = characters.first, "\"\\$`".contains(next) {
                    word.append(characters.removeFirst())
                } else {
                    word.append(d)
                }
            }
            if !closed { throw UnclosedQuote() }
        case "\\":
            inWord = true
            if let next = characters.popFirst() { word.append(next) }
        default:
            inWord = true
            word.append(c)
        }
    }
    if inWord { words.append(word) }
    return words
}
