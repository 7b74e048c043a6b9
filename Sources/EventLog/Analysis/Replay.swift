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
    private var upcasters: [EventShape: Upcaster] = [:]
    /// Today's version of each stream and type an upcaster reads (the shape's `version` is it).
    private var currentVersions: [EventShape: Int] = [:]
    /// Upcasters registered twice, by the shape they read: each such event replays as
    /// skipped, saying so.
    private var conflicts: Set<EventShape> = []

    /// Turns one recorded event of some version into the events of the next version that
    /// today's code would have recorded in its place: none (a drop), one (a rename, a new
    /// field) or several (a split). A pure function of the event: no state, no clock, no I/O.
    /// What it returns of the same stream and type is stamped with the next version; events of
    /// other types keep the version they are given.
    public typealias Upcaster = @Sendable (Event) -> [Event]

    /// A stream, a type and a version: what an upcaster reads (version 0: the type itself).
    private struct EventShape: Hashable {
        var stream: String
        var type: String
        var version: Int
    }

    /// Projections that know no stream yet.
    public init() {}

    /// Registers `upcaster` for the events of `stream` and `type` recorded at `version`.
    /// Upcasters chain: an event of version 1 is read through the upcasters of versions 1, 2, …
    /// up to today's version of its type (one more than the newest upcaster registered for
    /// it), and `replay --verify` then proves them: today's code, fed the upcast events, must
    /// write what the original one recorded. Registering a second upcaster for one version
    /// keeps the first and makes every event it reads replay as skipped, saying so.
    public mutating func upcast(_ stream: String, _ type: String, from version: Int, with upcaster: @escaping Upcaster) {
        let shape = EventShape(stream: stream, type: type, version: version)
        if upcasters[shape] != nil { conflicts.insert(shape) } else { upcasters[shape] = upcaster }
        currentVersions[EventShape(stream: stream, type: type, version: 0), default: 1] = max(currentVersion(of: stream, type), version + 1)
    }

    /// Today's version of events of `stream` and `type`: one more than the newest version an
    /// upcaster reads, or 1 when none does.
    public func currentVersion(of stream: String, _ type: String) -> Int {
        currentVersions[EventShape(stream: stream, type: type, version: 0)] ?? 1
    }

    /// Recomputes the events of `streams` with `projection`.
    public mutating func recompute(_ streams: [String], with projection: some Projection) {
        for stream in streams { byStream[stream] = projection }
    }

    /// Takes the events of `streams` as recorded: they are inputs, not derived.
    public mutating func takeAsRecorded(_ streams: [String]) {
        inputs.formUnion(streams)
    }

    /// What the projection given for the record's stream computes; `nil` for a stream taken
    /// as recorded or unknown. An event older than today's version of its type is read
    /// through its upcasters first, and the events they give are recomputed in order, their
    /// writes together; an event no upcaster can bring to today's version (a gap in the
    /// chain, a version newer than today's, two upcasters for one version) is `skipped`
    /// with the reason, which `replay --verify` reports as where the code and log part.
    public func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
        guard let projection = byStream[record.event.stream] else { return nil }
        // Today's events (every event of a log without upcasters) take the plain path.
        guard record.event.version != (upcasters.isEmpty ? 1 : currentVersion(of: record.event.stream, record.event.type)) else {
            return projection.recompute(record, in: state)
        }
        let events: [Event]
        switch chain(record.event) {
        case .success(let upcast): events = upcast
        case .failure(let error): return Recomputed(outcome: .skipped(reason: error.reason), writes: [])
        }
        var state = state
        var writes: [Write] = []
        var outcomes: [Outcome] = []
        for event in events {
            var single = record
            single.event = event
            guard let recomputed = byStream[event.stream]?.recompute(single, in: state) else {
                return Recomputed(outcome: .skipped(reason: "the upcast \(event.stream)/\(event.type) v\(event.version) is of a stream no code recomputes"), writes: [])
            }
            for write in recomputed.writes {
                do { _ = try state.set(write.new, at: write.path) } catch {
                    return Recomputed(outcome: .skipped(reason: "the upcast \(event.stream)/\(event.type) v\(event.version) writes \(write.path), which does not fit: \(error)"), writes: [])
                }
            }
            writes += recomputed.writes
            outcomes.append(recomputed.outcome)
        }
        // Applied when any upcast event is; a drop keeps the original's outcome.
        let outcome = outcomes.first { $0 == .applied } ?? outcomes.first ?? record.event.outcome
        return Recomputed(outcome: outcome, writes: writes)
    }

    /// `event` read through the chain of upcasters to today's version of each event it
    /// becomes, or why it cannot be.
    private func chain(_ event: Event) -> Result<[Event], RuleError> {
        let current = currentVersion(of: event.stream, event.type)
        let shape = EventShape(stream: event.stream, type: event.type, version: event.version)
        if event.version == current { return .success([event]) }
        let name = "\(event.stream)/\(event.type)"
        guard event.version < current else {
            return .failure(RuleError("\(name) v\(event.version) is newer than today's v\(current) (a log from a newer release)"))
        }
        guard !conflicts.contains(shape) else { return .failure(RuleError("two upcasters read \(name) v\(event.version)")) }
        guard let upcaster = upcasters[shape] else {
            return .failure(RuleError("no upcaster for \(name) v\(event.version) → v\(event.version + 1)"))
        }
        var events: [Event] = []
        for var next in upcaster(event) {
            // The next version of this type; an event of another type (a split) is at the
            // version the upcaster gave it, 1 unless it says otherwise.
            if next.stream == event.stream && next.type == event.type { next.version = event.version + 1 }
            switch chain(next) {
            case .success(let upcast): events += upcast
            case .failure(let error): return .failure(error)
            }
        }
        return .success(events)
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
        let from = try windowStart(from)
        var report = ReplayReport(state: try snapshot(after: from - 1))
        try forEachRecord(from: from, to: to) { record in
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
        let from = max(try windowStart(from), try other.windowStart(from))
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
