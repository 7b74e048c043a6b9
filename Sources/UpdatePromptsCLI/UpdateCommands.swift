import EventLog
import EventLogCLI
import Foundation
import HTTPFetch
import UpdatePrompts

/// `eventlog update-check`: the App Store version check and the person's answer.
enum UpdateCommands {
    static let all: [CommandSpec] = [updateCheck]

    static let updateCheck = CommandSpec(
        name: "update-check",
        summary: "Check the store's version, decide whether to prompt, and record the answer; every step is an event.",
        discussion: """
            With --lookup, looks the store's version up (an iTunes Search API lookup URL, such as
            https://itunes.apple.com/lookup?id=888237539, or a file holding a response) and records the
            result and the decision in the "updates" stream:
              store newer   by the --rules for its kind of update (major 2.0, minor 1.3, patch 1.2.4, revision
                            1.2.3.4): forcedPromptShown (force), promptShownWithoutSkip (option), promptShown
                            (skip) or ruleIsNone (none). No prompt while the store's release is younger than
                            --release-age-days (releaseTooNew; releaseDateUnknown when the lookup gives no
                            currentVersionReleaseDate), when the release needs a newer OS than --os-version
                            (osTooOld), and no prompt but a forced one after --max-declines "Not now" answers
                            (declineCapReached), for a skipped version (versionSkipped), or sooner than
                            --prompt-interval-days after the last one (tooSoon)
              same version  upToDate (the decline count starts over when the installed version changed)
              store older   storeOlder
            A failed lookup (HTTP error, timeout, not JSON, resultCount 0, no version) is recorded with
            its reason, changes nothing else, and exits 1.
            --answer records the person's answer to the prompt on screen (after this command's check, or
            an earlier one): update (a forced prompt comes back), later (adds one to the decline count)
            or skip (silences that store version). With no prompt on screen, or an answer the prompt does
            not offer (a forced one has only update, an option one no skip), the answer is refused: exit 2
            without --lookup; with it, the check stays recorded and the command exits 1.
            Versions compare as dotted integers, a missing component counting as 0 (1.10 > 1.9,
            1.0 == 1.0.0); text after the numbers is a pre-release label (1.2b < 1.2), and build
            metadata after a + is ignored (1.2+45 == 1.2).
            """,
        options: [
            .init(name: "lookup", value: "URL|FILE", help: "Where the store's answer comes from."),
            .init(name: "installed", value: "VERSION", help: "The installed version (needed with --lookup)."),
            .init(name: "forced", value: nil, help: "Every kind not in --rules is force: \"Update\" only, shown again after it is tapped."),
            .init(name: "rules", value: "KIND=RULE,...", help: "Rules by kind (major, minor, patch, revision): force, option, skip or none (default: skip)."),
            .init(name: "release-age-days", value: "N", help: "Prompt only once the store's release is N days old (default 1; 0: not checked)."),
            .init(name: "max-declines", value: "N", help: "Stop the optional prompt after N \"Not now\" answers (default 5)."),
            .init(name: "os-version", value: "VERSION", help: "The device's OS version, checked against minimumOsVersion."),
            .init(name: "prompt-interval-days", value: "N", help: "Show the optional prompt at most once per N days."),
            .init(name: "timeout", value: "SECONDS", help: "How long the lookup server may stay silent (default 10)."),
            .init(name: "deadline", value: "SECONDS", help: "How long the whole lookup may take (default: the timeout)."),
            .init(name: "answer", value: "ANSWER", help: "The person's answer: update, later or skip."),
        ],
        writes: true
    ) { arguments, context in
        let answer = try arguments.value("answer").map { (text) throws(CLIError) -> PromptAnswer in
            switch text {
            case "update": return .update
            case "later": return .later
            case "skip": return .skip
            default: throw CLIError.usage("--answer must be update, later or skip, not \"\(text)\"")
            }
        }
        let lookupText = arguments.value("lookup")
        guard lookupText != nil || answer != nil else { throw CLIError.usage("give --lookup to check, --answer to answer, or both") }
        let installed = try arguments.value("installed").map { (text) throws(CLIError) in try version(text, "--installed") }
        guard lookupText == nil || installed != nil else { throw CLIError.usage("--lookup needs --installed VERSION") }
        let unlisted: PromptRule = arguments.flag("forced") ? .force : .skip
        var policy = PromptPolicy(rules: try arguments.value("rules").map { (text) throws(CLIError) in try rules(text, unlisted: unlisted) }
            ?? PromptRules(every: unlisted))
        if let days = try releaseAgeDays(arguments.value("release-age-days")) { policy.releaseAgeDays = days }
        if let declines = try arguments.count("max-declines") { policy.maxDeclines = declines }
        policy.osVersion = try arguments.value("os-version").map { (text) throws(CLIError) in try version(text, "--os-version") }
        policy.promptIntervalDays = try arguments.count("prompt-interval-days")
        if let days = policy.promptIntervalDays, days > 36_500 { throw CLIError.usage("--prompt-interval-days must be at most 36500 (a century), not \(days)") }
        let timeout = try arguments.seconds("timeout") ?? 10
        let deadline = try arguments.seconds("deadline")
        if let lookupText, lookupText.isEmpty { throw CLIError.usage("--lookup must not be empty") }
        if let lookupText, case .url(let url) = StoreLookupSource(lookupText), let problem = HTTPFetch.problem(with: url) {
            throw CLIError.usage("--lookup: \(problem)")
        }

        let store = try context.openStore(writable: true)
        let prompter = UpdatePrompter(store: store, installedVersion: installed ?? AppVersion("0")!, policy: policy)
        var records: [EventRecord] = []
        var check: UpdatePrompter.Check?
        if let lookupText {
            let lookup = StoreLookup(StoreLookupSource(lookupText), timeout: timeout, deadline: deadline)
            let result = lookup.fetch()
            check = try attempt(writingTo: context.databasePath) { try prompter.check(result, source: lookup.source.description) }
            records += check!.records
        }
        var refusal: String?
        if let answer {
            let answered = try attempt(writingTo: context.databasePath) { () throws -> Result<EventRecord, RuleError> in
                do { return .success(try prompter.answer(answer)) } catch let error as RuleError { return .failure(error) }
            }
            switch answered {
            case .success(let record): records.append(record)
            case .failure(let error): refusal = error.reason
            }
        }
        let state = try attempt { try prompter.state() }
        if context.json {
            var result: StateObject = ["events": .array(records.map(\.jsonValue)), "updates": state]
            if let check { result["decision"] = StateValue(check.decision?.rawValue); result["lookupFailure"] = StateValue(check.failure?.reason) }
            if let answer { result["answer"] = refusal == nil ? .string(answer.rawValue) : .null; result["answerRefused"] = StateValue(refusal) }
            context.printJSON(.object(result))
        } else {
            for record in records { context.console.row(Render.traceLine(record)) }
            if let failure = check?.failure { context.console.line("lookup failed: \(Render.escaped(failure.reason)); nothing else changed") }
            if let decision = check?.decision { context.console.line("decision: \(decision.rawValue)\(hint(decision))") }
        }
        if let refusal {
            guard check != nil else { throw CLIError.badInput("cannot record --answer: \(refusal)") }
            throw CLIError.problem("--answer not recorded: \(refusal)")
        }
        return check?.failure == nil ? .ok : .problem
    }

