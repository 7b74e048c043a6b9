import EventLog

/// A family of events (objects, update prompts, deploys, the fleet, an app's own), declared
/// in one value: what the engine needs from it. Its module vends it; an app lists the
/// families it uses (``EventLogApp/families``), and the command line serves exactly those:
/// their code replays their streams, their read models are verified, rebuilt and kept in
/// line by `import` and `salvage`, and their commands join the engine's.
///
///     extension EventFamily {
///         static let counters = EventFamily(name: "counters", commands: [countCommand]) { code in
///             code.recompute(["counter"], with: CounterProjection())
///         }
///     }
public struct EventFamily: Sendable {
    /// The family's name, for messages.
    public var name: String
    /// The family's commands, listed after the log's own.
    public var commands: [CommandSpec]
    /// The family's read models over a store (opened, and created when the store is
    /// writable and has none).
    public var readModels: @Sendable (_ store: EventStore) throws -> [any ReadModel]
    /// Adds the family's code for replay: a projection for each of its streams, or its
    /// streams taken as recorded (inputs no code derives).
    public var code: @Sendable (_ code: inout Projections) -> Void
    /// The settings of its rules that `replay --what-if` can change.
    public var knobs: [RuleKnob]
    /// The outcomes `replay --what-if` counts for it, as recorded and under the changed rules.
    public var tallies: [OutcomeTally]
    /// For a family that ships logs elsewhere: the newest seq of the log that arrived there
    /// (`nil`: none yet), the furthest `compact --shipped` drops.
    public var shippedThrough: (@Sendable (_ store: EventStore) throws -> UInt64?)?

    /// A family named `name`.
    /// - Parameters:
    ///   - commands: Its commands.
    ///   - readModels: Its read models over a store; none by default.
    ///   - knobs: The settings of its rules a what-if replay can change; none by default.
    ///   - tallies: The outcomes a what-if replay counts; none by default.
    ///   - shippedThrough: How far it shipped a log elsewhere, for a family that does.
    ///   - code: Adds its streams' code to the app's.
    public init(name: String, commands: [CommandSpec] = [],
                readModels: @escaping @Sendable (_ store: EventStore) throws -> [any ReadModel] = { _ in [] },
                knobs: [RuleKnob] = [], tallies: [OutcomeTally] = [],
                shippedThrough: (@Sendable (_ store: EventStore) throws -> UInt64?)? = nil,
                code: @escaping @Sendable (_ code: inout Projections) -> Void) {
        self.name = name
        self.commands = commands
        self.readModels = readModels
        self.knobs = knobs
        self.tallies = tallies
        self.shippedThrough = shippedThrough
        self.code = code
    }
}
