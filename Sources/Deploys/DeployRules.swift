import EventLog

/// The pure rules of the `deploy` stream: what each transition writes, from its payload and
/// the state before it. The client records with them and replay recomputes with them; they
/// never touch the file system or the network.
///
/// State, under `deploy`: `phase`, `workingUpdate` (absent: the embedded bundle),
/// `holdingUpdate`, `availableUpdate`, `pendingUpdate` (installed, awaiting the app's
/// confirmation of a good launch), `progress` (percent of the download), `lastCheck`, `lastError`,
/// `serverDefinedHeaders` and `manifestFilters` (as the last response that carried them said),
/// and `rejectedUpdates.ID` (the reason), for updates rolled back after a launch the app never
/// confirmed: the client does not install those again, unless its rollback retry allows it once
/// `rejections.ID` (`times` rejected, last `at`) says the delay has passed. Since reaping:
/// `madeUpdates.ID` for each update directory this client's downloads made and has not reaped,
/// `previousUpdate` (the working update before the newest install) and `reaping` (the updates
/// a reap is removing, with why, until it is finished).
public enum DeployRules: EventRules {
    /// The stream of deploy events, and the key of their state.
    public static let stream = "deploy"

    /// Every transition of the lifecycle.
    public enum Transition: String, Sendable, CaseIterable {
        case checkStarted, newDeployAvailable, noNewDeploy, checkFailed
        /// The client trusts certificates and the manifest or directive's `expo-signature` is
        /// missing, malformed, by an unknown key id or an invalid certificate, or does not
        /// verify: nothing of the answer is used.
        case signatureInvalid
        /// A manifest response carried `expo-server-defined-headers` or `expo-manifest-filters`:
        /// kept until a later response replaces them.
        case responseHeadersStored
        /// At most one per 5% of a download (`DeployClient.progressStep`).
        case downloadProgress
        /// The update is complete on disk and goes into holding; since asset reuse, the payload
        /// also counts the assets and bytes linked from updates on disk (`reusedAssets`,
        /// `reusedBytes`) and fetched (`downloadedAssets`, `downloadedBytes`); older payloads
        /// without them replay as they did.
        case downloaded
        case downloadFailed, integrityFailed
        case willUpdateWorkingDirectory, didUpdateWorkingDirectory, failedToUpdateWorkingDirectory
        /// A start found an install cut short by a crash and finished it or undid it (`result`).
        case installRecovered
        case didReloadWebView, rolledBack, launchConfirmed
        /// The app confirmed a launch later than the client's ready timeout allows (Capgo's
        /// `appReadyTimeout`): the launch counts as failed, and the next start rolls it back.
        case launchConfirmedTooLate
        /// The client removes update directories it made and no longer needs (`updates`: each
        /// id with why: `superseded`, `rejected` or `otherRuntimeVersion`); recorded before
        /// anything is removed.
        case updatesReaped
        /// The removal `updatesReaped` named is done (`removedFiles`, by the call that finished
        /// it; `left`: what stays of each update, with the first reason).
        case reapFinished

        /// The transitions that record a refused or failed step.
        public static let failures: Set<Transition> = [.checkFailed, .signatureInvalid, .downloadFailed, .integrityFailed, .failedToUpdateWorkingDirectory,
                                                       .launchConfirmedTooLate]
    }

    /// The values of `deploy.phase`.
    public enum Phase: String, Sendable, CaseIterable {
        case checking, updateAvailable, upToDate, checkFailed, signatureInvalid, downloading, downloaded, downloadFailed, integrityFailed,
             installing, installed, installFailed, launched, confirmed, rolledBack
    }

