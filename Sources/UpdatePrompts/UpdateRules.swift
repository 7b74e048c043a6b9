import EventLog

/// How an app asks for updates. Every field is recorded with each decision, so that replay
/// decides again exactly as the app did.
public struct PromptPolicy: Sendable, Hashable {
    /// Forced: one button, "Update", and the prompt comes back after it is tapped.
    /// Optional: "Update", "Not now" and "Skip this version".
    public var forced = false
    /// After this many "Not now" answers an optional prompt is no longer shown (the seed's 5).
    public var maxDeclines = 5
    /// The device's OS version: a release whose `minimumOsVersion` is above it is not offered.
    /// `nil`: not checked.
    public var osVersion: AppVersion?
    /// An optional prompt is shown at most once per this many days; `nil`: no limit.
    public var promptIntervalDays: Int?

    /// A policy; the defaults are the seed's (optional, five declines, no OS check, no
    /// interval).
    public init(forced: Bool = false, maxDeclines: Int = 5, osVersion: AppVersion? = nil, promptIntervalDays: Int? = nil) {
        self.forced = forced
        self.maxDeclines = maxDeclines
        self.osVersion = osVersion
        self.promptIntervalDays = promptIntervalDays
    }
}

/// What the app decided after a lookup, written to `updates.lastDecision`.
public enum PromptDecision: String, Sendable, CaseIterable {
    /// Store newer: the optional prompt is on screen.
    case promptShown
    /// Store newer: the forced prompt is on screen.
    case forcedPromptShown
    /// Same version: no prompt. (Whatever the decision, the decline count starts over when the
    /// installed version is not the one it was counted for.)
    case upToDate
    /// The store's version is older than the installed one: no prompt.
    case storeOlder
    /// Store newer, but "Not now" was answered `maxDeclines` times: no optional prompt.
    case declineCapReached
    /// Store newer, but the person chose to skip exactly this version.
    case versionSkipped
    /// Store newer, but an optional prompt was shown less than `promptIntervalDays` ago.
    case tooSoon
    /// The release needs a newer OS than the device's: not offered.
    case osTooOld
}

/// A person's answer to the prompt on screen; the raw value is its event type, and what
/// `updates.lastDecision` says afterwards (but for a forced "Update", after which the prompt
/// comes back and it says `forcedPromptShown`).
public enum PromptAnswer: String, Sendable, CaseIterable {
    /// "Update": the store page opens.
    case update = "updateTapped"
    /// "Not now": the decline count goes up by one.
    case later = "declined"
    /// "Skip this version": no optional prompt for this store version again.
    case skip = "skippedVersion"
}

/// The pure rules of the `updates` stream: what each event writes, given the state before it.
/// The prompter records with them and replay recomputes with them; they never touch the
/// network, a file or a clock (the time is the event's).
///
/// State, under `updates`: `installedVersion`, `storeVersion`, `releaseNotes`, `trackViewUrl`,
/// `minimumOsVersion`, `lastCheck` (the lookup's time), `lastLookupError`, `declineCount` and
/// `declineCountVersion` (the installed version the count belongs to), `skippedVersion`,
/// `lastPromptAt`, and `lastDecision` (a `PromptDecision` or a `PromptAnswer`).
public enum UpdateRules: EventRules {
    /// The stream of update-prompt events, and the key of their state.
    public static let stream = "updates"

    /// The event types.
    public enum EventType: String, Sendable, CaseIterable {
        /// A lookup answered: the installed and store versions, with the release's details.
        case storeVersionFound
        /// A lookup failed (down, timed out, HTTP error, bad answer): the reason, nothing else.
        case lookupFailed
        /// The decision after a lookup, with the policy it was made under.
        case promptDecided
        /// The person's answers, as `PromptAnswer`'s raw values name them.
        case updateTapped, declined, skippedVersion
    }

