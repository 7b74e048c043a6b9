import EventLog

/// The pure rules of the `deployGate` stream: a rollout gate's decisions (`eventlog deploy
/// gate`), each from the counts it was made on, so that replay checks its arithmetic.
///
/// State, under `deployGate`: for each update gated, its latest decision: `decision`
/// (`halted` or `kept`), `took` (installs that took the update), `reached` (of those, how many
/// reached the bad state), `maxShare` (the percent allowed), `wasPercent` (the rollout before)
/// and `percent` (after: 0 once halted).
public enum GateRules: EventRules {
    /// The stream of gate decisions, and the key of their state.
    public static let stream = "deployGate"

    /// What a gate decided.
    public enum Decision: String, Sendable, CaseIterable {
        /// More than the share allowed reached the bad state: the rollout goes to 0%.
        case rolloutHalted
        /// No more than the share allowed did: the rollout stays as it was.
        case rolloutKept
    }

    /// Whether `reached` of `took` installs is more than `maxShare` percent of them.
    public static func trips(reached: Int, of took: Int, maxShare: Int) -> Bool {
        reached * 100 > maxShare * took
    }

    /// The writes of a decision: its payload names the `update` and holds `took`, `reached`,
    /// `maxShare` and `wasPercent`; the type must be the one the counts give.
    public static func writes(for event: Event, in state: StateValue, at time: Timestamp) -> Result<[Write], RuleError> {
        guard let decision = Decision(rawValue: event.type) else { return .failure(RuleError("unknown decision \"\(event.type)\"")) }
        let fields = event.payload.objectValue ?? StateObject()
        func count(_ key: String, upTo limit: Int = .max) -> Int? {
            fields[key]?.intValue.flatMap { $0 >= 0 && $0 <= limit ? Int($0) : nil }
        }
        guard let update = fields["update"]?.stringValue, !update.isEmpty, let took = count("took"), let reached = count("reached", upTo: took),
              let maxShare = count("maxShare", upTo: 100), let wasPercent = count("wasPercent", upTo: 99) else {
            return .failure(RuleError("the payload needs update, took, reached (at most took), maxShare and wasPercent (percents)"))
        }
        let tripped = trips(reached: reached, of: took, maxShare: maxShare)
        guard tripped == (decision == .rolloutHalted) else {
            return .failure(RuleError("\(reached) of \(took) is \(tripped ? "more than" : "within") \(maxShare)%, not a \(decision.rawValue)"))
        }
        var changes = StateChanges(state, under: StatePath([.key(stream)]))
        changes[update] = ["decision": .string(tripped ? "halted" : "kept"), "took": .int(Int64(took)), "reached": .int(Int64(reached)),
                           "maxShare": .int(Int64(maxShare)), "wasPercent": .int(Int64(wasPercent)), "percent": .int(Int64(tripped ? 0 : wasPercent))]
        if let failure = changes.failure { return .failure(RuleError("\(failure)")) }
        return .success(changes.writes)
    }
}
