/// Today's code for the events of a log: what each event writes when it is applied now.
public protocol Projection {
    /// What `record` does to `state` (the state right before it) under today's code, or `nil`
    /// when today's code does not recompute it: an input such as a plan start or an initial
    /// state, whose recorded writes are replayed as they are.
    func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed?

    /// Whether this code knows the events of `stream` (recomputing them, or taking them as
    /// inputs on purpose). Events of a stream it does not know replay as recorded, unchecked:
    /// `replay` counts them apart, so that a verification never passes by ignoring them.
    func knows(stream: String) -> Bool
}

extension Projection {
    /// Every stream, unless a projection says otherwise.
    public func knows(stream: String) -> Bool { true }
}

/// An app's code for its whole log, declared once: a projection per stream, and the streams
/// whose events are inputs (an initial state, a plan's start, an object's saved fields) that
/// no code derives and that replay as recorded. Any other stream is unknown to it.
public struct Projections: Projection {
    private var byStream: [String: any Projection] = [:]
    private var inputs: Set<String> = []

    /// Projections that know no stream yet.
    public init() {}

    /// Recomputes the events of `streams` with `projection`.
    public mutating func recompute(_ streams: [String], with projection: some Projection) {
        for stream in streams { byStream[stream] = projection }
    }

    /// Takes the events of `streams` as recorded: they are inputs, not derived.
    public mutating func takeAsRecorded(_ streams: [String]) {
        inputs.formUnion(streams)
    }

    /// What the projection given for the record's stream computes; `nil` for a stream taken
    /// as recorded or unknown.
    public func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
        byStream[record.event.stream]?.recompute(record, in: state)
    }

    /// Whether `stream` was given a projection or taken as recorded.
    public func knows(stream: String) -> Bool { byStream[stream] != nil || inputs.contains(stream) }
}

/// An event's outcome and writes as today's code computes them.
public struct Recomputed: Sendable, Hashable {
    /// The outcome today's code gives the event.
    public var outcome: Outcome
    /// The writes today's code makes, in order; a replay applies them instead of the recorded ones.
    public var writes: [Write]

    /// What today's code computes for an event, as given.
    public init(outcome: Outcome, writes: [Write]) {
        self.outcome = outcome
        self.writes = writes
    }

    /// Whether this agrees with what was recorded: the same kind of outcome and the same
    /// writes. Skip reasons are for people and may be worded differently.
    public func agrees(with event: Event) -> Bool {
        outcome.name == event.outcome.name && writes == event.writes
    }
}

/// The first event where today's code and the recording disagree.
public struct Divergence: Sendable, Hashable {
    /// The event as recorded.
    public var record: EventRecord
    /// What today's code does instead.
    public var actual: Recomputed
    /// The recorded state after the event, against today's: `old` recorded, `new` today's.
    public var diff: [Write]

    /// The seq of the event where they first disagree.
    public var seq: UInt64 { record.seq }
    /// Recorded writes today's code does not make (or makes with other values).
    public var missing: [Write] { record.event.writes.filter { !actual.writes.contains($0) } }
    /// Writes today's code makes that were not recorded.
    public var unexpected: [Write] { actual.writes.filter { !record.event.writes.contains($0) } }
}

/// What a replay found.
public struct ReplayReport: Sendable, Hashable {
    /// How the events of one stream were replayed.
    public struct StreamCount: Sendable, Hashable {
        /// Recomputed by today's code (and, when verifying, checked against the recording).
        public var recomputed = 0
        /// Taken as recorded: inputs of a stream the code knows.
        public var asRecorded = 0
        /// Taken as recorded because no code knows the stream: nothing checked them.
        public var unknown = 0
    }

    /// How many events were replayed (up to and including a divergence).
    public var events: UInt64 = 0
    /// By stream, how its events were replayed.
    public var streams: [String: StreamCount] = [:]
    /// The streams no code knows, sorted by name.
    public var unknownStreams: [String] {
        streams.filter { $0.value.unknown > 0 }.map(\.key).sorted()
    }
    /// The state after the last replayed event, under today's code.
    public var state: StateValue
    /// The first divergence, when verifying found one.
    public var divergence: Divergence?
}

