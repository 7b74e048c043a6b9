import EventLog

/// An app whose logs the commands serve: its code for `replay` and `bisect --replay`, the
/// families of events it uses, and commands of its own beside the engine's, declared once.
/// The shipped `eventlog` is the demo's (`EventLogApp.demo` in `DemoCLI`); an app builds a
/// command line of its own in a few lines:
///
///     var code = Projections()
///     code.recompute(["counter"], with: CounterProjection())
///     code.takeAsRecorded(["imports"])
///     var app = EventLogApp(name: "counter-log", families: [.objects]) { _ in code }
///     app.commands = [countCommand]
///     EventLogCLI.main(app: app)
public struct EventLogApp: Sendable {
    /// The program's name, for help and errors.
    public var name: String
    /// The families of events the app uses, each with its code, read models and commands.
    public var families: [EventFamily]
    /// Faulty variants of the app's code that `--regression NAME` replays through, with a
    /// line each saying what is wrong: for demonstrating `replay` and `bisect`.
    public var variants: [(name: String, summary: String)]
    /// The app's own code, or the faulty variant named (always one of `variants`).
    private var ownCode: @Sendable (_ variant: String?) throws -> Projections
    /// Commands of the app's own, listed after the log's and its families' (the demo's are
    /// `open`, `routes`, `capture`, `testgen` and `demo`). A name used twice is refused when
    /// the command line runs.
    public var commands: [CommandSpec] = []

    /// An app named `name` (for help and errors) whose code is `projections` and its families'.
    /// - Parameters:
    ///   - families: The families of events the app uses.
    ///   - variants: Faulty variants of the code, each with a line saying what is wrong; with
    ///     any, `replay` and `bisect` take `--regression NAME`.
    ///   - projections: The app's own code when given `nil`, else the faulty variant named.
    public init(name: String, families: [EventFamily] = [], variants: [(name: String, summary: String)] = [],
                projections: @escaping @Sendable (_ variant: String?) throws -> Projections) {
        self.name = name
        self.families = families
        self.variants = variants
        ownCode = projections
    }

    /// The code for the app's whole log: its own (or the faulty variant named) and every
    /// family's.
    /// - Throws: What the app's own code throws for the variant.
    public func projections(_ variant: String?) throws -> Projections {
        var code = try ownCode(variant)
        for family in families { family.code(&code) }
        return code
    }

    /// The read models of every family over `store`.
    /// - Throws: What a family throws opening its read models.
    public func readModels(for store: EventStore) throws -> [any ReadModel] {
        try families.flatMap { try $0.readModels(store) }
    }

    /// The first way a read model of `store` disagrees with `state` (the newest state when
    /// `nil`), as `NAME does not match the log: WHY`, or `nil` when every one agrees.
    func readModelProblem(in store: EventStore, against state: StateValue? = nil) throws -> String? {
        for readModel in try readModels(for: store) {
            if let problem = try readModel.problem(against: state) { return "\(readModel.name) does not match the log: \(problem)" }
        }
        return nil
    }

    /// Every family's knobs, for `replay --what-if`.
    var knobs: [RuleKnob] { families.flatMap(\.knobs) }

    /// The `--regression` option, when the app has variants.
    var variantOption: CommandSpec.Option? {
        variants.isEmpty ? nil : .regression(variants)
    }
}
