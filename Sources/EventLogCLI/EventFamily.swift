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

    /// A family named `name`.
    /// - Parameters:
    ///   - commands: Its commands.
    ///   - readModels: Its read models over a store; none by default.
    ///   - code: Adds its streams' code to the app's.
    public init(name: String, commands: [CommandSpec] = [],
                readModels: @escaping @Sendable (_ store: EventStore) throws -> [any ReadModel] = { _ in [] },
                code: @escaping @Sendable (_ code: inout Projections) -> Void) {
        self.name = name
        self.commands = commands
        self.readModels = readModels
        self.code = code
    }
}
