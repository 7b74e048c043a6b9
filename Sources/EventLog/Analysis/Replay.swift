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

    /// How today's code reads `event`: as it is, as the events its upcasters make of an
    /// older version, or not at all. Replay asks before `recompute`.
    func upcasting(_ event: Event) -> Upcast

    /// Today's version of each type of `stream` this code writes past version 1, by type
    /// (`["selectBotTab": 2]`): older events of those types are read through upcasters
    /// (``Projections/upcast(_:_:from:with:)``), and are unreadable without one.
    func versions(in stream: String) -> [String: Int]
}

extension Projection {
    /// Every stream, unless a projection says otherwise.
    public func knows(stream: String) -> Bool { true }

    /// Every event as it is, unless a projection says otherwise.
    public func upcasting(_ event: Event) -> Upcast { .current }

    /// Every type at version 1, unless a projection says otherwise.
    public func versions(in stream: String) -> [String: Int] { [:] }

    /// What today's code computes for `events`, what the upcasters made of `record`, applied
    /// in order from `state`: their writes together, applied when any is (a drop keeps the
    /// original's outcome); `nil` when it recomputes none of them (inputs, such as a
    /// cancelled step). An upcast event it does not recompute among others it does, or whose
    /// writes do not fit, makes the whole `skipped` with the reason.
    func recompute(upcast events: consuming [Event], of record: EventRecord, in state: StateValue) -> Recomputed? {
        // One event (a rename, a new field): as today's code computes it, the state untouched,
        // the event moved out of the array rather than copied.
        if events.count == 1 {
            return recompute(EventRecord(seq: record.seq, time: record.time, event: events.removeLast(), checksum: record.checksum), in: state)
        }
        var state = state
        var writes: [Write] = []
        var outcomes: [Outcome] = []
        var input: Event?
        for event in events {
            var single = record
            single.event = event
            guard let recomputed = recompute(single, in: state) else {
                input = input ?? event
                continue
            }
            for write in recomputed.writes {
                do { _ = try state.set(write.new, at: write.path) } catch {
                    return Recomputed(outcome: .skipped(reason: "the upcast \(EventShape(event)) writes \(write.path), which does not fit: \(error)"), writes: [])
                }
            }
            writes += recomputed.writes
            outcomes.append(recomputed.outcome)
        }
        if let input {
            guard !outcomes.isEmpty else { return nil }
            return Recomputed(outcome: .skipped(reason: "today's code recomputes nothing from the upcast \(EventShape(input)) \(input.payload.json())"), writes: [])
        }
        let outcome = outcomes.first { $0 == .applied } ?? outcomes.first ?? record.event.outcome
        return Recomputed(outcome: outcome, writes: writes)
    }
}

/// How today's code reads a recorded event (``Projection/upcasting(_:)``).
public enum Upcast: Sendable, Hashable {
    /// At today's version of its type (every event of a log without upcasters): as it is.
    case current
    /// Older: the events its upcasters make of it, each at today's version of its type.
    case events([Event])
    /// Newer than today's version of its type (a log from a newer release): replay takes it
    /// as recorded, unchecked, and counts it.
    case newer(today: Int)
    /// Older, and no chain of upcasters reaches today's version (a gap, two upcasters for
    /// one version): why, naming the stream, type and versions. Replay stops before it.
    case unreadable(reason: String)
}

/// A stream, a type and a version: the shape of an event, as upcasters read it.
public struct EventShape: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The event's stream.
    public var stream: String
    /// The event's type.
    public var type: String
    /// The version of the type's payload.
    public var version: Int

    /// The shape of `stream`/`type` at `version`.
    public init(stream: String, type: String, version: Int) {
        self.stream = stream
        self.type = type
        self.version = version
    }

    /// The shape of `event`.
    public init(_ event: Event) {
        self.init(stream: event.stream, type: event.type, version: event.version)
    }

    /// `messenger/selectBotTab v1`.
    public var description: String { "\(stream)/\(type) v\(version)" }

    /// By stream, type, then version.
    public static func < (a: EventShape, b: EventShape) -> Bool {
        (a.stream, a.type, a.version) < (b.stream, b.type, b.version)
    }

    /// The type and version: replay counts one for every event read through an upcaster,
    /// an app has few streams, and equality still compares all three.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(type)
        hasher.combine(version)
    }
}

