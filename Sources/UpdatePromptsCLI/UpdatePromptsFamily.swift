import EventLog
import EventLogCLI
import UpdatePrompts

extension EventFamily {
    /// The App Store version check: the `updates` stream, recomputed by its rules on replay,
    /// and the `update-check` command.
    public static let updatePrompts = EventFamily(name: "update prompts", commands: UpdateCommands.all) { code in
        code.recompute(by: UpdateRules.self)
    }
}