    /// The writes of `event` on `state` at `time`, or why it cannot be one of this stream's.
    public static func writes(for event: Event, in state: StateValue, at time: Timestamp) -> Result<[Write], RuleError> {
        guard let transition = Transition(rawValue: event.type) else { return .failure(RuleError("unknown transition \"\(event.type)\"")) }
        let fields = event.payload.objectValue ?? StateObject()
        func text(_ key: String) -> StateValue? { fields[key].flatMap { $0.stringValue == nil ? nil : $0 } }
        var changes = StateChanges(state, under: StatePath([.key(stream)]))
        let update = text("updateId")
        switch transition {
        case .checkStarted:
            changes["phase"] = phaseValue(.checking)
            changes["lastCheck"] = .string(time.description)
        case .newDeployAvailable:
            guard let update else { return .failure(RuleError("newDeployAvailable needs an updateId")) }
            changes["phase"] = phaseValue(.updateAvailable)
            changes["availableUpdate"] = update
            changes["lastError"] = nil
        case .responseHeadersStored:
            for key in ["serverDefinedHeaders", "manifestFilters"] {
                guard let field = fields[key] else { continue }
                guard let headers = field.objectValue, headers.allSatisfy({ $0.value.stringValue != nil }) else {
                    return .failure(RuleError("responseHeadersStored's \(key) is an object of strings"))
                }
                changes[key] = field
            }
        case .noNewDeploy:
            changes["phase"] = phaseValue(.upToDate)
            changes["availableUpdate"] = nil
            changes["lastError"] = nil
        case .checkFailed, .signatureInvalid, .downloadFailed, .integrityFailed, .failedToUpdateWorkingDirectory:
            guard let reason = text("reason") else { return .failure(RuleError("\(transition.rawValue) needs a reason")) }
            let phase: Phase = switch transition {
            case .checkFailed: .checkFailed
            case .signatureInvalid: .signatureInvalid
            case .downloadFailed: .downloadFailed
            case .integrityFailed: .integrityFailed
            default: .installFailed
            }
            changes["phase"] = phaseValue(phase)
            changes["lastError"] = reason
            if transition == .downloadFailed || transition == .integrityFailed { changes["progress"] = nil }
        case .downloadProgress:
            guard let percent = fields["percent"]?.intValue, (0...100).contains(percent) else {
                return .failure(RuleError("downloadProgress needs a percent from 0 to 100"))
            }
            changes["phase"] = phaseValue(.downloading)
            changes["progress"] = .int(percent)
        case .downloaded:
            guard let update else { return .failure(RuleError("downloaded needs an updateId")) }
            for key in ["reusedAssets", "reusedBytes", "downloadedAssets", "downloadedBytes"] {
                if let field = fields[key], (field.intValue ?? -1) < 0 { return .failure(RuleError("downloaded's \(key) is a count, not \(field)")) }
            }
            if fields["madeUpdateDirectory"]?.boolValue == true, let id = update.stringValue {
                changes.set(true, at: StatePath([.key(stream), .key("madeUpdates"), .key(id)]))
            }
            changes["phase"] = phaseValue(.downloaded)
            changes["holdingUpdate"] = update
            changes["progress"] = .int(100)
            changes["lastError"] = nil
        case .willUpdateWorkingDirectory:
            changes["phase"] = phaseValue(.installing)
        case .didUpdateWorkingDirectory:
            guard let update else { return .failure(RuleError("didUpdateWorkingDirectory needs an updateId")) }
            if let failure = installed(update, previous: fields["previousUpdate"], &changes) { return .failure(failure) }
        case .installRecovered:
            guard let update, let result = fields["result"]?.stringValue else { return .failure(RuleError("installRecovered needs an updateId and a result")) }
            switch result {
            case "finished": if let failure = installed(update, previous: fields["previousUpdate"], &changes) { return .failure(failure) }
            case "undone": changes["phase"] = phaseValue(.downloaded)
            default: return .failure(RuleError("installRecovered's result is finished or undone, not \"\(result)\""))
            }
        case .didReloadWebView:
            changes["phase"] = phaseValue(.launched)
        case .rolledBack:
            guard let reason = text("reason") else { return .failure(RuleError("rolledBack needs a reason")) }
            changes["phase"] = phaseValue(.rolledBack)
            changes["workingUpdate"] = text("to")
            changes["pendingUpdate"] = nil
            changes["lastError"] = reason
            if fields["rejectsUpdate"]?.boolValue == true, let from = fields["from"]?.stringValue {
                changes.set(reason, at: StatePath([.key(stream), .key("rejectedUpdates"), .key(from)]))
                // Since rollback retries: how many times it was rejected, and when last (older
                // payloads without `rejection` replay as they did).
                if let rejection = fields["rejection"] {
                    guard let times = rejection.intValue, times > 0 else { return .failure(RuleError("rolledBack's rejection is a count from 1, not \(rejection)")) }
                    changes.set(["times": .int(times), "at": .string(time.description)], at: StatePath([.key(stream), .key("rejections"), .key(from)]))
                }
            }
        case .launchConfirmed:
            changes["phase"] = phaseValue(.confirmed)
            changes["pendingUpdate"] = nil
        case .launchConfirmedTooLate:
            guard let reason = text("reason") else { return .failure(RuleError("launchConfirmedTooLate needs a reason")) }
            changes["lastError"] = reason
        case .updatesReaped:
            guard let updates = fields["updates"]?.objectValue, !updates.isEmpty, updates.allSatisfy({ $0.value.stringValue != nil }) else {
                return .failure(RuleError("updatesReaped needs updates, each id with why"))
            }
            changes["reaping"] = .object(updates)
            for (id, _) in updates { changes.set(nil, at: StatePath([.key(stream), .key("madeUpdates"), .key(id)])) }
        case .reapFinished:
            changes["reaping"] = nil
        }
        if let failure = changes.failure { return .failure(RuleError("\(failure)")) }
        return .success(changes.writes)
    }

    private static func phaseValue(_ phase: Phase) -> StateValue { .string(phase.rawValue) }

    /// `update` is now in the working directory, awaiting the app's confirmation; `previous`,
    /// when the payload has it (since reaping), is the working update it replaced (`null`: the
    /// embedded bundle). Returns why `previous` cannot be one.
    private static func installed(_ update: StateValue, previous: StateValue?, _ changes: inout StateChanges) -> RuleError? {
        if let previous {
            guard previous == .null || previous.stringValue != nil else { return RuleError("previousUpdate is an update id or null, not \(previous)") }
            changes["previousUpdate"] = previous == .null ? nil : previous
        }
        changes["phase"] = phaseValue(.installed)
        changes["workingUpdate"] = update
        changes["holdingUpdate"] = nil
        changes["pendingUpdate"] = update
        changes["availableUpdate"] = nil
        return nil
    }

    /// The path of a key of the `deploy` state.
    public static func path(_ key: String) -> StatePath { StatePath([.key(stream), .key(key)]) }
}
