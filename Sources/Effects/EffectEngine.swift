import EventLog
import Foundation

/// Runs plans through one `apply` step, whatever started them: a tap, a URL, a test or a
/// capture script differ only in the origin they record.
///
/// For every step, in this order (the steps a call runs share one write transaction):
/// 1. if a newer plan has started (here or in another process) the rest of this plan is
///    recorded `cancelled`;
/// 2. the effect's guard runs; a failure is recorded `skipped` with its reason and the plan
///    goes on;
/// 3. a step that waits (a scroll waiting for its list) holds the plan until its condition
///    holds, a newer plan interrupts it, or its bound passes (then it is `skipped`);
/// 4. the intended writes are compared with the state: a step that would change nothing is
///    `skipped` as a no-op, otherwise it is `applied` with exactly the writes that change
///    something (path, old value, new value).
///
/// Every step is one event; the post-state of each is a snapshot of the log. State layout:
/// the app's properties under `model.stream`, `navigation.path` and `navigation.sheet`, and
/// the active plan under `plan`.
public final class EffectEngine<Model: EffectModel>: @unchecked Sendable {
    /// The log every step is appended to.
    public let store: EventStore
    /// The app's effects: their guards, waits and writes.
    public let model: Model

    /// What became of a plan when `run` or `resume` returned.
    public enum Status: Sendable, Hashable {
        /// Every step was recorded.
        case finished
        /// The plan holds at a step until its condition holds or `deadline` passes; call
        /// `resume()` then (or when the state may have changed).
        case waiting(for: String, deadline: Timestamp)
        /// A newer plan took over; the rest was recorded `cancelled`.
        case superseded
    }

    /// The events a plan produced so far, and where it stands.
    public struct PlanRun: Sendable {
        /// The plan's id, which every one of its events carries as its cause.
        public var id: String
        /// The events this call appended, in order: for `run`, the cancelled steps of the plan
        /// it superseded, the plan's start, then the steps it ran.
        public var records: [EventRecord]
        /// Whether the plan finished, waits or was superseded.
        public var status: Status
    }

    private struct ActivePlan {
        var id: String
        var plan: Plan<Model.Effect>
        var origin: Origin
        var next = 0
        var deadline: Timestamp?
    }

    /// The plan still waiting, if any; its lock also makes the engine's calls take turns.
    private let active = Locked<ActivePlan?>(nil)

    /// The id of the plan still waiting (``Status/waiting(for:deadline:)``), if any.
    public var waitingPlan: String? { active.withLock { $0?.id } }

    /// The stream of plan start events.
    public static var planStream: String { "plans" }
    /// The stream of navigation steps (push, pop, present, …), in a plan or applied alone.
    public static var navigationStream: String { "navigation" }
    /// The stream of the event that records the model's initial state.
    public static var initialStateStream: String { "system" }

    /// Attaches to `store`, recording the app's initial state first if the log has none.
    /// Only the parts missing from the state (the model's properties, `navigation`, `plan`)
    /// are written, in one event.
    /// - Throws: `EventStoreError.readOnly` on a read-only store whose log lacks any of them;
    ///   `.limitExceeded` when the initial state breaks `StateLimits`; `LMDBError` when the
    ///   transaction fails.
    public init(store: EventStore, model: Model) throws {
        self.store = store
        self.model = model
        let initial: [(StatePath, StateValue)] = [
            (StatePath([.key(model.stream)]), .object(model.initialState)),
            ("navigation", ["path": [], "sheet": .null]),
            ("plan", ["id": .null, "source": .null]),
        ]
        try store.transact { batch in
            let writes = initial.filter { batch.state[$0.0] == nil }.map { Write($0.0, old: nil, new: $0.1) }
            if !writes.isEmpty {
                try batch.append(Event(stream: Self.initialStateStream, type: "initialState", origin: .system,
                                       payload: ["app": .string(model.stream)], writes: writes))
            }
        }
    }

    /// Starts `plan`, superseding any plan of this engine still waiting (its remaining steps
    /// are recorded `cancelled`), and runs its steps until it finishes or waits. The plan's
    /// start and the steps it runs now commit together, in one transaction.
    /// - Parameter origin: What started the plan: `.tap`, `.url`, `.test`, `.capture` or an
    ///   app's own; recorded on every event of the plan.
    /// - Throws: `EventStoreError.readOnly` on a read-only store; `.invalidWrite` when an
    ///   effect writes where the state's shape allows no value; `.limitExceeded` when an event
    ///   breaks `StateLimits`; `LMDBError` when the transaction fails. Nothing of the call is
    ///   appended then, and a plan that was waiting still waits.
    @discardableResult
    public func run(_ plan: Plan<Model.Effect>, origin: Origin) throws -> PlanRun {
        try active.withLock { active in
            let previous = active
            let (id, advanced) = try store.transact { batch in
                let cancelled = try previous.map { try cancelRemaining(of: $0, in: &batch) } ?? []
                let id = "plan-\(batch.lastSeq + 1)"
                let started = Event(
                    stream: Self.planStream, type: "planStarted", origin: origin,
                    cause: Cause(id: id, step: 0, source: plan.source),
                    payload: ["steps": .array(plan.steps.map { .string($0.description) })],
                    writes: [Write("plan.id", old: batch.state["plan.id"], new: .string(id)),
                             Write("plan.source", old: batch.state["plan.source"], new: .string(plan.source))])
                let record = try batch.append(started)
                var advanced = try advance(ActivePlan(id: id, plan: plan, origin: origin), in: &batch)
                advanced.records = cancelled + [record] + advanced.records
                return (id, advanced)
            }
            active = advanced.plan
            return PlanRun(id: id, records: advanced.records, status: advanced.status)
        }
    }