    /// The writes of `event` on `state` at `time`, or the reason it cannot happen there (an
    /// answer with no prompt on screen, a payload that is not this stream's).
    public static func writes(for event: Event, in state: StateValue, at time: Timestamp) -> Result<[Write], RuleError> {
        guard let type = EventType(rawValue: event.type) else { return .failure(RuleError("unknown event type \"\(event.type)\"")) }
        var changes = StateChanges(state, under: StatePath([.key(stream)]))
        let payload = event.payload
        let fields = payload.objectValue ?? StateObject()
        switch type {
        case .storeVersionFound:
            guard let installed = fields["installedVersion"]?.stringValue, let store = fields["storeVersion"]?.stringValue else {
                return .failure(RuleError("the payload needs installedVersion and storeVersion"))
            }
            changes["installedVersion"] = .string(installed)
            changes["storeVersion"] = .string(store)
            for key in ["releaseNotes", "trackViewUrl", "minimumOsVersion"] { changes[key] = fields[key].flatMap { $0 == .null ? nil : $0 } }
            changes["lastCheck"] = .string(time.description)
            changes["lastLookupError"] = nil
        case .lookupFailed:
            guard let reason = fields["reason"]?.stringValue else { return .failure(RuleError("the payload needs a reason")) }
            changes["lastCheck"] = .string(time.description)
            changes["lastLookupError"] = .string(reason)
        case .promptDecided:
            guard let policy = PromptPolicy(payload: payload) else { return .failure(RuleError("the payload is not a prompt policy")) }
            guard let decision = decide(&changes, policy, at: time) else { return .failure(RuleError("no lookup has found the store's version")) }
            changes["lastDecision"] = .string(decision.rawValue)
        case .updateTapped, .declined, .skippedVersion:
            let answer = PromptAnswer(rawValue: type.rawValue)!
            if let refusal = refusal(of: answer, in: changes.state) { return .failure(RuleError(refusal)) }
            switch answer {
            case .update where changes["lastDecision"]?.stringValue == PromptDecision.forcedPromptShown.rawValue:
                changes["lastPromptAt"] = .string(time.description) // the forced prompt comes back at once
            case .update:
                changes["lastDecision"] = .string(answer.rawValue)
            case .later:
                changes["declineCount"] = .int((changes["declineCount"]?.intValue ?? 0).addingReportingOverflow(1).partialValue)
                changes["declineCountVersion"] = changes["installedVersion"]
                changes["lastDecision"] = .string(answer.rawValue)
            case .skip:
                changes["skippedVersion"] = changes["storeVersion"]
                changes["lastDecision"] = .string(answer.rawValue)
            }
        }
        if let failure = changes.failure { return .failure(RuleError("\(failure)")) }
        return .success(changes.writes)
    }

    /// Why `answer` cannot be given in `state`, or `nil` when it can: there must be a prompt
    /// on screen, and a forced one only takes "Update".
    public static func refusal(of answer: PromptAnswer, in state: StateValue) -> String? {
        switch state[path("lastDecision")]?.stringValue {
        case PromptDecision.promptShown.rawValue: nil
        case PromptDecision.forcedPromptShown.rawValue:
            answer == .update ? nil : "the forced prompt has only \"Update\""
        default: "no update prompt is on screen"
        }
    }

    /// Decides after a lookup, writing the decline-count reset and the prompt time into `changes`.
    private static func decide(_ changes: inout StateChanges, _ policy: PromptPolicy, at time: Timestamp) -> PromptDecision? {
        guard let installedText = changes["installedVersion"]?.stringValue, let installed = AppVersion(installedText),
              let storeText = changes["storeVersion"]?.stringValue, let store = AppVersion(storeText) else { return nil }
        // The count belongs to one installed version: another one starts it over (the seed's
        // clearPlistChannelCount, there only when the versions are equal).
        if let countVersion = changes["declineCountVersion"]?.stringValue, AppVersion(countVersion) != installed {
            changes["declineCount"] = .int(0)
            changes["declineCountVersion"] = .string(installedText)
        }
        if store < installed { return .storeOlder }
        if store == installed { return .upToDate }
        if let osVersion = policy.osVersion, let minimum = changes["minimumOsVersion"]?.stringValue.flatMap(AppVersion.init), minimum > osVersion {
            return .osTooOld
        }
        if !policy.forced {
            if let skipped = changes["skippedVersion"]?.stringValue.flatMap(AppVersion.init), skipped == store { return .versionSkipped }
            if changes["declineCount"]?.intValue ?? 0 >= Int64(policy.maxDeclines) { return .declineCapReached }
            if let days = policy.promptIntervalDays, let last = changes["lastPromptAt"]?.stringValue.flatMap(Timestamp.init(rfc3339:)) {
                // Overflow-safe: a recorded policy may hold any number of days.
                let (interval, tooLong) = Int64(days).multipliedReportingOverflow(by: 86_400_000_000)
                let (elapsed, backwards) = time.microsecondsSince1970.subtractingReportingOverflow(last.microsecondsSince1970)
                if tooLong || backwards || elapsed < interval { return .tooSoon }
            }
        }
        changes["lastPromptAt"] = .string(time.description)
        return policy.forced ? .forcedPromptShown : .promptShown
    }

    /// The path of a key of the `updates` state.
    public static func path(_ key: String) -> StatePath { StatePath([.key(stream), .key(key)]) }
}

extension PromptPolicy {
    /// As recorded in a `promptDecided` event.
    public var payload: StateValue {
        var object: StateObject = ["forced": .bool(forced), "maxDeclines": .int(Int64(maxDeclines))]
        if let osVersion { object["osVersion"] = .string(osVersion.text) }
        if let promptIntervalDays { object["promptIntervalDays"] = .int(Int64(promptIntervalDays)) }
        return .object(object)
    }

    /// Reads a recorded policy; `nil` when it is not one.
    public init?(payload: StateValue) {
        let fields = payload.objectValue ?? StateObject()
        guard let forced = fields["forced"]?.boolValue, let maxDeclines = fields["maxDeclines"]?.intValue,
              let declines = Int(exactly: maxDeclines) else { return nil }
        self.init(forced: forced, maxDeclines: declines)
        if let text = fields["osVersion"] {
            guard let version = text.stringValue.flatMap(AppVersion.init) else { return nil }
            osVersion = version
        }
        if let days = fields["promptIntervalDays"] {
            guard let value = days.intValue.flatMap({ Int(exactly: $0) }) else { return nil }
            promptIntervalDays = value
        }
    }
}
