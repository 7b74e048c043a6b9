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

/// What a session would have done under other rules, against what today's code does with
/// the rules as recorded: a change the code itself makes (a regression) is not the settings'.
public struct WhatIfReport: Sendable {
    /// One event whose outcome or writes the changed rules change.
    public struct Difference: Sendable {
        /// The event as recorded.
        public var record: EventRecord
        /// The event as the changed rules read it (its payload rewritten by the knobs).
        public var rewritten: Event
        /// What the code makes of it with the rules as recorded (the recorded event, for one
        /// it takes as recorded).
        public var before: Event
        /// What the code makes of it under the changed rules.
        public var whatIf: Event
    }

    /// One tally, with the rules as recorded and under the changed ones.
    public struct Count: Sendable, Hashable {
        /// The tally's name.
        public var name: String
        /// How many events it counts with the rules as recorded.
        public var before: Int
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
    /// Folds the log through `code` twice side by side: with the rules as recorded, and with
    /// knobs changed, where every event of a setting's stream is rewritten by it (given the
    /// state before it, under the changed rules) before it is recomputed. Each fold goes on with
    /// what its own decisions wrote, so that each decision is made on the state the ones before
    /// it left. Events `code` takes as recorded stay as recorded in both. Only reads the log,
    /// and never calls out: the recorded inputs (lookup answers, taps) are all it decides from.
    ///
    /// - Parameters:
    ///   - code: Today's code, or a variant.
    ///   - settings: The knobs changed, each at its value.
    ///   - tallies: The outcomes to count in both folds.
    /// - Throws: The errors of ``replay(through:from:to:verify:progress:)``.
    public func whatIf(through code: some Projection, changing settings: [RuleKnob.Setting],
                       tallies: [OutcomeTally], to: UInt64 = .max) throws -> WhatIfReport {
        let from = try windowStart(1)
        var report = WhatIfReport(state: try snapshot(after: from - 1))
        var beforeState = report.state
        var counts = tallies.map { WhatIfReport.Count(name: $0.name, before: 0, whatIf: 0) }
        /// `record` with `event` in its place, as `code` decides it on `state`.
        func decided(_ record: EventRecord, as event: Event, on state: StateValue) -> Event {
            var read = record
            read.event = event
            let recomputed: Recomputed? = switch code.upcasting(event) {
            case .current: code.recompute(read, in: state)
            case .events(let events): code.recompute(upcast: events, of: read, in: state)
            case .newer, .unreadable: nil
            }
            guard let recomputed else { return record.event }
            var decided = record.event
            decided.outcome = recomputed.outcome
            decided.writes = recomputed.writes
            return decided
        }
        try forEachRecord(from: from, to: to) { record in
            report.events += 1
            var rewritten = record.event
            for setting in settings where setting.stream == rewritten.stream { setting.rewrite(&rewritten, report.state) }
            let before = decided(record, as: record.event, on: beforeState)
            let whatIf = decided(record, as: rewritten, on: report.state)
            for (index, tally) in tallies.enumerated() {
                if tally.counts(before) { counts[index].before += 1 }
                if tally.counts(whatIf) { counts[index].whatIf += 1 }
            }
            do throws(StateError) {
                try beforeState.apply(before.writes)
                try report.state.apply(whatIf.writes)
            } catch { throw EventStoreError.invalidWrite(error) }
            if whatIf.outcome.name != before.outcome.name
                || (before.writes + whatIf.writes).contains(where: { beforeState[$0.path] != report.state[$0.path] }) {
                report.changed.append(record.seq)
                if report.first == nil { report.first = .init(record: record, rewritten: rewritten, before: before, whatIf: whatIf) }
            }
            return true
        }
        report.counts = counts
        return report
    }
}