extension EventStore {
    /// Folds the events from `from` through `to` through today's code (`projection`),
    /// starting from the recorded state before `from`. With `verify`, every recomputed event
    /// is compared with the recording and the replay stops at the first disagreement; since
    /// the states are equal up to there, it is also the first event each judged on its own
    /// recorded state disagrees. Never touches anything but the log.
    ///
    /// - Parameters:
    ///   - projection: Today's code; its events replay as recorded where it returns `nil`.
    ///   - verify: Compare every recomputed event with the recording and stop at the first
    ///     that disagrees; without it the replay only folds.
    ///   - progress: Called every 65,536 events with the seq reached.
    /// - Returns: The counts by stream, the state reached, and the divergence when verifying
    ///   found one.
    /// - Throws: ``EventStoreError/noSuchEvent(seq:last:)`` when `from` is more than one past
    ///   the newest event; ``EventStoreError/corruptRecord(seq:reason:)`` at a record that is
    ///   missing, fails its checksum or does not decode; ``EventStoreError/invalidWrite(_:)``
    ///   when a recorded or recomputed write does not fit the state; an ``LMDBError`` when a
    ///   read fails.
    public func replay(through projection: some Projection, from: UInt64 = 1, to: UInt64 = .max, verify: Bool,
                       progress: ((UInt64) -> Void)? = nil) throws -> ReplayReport {
        var report = ReplayReport(state: try snapshot(after: from > 0 ? from - 1 : 0))
        try forEachRecord(from: max(from, 1), to: to) { record in
            report.events += 1
            if record.seq & 0xFFFF == 0 { progress?(record.seq) }
            let recomputed = projection.recompute(record, in: report.state)
            let stream = record.event.stream
            if recomputed != nil {
                report.streams[stream, default: .init()].recomputed += 1
            } else if projection.knows(stream: stream) {
                report.streams[stream, default: .init()].asRecorded += 1
            } else {
                report.streams[stream, default: .init()].unknown += 1
            }
            // Keep no second reference to the state while applying: it would make every write
            // copy the objects on its path (a whole collection, for object saves).
            var recorded: StateValue?
            if verify, let recomputed, !recomputed.agrees(with: record.event) {
                var state = report.state
                do throws(StateError) { try state.apply(record.event.writes) } catch { throw EventStoreError.invalidWrite(error) }
                recorded = state
            }
            let writes = recomputed?.writes ?? record.event.writes
            do throws(StateError) { try report.state.apply(writes) } catch { throw EventStoreError.invalidWrite(error) }
            guard let recorded, let recomputed else { return true }
            report.divergence = Divergence(record: record, actual: recomputed, diff: recorded.diff(to: report.state))
            return false
        }
        return report
    }

    /// The first event after which this log's state and `other`'s differ, comparing events
    /// `from` through `to`; `nil` when they agree. A log that ends first differs at the
    /// first event it lacks.
    ///
    /// - Parameters:
    ///   - other: The log to compare with; it is only read.
    ///   - from: The first event compared (0 is taken as 1); the states before it are compared
    ///     first (a difference there is reported at `from - 1`).
    ///   - to: The last event compared, clamped to the longer log.
    /// - Returns: The seq after which the states first differ, and the writes that turn this
    ///   log's state there into `other`'s; `nil` when they agree.
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at a record of either log that
    ///   is missing, fails its checksum or whose writes do not decode;
    ///   ``EventStoreError/invalidWrite(_:)`` when a write does not fit its state; an
    ///   ``LMDBError`` when a read fails.
    public func firstDifference(from other: EventStore, from: UInt64 = 1, to: UInt64 = .max) throws -> (seq: UInt64, diff: [Write])? {
        let from = max(from, 1)
        let mine = try lastSeq()
        let theirs = try other.lastSeq()
        let end = min(to, max(mine, theirs))
        guard from <= end else { return nil }
        var a = try snapshot(after: min(from - 1, mine))
        var b = try other.snapshot(after: min(from - 1, theirs))
        if a != b { return (from - 1, a.diff(to: b)) }
        var seq = from
        var found: (UInt64, [Write])?
        // Walk both logs in chunks so that neither read transaction lasts long.
        while seq <= end, found == nil {
            let chunkEnd = min(end, seq + 4_095)
            let writesA = try read { try writeSets(after: seq - 1, through: chunkEnd, in: $0) }
            let writesB = try other.read { try other.writeSets(after: seq - 1, through: chunkEnd, in: $0) }
            for offset in 0...Int(chunkEnd - seq) {
                let wa = offset < writesA.count ? writesA[offset] : nil
                let wb = offset < writesB.count ? writesB[offset] : nil
                if wa == nil || wb == nil {
                    found = (seq + UInt64(offset), a.diff(to: b))
                    break
                }
                do throws(StateError) {
                    try a.apply(wa!)
                    try b.apply(wb!)
                } catch {
                    throw EventStoreError.invalidWrite(error)
                }
                if wa != wb, a != b {
                    found = (seq + UInt64(offset), a.diff(to: b))
                    break
                }
            }
            seq = chunkEnd + 1
        }
        return found
    }
}
