import Deploys
import EventLog
import EventLogCLI

extension EventFamily {
    /// Web bundles over Expo Updates v1: the `deploy` stream, recomputed by its rules on
    /// replay, and the `deploy` command.
    public static let deploys = EventFamily(name: "deploys", commands: DeployCommands.all) { code in
        code.recompute(by: DeployRules.self)
    }
}
