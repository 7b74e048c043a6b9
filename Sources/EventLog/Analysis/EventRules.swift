/// A family's pure rules: what each event of its stream writes, from the event (its type and
/// payload), the state before it and its time. The same function records an event (``append(_:at:to:)``)
/// and replays it (``RulesProjection``), so what was recorded and what replay recomputes
/// cannot drift apart; rules never touch a file, a clock or the network.
public protocol EventRules: SendableMetatype {
    /// The stream whose events the rules decide, and the key of their state.
    static var stream: String { get }

    /// The writes of `event` on `state` at `time`, or why it cannot be one of the stream's
    /// events (an unknown type, a payload missing a field, a step the state does not allow).
    static func writes(for event: Event, in state: StateValue, at time: Timestamp) -> Result<[Write], RuleError>
}

/// Why rules refuse an event where it was put; replay records it as the `skipped` reason.
public struct RuleError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why, for people.
    public var reason: String
    /// An error saying `reason`.
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

extension EventRules {
    /// Appends `event` to `batch` at `time` with the writes the rules give it there (the
    /// event's own writes are replaced).
    /// - Throws: ``RuleError`` when the rules refuse the event (nothing is appended); the
    ///   errors of `AppendBatch.append(_:time:)`.
    @discardableResult
    public static func append(_ event: Event, at time: Timestamp, to batch: inout AppendBatch) throws -> EventRecord {
        var event = event
        event.writes = try writes(for: event, in: batch.state, at: time).get()
        return try batch.append(event, time: time)
    }

    /// Queues `event` (``EventStore/enqueue(_:)``: it returns before the commit) with the
    /// writes the rules give it at the state and time of its commit; the same refusals, from
    /// ``QueuedAppend/committed()``. After `previous`, it is refused with `previous`'s error
    /// when that one failed in an earlier commit, and a commit that fails fails both: a chain
    /// the log takes without a gap, or stops taking. (One the rules refuse alone inside the
    /// same commit as this one is not seen: its outcome is set once the commit ends.)
    @discardableResult
    public static func enqueue(_ event: Event, after previous: QueuedAppend? = nil, to store: EventStore) -> QueuedAppend {
        store.enqueue(appending: { batch in
            if case .failure(let error)? = previous?.outcome { throw error }
            return try append(event, at: store.clock.now(), to: &batch)
        })
    }
}

/// Today's code for a stream whose events follow `Rules`, for `replay` and `bisect --replay`:
/// every event of the stream is recomputed from its payload and the state before it,
/// `applied`; one the rules refuse is `skipped` with the reason.
public struct RulesProjection<Rules: EventRules>: Projection, Sendable {
    /// The projection of `rules`; it holds nothing.
    public init(_ rules: Rules.Type = Rules.self) {}

    /// What the rules give the event today. Never `nil`: every event of the stream is recomputed.
    public func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
        switch Rules.writes(for: record.event, in: state, at: record.time) {
        case .success(let writes): Recomputed(outcome: .applied, writes: writes)
        case .failure(let error): Recomputed(outcome: .skipped(reason: error.reason), writes: [])
        }
    }

    /// The rules' stream only.
    public func knows(stream: String) -> Bool { stream == Rules.stream }
}

extension Projections {
    /// Recomputes the events of the stream of `rules` by those rules.
    public mutating func recompute<Rules: EventRules>(by rules: Rules.Type) {
        recompute([Rules.stream], with: RulesProjection(rules))
    }
}
