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
    ///
    /// - Parameters:
    ///   - target: An empty, writable log (a non-empty one is a programmer error and traps).
    ///   - batch: Events per write transaction of the target; at least 1.
    ///   - progress: Called after each transaction with the target's newest seq.
    /// - Returns: The seqs copied and the first event left behind. A record that is missing,
    ///   fails its checksum or that the target refuses ends the copy and is reported here,
    ///   not thrown.
    /// - Throws: ``EventStoreError/readOnly`` when `target` is read-only; an ``LMDBError``
    ///   when reading this log or writing the target fails; what this log's and the target's
    ///   ``lastSeq()`` throw, but this log's ``EventStoreError/damaged(_:)`` (a newest key
    ///   that is not a seq), which ends the copy there instead.
    public func salvage(into target: EventStore, batch: Int = 10_000, progress: ((UInt64) -> Void)? = nil) throws -> SalvageReport {
        precondition(batch > 0, "a batch holds at least one event")
        let targetIsEmpty = try target.lastSeq() == 0
        precondition(targetIsEmpty, "salvage copies into an empty log")
        // A newest key that cannot be read still leaves the records before it to copy; the copy
        // then stops at it, and it is the newest seq reported.
        let newest: UInt64?
        do { newest = try lastSeq() } catch EventStoreError.damaged { newest = nil }
        let last = newest ?? .max
        var report = SalvageReport(copied: nil, firstLeftBehind: nil, lastSeq: last)
        // A compacted log's copy starts from the same base.
        var next: UInt64 = 1
        if let base = try base() {
            let state = try snapshot(after: base.seq)
            try target.transact { try $0.installBase(base, state: state) }
            next = base.firstSeq
        }
        while next <= last && report.firstLeftBehind == nil {
            var records: [EventRecord] = []
            do {
                try forEachRecord(from: next, to: next + UInt64(batch) - 1) { records.append($0); return true }
            } catch EventStoreError.corruptRecord(let seq, let reason) {
                report.firstLeftBehind = .init(seq: seq, reason: reason)
            }
            next = try Self.copy(records, into: target, report: &report) + 1
            progress?(next - 1)
            if records.isEmpty && report.firstLeftBehind == nil {
                report.firstLeftBehind = .init(seq: next, reason: "missing")
            }
        }
        if newest == nil { report.lastSeq = report.firstLeftBehind?.seq ?? next - 1 }
        return report
    }

    /// Salvage for a log whose storage is damaged (`verifyStorage` found it so), which LMDB
    /// cannot be trusted to read: the records are read straight from the pages of the file
    /// that can still be read (`StorageCheck.forEachReadableEntry`), never through LMDB, and
    /// copied into `target` as `salvage(into:)` does, up to the first one missing or damaged.
    ///
    /// - Parameters:
    ///   - path: The damaged log's directory, which holds `data.mdb`.
    ///   - target: An empty, writable log.
    ///   - batch: Events per write transaction of the target; at least 1.
    ///   - progress: Called after each full batch with the newest seq read.
    /// - Returns: As ``salvage(into:batch:progress:)``, with `lastSeq` the newest seq found in
    ///   the pages that can be read, or the number of events the database records when that
    ///   is more. Events lost with a damaged page are left behind even at the end of the log,
    ///   where they leave no gap.
    /// - Throws: ``EventStoreError/damaged(_:)`` when `data.mdb` is missing, has no intact meta
    ///   page or cannot be read; ``EventStoreError/readOnly`` when `target` is read-only; an
    ///   ``LMDBError`` when writing the target fails.
    public static func salvage(damagedLogAt path: String, into target: EventStore, batch: Int = 10_000,
                               progress: ((UInt64) -> Void)? = nil) throws -> SalvageReport {
        precondition(batch > 0, "a batch holds at least one event")
        var report = SalvageReport(copied: nil, firstLeftBehind: nil, lastSeq: 0)
        var records: [EventRecord] = []
        var expected: UInt64 = 1
        var baseSeq: UInt64 = 0
        let unread: StorageCheck.Unread
        do {
            // A compacted log's copy starts from the same base, read from the pages as the records are.
            if let (base, state) = try readBase(path: path + "/data.mdb") {
                try target.transact { try $0.installBase(base, state: state) }
                (baseSeq, expected) = (base.seq, base.firstSeq)
            }
            unread = try StorageCheck.forEachReadableEntry(path: path + "/data.mdb", database: "events") { key, value in
                guard let seq = try? key.withUnsafeBytes({ try RecordCodec.seq(fromKey: $0) }) else { return true }
                report.lastSeq = max(report.lastSeq, seq)
                // Past the first event left behind, only the newest seq is still of interest.
                guard report.firstLeftBehind == nil else { return true }
                guard seq == expected else {
                    report.firstLeftBehind = .init(seq: expected, reason: "missing: the page that held it is damaged")
                    return true
                }
                do {
                    records.append(try value.withUnsafeBytes { bytes throws(RecordDecodingError) in try RecordCodec.decode(bytes, seq: seq) })
                } catch {
                    report.firstLeftBehind = .init(seq: seq, reason: "\(error)")
                    return true
                }
                expected += 1
                if records.count == batch {
                    _ = try copy(records, into: target, report: &report)
                    records.removeAll(keepingCapacity: true)
                    progress?(expected - 1)
                }
                return true
            }
        } catch let damage as StorageCheck.Damage {
            throw EventStoreError.damaged(damage.description)
        }
        _ = try copy(records, into: target, report: &report)
        // Events lost with a damaged page at the end of the log leave no gap to see: the count
        // the database records, and the pages passed over, say so.
        let recorded = UInt64(max(0, unread.recordedEntries))
        if report.firstLeftBehind == nil, expected <= baseSeq + recorded || !unread.damagedPages.isEmpty {
            let pages = unread.damagedPages.map(String.init).joined(separator: ", ")
            report.firstLeftBehind = .init(seq: expected, reason: "missing: the log records \(recorded) events" + (baseSeq > 0 ? " after its base" : "")
                                           + (pages.isEmpty ? "" : ", and its page\(unread.damagedPages.count == 1 ? "" : "s") \(pages) could not be read"))
            report.lastSeq = max(report.lastSeq, baseSeq + recorded, expected)
        }
        return report
    }

    /// The base of the compacted log in `dataFile` and the state it holds, read from the pages
    /// of the file that can still be read; `nil` for a log without one.
    /// - Throws: ``EventStoreError/damaged(_:)`` when the meta names a base that cannot be read.
    private static func readBase(path dataFile: String) throws -> (LogBase, StateValue)? {
        var stored: [UInt8]?
        _ = try StorageCheck.forEachReadableEntry(path: dataFile, database: "meta") { key, value in
            if key == Array(BaseCodec.key.utf8) { stored = value }
            return stored == nil
        }
        guard let stored else { return nil }
        let base = try stored.withUnsafeBytes { try BaseCodec.decode($0) }
        var state: StateValue?
        _ = try StorageCheck.forEachReadableEntry(path: dataFile, database: "keyframes") { key, value in
            guard key.withUnsafeBytes({ try? RecordCodec.seq(fromKey: $0) }) == base.seq else { return true }
            state = value.withUnsafeBytes { try? RecordCodec.decodeKeyframe($0, seq: base.seq) }
            return false
        }
        guard let state else { throw EventStoreError.damaged("the base (the state after event \(base.seq)) cannot be read") }
        return (base, state)
    }

    /// Appends salvaged records to `target` in one transaction, stopping at the first it
    /// refuses (noted in `report`); returns the target's newest seq.
    private static func copy(_ records: [EventRecord], into target: EventStore, report: inout SalvageReport) throws -> UInt64 {
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
        if let first = records.first?.seq, appended >= first { report.copied = (report.copied?.lowerBound ?? first)...appended }
        return appended
    }
}
