import EventLog
import EventLogCLI
import UpdatePrompts

extension EventFamily {
    /// The App Store version check: the `updates` stream, recomputed by its rules on replay,
    /// the knobs of its policy for `replay --what-if`, and the `update-check` command.
    public static let updatePrompts = EventFamily(name: "update prompts", commands: UpdateCommands.all,
                                                  knobs: UpdateRules.knobs, tallies: UpdateRules.tallies) { code in
        code.recompute(by: UpdateRules.self)
    }
}