    private static func version(_ text: String, _ option: String) throws(CLIError) -> AppVersion {
        guard let version = AppVersion(text) else { throw CLIError.usage("\(option) must be a version such as 3.4.1, not \"\(text)\"") }
        return version
    }

    /// Reads `--rules major=force,minor=option,…`; the kinds it does not name take `unlisted`.
    private static func rules(_ text: String, unlisted: PromptRule) throws(CLIError) -> PromptRules {
        var rules = PromptRules(every: unlisted)
        var named: Set<UpdateKind> = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: "=", omittingEmptySubsequences: false)
            guard parts.count == 2 else { throw CLIError.usage("--rules: \"\(item)\" is not KIND=RULE, such as major=force") }
            guard let kind = UpdateKind(rawValue: String(parts[0])) else {
                throw CLIError.usage("--rules: unknown kind \"\(parts[0])\" (major, minor, patch or revision)")
            }
            guard let rule = PromptRule(rawValue: String(parts[1])) else {
                throw CLIError.usage("--rules: unknown rule \"\(parts[1])\" for \(kind.rawValue) (force, option, skip or none)")
            }
            guard named.insert(kind).inserted else { throw CLIError.usage("--rules: \(kind.rawValue) is given twice") }
            rules[kind] = rule
        }
        return rules
    }

    /// Reads `--release-age-days`: a whole number of days from 0 (not checked) to a century.
    private static func releaseAgeDays(_ text: String?) throws(CLIError) -> Int? {
        guard let text else { return nil }
        guard let days = Int(text), (0...36_500).contains(days) else {
            throw CLIError.usage("--release-age-days must be a whole number of days from 0 to 36500, not \"\(text)\"")
        }
        return days
    }

    private static func hint(_ decision: PromptDecision) -> String {
        switch decision {
        case .promptShown: " (answer with --answer update, later or skip)"
        case .promptShownWithoutSkip: " (answer with --answer update or later)"
        case .forcedPromptShown: " (answer with --answer update)"
        case .releaseTooNew: " (the store's release is younger than --release-age-days)"
        case .releaseDateUnknown: " (the lookup gives no currentVersionReleaseDate; --release-age-days 0 does not check it)"
        case .ruleIsNone: " (--rules says none for this kind of update)"
        default: ""
        }
    }
}