    /// Re-checks a waiting plan (after time passed or the state changed) and runs on.
    /// Returns `nil` when no plan is waiting.
    /// - Throws: The errors of `run(_:origin:)`; the plan then waits as before.
    @discardableResult
    public func resume() throws -> PlanRun? {
        try active.withLock { active in
            guard let waiting = active else { return nil }
            let advanced = try store.transact { batch in try advance(waiting, in: &batch) }
            active = advanced.plan
            return PlanRun(id: waiting.id, records: advanced.records, status: advanced.status)
        }
    }

    /// Applies one step outside any plan (the system popping a screen on a swipe, say),
    /// without superseding the waiting plan, which is then re-checked. The step never waits:
    /// an unmet wait condition records it `skipped`.
    /// - Returns: The step's event, then the events of the waiting plan's re-check.
    /// - Throws: The errors of `run(_:origin:)`; nothing is appended then.
    @discardableResult
    public func apply(_ step: Step<Model.Effect>, origin: Origin) throws -> [EventRecord] {
        try active.withLock { active in
            let waiting = active
            let (record, advanced) = try store.transact { batch in
                // Outside a plan nothing can wait: an unmet wait condition skips the step.
                guard case .event(let event) = resolve(step, origin: origin, cause: nil, state: batch.state, wait: .notAllowed) else {
                    preconditionFailure("a step that may not wait was held")
                }
                let record = try batch.append(event)
                return (record, try waiting.map { try advance($0, in: &batch) })
            }
            if let advanced { active = advanced.plan }
            return [record] + (advanced?.records ?? [])
        }
    }

    // MARK: The apply step

    /// Where a plan stands after `advance`: what it recorded, its status, and the plan to keep
    /// (only while it waits).
    private struct Advance {
        var records: [EventRecord]
        var status: Status
        var plan: ActivePlan?
    }

    /// Runs `plan`'s steps inside `batch` until it finishes, waits or is superseded. Pure with
    /// respect to the engine: the caller adopts the result once the transaction commits.
    private func advance(_ plan: ActivePlan, in batch: inout AppendBatch) throws -> Advance {
        var plan = plan
        var records: [EventRecord] = []
        while plan.next < plan.plan.steps.count {
            guard batch.state["plan.id"] == .string(plan.id) else {
                return Advance(records: records + (try cancelRemaining(of: plan, in: &batch)), status: .superseded)
            }
            let step = plan.plan.steps[plan.next]
            let cause = Cause(id: plan.id, step: plan.next + 1, source: plan.plan.source)
            switch resolve(step, origin: plan.origin, cause: cause, state: batch.state, wait: plan.deadline.map(Wait.until) ?? .start) {
            case .waiting(let condition, let deadline):
                plan.deadline = deadline
                return Advance(records: records, status: .waiting(for: condition, deadline: deadline), plan: plan)
            case .event(let event):
                records.append(try batch.append(event))
            }
            plan.next += 1
            plan.deadline = nil
        }
        return Advance(records: records, status: .finished)
    }

    private enum Resolved {
        case event(Event)
        case waiting(for: String, deadline: Timestamp)
    }

    /// Whether a step may hold its plan when its wait condition does not hold.
    private enum Wait {
        /// Outside a plan: an unmet condition skips the step.
        case notAllowed
        /// A first try: an unmet condition starts the wait.
        case start
        /// A wait under way, until this deadline.
        case until(Timestamp)
    }

    /// The event a step makes in `state`, or what it is waiting for.
    private func resolve(_ step: Step<Model.Effect>, origin: Origin, cause: Cause?, state: StateValue, wait mode: Wait) -> Resolved {
        func event(_ outcome: Outcome, _ writes: [Write] = []) -> Resolved {
            .event(Event(stream: stream(of: step), type: step.name, origin: origin, cause: cause,
                         outcome: outcome, payload: step.arguments, writes: writes, version: step.version))
        }
        switch model.evaluate(step, in: state) {
        case .skip(let reason):
            return event(.skipped(reason: reason))
        case .writes(let writes):
            return event(.applied, writes)
        case .wait(let wait):
            if case .notAllowed = mode {
                return event(.skipped(reason: "would wait until \(wait.description); steps outside a plan do not wait"))
            }
            let now = store.clock.now()
            let deadline: Timestamp
            if case .until(let existing) = mode {
                deadline = existing
            } else {
                deadline = Timestamp(microsecondsSince1970: now.microsecondsSince1970 + wait.boundMicroseconds)
            }
            guard now >= deadline else { return .waiting(for: wait.description, deadline: deadline) }
            let seconds = Double(wait.boundMicroseconds) / 1_000_000
            return event(.skipped(reason: "timed out after \(seconds) s waiting until \(wait.description)"))
        }
    }

    private func stream(of step: Step<Model.Effect>) -> String {
        if case .effect = step { model.stream } else { Self.navigationStream }
    }

    private func cancelRemaining(of plan: ActivePlan, in batch: inout AppendBatch) throws -> [EventRecord] {
        try (plan.next..<plan.plan.steps.count).map { index in
            let step = plan.plan.steps[index]
            return try batch.append(Event(stream: stream(of: step), type: step.name, origin: plan.origin,
                                          cause: Cause(id: plan.id, step: index + 1, source: plan.plan.source),
                                          outcome: .cancelled, payload: step.arguments, version: step.version))
        }
    }
}
