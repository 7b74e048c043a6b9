import Foundation

/// A server script started by a test on loopback, stopped when the test lets it go. The
/// script prints `listening on URL` once bound to a free port.
public final class LoopbackServer: @unchecked Sendable {
    public let url: URL
    private let process: Process

    /// The directory of this package's `tools/` and of the test servers beside this file.
    public static let toolsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("tools")
    public static let fixtureServer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("fixture_server.py")

    /// Starts `python3 script arguments…` and waits (up to 10 s) for its `listening on` line.
    public init(script: URL, arguments: [String]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var line = Data()
        let deadline = Date().addingTimeInterval(10)
        let handle = output.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")), Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("listening on "), let url = URL(string: String(text.dropFirst("listening on ".count))) else {
            process.terminate()
            throw LoopbackServerError(message: "\(script.lastPathComponent) did not start: \(text.isEmpty ? "no output" : text)")
        }
        self.url = url
    }

    /// The fixture server over `directory` (see `fixture_server.py`).
    public static func fixtures(in directory: String, host: String = "127.0.0.1") throws -> LoopbackServer {
        try LoopbackServer(script: fixtureServer, arguments: ["--dir", directory, "--host", host])
    }

    /// Kills the server at once, as a crash would.
    public func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { kill() }
}

public struct LoopbackServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
