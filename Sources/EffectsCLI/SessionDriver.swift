import Effects
import EventLog
import EventLogCLI

/// Drives a recorded session's entry points again, through any variant of an effects app's
/// code, on a scratch log: what `testgen` turns into a test, and what `shrink` re-runs with
/// fewer inputs. A plan's start runs the plan its recorded source (a URL) names; a step
/// outside a plan is applied again; a waiting plan is resumed; any other event (an object
/// save, an update check) is appended, decided again by `rules` when they recompute its
/// stream, else as recorded.
struct SessionDriver<Model: EffectModel> {
    typealias Engine = EffectEngine<Model>

    /// The code the calls run through.
    var model: Model
    /// The plan a recorded plan start's source (its URL) runs.
    var plan: (String) throws -> Plan<Model.Effect>
    /// The code that decides the other events again from their payload and the state they
    /// are appended to (an update check's lookup answer, say); `nil`: they are appended as recorded.
    var rules: Projections? = nil

    /// One entry-point call of a session.
    enum Call {
        /// A plan started from its source (a URL) by `origin`.
        case run(source: String, origin: Origin)
        /// A step applied outside any plan.
        case apply(Step<Model.Effect>, origin: Origin)
        /// The waiting plan re-checked; nothing when no plan waits.
        case resume
        /// An event no entry point makes. When `rules` recompute its stream, they decide its
        /// outcome and writes on the state it is appended to; else it is appended as recorded
        /// but for its writes' old values, which are the state's there (an input left out
        /// before may have changed them).
        case append(Event)
    }

    /// An input of a session: a call and when it was made.
    struct Input {
        var call: Call
        var time: Timestamp
        /// The recorded event the call's events start at.
        var seq: UInt64
    }

    /// A scratch log the calls are made on, its clock moved to each call's time.
    struct Session {
        let store: EventStore
        let engine: Engine
        let clock: ManualClock

        /// Moves the clock forward to `time`, returning by how many microseconds (0 when
        /// `time` is not later).
        func advance(to time: Timestamp) -> Int64 {
            let elapsed = time.microsecondsSince1970 - clock.now.microsecondsSince1970
            guard elapsed > 0 else { return 0 }
            clock.advance(microseconds: elapsed)
            return elapsed
        }
    }

    /// A new log at `path` (an empty directory) in the state `before` (one event that writes it,
    /// when not empty), with the app's engine attached, its clock at `start`.
    func session(at path: String, before: StateValue, start: Timestamp) throws -> Session {
        let clock = ManualClock(start: start)
        var options = EventStore.Options()
        options.clock = clock.clock
        options.durability = .lastCommitMayBeLost
        let store = try EventStore(path: path, options: options)
        let seeds = Self.seeds(before)
        if !seeds.isEmpty {
            do {
                try store.append(Event(stream: Engine.initialStateStream, type: "initialState",
                                       writes: seeds.map { Write(StatePath([.key($0.key)]), old: nil, new: $0.value) }))
            } catch EventStoreError.limitExceeded(let reason) {
                throw CLIError.badInput("the state the log starts from (its compacted base) is too big for the one event that starts a scratch log: \(reason)")
            }
        }
        return Session(store: store, engine: try Engine(store: store, model: model), clock: clock)
    }

    /// The top-level values of `state`, which a session started in it writes first.
    static func seeds(_ state: StateValue) -> [(key: String, value: StateValue)] {
        state.objectValue.map { Array($0) } ?? []
    }

    /// Where the calls of `records` start on a session started in `before`: past the initial
    /// state the engine recorded itself when nothing was before.
    static func firstCall(in records: [EventRecord], before: StateValue) -> Int {
        seeds(before).isEmpty && records.first?.event.stream == Engine.initialStateStream ? 1 : 0
    }

    /// Makes the call that `records[index]` starts on `session`, with the clock at its time;
    /// returns the call and the events it made. How many recorded events the call covers is
    /// what it made (at least one).
    /// - Throws: A ``CLIError`` (bad input) when a plan start records no source, or one its
    ///   `plan` refuses; the session's errors.
    func next(from index: Int, in records: [EventRecord], session: Session) throws -> (Call, [EventRecord]) {
        let event = records[index].event
        // A newer plan's start records the older plan's cancelled steps first, in the same call.
        let startIndex = event.outcome == .cancelled ? records[index...].firstIndex { $0.event.stream == Engine.planStream } : index
        if let startIndex, records[startIndex].event.stream == Engine.planStream, records[startIndex].event.type == "planStarted" {
            let start = records[startIndex].event
            let planned = try plan(startedBy: records[startIndex])
            return (.run(source: start.cause?.source ?? "", origin: start.origin), try session.engine.run(planned, origin: start.origin).records)
        }
        let isStep = event.stream == model.stream || event.stream == Engine.navigationStream
        if isStep, event.cause == nil, let step = Step<Model.Effect>(name: event.type, arguments: event.payload) {
            let call = Call.apply(step, origin: event.origin)
            return (call, try make(call, on: session))
        }
        if isStep, event.cause != nil, let resumed = try session.engine.resume() {
            return (.resume, resumed.records)
        }
        return (.append(event), try make(.append(event), on: session))
    }

