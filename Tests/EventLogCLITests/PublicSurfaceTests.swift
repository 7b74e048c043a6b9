import Foundation
import Testing

/// A client of the library sees what an app needs and nothing that writes around the log's
/// checks: code outside the package is typechecked against the built modules, as an app's is.
@Suite struct PublicSurfaceTests {
    @Test func theStorageLayerIsNotVisibleToClients() throws {
        let allowed = """
            import EventLog
            func use(_ store: EventStore) throws {
                try store.append(Event(stream: "s", type: "t", writes: [Write("a", old: nil, new: 1)]))
                _ = try store.snapshot(after: 1)
                _ = try store.firstEvent(where: StatePredicate(parsing: "a == 1"))
                var options = EventStore.Options()
                options.durability = .lastCommitMayBeLost
                options.clock = EventClock.system
                _ = store.path
            }
            """
        let allowedErrors = try typecheck(allowed)
        #expect(allowedErrors.isEmpty, "\(allowedErrors)")
        let refused = """
            import EventLog
            func sneak(_ store: EventStore, batch: inout AppendBatch) throws {
                _ = store.environment
                _ = try store.openDatabase(named: "events", create: false)
                let _: Transaction? = nil
                let _: Database? = nil
                _ = try Environment.open(path: "x")
                try batch.empty(Database(id: 0))
            }
            """
        let errors = try typecheck(refused)
        // One error (at least) on each line from the third on: every way in is closed.
        #expect(Set(errors.map(\.line)) == Set(3...8), "\(errors)")
    }

    /// The shipped `eventlog` is the demo's app built on EventLogCLI's public API alone: its
    /// sources typecheck as a module outside the package, which sees no `package` or
    /// internal declaration.
    @Test func theDemosCommandLineNeedsOnlyThePublicAPI() throws {
        let sources = root.appendingPathComponent("Sources/DemoCLI")
        let files = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { $0.hasSuffix(".swift") }.sorted()
        #expect(files == ["DemoApp.swift", "MessengerCommands.swift"])
        let errors = try typecheck(files: files.map { sources.appendingPathComponent($0).path })
        #expect(errors.isEmpty, "\(errors)")
    }

    /// The command line's parts are an app's to use, its machinery is not.
    @Test func theCommandLinesMachineryIsNotVisibleToApps() throws {
        let allowed = """
            import EventLog
            import EventLogCLI
            let command = CommandSpec(name: "hello", summary: "Say hello.", options: [.init(name: "to", value: "NAME", help: "Who.")]) { arguments, context in
                guard let name = arguments.value("to") else { throw CLIError.usage("--to is missing") }
                context.console.line("hello \\(Render.escaped(name)) in \\(context.databasePath)")
                return .ok
            }
            func app() -> EventLogApp {
                var app = EventLogApp(name: "hello") { _ in Projections() }
                app.commands = [command]
                return app
            }
            """
        let allowedErrors = try typecheck(allowed)
        #expect(allowedErrors.isEmpty, "\(allowedErrors)")
        let refused = """
            import EventLogCLI
            func sneak(_ arguments: ParsedArguments, _ context: CommandContext) throws {
                _ = Parser(program: "x", commands: [])
                _ = ParsedArguments()
                _ = try attempt { 1 }
                _ = arguments.values
                _ = CommandContext(arguments: arguments, environment: [:], console: context.console, app: context.app)
            }
            """
        let errors = try typecheck(refused)
        #expect(Set(errors.map(\.line)) == Set(3...7), "\(errors)")
    }

    /// The package's directory.
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Typechecks `source` as a separate module against the package's built modules and
    /// returns its errors with their lines.
    private func typecheck(_ source: String) throws -> [(line: Int, message: String)] {
        let file = NSTemporaryDirectory() + "client-\(UUID().uuidString).swift"
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        return try typecheck(files: [file]).map { ($0.line, $0.message) }
    }

    /// Typechecks `files` as one module outside the package (its own module name, so no
    /// `package` access) against the package's built modules and the C modules they import;
    /// returns the errors with their files and lines.
    private func typecheck(files: [String]) throws -> [(file: String, line: Int, message: String)] {
        // The build directory this test was built into (a sanitizer's build lives apart).
        let build = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        var arguments = ["swiftc", "-typecheck", "-module-name", "Client", "-I", build.appendingPathComponent("Modules").path]
        for system in ["CLMDB", "CCrypto", "CNATS", "CCurl"] { arguments += ["-I", root.appendingPathComponent("Sources/\(system)").path] }
        for target in ["CCRC32C", "CSHA256", "CFaultGuard"] {
            arguments += ["-Xcc", "-fmodule-map-file=" + build.appendingPathComponent("\(target).build/module.modulemap").path]
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments + files
        let output = Pipe()
        process.standardError = output
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let errors = text.split(separator: "\n").filter { $0.contains(": error: ") }.compactMap { line -> (String, Int, String)? in
            guard let file = files.first(where: { line.hasPrefix($0 + ":") }) else { return nil }
            let parts = line.dropFirst(file.count + 1).split(separator: ":", maxSplits: 1)
            return (file, Int(parts[0]) ?? 0, String(line))
        }
        #expect((process.terminationStatus == 0) == errors.isEmpty, "\(text)")
        return errors
    }
}
