import EventLog

extension UpdateRules {
    /// The policy's settings a what-if replay can change. Each rewrites the policy every
    /// `promptDecided` records, so that the recorded lookups are decided again under it; an
    /// answer to a prompt the changed policy no longer shows is then refused (`skipped`).
    /// A policy recorded before rules were (`forced`) is rewritten with them.
    public static let knobs: [RuleKnob] = [
        policyKnob("maxDeclines", "after this many \"Not now\" answers no optional prompt is shown", "a whole number, 0 or more",
                   parse: count) { policy, value, _ in policy.maxDeclines = value },
        policyKnob("promptIntervalDays", "an optional prompt is shown at most once per this many days", "a whole number, or none",
                   parse: { text -> Int?? in
                       if text == "none" { return .some(nil) }
                       return count(text).map { .some($0) }
                   }) { policy, value, _ in policy.promptIntervalDays = value },
        policyKnob("releaseAgeDays", "no prompt until the store's release is this many days old; 0 does not check", "a whole number, 0 or more",
                   parse: count) { policy, value, _ in policy.releaseAgeDays = value },
        policyKnob("forcedBelow", "every update is forced while the installed version is below this one", "a version, such as 3.4",
                   parse: { AppVersion($0) }) { policy, version, state in
            if let installed = state[path("installedVersion")]?.stringValue.flatMap(AppVersion.init), installed < version {
                policy.rules = .forced
            }
        },
    ]

    /// What a change of the policy shows in: prompts shown, the person's answers, and the
    /// answers the changed policy leaves without a prompt.
    public static let tallies: [OutcomeTally] = [
        OutcomeTally(name: "prompts shown") { event in
            event.stream == stream && event.type == EventType.promptDecided.rawValue && event.outcome == .applied
                && event.writes.contains { write in
                    write.path == path("lastDecision")
                        && [PromptDecision.promptShown, .promptShownWithoutSkip, .forcedPromptShown].map { StateValue.string($0.rawValue) }.contains(write.new)
                }
        },
        answered(.later, "declines"),
        answered(.update, "updates tapped"),
        answered(.skip, "versions skipped"),
        OutcomeTally(name: "answers with no prompt") { event in
            event.stream == stream && PromptAnswer(rawValue: event.type) != nil && event.outcome != .applied
        },
    ]

    /// A whole number, 0 or more.
    private static func count(_ text: String) -> Int? {
        Int(text).flatMap { $0 >= 0 ? $0 : nil }
    }

    /// A knob that sets a field of the policy every `promptDecided` records to a value
    /// `parse` reads.
    private static func policyKnob<Value: Sendable>(_ name: String, _ summary: String, _ values: String, parse: @escaping @Sendable (String) -> Value?,
                                                    set: @escaping @Sendable (inout PromptPolicy, Value, StateValue) -> Void) -> RuleKnob {
        RuleKnob(name: name, summary: summary, values: values) { text in
            guard let value = parse(text) else { return nil }
            return RuleKnob.Setting(stream: stream) { event, state in
                guard event.type == EventType.promptDecided.rawValue, var policy = PromptPolicy(payload: event.payload) else { return }
                set(&policy, value, state)
                var payload = event.payload.objectValue ?? StateObject()
                for (key, field) in policy.payload.objectValue ?? StateObject() { payload[key] = field }
                if policy.promptIntervalDays == nil { payload["promptIntervalDays"] = nil }
                event.payload = .object(payload)
            }
        }
    }

    /// The person's `answer`, applied.
    private static func answered(_ answer: PromptAnswer, _ name: String) -> OutcomeTally {
        OutcomeTally(name: name) { event in event.stream == stream && event.type == answer.rawValue && event.outcome == .applied }
    }
}
