import DeploysCLI
import DemoMessenger
import Effects
import EventLog
import EventLogCLI
import FleetCLI
import ObjectsCLI
import UpdatePromptsCLI

extension EventLogApp {
    /// The botmessages demo, the shipped `eventlog`: its effects and navigation recomputed by
    /// `MessengerModel`, plan starts and the initial state taken as recorded; the four
    /// families of objects, update prompts, deploys and the fleet; and its commands `open`,
    /// `routes`, `capture`, `testgen` and `demo`.
    public static let demo: EventLogApp = {
        var app = EventLogApp(name: "eventlog", families: [.objects, .updatePrompts, .deploys, .fleet],
                              variants: Regression.allCases.map { ($0.rawValue, $0.summary) }) { variant in
            demoProjections(MessengerModel(regression: variant.flatMap(Regression.init(rawValue:))))
        }
        app.commands = MessengerCommands.all
        return app
    }()

    /// The demo's own code for `model`: today's, or a faulty variant, with the upcasters that
    /// read release 1's events.
    static func demoProjections(_ model: MessengerModel) -> Projections {
        var code = Projections()
        code.recompute([model.stream, EffectEngine<MessengerModel>.navigationStream], with: EffectProjection(model: model))
        code.takeAsRecorded([EffectEngine<MessengerModel>.planStream, EffectEngine<MessengerModel>.initialStateStream])
        model.upcast(into: &code)
        return code
    }
}
