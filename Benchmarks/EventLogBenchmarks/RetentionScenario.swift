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
}
