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

    /// Typechecks `source` as a separate module against the package's built modules and
    /// returns its errors with their lines.
    private func typecheck(_ source: String) throws -> [(line: Int, message: String)] {
        let build = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug")
        let file = NSTemporaryDirectory() + "client-\(UUID().uuidString).swift"
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swiftc", "-typecheck", "-I", build.appendingPathComponent("Modules").path,
                             "-I", build.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources/CLMDB").path,
                             "-Xcc", "-fmodule-map-file=" + build.appendingPathComponent("CCRC32C.build/module.modulemap").path,
                             "-Xcc", "-fmodule-map-file=" + build.appendingPathComponent("CFaultGuard.build/module.modulemap").path, file]
        let output = Pipe()
        process.standardError = output
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let errors = text.split(separator: "\n").filter { $0.hasPrefix(file) && $0.contains(": error: ") }.map { line in
            let parts = line.dropFirst(file.count + 1).split(separator: ":", maxSplits: 1)
            return (line: Int(parts[0]) ?? 0, message: String(line))
        }
        #expect((process.terminationStatus == 0) == errors.isEmpty, "\(text)")
        return errors
    }
}