/// An app's code for its whole log, declared once: a projection per stream, and the streams
/// whose events are inputs (an initial state, a plan's start, an object's saved fields) that
/// no code derives and that replay as recorded. Any other stream is unknown to it.
public struct Projections: Projection {
    private var byStream: [String: any Projection] = [:]
    private var inputs: Set<String> = []
    /// Each stream and type past version 1: today's version and the upcasters from older ones.
    private var versioned: [EventType: TypeVersions] = [:]

    /// Turns one recorded event of some version into the events of the next version that
    /// today's code would have recorded in its place: none (a drop), one (a rename, a new
    /// field) or several (a split). A pure function of the event: no state, no clock, no I/O.
    /// What it returns of the same stream and type is stamped with the next version; events of
    /// other types keep the version they are given.
    public typealias Upcaster = @Sendable (Event) -> [Event]

    /// Changes one recorded event of some version, in place, into the one event of the next
    /// version that today's code would have recorded in its place (a rename, a new field): the
    /// commonest upcaster, which spares the array and the second copy of the event that an
    /// ``Upcaster`` makes (Axon's single event upcaster). Pure, as an ``Upcaster``; the event
    /// is stamped with the next version.
    public typealias ChangingUpcaster = @Sendable (inout Event) -> Void

    /// A stream and a type, whatever the version.
    private struct EventType: Hashable {
        var stream: String
        var type: String

        /// The type alone: replay looks one up for every event, an app has few streams, and
        /// equality still compares both.
        func hash(into hasher: inout Hasher) { hasher.combine(type) }
    }

    /// The versions of one type: today's (what its projection says, or one more than the
    /// newest version an upcaster reads, whichever is higher) and its upcasters by the version
    /// they read; a version read by two is unreadable.
    private struct TypeVersions {
        var today = 1
        /// Whether a projection recomputes the type's stream (events of other streams are
        /// read as they are); kept here so that reading an old event looks up nothing else.
        var isRecomputed = false
        var upcasters: [Int: Step] = [:]
        var readTwice: Set<Int> = []
    }

    /// What the upcaster of one version does.
    private enum Step {
        case events(Upcaster)
        case changing(ChangingUpcaster)
    }

    /// Projections that know no stream yet.
    public init() {}

    /// Registers `upcaster` for the events of `stream` and `type` recorded at `version`.
    /// Upcasters chain: an event of version 1 is read through the upcasters of versions 1, 2, …
    /// up to today's version of its type (what its projection says, or one more than the
    /// newest upcaster registered for it), and `replay --verify` then proves them: today's
    /// code, fed the upcast events, must write what the original one recorded. Registering a
    /// second upcaster for one version keeps the first and makes every event it reads
    /// unreadable, saying so.
    public mutating func upcast(_ stream: String, _ type: String, from version: Int, with upcaster: @escaping Upcaster) {
        register(.events(upcaster), stream, type, from: version)
    }

    /// Registers `upcaster` for the events of `stream` and `type` recorded at `version`, each
    /// changed in place into the one event of the next version; it chains, is proved and is
    /// refused twice as ``upcast(_:_:from:with:)`` is.
    public mutating func upcast(_ stream: String, _ type: String, from version: Int, changing upcaster: @escaping ChangingUpcaster) {
        register(.changing(upcaster), stream, type, from: version)
    }

    private mutating func register(_ step: Step, _ stream: String, _ type: String, from version: Int) {
        let key = EventType(stream: stream, type: type)
        var versions = versioned[key] ?? TypeVersions(isRecomputed: byStream[stream] != nil)
        if versions.upcasters[version] != nil { versions.readTwice.insert(version) } else { versions.upcasters[version] = step }
        versions.today = max(versions.today, version + 1)
        versioned[key] = versions
    }

    /// Today's version of events of `stream` and `type`: what its projection says, or one
    /// more than the newest version an upcaster reads; 1 when neither says more.
    public func currentVersion(of stream: String, _ type: String) -> Int {
        versioned[EventType(stream: stream, type: type)]?.today ?? 1
    }

    /// Recomputes the events of `streams` with `projection`, whose ``Projection/versions(in:)``
    /// say today's version of their types.
    public mutating func recompute(_ streams: [String], with projection: some Projection) {
        for stream in streams {
            byStream[stream] = projection
            for key in versioned.keys where key.stream == stream { versioned[key]?.isRecomputed = true }
            for (type, version) in projection.versions(in: stream) where version > 1 {
                let key = EventType(stream: stream, type: type)
                versioned[key, default: TypeVersions(isRecomputed: true)].today = max(currentVersion(of: stream, type), version)
            }
        }
    }

