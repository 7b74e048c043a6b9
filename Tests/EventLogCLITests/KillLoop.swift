import Foundation

/// Runs `body` once a round, for `rounds` or until `deadline`, whichever ends first; each
/// round starts the built `eventlog` as a child process through the `runAndKill` it is handed,
/// and checks what the child left. The first round's child is not killed: it runs to the end,
/// to learn how long a run takes. Every later one is sent SIGKILL at a random moment within
/// `fraction` of the shortest whole run so far (a child that ran to its end before the kill
/// shortens it: a first run slowed by a cold start would otherwise let many runs finish), only
/// while it still runs (the id of a child that ended may be another process's), as a crash or
/// a power cut would stop it.
/// - Parameters:
///   - rounds: The rounds' numbers, handed to `body`.
///   - fraction: How much of the shortest whole run's time the kill may fall in (1: all of it).
///   - deadline: No round starts after it.
///   - body: Makes the round's child (by `spawnEventlog`, say, with the input it reads),
///     hands it to `runAndKill` once, and then checks the outcome. `runAndKill` sends the
///     child's stdout and stderr to `/dev/null` unless the body set them, runs it, kills it as above, and returns once
///     it has ended (its `terminationReason` says whether it was killed).
func killAtRandomMoments(rounds: some Sequence<Int>, within fraction: Double = 1, until deadline: Date = .distantFuture,
                         _ body: (_ round: Int, _ runAndKill: (Process) throws -> Void) throws -> Void) throws {
    var shortest: Double?
    func runAndKill(_ process: Process) throws {
        if process.standardOutput == nil { process.standardOutput = FileHandle.nullDevice }
        if process.standardError == nil { process.standardError = FileHandle.nullDevice }
        let started = Date()
        try process.run()
        if let shortest {
            usleep(UInt32.random(in: 0...UInt32(shortest * fraction * 1_000_000)))
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        if process.terminationReason == .exit && process.terminationStatus == 0 {
            let took = Date().timeIntervalSince(started)
            shortest = min(shortest ?? took, took)
        }
    }
    for round in rounds where Date() < deadline {
        try body(round, runAndKill)
    }
}

/// How many rounds a kill loop of `count` runs: `count` in a plain build, a quarter of it (at
/// least 5) under a sanitizer (tools/sanitize.sh sets `EVENTLOG_TEST_SANITIZER`), where every
/// child runs several times slower and the run looks for races and memory errors, which a few
/// rounds show as well as many; the plain run is the one that counts kills.
func killRounds(_ count: Int) -> Int {
    ProcessInfo.processInfo.environment["EVENTLOG_TEST_SANITIZER"] == nil ? count : max(5, count / 4)
}
