import EventLog
import Foundation

/// `eventlog-bench [--quick] [--runs N] [--json FILE] [--only NAME] [--subject NAME]`: runs the
/// scenarios, prints a table, and optionally writes the results as JSON. Build with `-c release`.
let usage = "usage: eventlog-bench [--quick] [--runs N] [--json FILE] [--only NAME] [--subject NAME]"
let subjectNames = ["eventlog", "raw-lmdb", "sqlite", "jsonl"]
var quick = false
var runs = 1
var jsonPath: String?
var only: String?
var onlySubject: String?

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Error: \(message)\n\(usage)\n".utf8))
    exit(2)
}

var arguments = CommandLine.arguments.dropFirst()
@MainActor func value(of option: String) -> String {
    guard let value = arguments.popFirst(), !value.hasPrefix("--") else { fail("\(option) needs a value") }
    return value
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--quick": quick = true
    case "--runs":
        guard let count = Int(value(of: argument)), count >= 1 else { fail("--runs needs a whole number of at least 1") }
        runs = count
    case "--json": jsonPath = value(of: argument)
    case "--only": only = value(of: argument)
    case "--subject":
        let name = value(of: argument)
        guard subjectNames.contains(name) else { fail("unknown subject '\(name)'; the subjects are \(subjectNames.joined(separator: ", "))") }
        onlySubject = name
    case "-h", "--help":
        print("""
            OVERVIEW: Measure the engine against raw LMDB, SQLite and JSON lines in one run.

            USAGE: eventlog-bench [--quick] [--runs N] [--json FILE] [--only NAME] [--subject NAME]

            OPTIONS:
              --quick      Small sizes, under a minute (CI smoke runs).
              --runs N     Run every scenario N times (default 1) and report each subject's median
                           run, and each ratio as the median of the ratios within the runs, with
                           their range; memory figures are the first run's.
              --json FILE  Also write the results as JSON to FILE.
              --only NAME  Run only the scenarios whose name contains NAME (a step that measures
                           several scenarios at once runs whole; only the wanted are reported).
              --subject S  Run only subject S (eventlog, raw-lmdb, sqlite, jsonl) in append scenarios;
                           with eventlog, the read scenarios build no peers either.
            """)
        exit(0)
    default:
        fail("unknown argument '\(argument)'")
    }
}
let sizes = quick ? Sizes.quick : Sizes.full
let subject = onlySubject
let batchRuns = [(100, false), (10_000, false), (1, true), (100, true), (10_000, true)].map { batch, fast in
    (name: "append.batch.\(batch).\(fast ? "fast" : "durable")", batch: batch, fast: fast)
}
/// The steps that read one shared million-event log, with the scenarios each reports.
let readSteps = [("replay", ["replay", "replay.state", "replay.upcast"]), ("snapshot.random", ["snapshot.random"]),
                 ("bisect.where", ["bisect.where"]), ("history", ["history"]), ("verify", ["verify"]), ("storage", ["storage"])]
let objectScenarios = ["objects.create", "objects.update", "objects.delete", "objects.replay", "objects.fetch"]
let typedObjectScenarios = ["objects.typed.create", "objects.typed.update", "objects.typed.fetch"]
/// The scenarios that start nats-server.
let fleetScenarios = ["fleet.ship", "fleet.pull", "fleet.bisect", "fleet.many.ship", "fleet.many.stats"]
/// The scenarios that run the release `eventlog` binary.
let binaryScenarios = ["import.jsonl", "deploy.download", "deploy.download.second", "follow.latency"]
let allScenarios = ["append.durable.single"] + batchRuns.map(\.name) + ["append.queued", "append.concurrent"] + objectScenarios + typedObjectScenarios
    + readSteps.flatMap(\.1) + ["retention.compact", "retention.flat"] + binaryScenarios + fleetScenarios
let filter = only
func wanted(_ name: String) -> Bool { filter.map { name.contains($0) } ?? true }
if let filter, !allScenarios.contains(where: wanted) {
    fail("no scenario name contains '\(filter)'; the scenarios are \(allScenarios.joined(separator: ", "))")
}
func progress(_ text: String) { FileHandle.standardError.write(Data("· \(text)\n".utf8)) }

