import Foundation

/// Keeps a value alive so that the optimiser cannot drop the work that produced it.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// Monotonic nanoseconds.
func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Seconds taken by `body`.
func time(_ body: () throws -> Void) rethrows -> Double {
    let start = now()
    try body()
    return Double(now() - start) / 1e9
}

/// One subject's figures in one scenario.
struct Measurement {
    var subject: String
    var operations: Int
    var seconds: Double
    /// Per-operation latencies in microseconds, when they matter.
    var latencies: [Double] = []
    var bytesPerEvent: Double?
    /// Other figures, such as probes or memory.
    var extra: [(String, Double)] = []

    /// The engine's ratio over this subject in each run, when several runs were combined.
    var runRatios: [Double] = []

    var opsPerSecond: Double { Double(operations) / seconds }

    func percentile(_ p: Double) -> Double? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }
}

/// A scenario's measurements, the subject first and its peers after.
struct ScenarioReport {
    var name: String
    var summary: String
    var measurements: [Measurement]
    var note: String?
    /// Whether throughput means anything here (not for a scenario that only measures sizes).
    var comparesThroughput = true
    /// The process's peak resident memory while the step that produced this report ran
    /// (`PeakMemory.measuring`); `nil` where the kernel cannot reset the peak.
    var peakResidentBytes: Int?

    /// The engine's throughput over a peer's, in the same run (the median over the runs, when
    /// several were combined).
    func ratio(against peer: Measurement) -> Double? {
        guard comparesThroughput, let engine = measurements.first, engine.subject != peer.subject else { return nil }
        return peer.runRatios.isEmpty ? engine.opsPerSecond / peer.opsPerSecond : median(peer.runRatios)
    }

    /// The lowest and highest of the ratios over a peer, when several runs were combined.
    func ratioRange(against peer: Measurement) -> ClosedRange<Double>? {
        guard peer.runRatios.count > 1, let low = peer.runRatios.min(), let high = peer.runRatios.max() else { return nil }
        return low...high
    }
}

extension ScenarioReport {
    /// Several runs of one scenario as one report: each subject's median run by throughput,
    /// and each ratio as the median of the ratios measured within the runs (a ratio is only
    /// ever taken between figures of the same run). The other figures (peak memory, heap
    /// growth, counts) are the first run's: later runs start with what earlier ones left
    /// resident, so only the first is measured as a single run would be.
    init(combining runs: [ScenarioReport]) {
        self = runs[0]
        guard runs.count > 1 else { return }
        measurements = measurements.indices.map { index in
            var middle = runs.map { $0.measurements[index] }.sorted { $0.opsPerSecond < $1.opsPerSecond }[runs.count / 2]
            middle.extra = runs[0].measurements[index].extra
            middle.runRatios = runs.compactMap { $0.ratio(against: $0.measurements[index]) }
            return middle
        }
    }
}

/// The middle value (the mean of the two middle ones for an even count).
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// The resident memory of this process, in bytes: now (`VmRSS`), at its peak (`VmHWM`), and
/// the part that is the process's own heap rather than mapped files such as LMDB's (`RssAnon`).
func residentMemory() -> (current: Int, peak: Int, anonymous: Int) {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0, 0) }
    func field(_ name: String) -> Int {
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            return (Int(line.split(separator: " ").dropFirst().first(where: { !$0.isEmpty }) ?? "0") ?? 0) * 1024
        }
        return 0
    }
    return (field("VmRSS"), field("VmHWM"), field("RssAnon"))
}

/// The process's peak resident memory, per step of the benchmark and over the whole run.
struct PeakMemory {
    /// The highest peak seen so far, whatever step it fell in.
    private(set) var wholeRun = 0

    /// Runs one step and records in its reports the peak resident memory meanwhile: the
    /// kernel's high-water mark (`VmHWM`) is reset to the current size first
    /// (`/proc/self/clear_refs`), so the figure covers this step, including memory that was
    /// already resident when it began (LMDB's mapped pages among it).
    mutating func measuring(_ step: () throws -> [ScenarioReport]) rethrows -> [ScenarioReport] {
        wholeRun = max(wholeRun, residentMemory().peak)
        let reset = (try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)) != nil
        var reports = try step()
        let peak = residentMemory().peak
        wholeRun = max(wholeRun, peak)
        for index in reports.indices { reports[index].peakResidentBytes = reset ? peak : nil }
        return reports
    }
}