    /// Today's version of each type of `stream` past version 1: what its projection says,
    /// or one more than the newest version an upcaster reads.
    public func versions(in stream: String) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: versioned.filter { $0.key.stream == stream }.map { ($0.key.type, $0.value.today) })
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

    /// An event of a stream this code recomputes, older than today's version of its type,
    /// read through its upcasters; `unreadable` when none can bring it to today's version (a
    /// gap in the chain, two upcasters for one version). Events of streams taken as recorded
    /// are read as they are, whatever their version.
    public func upcasting(_ event: Event) -> Upcast {
        // Every event of an app whose types are all at version 1 takes this branch.
        if event.version == 1, versioned.isEmpty { return .current }
        let versions = versioned[EventType(stream: event.stream, type: event.type)]
        let today = versions?.today ?? 1
        guard event.version != today, versions?.isRecomputed ?? (byStream[event.stream] != nil) else { return .current }
        guard event.version < today, let versions else { return .newer(today: today) }
        switch chain(event, versions) {
        case .success(let events): return .events(events)
        case .failure(let error): return .unreadable(reason: error.reason)
        }
    }

    /// `event` read through the upcasters of its type (`versions`) to today's version, and
    /// each event of another type it becomes to today's version of its own; or why it cannot be.
    private func chain(_ recorded: Event, _ versions: TypeVersions) -> Result<[Event], RuleError> {
        // The recorded event goes to the first upcaster as it is, and each rename after it in
        // the array of one its upcaster returned: no copy of an event is made on the way but
        // the one a change in place needs.
        var renamed: [Event] = []
        while true {
            let version = renamed.first?.version ?? recorded.version
            guard version < versions.today else { return .success(renamed.isEmpty ? [recorded] : renamed) }
            guard versions.readTwice.isEmpty || !versions.readTwice.contains(version) else {
                return .failure(RuleError("two upcasters read \(EventShape(stream: recorded.stream, type: recorded.type, version: version))"))
            }
            guard let step = versions.upcasters[version] else {
                return .failure(RuleError("no upcaster for \(EventShape(stream: recorded.stream, type: recorded.type, version: version)) → v\(version + 1)"))
            }
            var made: [Event]
            switch step {
            case .events(let upcaster):
                made = renamed.isEmpty ? upcaster(recorded) : upcaster(renamed[0])
            case .changing(let change):
                made = renamed.isEmpty ? [recorded] : renamed
                renamed = [] // so that the change is made on the only reference to the event
                change(&made[0])
            }
            // A rename or a new field: the next version of this event, read on.
            if made.count == 1, made[0].stream == recorded.stream, made[0].type == recorded.type {
                made[0].version = version + 1
                renamed = made
                continue
            }
            var events: [Event] = []
            for var next in made {
                // The next version of this type; an event of another type (a split) is at the
                // version the upcaster gave it, 1 unless it says otherwise.
                let other = versioned[EventType(stream: next.stream, type: next.type)] ?? TypeVersions()
                if next.stream == recorded.stream, next.type == recorded.type { next.version = version + 1 }
                guard next.version <= other.today else {
                    return .failure(RuleError("an upcaster gives \(EventShape(next)), newer than today's v\(other.today)"))
                }
                switch chain(next, other) {
                case .success(let upcast): events += upcast
                case .failure(let error): return .failure(error)
                }
            }
            return .success(events)
        }
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
    /// What its upcasters made of it, when it is older than today's version; else empty.
    public var upcast: [Event]
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
    /// By shape, how many older events were read through upcasters (and, when verifying,
    /// proved against what they recorded, but a divergence's own).
    public var upcast: [EventShape: Int] = [:]
    /// By shape, how many events newer than today's code replayed as recorded, unchecked.
    public var newer: [EventShape: Int] = [:]
    /// The state after the last replayed event, under today's code.
    public var state: StateValue
    /// The first divergence, when verifying found one.
    public var divergence: Divergence?
    /// The first event today's code cannot read, and why; the replay stopped before it.
    public var unreadable: UnreadableEvent?
}

