import DemoCLI
import EventLog
import Foundation
@testable import EventLogCLI

/// What one command printed and returned.
struct CommandOutcome {
    var code: Int32
    var out: String
    var err: String
}

/// Runs `eventlog` in-process with captured streams.
func eventlog(_ arguments: [String], stdin: String = "", environment: [String: String] = [:]) -> CommandOutcome {
    let out = Captured()
    let err = Captured()
    var input: Data? = Data(stdin.utf8)
    let console = Console(stdout: out.append, stderr: err.append, stdin: { defer { input = nil }; return input })
    let code = EventLogCLI.run(arguments, environment: environment, console: console, app: .demo)
    return CommandOutcome(code: code, out: out.text, err: err.text)
}

/// Text that threads may add to.
final class Captured: Sendable {
    private let parts = Locked<[String]>([])
    func append(_ text: String) { parts.withLock { $0.append(text) } }
    var text: String { parts.withLock { $0.joined() } }
}

/// The built executable `name` (by default `eventlog`), next to the test bundle.
func builtExecutable(_ name: String = "eventlog") -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug"),
    ]
    for directory in candidates {
        let url = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    fatalError("the \(name) executable is not built; run `swift build` first")
}

/// The built executable as a child process, ready to run. With `fileSizeLimit` (bytes) it
/// runs under that limit with `SIGXFSZ` ignored, so that writes past it come up short, as
/// on a full disk; `ignoringHangUp` starts it with `SIGHUP` ignored, as `nohup` does.
/// `interruptible` starts it with Ctrl-C, SIGTERM and SIGHUP at their defaults, unblocked,
/// as a terminal's shell would: a child inherits this process's dispositions, and a test
/// running a command in-process may be ignoring them at that moment (or its thread blocking
/// them); no shell can undo an inherited ignore, so Python's `exec` does.
func spawnEventlog(_ arguments: [String], executable: String = "eventlog", environment: [String: String] = [:], fileSizeLimit: Int? = nil,
                   ignoringHangUp: Bool = false, interruptible: Bool = false) throws -> Process {
    if interruptible {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", """
            import os, signal, sys
            numbers = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
            for number in numbers: signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, numbers)
            os.execv(sys.argv[1], sys.argv[1:])
            """, builtExecutable(executable).path] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        return process
    }
    let process = Process()
    // POSIX sh counts `ulimit -f` in blocks of 512 bytes.
    let setup = (fileSizeLimit.map { ["ulimit -f \($0 / 512)", "trap '' XFSZ"] } ?? []) + (ignoringHangUp ? ["trap '' HUP"] : [])
    if !setup.isEmpty {
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", (setup + [#"exec "$0" "$@""#]).joined(separator: " && "), builtExecutable(executable).path] + arguments
    } else {
        process.executableURL = builtExecutable(executable)
        process.arguments = arguments
    }
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    return process
}

/// Runs the built executable to the end with `stdin` as its input (none when `nil`), reading
/// both pipes before waiting.
func runEventlog(_ arguments: [String], executable: String = "eventlog", stdin: String? = nil, environment: [String: String] = [:],
                 fileSizeLimit: Int? = nil) throws -> CommandOutcome {
    let process = try spawnEventlog(arguments, executable: executable, environment: environment, fileSizeLimit: fileSizeLimit)
    let out = Pipe()
    let err = Pipe()
    let input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = stdin == nil ? FileHandle.nullDevice : input
    try process.run()
    if let stdin {
        // A child that exits before reading all must end the write, not this process.
        signal(SIGPIPE, SIG_IGN)
        // From a thread of its own: a child that stops reading must not block this one. Not
        // on Dispatch's global queue: it is as wide as the machine has cores, and blocking
        // work queued there waits behind other tests' blocking work (two children reading
        // stdin whose writers are queued behind two stderr reads deadlocked the suite).
        Thread.detachNewThread {
            try? input.fileHandleForWriting.write(contentsOf: Data(stdin.utf8))
            try? input.fileHandleForWriting.close()
        }
    }
    // Read both pipes before waiting: a child that fills a pipe would otherwise never exit.
    let errRead = DispatchSemaphore(value: 0)
    let errData = Locked(Data())
    Thread.detachNewThread {
        let read = err.fileHandleForReading.readDataToEndOfFile()
        errData.withLock { $0 = read }
        errRead.signal()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    errRead.wait()
    process.waitUntilExit()
    return CommandOutcome(code: process.terminationStatus, out: String(decoding: outData, as: UTF8.self), err: String(decoding: errData.withLock { $0 }, as: UTF8.self))
}

/// JSON lines for `count` events that count `key` up from `start`.
func counterEvents(key: String, count: Int, start: Int = 0) -> String {
    (start..<start + count).map { i in
        let old = i == 0 ? "" : #","old":\#(i - 1)"#
        return #"{"stream":"test","type":"tick","origin":"test","writes":[{"path":"\#(key)"\#(old),"new":\#(i)}]}"#
    }.joined(separator: "\n") + "\n"
}

/// Waits until `path` exists, for at most a minute and only while `process` runs.
func waitForFile(_ path: String, of process: Process) throws {
    let deadline = Date().addingTimeInterval(60)
    while !FileManager.default.fileExists(atPath: path) {
        guard process.isRunning, Date() < deadline else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
        usleep(10_000)
    }
}
