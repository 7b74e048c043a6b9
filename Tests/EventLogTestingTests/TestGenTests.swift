import DemoCLI
import DemoMessenger
import EventLog
import EventLogCLI
import EventLogTesting
import Foundation
import Testing

/// `eventlog testgen` on the recorded bots-tab session gives `Generated/BotsTab.swift`, which
/// is compiled into this target: it passes on today's code and fails on the regression.
@Suite struct TestGenTests {
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()

    /// Runs the command line in this process: exit code, stdout, stderr.
    func eventlog(_ arguments: [String]) -> (code: Int32, out: String, err: String) {
        let out = Locked(""), err = Locked("")
        let code = EventLogCLI.run(arguments, environment: [:],
                                   console: Console(stdout: { text in out.withLock { $0 += text } }, stderr: { text in err.withLock { $0 += text } }), app: .demo)
        return (code, out.withLock { $0 }, err.withLock { $0 })
    }

    @Test func theGeneratedTestIsTheOneCheckedIn() throws {
        let directory = TemporaryDirectory()
        let db = directory.file("db")
        #expect(eventlog(["import", here.appendingPathComponent("Fixtures/bots-tab.jsonl").path, "--db", db]).code == 0)
        let generated = eventlog(["testgen", "--from", "2", "--name", "botsTab", "--db", db])
        #expect(generated.code == 0)
        #expect(generated.err == "")
        let checkedIn = here.appendingPathComponent("Generated/BotsTab.swift")
        if RecordedSession.isRecording {
            try Data(generated.out.utf8).write(to: checkedIn)
            Issue.record("Wrote \(checkedIn.path) (EVENTLOG_RECORD is set). Run again without it to verify.")
            return
        }
        #expect(generated.out == (try String(contentsOf: checkedIn, encoding: .utf8)), "regenerate it with EVENTLOG_RECORD=1")
    }

