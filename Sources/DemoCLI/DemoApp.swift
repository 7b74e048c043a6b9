import DemoMessenger
import Deploys
import Effects
import EventLog
import EventLogCLI
import Objects
import UpdatePrompts

extension EventLogApp {
    /// The botmessages demo, the shipped `eventlog`: its effects and navigation recomputed by
    /// `MessengerModel`, update checks by `UpdateRules`, deploys by `DeployRules`; plan starts,
    /// the initial state and object saves taken as recorded; and its commands `open`, `routes`,
    /// `capture`, `testgen` and `demo`.
    public static let demo: EventLogApp = {
        var app = EventLogApp(name: "eventlog", variants: Regression.allCases.map { ($0.rawValue, $0.summary) }) { variant in
            demoProjections(MessengerModel(regression: variant.flatMap(Regression.init(rawValue:))))
        }
        app.commands = MessengerCommands.all
        return app
    }()

    /// The demo's code for `model`: today's, or a faulty variant.
    static func demoProjections(_ model: MessengerModel) -> Projections {
        var code = Projections()
        code.recompute([model.stream, EffectEngine<MessengerModel>.navigationStream], with: EffectProjection(model: model))
        code.recompute([UpdateRules.stream], with: UpdatesProjection())
        code.recompute([DeployRules.stream], with: DeployProjection())
        code.takeAsRecorded([EffectEngine<MessengerModel>.planStream, EffectEngine<MessengerModel>.initialStateStream, ObjectStore.stream])
        return code
    }
}