/// An event today's code cannot read (``Upcast/unreadable(reason:)``).
public struct UnreadableEvent: Sendable, Hashable {
    /// The event as recorded.
    public var record: EventRecord
    /// Why, naming the stream, type and versions: `no upcaster for messenger/selectBotTab v1 → v2`.
    public var reason: String
}

extension EventStore {
    /// Folds the events from `from` through `to` through today's code (`projection`),
    /// starting from the recorded state before `from`. With `verify`, every recomputed event
    /// is compared with the recording and the replay stops at the first disagreement; since
    /// the states are equal up to there, it is also the first event each judged on its own
    /// recorded state disagrees. An event older than today's version of its type is read
    /// through its upcasters (and, verifying, proved against its recorded writes); one newer
    /// replays as recorded; at one no upcaster can read the replay stops
    /// (``ReplayReport/unreadable``). Never touches anything but the log.
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
        var upcastCounts = ShapeCounts()
        try forEachRecord(from: from, to: to) { record in
            if record.seq & 0xFFFF == 0 { progress?(record.seq) }
            let event = record.event
            let recomputed: Recomputed?
            switch projection.upcasting(event) {
            case .current:
                recomputed = projection.recompute(record, in: report.state)
            case .events(let events):
                upcastCounts.count(event)
                recomputed = projection.recompute(upcast: events, of: record, in: report.state)
            case .newer:
                report.events += 1
                report.newer[EventShape(event), default: 0] += 1
                do throws(StateError) { try report.state.apply(event.writes) } catch { throw EventStoreError.invalidWrite(error) }
                return true
            case .unreadable(let reason):
                report.unreadable = UnreadableEvent(record: record, reason: reason)
                return false
            }
            report.events += 1
            if recomputed != nil {
                report.streams[event.stream, default: .init()].recomputed += 1
            } else if projection.knows(stream: event.stream) {
                report.streams[event.stream, default: .init()].asRecorded += 1
            } else {
                report.streams[event.stream, default: .init()].unknown += 1
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
            // Upcasters are pure: asked again, they make what today's code was fed (which it
            // took, not copied).
            var upcast: [Event] = []
            if case .events(let events) = projection.upcasting(event) { upcast = events }
            report.divergence = Divergence(record: record, upcast: upcast, actual: recomputed, diff: recorded.diff(to: report.state))
            return false
        }
        report.upcast = upcastCounts.total()
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

/// Counts events by shape, for the report of events read through upcasters, without hashing
/// their names for every event: a memo keyed by the bits of the stream and type strings. A
/// read repeats its names with the same bits (a short string is its bits; a longer one is
/// shared through the read's name cache), and equal bits are equal strings. A shape looks at
/// four slots from the one its bits choose; when all are taken by others, the last one's
/// count moves to the dictionary.
private struct ShapeCounts {
    private struct Slot {
        var stream: String
        var type: String
        var version: Int
        var count: Int
    }

    private var slots = [Slot?](repeating: nil, count: 64)
    private var counts: [EventShape: Int] = [:]

    mutating func count(_ event: Event) {
        let stream = Self.bits(event.stream), type = Self.bits(event.type)
        let mixed = (stream.0 ^ stream.1 ^ type.0 ^ type.1 ^ UInt64(truncatingIfNeeded: event.version)) &* 0x9E37_79B9_7F4A_7C15
        let first = Int(truncatingIfNeeded: mixed >> 58)
        var index = first
        for probe in 0..<4 {
            index = (first + probe) & 63
            guard let slot = slots[index] else { break }
            if slot.version == event.version, Self.bits(slot.type) == type, Self.bits(slot.stream) == stream {
                slots[index]!.count += 1
                return
            }
        }
        if let slot = slots[index] { counts[EventShape(stream: slot.stream, type: slot.type, version: slot.version), default: 0] += slot.count }
        slots[index] = Slot(stream: event.stream, type: event.type, version: event.version, count: 1)
    }

    /// Every count, by shape.
    func total() -> [EventShape: Int] {
        slots.reduce(into: counts) { counts, slot in
            if let slot { counts[EventShape(stream: slot.stream, type: slot.type, version: slot.version), default: 0] += slot.count }
        }
    }

    private static func bits(_ string: String) -> (UInt64, UInt64) { unsafeBitCast(string, to: (UInt64, UInt64).self) }
}