/// A child process run to its end.
struct ChildRun {
    /// Wall time from spawning the child to its exit.
    let seconds: Double
    /// The child's own peak resident memory: `wait4`'s `ru_maxrss` for this child alone
    /// (`RUSAGE_CHILDREN` would be the highest over every child waited for).
    let peakResidentBytes: Int
    /// What it printed on stdout.
    let output: String

    /// Runs `executable` with `arguments`, its stdout and stderr going to files in `scratch`
    /// (where no full pipe can stall it); throws, with what it printed on stderr, unless it
    /// exits with status 0.
    init(_ executable: String, _ arguments: [String], in scratch: Scratch) throws {
        let outputPath = scratch.file("child.stdout")
        let errorPath = scratch.file("child.stderr")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let command = ([executable] + arguments).joined(separator: " ")
        var pid: pid_t = 0
        let start = now()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw BenchmarkError(description: "cannot run \(command): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw BenchmarkError(description: "waiting for \(command): \(String(cString: strerror(errno)))") }
        }
        seconds = Double(now() - start) / 1e9
        // The status's low 7 bits are the signal that ended the child, 0 when it exited; the next 8 its exit status.
        guard status & 0x7F == 0, status >> 8 & 0xFF == 0 else {
            let ending = status & 0x7F == 0 ? "exited with status \(status >> 8 & 0xFF)" : "was killed by signal \(status & 0x7F)"
            let errors = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            throw BenchmarkError(description: "\(command) \(ending): \(errors.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        peakResidentBytes = usage.ru_maxrss * 1024  // KiB on Linux
        output = try String(contentsOfFile: outputPath, encoding: .utf8)
    }
}

/// A directory removed when the value dies.
final class Scratch {
    let path = NSTemporaryDirectory() + "eventlog-bench-\(UUID().uuidString)"
    init() { try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
    func file(_ name: String) -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

func fileSize(_ path: String) -> Int {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return 0 }
    if !isDirectory.boolValue { return (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
    let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    return names.filter { $0 != "lock.mdb" && !$0.hasSuffix("-shm") }.map { fileSize(path + "/" + $0) }.reduce(0, +)
}

/// Renders reports as a table for people.
enum Table {
    static func render(_ reports: [ScenarioReport]) -> String {
        let header = ["scenario", "subject", "ops/s", "p50 µs", "p99 µs", "p99.9 µs", "bytes/event", "peak MiB", "vs peer", "other"]
        var rows: [[String]] = []
        for report in reports {
            for (index, m) in report.measurements.enumerated() {
                rows.append([
                    index == 0 ? report.name : "",
                    m.subject,
                    format(m.opsPerSecond),
                    m.percentile(50).map { format($0) } ?? "",
                    m.percentile(99).map { format($0) } ?? "",
                    m.percentile(99.9).map { format($0) } ?? "",
                    m.bytesPerEvent.map { String(format: "%.0f", $0) } ?? "",
                    index == 0 ? report.peakResidentBytes.map { String($0 >> 20) } ?? "" : "",
                    report.ratio(against: m).map { ratio in
                        String(format: "%.2f×", ratio) + (report.ratioRange(against: m).map { String(format: " (%.2f–%.2f)", $0.lowerBound, $0.upperBound) } ?? "")
                    } ?? "",
                    m.extra.map { "\($0.0) \(format($0.1))" }.joined(separator: ", "),
                ])
            }
        }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index < 2 ? cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
                          : String(repeating: " ", count: widths[index] - cell.count) + cell
            }.joined(separator: "  ").replacing(#/ +$/#, with: "")
        }
        var text = line(header) + "\n" + line(widths.map { String(repeating: "-", count: $0) }) + "\n"
        for row in rows { text += line(row) + "\n" }
        for report in reports where report.note != nil { text += "\n\(report.name): \(report.note!)" }
        return text + "\n"
    }

    /// `1,234,567` for large values, two significant decimals for small ones.
    static func format(_ value: Double) -> String {
        guard value >= 100 else { return String(format: value >= 10 ? "%.1f" : "%.2f", value) }
        var digits = String(Int(value.rounded()))
        var index = digits.endIndex
        while digits.distance(from: digits.startIndex, to: index) > 3 {
            index = digits.index(index, offsetBy: -3)
            digits.insert(",", at: index)
        }
        return digits
    }
}
