import EventLog

/// The kind of an update, by the first numeric component in which the store's version is
/// ahead of the installed one, as Siren's `RulesManager` names them (A.b.c.d).
public enum UpdateKind: String, Sendable, CaseIterable {
    /// The first component differs: `1.9 → 2.0`.
    case major
    /// The second: `1.2 → 1.3`.
    case minor
    /// The third: `1.2.3 → 1.2.4`.
    case patch
    /// A later one, or only the pre-release label: `1.2.3.4 → 1.2.3.5`, `1.2b → 1.2`.
    case revision

    /// The kind of the update from `installed` to `store`, which should be newer.
    public init(from installed: AppVersion, to store: AppVersion) {
        let differing = (0..<3).first { index in
            let a = index < installed.components.count ? installed.components[index] : "0"
            let b = index < store.components.count ? store.components[index] : "0"
            return a != b // components are normalized: equal numbers are equal strings
        }
        self = differing.map { [.major, .minor, .patch][$0] } ?? .revision
    }
}

/// How an update of one kind is offered, as Siren's rules (its `AlertType`) are.
public enum PromptRule: String, Sendable, CaseIterable {
    /// "Update" only, shown again after it is tapped (`forcedPromptShown`).
    case force
    /// "Update" and "Not now" (`promptShownWithoutSkip`).
    case option
    /// "Update", "Not now" and "Skip this version" (`promptShown`): the seed's optional prompt.
    case skip
    /// No prompt (`ruleIsNone`): the decision is recorded, nothing is shown.
    case none

    /// The decision recorded when an update under this rule is offered.
    public var decision: PromptDecision {
        switch self {
        case .force: .forcedPromptShown
        case .option: .promptShownWithoutSkip
        case .skip: .promptShown
        case .none: .ruleIsNone
        }
    }
}

/// The rule for each kind of update.
public struct PromptRules: Sendable, Hashable {
    /// The rule for a major update (A.b.c.d).
    public var major: PromptRule
    /// The rule for a minor update (a.B.c.d).
    public var minor: PromptRule
    /// The rule for a patch update (a.b.C.d).
    public var patch: PromptRule
    /// The rule for a revision (a.b.c.D, or a label only).
    public var revision: PromptRule

    /// Rules for each kind; a kind not given is `skip`, the seed's optional prompt.
    public init(major: PromptRule = .skip, minor: PromptRule = .skip, patch: PromptRule = .skip, revision: PromptRule = .skip) {
        self.major = major
        self.minor = minor
        self.patch = patch
        self.revision = revision
    }

    /// The same rule for every kind.
    public init(every rule: PromptRule) { self.init(major: rule, minor: rule, patch: rule, revision: rule) }

    /// Every kind `skip`: the prompt of the seed, and of every log recorded before rules were.
    public static let optional = PromptRules(every: .skip)
    /// Every kind `force`: `--forced`.
    public static let forced = PromptRules(every: .force)

    /// The rule for `kind`.
    public subscript(kind: UpdateKind) -> PromptRule {
        get {
            switch kind {
            case .major: major
            case .minor: minor
            case .patch: patch
            case .revision: revision
            }
        }
        set {
            switch kind {
            case .major: major = newValue
            case .minor: minor = newValue
            case .patch: patch = newValue
            case .revision: revision = newValue
            }
        }
    }
}

/// How an app asks for updates. Every field is recorded with each decision, so that replay
/// decides again exactly as the app did.
public struct PromptPolicy: Sendable, Hashable {
    /// How each kind of update is offered.
    public var rules = PromptRules.optional
    /// After this many "Not now" answers a prompt that offers it is no longer shown (the seed's 5).
    public var maxDeclines = 5
    /// The device's OS version: a release whose `minimumOsVersion` is above it is not offered.
    /// `nil`: not checked.
    public var osVersion: AppVersion?
    /// A prompt that is not forced is shown at most once per this many days; `nil`: no limit.
    public var promptIntervalDays: Int?
    /// No prompt until the store's release (`currentVersionReleaseDate`) is this many days old:
    /// the store's lookup answers before every store serves the binary (Siren's
    /// `releasedForDays`, 1 by default). 0: not checked.
    public var releaseAgeDays = 1

    /// A policy; the defaults are the seed's (optional prompts with "Skip this version", five
    /// declines, no OS check, no interval) and Siren's one day of release age.
    public init(rules: PromptRules = .optional, maxDeclines: Int = 5, osVersion: AppVersion? = nil,
                promptIntervalDays: Int? = nil, releaseAgeDays: Int = 1) {
        self.rules = rules
        self.maxDeclines = maxDeclines
        self.osVersion = osVersion
        self.promptIntervalDays = promptIntervalDays
        self.releaseAgeDays = releaseAgeDays
    }
}

