import EventLog

extension Origin {
    /// A lookup and the decision after it, made by the app on its own schedule.
    public static let updateCheck: Origin = "update-check"
    /// A person's answer to the update prompt.
    public static let prompt: Origin = "prompt"
}

/// The App Store version check of one app install: it looks the store's version up, decides
/// whether to prompt, and takes the person's answer, recording every step and decision as an
/// event of the `updates` stream through `UpdateRules`.
public final class UpdatePrompter: Sendable {
    /// The log the `updates` events are recorded in.
    public let store: EventStore
    /// The installed version (`CFBundleShortVersionString`).
    public let installedVersion: AppVersion
    /// How the app asks; recorded with every decision.
    public let policy: PromptPolicy

    /// A prompter for the install running `installedVersion`; nothing is recorded until a
    /// check.
    public init(store: EventStore, installedVersion: AppVersion, policy: PromptPolicy = PromptPolicy()) {
        self.store = store
        self.installedVersion = installedVersion
        self.policy = policy
    }

    /// What a check recorded.
    public struct Check: Sendable {
        /// The lookup's event and, when the lookup answered, the decision's.
        public var records: [EventRecord]
        /// The decision; `nil` when the lookup failed (and nothing else happened).
        public var decision: PromptDecision?
        /// Why the lookup failed, when it did.
        public var failure: StoreLookupError?
    }

    /// Looks the store's version up and decides, in one transaction. The lookup runs
    /// before the transaction; a failed one is recorded (`lookupFailed`), not thrown.
    /// - Throws: The errors of `check(_:source:)`.
    public func check(_ lookup: StoreLookup) throws -> Check {
        try check(lookup.fetch(), source: lookup.source.description)
    }

    /// Records a lookup's result (fetched by the caller, or made up by a test or demo) and
    /// the decision after it.
    /// - Parameters:
    ///   - result: The release found, or why the lookup failed.
    ///   - source: Where the answer came from, recorded in the payload and the cause.
    /// - Throws: `EventStoreError` or `LMDBError` when the events cannot be recorded
    ///   (`.readOnly` on a read-only store); `RuleError` when the `updates` state is not
    ///   shaped as the rules write it. Nothing is appended then.
    public func check(_ result: Result<StoreRelease, StoreLookupError>, source: String) throws -> Check {
        try store.transact { batch in
            let time = store.clock.now()
            let cause = Cause(id: "update-check-\(batch.lastSeq + 1)", step: 0, source: source)
            var payload: StateObject = ["installedVersion": .string(installedVersion.text), "source": .string(source)]
            switch result {
            case .failure(let failure):
                payload["reason"] = .string(failure.reason)
                let record = try append(.lookupFailed, .object(payload), cause, time, &batch)
                return Check(records: [record], decision: nil, failure: failure)
            case .success(let release):
                payload["storeVersion"] = .string(release.version.text)
                payload["releaseNotes"] = release.releaseNotes.map(StateValue.string)
                payload["trackViewUrl"] = release.trackViewURL.map(StateValue.string)
                payload["minimumOsVersion"] = release.minimumOSVersion.map { .string($0.text) }
                payload["releaseDate"] = release.releaseDate.map(StateValue.string)
                let found = try append(.storeVersionFound, .object(payload), cause, time, &batch)
                var decisionCause = cause
                decisionCause.step = 1
                var decisionPayload = policy.payload.objectValue ?? StateObject()
                decisionPayload["releaseDate"] = release.releaseDate.map(StateValue.string) // the age rule's input
                let decided = try append(.promptDecided, .object(decisionPayload), decisionCause, time, &batch)
                let decision = batch.state[UpdateRules.path("lastDecision")]?.stringValue.flatMap(PromptDecision.init(rawValue:))
                return Check(records: [found, decided], decision: decision, failure: nil)
            }
        }
    }

    /// Records the person's answer to the prompt on screen.
    /// - Throws: `RuleError` when there is no prompt on screen, or a forced one and the answer
    ///   is not "Update"; `EventStoreError` or `LMDBError` when the event cannot be recorded.
    ///   Nothing is appended then.
    @discardableResult
    public func answer(_ answer: PromptAnswer) throws -> EventRecord {
        try store.transact { batch in
            try append(UpdateRules.EventType(rawValue: answer.rawValue)!, .null, nil, store.clock.now(), &batch, origin: .prompt)
        }
    }

    /// The `updates` state now.
    /// - Throws: The errors of `EventStore.currentState` when the log cannot be read.
    public func state() throws -> StateValue {
        try store.currentState[StatePath([.key(UpdateRules.stream)])] ?? .emptyObject
    }

    private func append(_ type: UpdateRules.EventType, _ payload: StateValue, _ cause: Cause?, _ time: Timestamp,
                        _ batch: inout AppendBatch, origin: Origin = .updateCheck) throws -> EventRecord {
        try UpdateRules.append(Event(stream: UpdateRules.stream, type: type.rawValue, origin: origin, cause: cause, payload: payload),
                               at: time, to: &batch)
    }
}
