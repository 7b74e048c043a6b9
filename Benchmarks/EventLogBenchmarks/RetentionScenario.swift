import EventLog
import Foundation

extension Scenarios {
    /// `retention.compact`: a log of `events` compacted to its newest `keep` (one transaction:
    /// the dropped records hashed and deleted, the base written), then copied without its free
    /// pages (`compact --to`); the file sizes before and after each.
    static func retentionCompact(events: Int, keep: Int) throws -> ScenarioReport {
        let log = try BigLog(events: events, withPeers: false)
        defer { log.close() }
        let store = log.store
        let before = fileSize(store.environment.path)
        let newest = try store.lastSeq()
        let expected = try store.snapshot(after: newest)
        var base: LogBase?
        let compactSeconds = try time { base = try store.compact(before: newest - UInt64(keep) + 1) }
        guard let base, base.firstSeq == newest - UInt64(keep) + 1, try store.currentState == expected, try store.verify().isOK else {
            throw BenchmarkError(description: "the compacted log does not hold the newest \(keep) events and the same state")
        }
        let after = fileSize(store.environment.path)
        let copy = log.scratch.file("compacted.lmdb")
        let copySeconds = try time { try store.copyCompacted(to: copy) }
        let copied = fileSize(copy)
        let megabytes = { (bytes: Int) in Double(bytes) / 1_048_576 }
        return ScenarioReport(
            name: "retention.compact", summary: "compact a log of \(events) events to its newest \(keep), then copy it without its free pages",
            measurements: [
                Measurement(subject: "compact(before:)", operations: events - keep, seconds: compactSeconds,
                            extra: [("ms", compactSeconds * 1_000), ("MB before", megabytes(before)), ("MB after", megabytes(after))]),
                Measurement(subject: "copyCompacted(to:)", operations: keep, seconds: copySeconds, extra: [("ms", copySeconds * 1_000), ("MB of the copy", megabytes(copied))]),
            ],
            note: "ops/s are events dropped (compact) and events kept (copy) per second; the file keeps its size until the copy",
            comparesThroughput: false)
    }

    /// `retention.flat`: `events` appended in durable commits of 1,000 under keep-last `keep`
    /// (its steps run after the commits that take the log past the slack), against the same
    /// appends without a policy; the data file's size after a quarter, half and all of them,
    /// and each commit's latency (the step included, which is what an append waits for).
    static func retentionFlat(events: Int, keep: Int) throws -> ScenarioReport {
        let batch = 1_000
        let checkpoints = [events / 4, events / 2, events]
        func run(_ policy: RetentionPolicy?) throws -> Measurement {
            let scratch = Scratch()
            var options = EventStore.Options()
            options.retention = policy
            let store = try EventStore(path: scratch.file("log.lmdb"), options: options)
            var workload = Workload()
            var latencies: [Double] = []
            var sizes: [(String, Double)] = []
            var seconds = 0.0
            for done in stride(from: batch, through: events, by: batch) {
                let events = workload.next(batch)
                let taken = try time { try store.append(contentsOf: events) }
                seconds += taken
                latencies.append(taken * 1e6)
                if checkpoints.contains(done) { sizes.append(("MB at \(done / 1_000)k", Double(fileSize(store.environment.path)) / 1_048_576)) }
            }
            let held = try store.lastSeq() - (store.base()?.seq ?? 0)
            guard try store.lastSeq() == UInt64(events), policy == nil ? held == UInt64(events) : held >= UInt64(keep) && held <= UInt64(keep) + RetentionPolicy.keepLast(UInt64(keep)).slackEvents,
                  try store.verify().isOK, store.retentionError == nil else {
                throw BenchmarkError(description: "retention.flat: \(held) events held of \(events) under \(policy.map(String.init(describing:)) ?? "no policy")")
            }
            return Measurement(subject: policy.map { "\($0)" } ?? "no policy", operations: events, seconds: seconds, latencies: latencies, extra: sizes)
        }
        let measurements = [try run(.keepLast(UInt64(keep))), try run(nil)]
        return ScenarioReport(
            name: "retention.flat", summary: "append \(events) events in durable commits of \(batch) under keep-last \(keep), and without a policy",
            measurements: measurements,
            note: "latencies are per commit of \(batch) events, a retention step included; the file's size after each quarter of the appends")
    }
}
