/// Which events a query keeps: by stream, type and outcome, with or without the events that
/// wrote nothing, and only those that touched a path. Every condition given must hold; an
/// empty filter keeps every event.
public struct EventFilter: Sendable, Hashable {
    /// Keep only these streams (`nil`: any).
    public var streams: Set<String>?
    /// Keep only these types (`nil`: any).
    public var types: Set<String>?
    /// Keep only these outcomes, by name: `applied`, `skipped`, `cancelled` (`nil`: any).
    public var outcomes: Set<String>?
    /// Drop events that wrote nothing (skipped, cancelled, or applied without a write).
    public var hideNoOps = false
    /// Keep only events with a write at this path, under it, or above it (a write to an
    /// object that holds it).
    public var touching: StatePath?

    /// A filter of the conditions given; with no arguments it keeps every event.
    public init(streams: Set<String>? = nil, types: Set<String>? = nil, outcomes: Set<String>? = nil,
                hideNoOps: Bool = false, touching: StatePath? = nil) {
        self.streams = streams
        self.types = types
        self.outcomes = outcomes
        self.hideNoOps = hideNoOps
        self.touching = touching
    }

    /// The outcome names `outcomes` may hold.
    public static let outcomeNames: Set<String> = ["applied", "skipped", "cancelled"]

    /// Whether `event` meets every condition of the filter.
    public func keeps(_ event: Event) -> Bool {
        if let streams, !streams.contains(event.stream) { return false }
        if let types, !types.contains(event.type) { return false }
        if let outcomes, !outcomes.contains(event.outcome.name) { return false }
        if hideNoOps, event.writes.isEmpty { return false }
        if let touching, !event.writes.contains(where: { $0.path.overlaps(touching) }) { return false }
        return true
    }
}

extension EventStore {
    /// Calls `body` with each record from `from` through `to` (inclusive, clamped to the log)
    /// that `filter` keeps, in order; `body` returns `false` to stop early. A gap in the
    /// sequence is a corrupt record, as is a bad checksum. Without a filter, the walk is one
    /// read transaction; with `filter.touching`, write sets are scanned first (decoding
    /// nothing else) and only the records that touch the path are decoded whole, in read
    /// transactions of at most 4,096 events.
    ///
    /// One of the log's three public walks: this one, for the records;
    /// ``forEachState(from:to:_:)`` for the state after each event; ``records(after:chunk:)``
    /// for the live stream of new ones.
    ///
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at the first record that is
    ///   missing, fails its checksum or does not decode (`body` has seen the ones before it);
    ///   whatever `body` throws; an ``LMDBError`` when a read fails.
    public func forEachRecord(matching filter: EventFilter = EventFilter(), from: UInt64 = 1, to: UInt64 = .max,
                              _ body: (EventRecord) throws -> Bool) throws {
        guard let touching = filter.touching else {
            if filter == EventFilter() { return try forEachRecordInOneRead(from: from, to: to, body) }
            try forEachRecordInOneRead(from: from, to: to) { record in try !filter.keeps(record.event) || body(record) }
            return
        }
        let end = Swift.min(to, try lastSeq())
        var seq = try windowStart(from)
        while seq <= end {
            let chunkEnd = Swift.min(end, seq + 4_095)
            var stopped = false
            try read { txn in
                let writeSets = try self.writeSets(after: seq - 1, through: chunkEnd, in: txn)
                for (offset, writes) in writeSets.enumerated() where writes.contains(where: { $0.path.overlaps(touching) }) {
                    let at = seq + UInt64(offset)
                    guard let record = try self.record(at, in: txn), filter.keeps(record.event) else { continue }
                    guard try body(record) else { stopped = true; return }
                }
            }
            if stopped { return }
            seq = chunkEnd + 1
        }
    }
}

extension StatePath {
    /// Whether one path is the other or lies under it: a write at either changes what the other reads.
    public func overlaps(_ other: StatePath) -> Bool {
        let shorter = min(components.count, other.components.count)
        return components[..<shorter] == other.components[..<shorter]
    }

    /// What is left of `self` below `prefix`, or `nil` when `prefix` is not a prefix of it.
    public func relative(to prefix: StatePath) -> StatePath? {
        guard components.count >= prefix.components.count, components.starts(with: prefix.components) else { return nil }
        return StatePath(Array(components[prefix.components.count...]))
    }
}

extension Write {
    /// This write as seen from `path`: the value at `path` before and after it (through an
    /// ancestor's write, the part of its values at `path`), or `nil` when it does not change
    /// the value at `path` or under it. A write under `path` is returned as it is.
    public func seen(from path: StatePath) -> Write? {
        if self.path.relative(to: path) != nil { return self }
        guard let below = path.relative(to: self.path) else { return nil }
        let before = old?[below], after = new?[below]
        return before == after ? nil : Write(path, old: before, new: after)
    }
}
