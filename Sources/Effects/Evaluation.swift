import EventLog

/// What a step does in a given state: the single decision behind both the engine's apply
/// step and the replay of recorded steps, so the two can never drift apart.
enum Evaluation {
    /// The guard failed, or the step would change nothing ("no-op: …").
    case skip(String)
    /// The step waits for a condition that does not hold yet.
    case wait(WaitCondition)
    /// The writes that change something, with old and new values.
    case writes([Write])
}

extension EffectModel {
    /// Guard, wait, then the intended writes compared with the state: only values that
    /// change are written, and a step that would change nothing is a no-op.
    func evaluate(_ step: Step<Effect>, in state: StateValue) -> Evaluation {
        let resolution: Resolution
        if step.isNavigation, let reason = guardNavigation(step, in: state) {
            resolution = .skip(reason)
        } else {
            resolution = resolve(step, in: state)
        }
        switch resolution {
        case .skip(let reason):
            return .skip(reason)
        case .assign(let assignments, let wait):
            if let wait, !wait.isSatisfied(state) { return .wait(wait) }
            var scratch = state
            var writes: [Write] = []
            for assignment in assignments {
                let old = scratch[assignment.path]
                guard old != assignment.value else { continue }
                writes.append(Write(assignment.path, old: old, new: assignment.value))
                _ = try? scratch.set(assignment.value, at: assignment.path)
            }
            guard writes.isEmpty else { return .writes(writes) }
            let unchanged = assignments.map { "\($0.path) is already \($0.value?.json() ?? "absent")" }
            return .skip("no-op: " + unchanged.joined(separator: ", "))
        }
    }

    /// What a navigation step or effect would write, before guards and waits.
    private func resolve(_ step: Step<Effect>, in state: StateValue) -> Resolution {
        let path = state["navigation.path"]?.arrayValue ?? []
        switch step {
        case .push(let screen): return .assign([Assignment("navigation.path", .array(path + [.string(screen)]))])
        case .pop: return .assign([Assignment("navigation.path", .array(Array(path.dropLast())))])
        case .popToRoot: return .assign([Assignment("navigation.path", [])])
        case .present(let sheet): return .assign([Assignment("navigation.sheet", .string(sheet))])
        case .dismissSheet: return .assign([Assignment("navigation.sheet", .null)])
        case .effect(let effect): return resolve(effect, in: state)
        }
    }
}

/// Replays recorded steps through today's model: the `Projection` of an effects app.
///
/// Steps of the app's stream and of navigation are recomputed; cancelled steps, plan starts
/// and initial states are inputs (what happened, not what the code decided) and replay as
/// recorded. A step recorded as timed out agrees when today's code would still be waiting.
public struct EffectProjection<Model: EffectModel>: Projection {
    /// The app's model, as today's code has it.
    public let model: Model

    /// A projection that recomputes the steps of `model`'s app.
    public init(model: Model) { self.model = model }

    /// The outcome and writes today's model gives a step of the app's stream or of
    /// navigation in `state`; a step that would still wait is `skipped`, and so is an event
    /// that names no step of today's app (an unknown type, or arguments of another shape),
    /// saying so. `nil` for events of other streams and cancelled steps.
    public func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
        let event = record.event
        guard event.stream == model.stream || event.stream == EffectEngine<Model>.navigationStream,
              event.outcome != .cancelled else { return nil }
        guard let step = Step<Model.Effect>(name: event.type, arguments: event.payload) else {
            return Recomputed(outcome: .skipped(reason: "today's code knows no step \(event.type) with arguments \(event.payload.json())"), writes: [])
        }
        switch model.evaluate(step, in: state) {
        case .skip(let reason): return Recomputed(outcome: .skipped(reason: reason), writes: [])
        case .wait(let wait): return Recomputed(outcome: .skipped(reason: "would wait until \(wait.description)"), writes: [])
        case .writes(let writes): return Recomputed(outcome: .applied, writes: writes)
        }
    }

    /// The versions of the model's effects past version 1 (``NamedEffect/versions``), for its stream.
    public func versions(in stream: String) -> [String: Int] {
        stream == model.stream ? Model.Effect.versions : [:]
    }

    /// The model's effects and the navigation steps; the engine's own inputs (plan starts,
    /// the initial state) are for the app's `Projections` to take as recorded.
    public func knows(stream: String) -> Bool {
        stream == model.stream || stream == EffectEngine<Model>.navigationStream
    }
}
