import DemoMessenger
import Deploys
import Effects
import EventLog
import Objects
import UpdatePrompts

/// An app whose logs the `eventlog` commands serve: its code for `replay` and `bisect
/// --replay`, declared once. The shipped `eventlog` is `EventLogApp.demo`; an app builds a
/// command line of its own, with every command but the demo's, in a few lines:
///
///     var code = Projections()
///     code.recompute(["counter"], with: CounterProjection())
///     code.takeAsRecorded(["imports"])
///     let app = EventLogApp(name: "counter-log") { _ in code }
///     exit(EventLogCLI.run(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment,
///                          console: .standard(), app: app))
public struct EventLogApp: Sendable {
    /// The program's name, for help and errors.
    public var name: String
    /// Faulty variants of the app's code that `--regression NAME` replays through, with a
    /// line each saying what is wrong: for demonstrating `replay` and `bisect`.
    public var variants: [(name: String, summary: String)]
    /// Today's code, or the faulty variant named (always one of `variants`).
    public var projections: @Sendable (_ variant: String?) throws -> Projections
    /// Commands of the app's own (the demo's `open`, `routes`, `capture`, `demo`).
    var commands: [CommandSpec] = []

    public init(name: String, variants: [(name: String, summary: String)] = [],
                projections: @escaping @Sendable (_ variant: String?) throws -> Projections) {
        self.name = name
        self.variants = variants
        self.projections = projections
    }

    /// The botmessages demo: its effects and navigation recomputed by `MessengerModel`, update
    /// checks by `UpdateRules`, deploys by `DeployRules`; plan starts, the initial state and object saves taken as recorded.
    public static let demo: EventLogApp = {
        var app = EventLogApp(name: "eventlog", variants: Regression.allCases.map { ($0.rawValue, $0.summary) }) { variant in
            demoProjections(MessengerModel(regression: variant.flatMap(Regression.init(rawValue:))))
        }
        app.commands = MessengerCommands.all
        return app
    }()

    static func demoProjections(_ model: MessengerModel) -> Projections {
        var code = Projections()
        code.recompute([model.stream, EffectEngine<MessengerModel>.navigationStream], with: EffectProjection(model: model))
        code.recompute([UpdateRules.stream], with: UpdatesProjection())
        code.recompute([DeployRules.stream], with: DeployProjection())
        code.takeAsRecorded([EffectEngine<MessengerModel>.planStream, EffectEngine<MessengerModel>.initialStateStream, ObjectStore.stream])
        return code
    }

    /// The `--regression` option, when the app has variants.
    var variantOption: CommandSpec.Option? {
        variants.isEmpty ? nil : .regression(variants)
    }
}
