/// What `EventStore.salvage(into:)` copied and what it had to leave behind.
public struct SalvageReport: Sendable, Hashable {
    /// The seqs copied (the same in both logs); `nil` when not even the first event was good.
    public var copied: ClosedRange<UInt64>?
    /// The first event that could not be copied, and why; `nil` when every event was.
    public var firstLeftBehind: VerificationReport.Problem?
    /// The newest seq of the damaged log: everything from `firstLeftBehind` to it stays behind,
    /// since each event's writes build on the state the ones before it left.
    public var lastSeq: UInt64
}

extension EventStore {
    /// Copies the longest good prefix of this log (every event whose record reads back and
    /// whose writes match the state before it) into `target`, an empty log, with the same
    /// seqs, times and contents, `batch` events per transaction; returns what it copied and
    /// where it stopped. The target writes its own keyframes: damaged ones are not copied.
    public func salvage(into target: EventStore, batch: Int = 10_000, progress: ((UInt64) -> Void)? = nil) throws -> SalvageReport {
        precondition(batch > 0, "a batch holds at least one event")
        let targetIsEmpty = try target.lastSeq() == 0
        precondition(targetIsEmpty, "salvage copies into an empty log")
        let last = (try? lastSeq()) ?? 0
        var report = SalvageReport(copied: nil, firstLeftBehind: nil, lastSeq: last)
        var next: UInt64 = 1
        while next <= last && report.firstLeftBehind == nil {
            var records: [EventRecord] = []
            do {
                try forEachRecord(from: next, to: next + UInt64(batch) - 1) { records.append($0); return true }
            } catch EventStoreError.corruptRecord(let seq, let reason) {
                report.firstLeftBehind = .init(seq: seq, reason: reason)
            }
            let (appended, refused) = try target.transact { appending -> (UInt64, VerificationReport.Problem?) in
                for record in records {
                    do {
                        try appending.append(record.event, time: record.time)
                    } catch let error as EventStoreError {
                        return (appending.lastSeq, .init(seq: record.seq, reason: "\(error)"))
                    }
                }
                return (appending.lastSeq, nil)
            }
            if let refused { report.firstLeftBehind = refused }
            if appended >= next { report.copied = 1...appended }
            next = appended + 1
            progress?(appended)
            if records.isEmpty && report.firstLeftBehind == nil {
                report.firstLeftBehind = .init(seq: next, reason: "missing")
            }
        }
        return report
    }
}
