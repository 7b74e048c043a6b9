import EventLog
import Foundation

/// Runs plans through one `apply` step, whatever started them: a tap, a URL, a test or a
/// capture script differ only in the origin they record.
///
/// For every step, inside one write transaction and in this order:
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
    public let store: EventStore
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
        public var records: [EventRecord]
        public var status: Status
    }

    private struct ActivePlan {
        var id: String
        var plan: Plan<Model.Effect>
        var origin: Origin
        var next = 0
        var deadline: Timestamp?
    }

    private let lock = NSLock()
    private var active: ActivePlan?

    /// The stream of plan start events and of navigation steps.
    public static var planStream: String { "plans" }
    public static var navigationStream: String { "navigation" }

    /// Attaches to `store`, recording the app's initial state first if the log has none.
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
                try batch.append(Event(stream: "system", type: "initialState", origin: .system,
                                       payload: ["app": .string(model.stream)], writes: writes))
            }
        }
    }

    /// Starts `plan`, superseding any plan of this engine still waiting (its remaining steps
    /// are recorded `cancelled`), and runs its steps until it finishes or waits.
    @discardableResult
    public func run(_ plan: Plan<Model.Effect>, origin: Origin) throws -> PlanRun {
        try lock.withLock {
            var records: [EventRecord] = []
            let id: String = try store.transact { batch in
                records = []
                if let previous = active { records += try cancelRemaining(of: previous, in: &batch) }
                let id = "plan-\(batch.lastSeq + 1)"
                let started = Event(
                    stream: Self.planStream, type: "planStarted", origin: origin,
                    cause: Cause(id: id, step: 0, source: plan.source),
                    payload: ["steps": .array(plan.steps.map { .string($0.description) })],
                    writes: [Write("plan.id", old: batch.state["plan.id"], new: .string(id)),
                             Write("plan.source", old: batch.state["plan.source"], new: .string(plan.source))])
                records.append(try batch.append(started))
                return id
            }
            active = ActivePlan(id: id, plan: plan, origin: origin)
            let (more, status) = try drain()
            return PlanRun(id: id, records: records + more, status: status)
        }
    }

    /// Re-checks a waiting plan (after time passed or the state changed) and runs on.
    /// Returns `nil` when no plan is waiting.
    @discardableResult
    public func resume() throws -> PlanRun? {
        try lock.withLock {
            guard let id = active?.id else { return nil }
            let (records, status) = try drain()
            return PlanRun(id: id, records: records, status: status)
        }
    }

    /// Applies one step outside any plan (the system popping a screen on a swipe, say),
    /// without superseding the waiting plan, which is then re-checked.
    @discardableResult
    public func apply(_ step: Step<Model.Effect>, origin: Origin) throws -> [EventRecord] {
        try lock.withLock {
            let record = try store.transact { batch in
                try batch.append(resolvedEvent(for: step, origin: origin, cause: nil, state: batch.state, deadline: nil).event!)
            }
            return [record] + (try drain().records)
        }
    }

    // MARK: The apply step

    private enum StepResult {
        case recorded(EventRecord)
        case superseded([EventRecord])
        case waiting(String, Timestamp)
    }

    /// Runs the active plan's steps until it finishes, waits or is superseded.
    private func drain() throws -> (records: [EventRecord], status: Status) {
        var records: [EventRecord] = []
        while var current = active {
            guard current.next < current.plan.steps.count else {
                active = nil
                return (records, .finished)
            }
            let step = current.plan.steps[current.next]
            let cause = Cause(id: current.id, step: current.next + 1, source: current.plan.source)
            let result: StepResult = try store.transact { batch in
                guard batch.state["plan.id"] == .string(current.id) else {
                    return .superseded(try cancelRemaining(of: current, in: &batch))
                }
                let resolved = resolvedEvent(for: step, origin: current.origin, cause: cause, state: batch.state, deadline: current.deadline)
                if let event = resolved.event { return .recorded(try batch.append(event)) }
                return .waiting(resolved.waitingFor!, resolved.deadline!)
            }
            switch result {
            case .recorded(let record):
                records.append(record)
                current.next += 1
                current.deadline = nil
                active = current
            case .superseded(let cancelled):
                active = nil
                return (records + cancelled, .superseded)
            case .waiting(let description, let deadline):
                current.deadline = deadline
                active = current
                return (records, .waiting(for: description, deadline: deadline))
            }
        }
        return (records, .finished)
    }

    /// The event a step makes in `state`, or what it is waiting for.
    private func resolvedEvent(for step: Step<Model.Effect>, origin: Origin, cause: Cause?, state: StateValue,
                               deadline: Timestamp?) -> (event: Event?, waitingFor: String?, deadline: Timestamp?) {
        func event(_ outcome: Outcome, _ writes: [Write] = []) -> Event {
            Event(stream: stream(of: step), type: step.name, origin: origin, cause: cause,
                  outcome: outcome, payload: step.arguments, writes: writes)
        }
        switch model.evaluate(step, in: state) {
        case .skip(let reason):
            return (event(.skipped(reason: reason)), nil, nil)
        case .writes(let writes):
            return (event(.applied, writes), nil, nil)
        case .wait(let wait):
            let now = store.clock.now()
            let deadline = deadline ?? Timestamp(microsecondsSince1970: now.microsecondsSince1970 + wait.boundMicroseconds)
            guard now >= deadline else { return (nil, wait.description, deadline) }
            let seconds = Double(wait.boundMicroseconds) / 1_000_000
            return (event(.skipped(reason: "timed out after \(seconds) s waiting until \(wait.description)")), nil, nil)
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
                                          outcome: .cancelled, payload: step.arguments))
        }
    }
}