    /// The plan a recorded plan start runs: the one its source (a URL) names.
    /// - Throws: A ``CLIError`` (bad input) when it records no source, or one `plan` refuses.
    func plan(startedBy record: EventRecord) throws(CLIError) -> Plan<Model.Effect> {
        let source = record.event.cause?.source ?? ""
        do { return try plan(source) } catch {
            throw CLIError.badInput("event #\(record.seq): "
                + (source.isEmpty ? "its plan records no source to rebuild it from" : "cannot rebuild the plan of \"\(Render.escaped(source))\": \(error)"))
        }
    }

    /// The inputs of `records` (a contiguous range of a log that starts in the state
    /// `before`), found by making every call on a scratch log at `scratch` (an empty directory):
    /// each plan start, each step outside a plan, each moment the recording resumed a plan
    /// today's code still has waiting (a step of it recorded while it waits), and every event
    /// no entry point makes. The other steps of a plan started in the range are what its calls
    /// make, not inputs, wherever they lie; those of a plan started before the range are
    /// appended as recorded.
    /// - Throws: A ``CLIError`` (bad input) when a plan start records no source, or one its
    ///   `plan` refuses; the session's errors.
    func inputs(of records: [EventRecord], before: StateValue, scratch: String) throws -> [Input] {
        guard let first = records.first else { return [] }
        let session = try session(at: scratch, before: before, start: first.time)
        var inputs: [Input] = []
        // Each recorded plan started in the range, by id, and the id today's run of it has.
        var driven: [String: String] = [:]
        for record in records[Self.firstCall(in: records, before: before)...] {
            do {
                if let input = try input(at: record, driven: &driven, on: session) { inputs.append(input) }
            } catch let error as EventStoreError {
                throw CLIError.badInput("the session cannot be driven again: at event #\(record.seq), \(error)")
            }
        }
        return inputs
    }

    /// The input `record` is, made on `session`; `nil` when it is what an input made.
    private func input(at record: EventRecord, driven: inout [String: String], on session: Session) throws -> Input? {
        _ = session.advance(to: record.time)
        let event = record.event
        let call: Call
        if event.stream == Engine.planStream, event.type == "planStarted" {
            call = .run(source: event.cause?.source ?? "", origin: event.origin)
            let run = try session.engine.run(try plan(startedBy: record), origin: event.origin)
            if let id = event.cause?.id { driven[id] = run.id }
        } else if let id = event.cause?.id, let today = driven[id] {
            // A step of a plan driven here: made by its calls, unless the plan still waits today.
            guard event.outcome != .cancelled, session.engine.waitingPlan == today,
                  let resumed = try session.engine.resume(), !resumed.records.isEmpty else { return nil }
            call = .resume
        } else if (event.stream == model.stream || event.stream == Engine.navigationStream), event.cause == nil,
                  let step = Step<Model.Effect>(name: event.type, arguments: event.payload) {
            call = .apply(step, origin: event.origin)
            _ = try make(call, on: session)
        } else {
            call = .append(event)
            _ = try make(call, on: session)
        }
        return Input(call: call, time: record.time, seq: record.seq)
    }

    /// Makes `inputs`, in order, each at its time, on a new log at `path` started in `before`.
    /// - Throws: The session's errors (a write the state's shape refuses, say).
    func drive(_ inputs: [Input], before: StateValue, start: Timestamp, at path: String) throws -> EventStore {
        let session = try session(at: path, before: before, start: start)
        for input in inputs {
            _ = session.advance(to: input.time)
            _ = try make(input.call, on: session)
        }
        return session.store
    }

    /// Makes `call` on `session`, returning the events it made.
    func make(_ call: Call, on session: Session) throws -> [EventRecord] {
        switch call {
        case .run(let source, let origin):
            return try session.engine.run(try plan(source), origin: origin).records
        case .apply(let step, let origin):
            return try session.engine.apply(step, origin: origin)
        case .resume:
            return try session.engine.resume()?.records ?? []
        case .append(var event):
            return [try session.store.transact { batch in
                let record = EventRecord(seq: batch.lastSeq + 1, time: session.clock.now, event: event, checksum: 0)
                if let decided = rules?.recompute(record, in: batch.state) {
                    event.outcome = decided.outcome
                    event.writes = decided.writes
                } else {
                    event.writes = event.writes.map { Write($0.path, old: batch.state[$0.path], new: $0.new) }
                }
                return try batch.append(event)
            }]
        }
    }
}

extension SessionDriver.Input {
    /// `tap botmessages://bots?filter=unread`, `system applies navigation/pop`,
    /// `resume the waiting plan`, `updates/declined`.
    var summary: String {
        switch call {
        case .run(let source, let origin): "\(origin.rawValue) \(Render.escaped(source))"
        case .apply(let step, let origin): "\(origin.rawValue) applies \(Render.escaped(step.description))"
        case .resume: "resume the waiting plan"
        case .append(let event): "\(Render.escaped(event.stream))/\(Render.escaped(event.type))"
        }
    }
}