/// What the app decided after a lookup, written to `updates.lastDecision`.
public enum PromptDecision: String, Sendable, CaseIterable {
    /// Store newer, rule `skip`: the prompt with "Update", "Not now" and "Skip this version"
    /// is on screen.
    case promptShown
    /// Store newer, rule `option`: the prompt with "Update" and "Not now" is on screen.
    case promptShownWithoutSkip
    /// Store newer, rule `force`: the forced prompt is on screen.
    case forcedPromptShown
    /// Store newer, but the rule for its kind of update is `none`: no prompt.
    case ruleIsNone
    /// Store newer, but its release is younger than `releaseAgeDays`: no prompt yet.
    case releaseTooNew
    /// Store newer, `releaseAgeDays` is set, and the lookup gave no release date: no prompt.
    case releaseDateUnknown
    /// Same version: no prompt. (Whatever the decision, the decline count starts over when the
    /// installed version is not the one it was counted for.)
    case upToDate
    /// The store's version is older than the installed one: no prompt.
    case storeOlder
    /// Store newer, but "Not now" was answered `maxDeclines` times: no prompt but a forced one.
    case declineCapReached
    /// Store newer, but the person chose to skip exactly this version.
    case versionSkipped
    /// Store newer, but a prompt that is not forced was shown less than `promptIntervalDays` ago.
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
        /// The decision after a lookup, with the policy it was made under and the release's date.
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
            let releaseDate = fields["releaseDate"]?.stringValue.flatMap(Timestamp.init(rfc3339:))
            guard let decision = decide(&changes, policy, releasedAt: releaseDate, at: time) else { return .failure(RuleError("no lookup has found the store's version")) }
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
    /// on screen, a forced one only takes "Update", and one shown under `option` has no
    /// "Skip this version".
    public static func refusal(of answer: PromptAnswer, in state: StateValue) -> String? {
        switch state[path("lastDecision")]?.stringValue {
        case PromptDecision.promptShown.rawValue: nil
        case PromptDecision.promptShownWithoutSkip.rawValue:
            answer == .skip ? "the prompt has no \"Skip this version\"" : nil
        case PromptDecision.forcedPromptShown.rawValue:
            answer == .update ? nil : "the forced prompt has only \"Update\""
        default: "no update prompt is on screen"
        }
    }

    /// Decides after a lookup of a release made on `releaseDate` (when the lookup said),
    /// writing the decline-count reset and the prompt time into `changes`.
    private static func decide(_ changes: inout StateChanges, _ policy: PromptPolicy, releasedAt releaseDate: Timestamp?,
                               at time: Timestamp) -> PromptDecision? {
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
        let rule = policy.rules[UpdateKind(from: installed, to: store)]
        if rule == .none { return rule.decision }
        if policy.releaseAgeDays > 0 {
            guard let releaseDate else { return .releaseDateUnknown }
            if fewerThan(days: policy.releaseAgeDays, from: releaseDate, to: time) { return .releaseTooNew }
        }
        if rule != .force {
            if let skipped = changes["skippedVersion"]?.stringValue.flatMap(AppVersion.init), skipped == store { return .versionSkipped }
            if changes["declineCount"]?.intValue ?? 0 >= Int64(policy.maxDeclines) { return .declineCapReached }
            if let days = policy.promptIntervalDays, let last = changes["lastPromptAt"]?.stringValue.flatMap(Timestamp.init(rfc3339:)),
               fewerThan(days: days, from: last, to: time) {
                return .tooSoon
            }
        }
        changes["lastPromptAt"] = .string(time.description)
        return rule.decision
    }

    /// Whether fewer than `days` whole days have passed from `start` to `end`; true when `end`
    /// is before `start`. Overflow-safe: a recorded policy may hold any number of days.
    private static func fewerThan(days: Int, from start: Timestamp, to end: Timestamp) -> Bool {
        let (interval, tooLong) = Int64(days).multipliedReportingOverflow(by: 86_400_000_000)
        let (elapsed, backwards) = end.microsecondsSince1970.subtractingReportingOverflow(start.microsecondsSince1970)
        return tooLong || backwards || elapsed < interval
    }

    /// The path of a key of the `updates` state.
    public static func path(_ key: String) -> StatePath { StatePath([.key(stream), .key(key)]) }
}

extension PromptPolicy {
    /// As recorded in a `promptDecided` event (which adds the release's `releaseDate`).
    public var payload: StateValue {
        var ruleFields = StateObject()
        for kind in UpdateKind.allCases { ruleFields[kind.rawValue] = .string(rules[kind].rawValue) }
        var object: StateObject = ["rules": .object(ruleFields),
                                   "maxDeclines": .int(Int64(maxDeclines)), "releaseAgeDays": .int(Int64(releaseAgeDays))]
        if let osVersion { object["osVersion"] = .string(osVersion.text) }
        if let promptIntervalDays { object["promptIntervalDays"] = .int(Int64(promptIntervalDays)) }
        return .object(object)
    }

    /// Reads a recorded policy; `nil` when it is not one. A policy recorded before rules and
    /// release age were has `forced` instead of `rules` (every kind `force` or `skip`) and no
    /// `releaseAgeDays` (0: it was not checked), and decides again as it did then.
    public init?(payload: StateValue) {
        let fields = payload.objectValue ?? StateObject()
        guard let maxDeclines = fields["maxDeclines"]?.intValue, let declines = Int(exactly: maxDeclines) else { return nil }
        self.init(maxDeclines: declines, releaseAgeDays: 0)
        if let recorded = fields["rules"] {
            guard let ruleFields = recorded.objectValue else { return nil }
            for kind in UpdateKind.allCases {
                guard let rule = ruleFields[kind.rawValue]?.stringValue.flatMap(PromptRule.init(rawValue:)) else { return nil }
                rules[kind] = rule
            }
        } else {
            guard let forced = fields["forced"]?.boolValue else { return nil }
            rules = forced ? .forced : .optional
        }
        if let text = fields["osVersion"] {
            guard let version = text.stringValue.flatMap(AppVersion.init) else { return nil }
            osVersion = version
        }
        if let days = fields["promptIntervalDays"] {
            guard let value = days.intValue.flatMap({ Int(exactly: $0) }) else { return nil }
            promptIntervalDays = value
        }
        if let days = fields["releaseAgeDays"] {
            guard let value = days.intValue.flatMap({ Int(exactly: $0) }), value >= 0 else { return nil }
            releaseAgeDays = value
        }
    }
}
