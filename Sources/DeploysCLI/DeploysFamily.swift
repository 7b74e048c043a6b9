import Deploys
import EventLog
import EventLogCLI

extension EventFamily {
    /// Web bundles over Expo Updates v1: the `deploy` stream of an install and the
    /// `deployGate` stream of rollout gates, each recomputed by its rules on replay, and the
    /// `deploy` command.
    public static let deploys = EventFamily(name: "deploys", commands: DeployCommands.all) { code in
        code.recompute(by: DeployRules.self)
        code.recompute(by: GateRules.self)
    }
}