var reports: [ScenarioReport] = []
var peakMemory = PeakMemory()
/// Runs one step of the benchmark `runs` times when any of the scenarios it reports is
/// wanted: its progress lines, its wanted reports (combined over the runs) and peak memory.
@MainActor func step(_ name: String, reporting scenarios: [String]? = nil, _ run: () throws -> [ScenarioReport]) throws {
    guard (scenarios ?? [name]).contains(where: wanted) else { return }
    var rounds: [[ScenarioReport]] = []
    for round in 1...runs {
        progress(runs == 1 ? name : "\(name), run \(round) of \(runs)")
        rounds.append(try peakMemory.measuring(run).filter { wanted($0.name) })
    }
    reports += rounds[0].indices.map { index in ScenarioReport(combining: rounds.map { $0[index] }) }
}
do {
    // Found before any step runs, so that a missing binary fails a full run at its start.
    let eventlogBinary = binaryScenarios.contains(where: wanted) ? try Scenarios.eventlogBinary() : nil
    try step("append.durable.single") {
        [try Scenarios.append(name: "append.durable.single", summary: "one event per durable commit",
                              events: sizes.singleCommits, batch: 1, fast: false, only: subject)]
    }
    for (name, batch, fast) in batchRuns {
        try step(name) {
            [try Scenarios.append(name: name, summary: "\(batch) events per \(fast ? "commit, faster mode" : "durable commit")",
                                  events: sizes.batchEvents[batch]!, batch: batch, fast: fast, only: subject)]
        }
    }
    try step("append.queued") { [try Scenarios.queued(events: sizes.queuedEvents)] }
    try step("append.concurrent") { [try Scenarios.concurrent(producers: 16, perProducer: sizes.perProducer)] }
    try step("objects", reporting: objectScenarios) {
        try Scenarios.objects(count: sizes.objects, updates: sizes.objectUpdates, fetches: sizes.fetches)
    }
    try step("objects.typed", reporting: typedObjectScenarios) {
        try Scenarios.typedObjects(count: sizes.objects, updates: sizes.objectUpdates, fetches: sizes.fetches)
    }
    let readNames = readSteps.filter { $0.1.contains(where: wanted) }.map(\.0)
    if !readNames.isEmpty {
        progress("building a log of \(sizes.logEvents) events for each subject")
        let withPeers = (readNames.contains("replay") || readNames.contains("storage")) && subject != "eventlog"
        let log = try Scenarios.BigLog(events: sizes.logEvents, withPeers: withPeers)
        defer { log.close() }
        for (name, scenarios) in readSteps where readNames.contains(name) {
            try step(name, reporting: scenarios) {
                switch name {
                case "replay": try Scenarios.replay(log)
                case "snapshot.random": [try Scenarios.snapshots(log, probes: sizes.snapshotProbes)]
                case "bisect.where": [try Scenarios.bisect(log, runs: sizes.bisects)]
                case "history": [try Scenarios.history(log)]
                case "verify": [try Scenarios.verify(log)]
                default: [try Scenarios.storage(log)]
                }
            }
        }
    }
    try step("retention.compact") { [try Scenarios.retentionCompact(events: sizes.logEvents, keep: sizes.retentionKeep)] }
    try step("retention.flat") { [try Scenarios.retentionFlat(events: sizes.flatEvents, keep: sizes.flatKeep)] }
    if let eventlogBinary {
        try step("import.jsonl") { [try Scenarios.importJSONLines(events: sizes.importEvents, binary: eventlogBinary)] }
        try step("deploy.download", reporting: ["deploy.download", "deploy.download.second"]) {
            try Scenarios.deployDownload(megabytes: sizes.deployMegabytes, files: sizes.deployFiles, binary: eventlogBinary)
        }
        try step("follow.latency") { [try Scenarios.followLatency(events: sizes.followEvents, binary: eventlogBinary)] }
    }
    try step("fleet", reporting: ["fleet.ship", "fleet.pull", "fleet.bisect"]) {
        try Scenarios.fleet(events: sizes.fleetEvents, logs: sizes.fleetLogs, perLog: sizes.fleetEventsPerLog)
    }
    try step("fleet.many", reporting: ["fleet.many.ship", "fleet.many.stats"]) {
        try Scenarios.fleetMany(logs: sizes.manyLogs, perLog: sizes.manyEventsPerLog)
    }
} catch {
    FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
    exit(1)
}

let runPeak = max(peakMemory.wholeRun, residentMemory().peak)
let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
    .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown"
print("machine: \(cpu), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB; mode: \(quick ? "quick" : "full")\(runs > 1 ? ", \(runs) runs" : ""); peak RSS \(runPeak >> 20) MiB\n")
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
            if let range = report.ratioRange(against: m) {
                result["ratioLowest"] = number(range.lowerBound)
                result["ratioHighest"] = number(range.upperBound)
            }
            for (key, value) in m.extra { result[key] = number(value) }
            return .object(result)
        })
        return .object(object)
    }
    var document = StateObject()
    document["machine"] = ["cpu": .string(cpu), "cores": .int(Int64(ProcessInfo.processInfo.activeProcessorCount)),
                           "memoryBytes": .int(Int64(ProcessInfo.processInfo.physicalMemory))]
    document["mode"] = .string(quick ? "quick" : "full")
    document["runs"] = .int(Int64(runs))
    document["peakRSSBytes"] = .int(Int64(runPeak))
    document["scenarios"] = .array(scenarios)
    do {
        try StateValue.object(document).json(pretty: true).write(toFile: jsonPath, atomically: true, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("Error: cannot write \(jsonPath): \(error)\n".utf8))
        exit(1)
    }
}
