import EventLog
import Foundation

/// `eventlog-bench [--quick] [--json FILE] [--only NAME]`: runs the scenarios, prints a table,
/// and optionally writes the results as JSON. Build with `-c release`.
let usage = "usage: eventlog-bench [--quick] [--json FILE] [--only NAME] [--subject NAME]"
var quick = false
var jsonPath: String?
var only: String?
var onlySubject: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--quick": quick = true
    case "--json": jsonPath = arguments.popFirst()
    case "--only": only = arguments.popFirst()
    case "--subject": onlySubject = arguments.popFirst()
    case "-h", "--help":
        print("""
            OVERVIEW: Measure the engine against raw LMDB, SQLite and JSON lines in one run.

            USAGE: eventlog-bench [--quick] [--json FILE] [--only NAME] [--subject NAME]

            OPTIONS:
              --quick      Small sizes, under a minute (CI smoke runs).
              --json FILE  Also write the results as JSON to FILE.
              --only NAME  Run only the scenarios whose name contains NAME.
              --subject S  Run only subject S (eventlog, raw-lmdb, sqlite, jsonl) in append scenarios;
                           with eventlog, the read scenarios build no peers either.
            """)
        exit(0)
    default:
        FileHandle.standardError.write(Data("Error: unknown argument '\(argument)'\n\(usage)\n".utf8))
        exit(2)
    }
}
if jsonPath == nil, CommandLine.arguments.contains("--json") {
    FileHandle.standardError.write(Data("Error: --json needs a file\n\(usage)\n".utf8))
    exit(2)
}

let sizes = quick ? Sizes.quick : Sizes.full
let filter = only
let subject = onlySubject
func wanted(_ name: String) -> Bool { filter.map { name.contains($0) } ?? true }
func progress(_ text: String) { FileHandle.standardError.write(Data("· \(text)\n".utf8)) }

var reports: [ScenarioReport] = []
var peakMemory = PeakMemory()
/// Runs one step of the benchmark: its progress line, its reports and its peak memory.
@MainActor func step(_ name: String, _ run: () throws -> [ScenarioReport]) throws {
    progress(name)
    reports += try peakMemory.measuring(run)
}
do {
    if wanted("append.durable.single") {
        try step("append.durable.single") {
            [try Scenarios.append(name: "append.durable.single", summary: "one event per durable commit",
                                  events: sizes.singleCommits, batch: 1, fast: false, only: subject)]
        }
    }
    for (batch, fast) in [(100, false), (10_000, false), (1, true), (100, true), (10_000, true)] {
        let name = "append.batch.\(batch).\(fast ? "fast" : "durable")"
        guard wanted(name) else { continue }
        try step(name) {
            [try Scenarios.append(name: name, summary: "\(batch) events per \(fast ? "commit, faster mode" : "durable commit")",
                                  events: sizes.batchEvents[batch]!, batch: batch, fast: fast, only: subject)]
        }
    }
    if wanted("append.concurrent") {
        try step("append.concurrent") { [try Scenarios.concurrent(producers: 16, perProducer: sizes.perProducer)] }
    }
    if wanted("objects") {
        try step("objects") { try Scenarios.objects(count: sizes.objects, updates: sizes.objectUpdates, fetches: sizes.fetches) }
    }
    let readScenarios = ["replay", "snapshot.random", "bisect.where", "verify", "storage"].filter(wanted)
    if !readScenarios.isEmpty {
        progress("building a log of \(sizes.logEvents) events for each subject")
        let withPeers = (readScenarios.contains("replay") || readScenarios.contains("storage")) && subject != "eventlog"
        let log = try Scenarios.BigLog(events: sizes.logEvents, withPeers: withPeers)
        defer { log.close() }
        for name in readScenarios {
            try step(name) {
                switch name {
                case "replay": try Scenarios.replay(log)
                case "snapshot.random": [try Scenarios.snapshots(log, probes: sizes.snapshotProbes)]
                case "bisect.where": [try Scenarios.bisect(log, runs: sizes.bisects)]
                case "verify": [try Scenarios.verify(log)]
                default: [try Scenarios.storage(log)]
                }
            }
        }
    }
} catch {
    FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
    exit(1)
}

let runPeak = max(peakMemory.wholeRun, residentMemory().peak)
let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
    .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown"
print("machine: \(cpu), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB; mode: \(quick ? "quick" : "full"); peak RSS \(runPeak >> 20) MiB\n")
print(Table.render(reports), terminator: "")

if let jsonPath {
    func number(_ value: Double?) -> StateValue { value.map { .double(($0 * 1000).rounded() / 1000) } ?? .null }
    let scenarios: [StateValue] = reports.map { report in
        var object = StateObject()
        object["name"] = .string(report.name)
        object["summary"] = .string(report.summary)
        object["note"] = StateValue(report.note)
        object["peakRSSBytes"] = report.peakResidentBytes.map { .int(Int64($0)) } ?? .null
        object["results"] = .array(report.measurements.map { m in
            var result = StateObject()
            result["subject"] = .string(m.subject)
            result["operations"] = .int(Int64(m.operations))
            result["seconds"] = number(m.seconds)
            result["opsPerSecond"] = number(m.opsPerSecond)
            result["p50Microseconds"] = number(m.percentile(50))
            result["p99Microseconds"] = number(m.percentile(99))
            result["p999Microseconds"] = number(m.percentile(99.9))
            result["bytesPerEvent"] = number(m.bytesPerEvent)
            result["ratio"] = number(report.ratio(against: m))
            for (key, value) in m.extra { result[key] = number(value) }
            return .object(result)
        })
        return .object(object)
    }
    var document = StateObject()
    document["machine"] = ["cpu": .string(cpu), "cores": .int(Int64(ProcessInfo.processInfo.activeProcessorCount)),
                           "memoryBytes": .int(Int64(ProcessInfo.processInfo.physicalMemory))]
    document["mode"] = .string(quick ? "quick" : "full")
    document["peakRSSBytes"] = .int(Int64(runPeak))
    document["scenarios"] = .array(scenarios)
    do {
        try StateValue.object(document).json(pretty: true).write(toFile: jsonPath, atomically: true, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("Error: cannot write \(jsonPath): \(error)\n".utf8))
        exit(1)
    }
}
