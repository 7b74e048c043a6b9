/// A setting of a family's rules that a replay can change: the update prompts' `maxDeclines`,
/// say. It is recorded in the events the rules decide with; a value given to it rewrites them
/// before they are recomputed, so that the session's recorded inputs are decided again under it.
public struct RuleKnob: Sendable {
    /// The knob at one value: how it rewrites an event of its stream, given the state before
    /// it (an event it has no part in stays as it is).
    public struct Setting: Sendable {
        /// The stream of the events it rewrites.
        public var stream: String
        /// Rewrites one event.
        public var rewrite: @Sendable (_ event: inout Event, _ state: StateValue) -> Void

        /// A setting that rewrites the events of `stream` with `rewrite`.
        public init(stream: String, rewrite: @escaping @Sendable (_ event: inout Event, _ state: StateValue) -> Void) {
            self.stream = stream
            self.rewrite = rewrite
        }
    }

    /// Its name, as `replay --what-if NAME=VALUE` takes it.
    public var name: String
    /// What it sets, in one line.
    public var summary: String
    /// The values it takes, for people: `a whole number, 0 or more`.
    public var values: String
    /// The knob at the value `text` says, or `nil` when it takes no such value.
    public var setting: @Sendable (_ text: String) -> Setting?

    /// A knob named `name`, set to a value by `setting`.
    public init(name: String, summary: String, values: String, setting: @escaping @Sendable (_ text: String) -> Setting?) {
        self.name = name
        self.summary = summary
        self.values = values
        self.setting = setting
    }
}

/// An outcome a family counts, to say what a change of its rules did: prompts shown,
/// updates installed, rollbacks.
public struct OutcomeTally: Sendable {
    /// What it counts, for people: `prompts shown`.
    public var name: String
    /// Whether an event, with the outcome and writes it has (recorded, or under the changed
    /// rules), is one of them.
    public var counts: @Sendable (_ event: Event) -> Bool

    /// A tally named `name` of the events `counts` accepts.
    public init(name: String, counts: @escaping @Sendable (_ event: Event) -> Bool) {
        self.name = name
        self.counts = counts
    }
}

/// What a session would have done under other rules.
public struct WhatIfReport: Sendable {
    /// One event whose outcome or writes the changed rules change.
    public struct Difference: Sendable {
        /// The event as recorded.
        public var record: EventRecord
        /// The event as the changed rules read it (its payload rewritten by the knobs).
        public var rewritten: Event
        /// What the code makes of it under the changed rules.
        public var whatIf: Recomputed
    }

    /// One tally, as recorded and under the changed rules.
    public struct Count: Sendable, Hashable {
        /// The tally's name.
        public var name: String
        /// How many events of the recording it counts.
        public var recorded: Int
        /// How many under the changed rules.
        public var whatIf: Int
    }

    /// How many events were replayed.
    public var events: UInt64 = 0
    /// The seqs of the events the changed rules change: another kind of outcome, or another
    /// value after the event at a path it writes (what it replaced may differ without that).
    public var changed: [UInt64] = []
    /// The first of them.
    public var first: Difference?
    /// Every tally, in the order given.
    public var counts: [Count] = []
    /// The state after the last event, under the changed rules.
    public var state: StateValue
}

extension EventStore {
    /// Folds the log through `code` with knobs changed: every event of a setting's stream is
    /// rewritten by it (given the state before it, under the changed rules) and recomputed;
    /// the fold goes on with what the changed rules write, so that each decision is made on
    /// the state the changed decisions before it left (and the recorded state is folded beside
    /// it, to tell what changed). Events `code` takes as recorded stay
    /// as recorded. Only reads the log, and never calls out: the recorded inputs (lookup
    /// answers, taps) are all it decides from.
    ///
    /// - Parameters:
    ///   - code: Today's code, or a variant.
    ///   - settings: The knobs changed, each at its value.
    ///   - tallies: The outcomes to count, as recorded and under the changed rules.
    /// - Throws: The errors of ``replay(through:from:to:verify:progress:)``.
    public func whatIf(through code: some Projection, changing settings: [RuleKnob.Setting],
                       tallies: [OutcomeTally], to: UInt64 = .max) throws -> WhatIfReport {
        let from = try windowStart(1)
        var report = WhatIfReport(state: try snapshot(after: from - 1))
        var recordedState = report.state
        var counts = tallies.map { WhatIfReport.Count(name: $0.name, recorded: 0, whatIf: 0) }
        try forEachRecord(from: from, to: to) { record in
            report.events += 1
            var event = record.event
            for setting in settings where setting.stream == event.stream { setting.rewrite(&event, report.state) }
            var rewritten = record
            rewritten.event = event
            let recomputed: Recomputed? = switch code.upcasting(event) {
            case .current: code.recompute(rewritten, in: report.state)
            case .events(let events): code.recompute(upcast: events, of: rewritten, in: report.state)
            case .newer, .unreadable: nil
            }
            var decided = record.event
            if let recomputed {
                decided.outcome = recomputed.outcome
                decided.writes = recomputed.writes
            }
            for (index, tally) in tallies.enumerated() {
                if tally.counts(record.event) { counts[index].recorded += 1 }
                if tally.counts(decided) { counts[index].whatIf += 1 }
            }
            do throws(StateError) {
                try report.state.apply(decided.writes)
                try recordedState.apply(record.event.writes)
            } catch { throw EventStoreError.invalidWrite(error) }
            if let recomputed, recomputed.outcome.name != record.event.outcome.name
                || (record.event.writes + recomputed.writes).contains(where: { recordedState[$0.path] != report.state[$0.path] }) {
                report.changed.append(record.seq)
                if report.first == nil { report.first = .init(record: record, rewritten: event, whatIf: recomputed) }
            }
            return true
        }
        report.counts = counts
        return report
    }
}
