import EventLog

/// An app whose logs the commands serve: its code for `replay` and `bisect --replay`, declared
/// once, and commands of its own beside the engine's. The shipped `eventlog` is the demo's
/// (`EventLogApp.demo` in `DemoCLI`); an app builds a command line of its own in a few lines:
///
///     var code = Projections()
///     code.recompute(["counter"], with: CounterProjection())
///     code.takeAsRecorded(["imports"])
///     var app = EventLogApp(name: "counter-log") { _ in code }
///     app.commands = [countCommand]
///     EventLogCLI.main(app: app)
public struct EventLogApp: Sendable {
    /// The program's name, for help and errors.
    public var name: String
    /// Faulty variants of the app's code that `--regression NAME` replays through, with a
    /// line each saying what is wrong: for demonstrating `replay` and `bisect`.
    public var variants: [(name: String, summary: String)]
    /// Today's code, or the faulty variant named (always one of `variants`).
    public var projections: @Sendable (_ variant: String?) throws -> Projections
    /// Commands of the app's own, listed after the log's (the demo's are `open`, `routes`,
    /// `capture`, `testgen` and `demo`). A name the engine uses too is refused when the
    /// command line runs.
    public var commands: [CommandSpec] = []

    /// An app named `name` (for help and errors) whose code is `projections`.
    /// - Parameters:
    ///   - variants: Faulty variants of the code, each with a line saying what is wrong; with
    ///     any, `replay` and `bisect` take `--regression NAME`.
    ///   - projections: Today's code when given `nil`, else the faulty variant named.
    public init(name: String, variants: [(name: String, summary: String)] = [],
                projections: @escaping @Sendable (_ variant: String?) throws -> Projections) {
        self.name = name
        self.variants = variants
        self.projections = projections
    }

    /// The `--regression` option, when the app has variants.
    var variantOption: CommandSpec.Option? {
        variants.isEmpty ? nil : .regression(variants)
    }
}