    @Test func theGeneratedTestFailsOnTheRegressionAtTheFilter() throws {
        let found = try failures { try botsTab(model: MessengerModel(regression: .compoundTabFilter)) }
        // The bot tab is selected twice in the session, and both times the filter is missing.
        #expect(found.count == 2)
        #expect(found.first?.message.contains("  ≠ #5 messenger/selectBotTab applied\n        messenger.listFilter: − \"unread\" + (not written)") == true,
                "\(found.first?.message ?? "")")
        for failure in found { removeKeptLogs(named: failure.message) }
    }

    /// `eventlog shrink --testgen` on the demo's faulty session gives `Generated/ShrunkBotsTab.swift`,
    /// compiled into this target: the one URL the session comes down to, which passes on
    /// today's code and fails on the regression.
    @Test func theShrunkSessionsTestIsTheOneCheckedIn() throws {
        let directory = TemporaryDirectory()
        let db = directory.file("faulty")
        #expect(eventlog(["demo", "--regression", "compound-tab-filter", "--db", db]).code == 0)
        let shrunk = eventlog(["shrink", "--replay", "--regression", "compound-tab-filter", "--testgen", "shrunkBotsTab", "--db", db])
        #expect(shrunk.code == 0)
        #expect(shrunk.err.hasPrefix("shrunk 149 inputs to 1 in "), "\(shrunk.err)")
        let checkedIn = here.appendingPathComponent("Generated/ShrunkBotsTab.swift")
        if RecordedSession.isRecording {
            try Data(shrunk.out.utf8).write(to: checkedIn)
            Issue.record("Wrote \(checkedIn.path) (EVENTLOG_RECORD is set). Run again without it to verify.")
            return
        }
        #expect(shrunk.out == (try String(contentsOf: checkedIn, encoding: .utf8)), "regenerate it with EVENTLOG_RECORD=1")
    }

    @Test func theShrunkSessionsTestFailsOnTheRegressionAtTheFilter() throws {
        let found = try failures { try shrunkBotsTab(model: MessengerModel(regression: .compoundTabFilter)) }
        #expect(found.count == 1)
        #expect(found.first?.message.contains("messenger.listFilter: − \"unread\" + (not written)") == true, "\(found.first?.message ?? "")")
        for failure in found { removeKeptLogs(named: failure.message) }
    }

    @Test func testgenSaysWhereTodaysCodeDiffersAndRefusesBadInput() throws {
        let directory = TemporaryDirectory()
        let db = directory.file("db")
        #expect(eventlog(["import", here.appendingPathComponent("Fixtures/bots-tab.jsonl").path, "--db", db]).code == 0)
        // A recording made by the faulty code: today's code writes the filter the recording lacks.
        let faulty = directory.file("faulty")
        #expect(eventlog(["open", "botmessages://bots?filter=unread", "--regression", "compound-tab-filter", "--db", faulty]).code == 0)
        let differs = eventlog(["testgen", "--db", faulty])
        #expect(differs.code == 0)
        #expect(differs.err.contains("testgen: today's code differs from the recording at #5 messenger/selectBotTab"), "\(differs.err)")
        #expect(eventlog(["testgen", "--from", "30", "--db", db]).err.contains("no events in 30…23"))
        #expect(eventlog(["testgen", "--name", "not-an-identifier", "--db", db]).code == 2)
        #expect(eventlog(["testgen", "--name", "9lives", "--db", db]).code == 2)
        #expect(eventlog(["testgen", "--db", directory.file("missing")]).code == 3)
        // A plan's start that cannot be driven again is bad input, and says why.
        let starts = directory.file("starts.jsonl")
        try (#"{"stream":"plans","type":"planStarted","origin":"url"}"# + "\n"
             + #"{"stream":"plans","type":"planStarted","origin":"url","cause":{"id":"p","source":"botmessages://nowhere"}}"#)
            .write(toFile: starts, atomically: true, encoding: .utf8)
        let odd = directory.file("odd.lmdb")
        #expect(eventlog(["import", starts, "--db", odd]).code == 0)
        #expect(eventlog(["testgen", "--from", "1", "--to", "1", "--db", odd]) == (2, "", "Error: event #1: its plan records no source to rebuild it from\n"))
        #expect(eventlog(["testgen", "--from", "2", "--to", "2", "--db", odd]).err
                == "Error: event #2: cannot rebuild the plan of \"botmessages://nowhere\": botmessages://nowhere: unknown destination 'nowhere' (see 'eventlog routes')\n")
    }

    /// Every name testgen takes prints Swift that parses (`swiftc -parse` on the output); the
    /// reserved words and the names the test's file uses are refused in one line. The words
    /// are the reserved and contextual keywords of The Swift Programming Language.
    @Test func aNameIsSwiftThatParsesOrRefused() throws {
        let directory = TemporaryDirectory()
        let db = directory.file("db")
        #expect(eventlog(["import", here.appendingPathComponent("Fixtures/bots-tab.jsonl").path, "--db", db]).code == 0)
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { String($0) + "/swiftc" }
        let swiftc = try #require(path.first { FileManager.default.isExecutableFile(atPath: $0) }, "swiftc is not on PATH")
        let reserved = ["associatedtype", "borrowing", "class", "consuming", "deinit", "enum", "extension", "fileprivate", "func", "import",
                        "init", "inout", "internal", "let", "nonisolated", "open", "operator", "private", "precedencegroup", "protocol",
                        "public", "rethrows", "static", "struct", "subscript", "typealias", "var", "break", "case", "catch", "continue",
                        "default", "defer", "do", "else", "fallthrough", "for", "guard", "if", "in", "repeat", "return", "throw", "switch",
                        "where", "while", "Any", "as", "await", "false", "is", "nil", "self", "Self", "super", "throws", "true", "try", "_"]
        let contextual = ["associativity", "async", "convenience", "didSet", "dynamic", "final", "get", "indirect", "infix", "lazy", "left",
                          "mutating", "none", "nonmutating", "optional", "override", "package", "postfix", "precedence", "prefix",
                          "Protocol", "required", "right", "set", "some", "Type", "unowned", "weak", "willSet", "actor", "any", "each",
                          "macro", "consume", "copy", "discard", "isolated", "sending", "then", "model", "tester", "engine"]
        // Parse well but would call or hide something else: refused too.
        let used = ["await", "Testing", "EventLog", "EventLogTesting", "Effects", "DemoMessenger", "StateValue", "TraceTester", "MessengerModel", "MessengerRouter", "Test"]
        for word in reserved + contextual + used {
            let result = eventlog(["testgen", "--from", "2", "--name", word, "--db", db])
            if reserved.contains(word) || used.contains(word) {
                #expect(result.code == 2, "\(word)")
            }
            guard result.code == 0 else {
                // One line of error, then the usage line.
                let first = result.err.split(separator: "\n").first ?? ""
                #expect(result.code == 2 && first.hasPrefix("Error: --name \(word) ") && first.hasSuffix("; choose another name")
                        && result.err.hasPrefix(first + "\nUsage: "), "\(word): \(result.err)")
                continue
            }
            let file = directory.file("\(word).swift")
            try Data(result.out.utf8).write(to: URL(fileURLWithPath: file))
            let parse = Process()
            parse.executableURL = URL(fileURLWithPath: swiftc)
            parse.arguments = ["-parse", file]
            parse.standardOutput = FileHandle.nullDevice
            parse.standardError = FileHandle.nullDevice
            try parse.run()
            parse.waitUntilExit()
            #expect(parse.terminationStatus == 0, "testgen --name \(word) printed Swift that does not parse")
        }
    }
}
