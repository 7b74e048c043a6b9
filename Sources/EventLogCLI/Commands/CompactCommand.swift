import EventLog
import Foundation

/// `eventlog compact`: drop the events before a seq, keeping a base in their place.
enum CompactCommand {
    static let spec = CommandSpec(
        name: "compact",
        summary: "Drop the oldest events, keeping in their place a base: the state they left, checksummed.",
        discussion: """
            Give one of --before, --keep-last or --older-than, or --shipped (which also bounds them:
            only events a fleet stream acknowledged go). In one transaction the events before
            the cut go, and the log keeps the state after the last of them as its base, with the number
            of events dropped per stream and the SHA-256 of their records as stored (info shows them).
            Seqs do not change: the log starts at the first event kept, and asking for an event before
            it is an error. The log keeps at least one event, against which verify checks the base.
            The log is verified first: a damaged log is refused (salvage it first). A cut at or before
            the log's first event drops nothing. The file keeps its size (new events reuse the space):
            --to writes a copy of the log without its free pages, and --in-place swaps such a copy in
            (while no other process has the log open; the old file is kept until the swap is flushed).
            --policy (alone or with the options above) stores a retention policy in the log, which
            every writer then applies as it appends: once the log is past it by more than 10% (at
            least 100 events), a writer drops at most 10,000 of the oldest events after its commit,
            in a transaction of its own. It drops nothing itself; info shows it, and none removes it.
            """,
        options: [
            .init(name: "before", value: "SEQ", help: "Drop the events before SEQ (2 to the newest seq)."),
            .init(name: "keep-last", value: "N", help: "Keep the newest N events (at least 1)."),
            .init(name: "older-than", value: "AGE", help: "Drop the events recorded before now minus AGE (30d, 12h, 90m, 45s) or before an RFC 3339 time, up to the first that is not."),
            .init(name: "shipped", value: nil, help: "Drop only events a fleet stream acknowledged: alone, all of them but the newest event; with a cut, no further."),
            .init(name: "to", value: "NEW_DB", help: "Then write a copy of the log without free pages into NEW_DB, a path that must not exist."),
            .init(name: "in-place", value: nil, help: "Then replace the log's file by such a copy, giving the space back."),
            .init(name: "policy", value: "POLICY", help: "Store a retention policy for writers to apply: keep-last=N, keep-days=D, or none to remove it."),
        ],
        writes: true
    ) { arguments, context in
        let cuts = ["before", "keep-last", "older-than"].filter { arguments.value($0) != nil }
        let shipped = arguments.flag("shipped")
        let shippers = context.app.families.compactMap(\.shippedThrough)
        if shipped && shippers.isEmpty { throw CLIError.usage("--shipped: no family of \(context.app.name) ships logs") }
        let copyPath = arguments.value("to")
        let inPlace = arguments.flag("in-place")
        guard cuts.count <= 1 else { throw CLIError.usage("use only one of " + cuts.map { "--\($0)" }.joined(separator: ", ")) }
        guard copyPath == nil || !inPlace else { throw CLIError.usage("use only one of --to, --in-place") }
        let policy = try arguments.value("policy").map { (text) throws(CLIError) in try Self.policy(text) }
        guard !cuts.isEmpty || shipped || copyPath != nil || inPlace || policy != nil else {
            throw CLIError.usage("give --before SEQ, --keep-last N, --older-than AGE or --shipped (or --to NEW_DB, --in-place, --policy POLICY)")
        }
        if let before = try arguments.seq("before"), before == 0 { throw CLIError.badInput("--before 0: there is no event 0; the first event to keep is 2 or later") }
        let keepLast = try arguments.count("keep-last")
        let cutoff = try arguments.value("older-than").map { (text) throws(CLIError) in try Self.cutoff(text) }
        if let copyPath, FileManager.default.fileExists(atPath: copyPath) {
            throw CLIError.badInput("--to \(copyPath) exists; compact copies into a new path")
        }
        guard EventStore.exists(at: context.databasePath) else {
            throw CLIError.unavailable("cannot open \(context.databasePath): no event log at \(context.databasePath)")
        }
        if let policy {
            let store = try context.openStore(writable: true)
            try attempt(writingTo: context.databasePath) { try store.setRetention(policy.value) }
        }
        guard !cuts.isEmpty || shipped || copyPath != nil || inPlace else {
            if context.json { context.printJSON(["retention": policy?.value.map { .string($0.description) } ?? .null]) } else {
                context.console.line(policy?.value.map { "retention policy \($0): writers drop older events as they append" } ?? "retention policy removed")
            }
            return .ok
        }
        let (oldBase, base, cut) = try Self.cut(arguments, context, keepLast: keepLast, cutoff: cutoff, shippers: shipped ? shippers : nil, copyPath: copyPath)
        var sizes: (before: Int, after: Int)?
        if inPlace {
            sizes = try attempt(writingTo: context.databasePath) { try EventStore.replaceWithCompactedCopy(at: context.databasePath) }
        }
        let first = (oldBase?.seq ?? 0) + 1
        let dropped = (base?.seq ?? 0) - (oldBase?.seq ?? 0)
        if context.json {
            var result: StateObject = ["dropped": .int(Int64(dropped)), "firstSeq": .int(Int64((base?.seq ?? 0) + 1)),
                                       "base": base.map { $0.jsonValue(state: nil)["base"] ?? .null } ?? .null]
            result["copy"] = copyPath.map(StateValue.string)
            if let policy { result["retention"] = policy.value.map { .string($0.description) } ?? .null }
            if let sizes { result["fileBytes"] = ["after": .int(Int64(sizes.after)), "before": .int(Int64(sizes.before))] }
            context.printJSON(.object(result))
        } else {
            if cut != nil {
                context.console.line(dropped == 0 ? "nothing to drop: the log starts at event \(first)"
                                     : "dropped events \(first)-\(base!.seq); the log starts at event \(base!.firstSeq), after its base (checksum \(String(format: "%08x", base!.checksum)))")
            }
            if let copyPath { context.console.line("wrote a compacted copy into \(copyPath)") }
            if let sizes { context.console.line("the file went from \(Render.bytes(sizes.before)) to \(Render.bytes(sizes.after))") }
            if let policy { context.console.line(policy.value.map { "retention policy \($0): writers drop older events as they append" } ?? "retention policy removed") }
        }
        return .ok
    }

    /// Verifies the log, makes the cut asked for (if any) and the copy `--to` asks for; the
    /// store is closed again when it returns, for `--in-place` to swap the file.
    /// With `shippers` (`--shipped`), the cut goes no further than the newest event they
    /// shipped, and without another cut it is there.
    private static func cut(_ arguments: ParsedArguments, _ context: CommandContext, keepLast: Int?, cutoff: Timestamp?,
                            shippers: [@Sendable (EventStore) throws -> UInt64?]?,
                            copyPath: String?) throws(CLIError) -> (old: LogBase?, new: LogBase?, cut: UInt64?) {
        // Never drop anything from a damaged log: what it holds is what salvage needs.
        if let damage = try attempt({ try EventStore.verifyStorage(at: context.databasePath) }) {
            throw CLIError.badInput("\(context.databasePath) is damaged (\(damage)); run '\(Program.name) salvage' first")
        }
        let store = try context.openStore(writable: true)
        let report = try attempt { try store.verify { context.console.progress("verified \($0) events") } }
        context.console.endProgress()
        if let problem = report.problem {
            throw CLIError.badInput("\(context.databasePath) is damaged (\(problem)); run '\(Program.name) salvage' first")
        }
        let (last, oldBase) = try attempt { (try store.lastSeq(), try store.base()) }
        let first = (oldBase?.seq ?? 0) + 1
        var cut: UInt64?
        if let before = try arguments.seq("before") {
            guard before <= last else {
                throw CLIError.badInput("--before \(before) is past the newest event \(last); the log keeps at least one event")
            }
            cut = before
        } else if let keepLast {
            cut = last >= UInt64(keepLast) ? last - UInt64(keepLast) + 1 : first
        } else if let cutoff {
            guard let seq = try attempt({ try store.firstEvent(recordedAtOrAfter: cutoff) }) else {
                throw CLIError.badInput("every event was recorded before \(cutoff); the log keeps at least one (use --keep-last 1)")
            }
            cut = seq
        }
        if let shippers {
            let shipped = try attempt { try shippers.compactMap { try $0(store) }.max() }
            guard let shipped else {
                throw CLIError.badInput("\(context.databasePath) was never shipped: --shipped drops only events a fleet stream acknowledged ('\(Program.name) ship' first)")
            }
            // The log keeps at least its newest event.
            cut = min(cut ?? .max, shipped + 1, last)
        }
        let base = try attempt(writingTo: context.databasePath) { try cut.map { try store.compact(before: $0) } ?? oldBase }
        if let copyPath {
            try attempt(writingTo: copyPath) { try store.copyCompacted(to: copyPath) }
        }
        return (oldBase, base, cut)
    }

    /// What `--policy` asks for: a policy to store, or (`value` `nil`) to remove the stored one.
    struct PolicyArgument {
        let value: RetentionPolicy?
    }

    /// The policy `--policy` names: `keep-last=N` and `keep-days=D` with N and D above 0, or `none`.
    static func policy(_ text: String) throws(CLIError) -> PolicyArgument {
        if text == "none" { return PolicyArgument(value: nil) }
        let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, ["keep-last", "keep-days"].contains(parts[0]) else {
            throw CLIError.badInput("--policy takes keep-last=N, keep-days=D or none, not \"\(text)\"")
        }
        let digits = parts[1]
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let count = UInt64(digits), count > 0,
              parts[0] == "keep-last" || count <= UInt64(UInt32.max) else {
            throw CLIError.badInput("--policy \(text): \(parts[0]) must be a positive whole number")
        }
        return PolicyArgument(value: parts[0] == "keep-last" ? .keepLast(count) : .keepDays(UInt32(count)))
    }

    /// The time `--older-than` names: now minus an age (`30d`, `12h`, `90m`, `45s`), or an
    /// RFC 3339 time; one in the future is refused.
    static func cutoff(_ text: String, now: Timestamp = .now()) throws(CLIError) -> Timestamp {
        let units: [Character: Int64] = ["d": 86_400, "h": 3_600, "m": 60, "s": 1]
        if let unit = text.last, let seconds = units[unit], let count = Int64(text.dropLast()), count >= 0,
           !text.dropLast().contains(where: { !$0.isASCII || !$0.isNumber }) {
            let (micros, overflow) = count.multipliedReportingOverflow(by: seconds * 1_000_000)
            guard !overflow, micros <= now.microsecondsSince1970 else { throw CLIError.badInput("--older-than \(text) reaches before 1970") }
            return Timestamp(microsecondsSince1970: now.microsecondsSince1970 - micros)
        }
        guard let time = try? Timestamp(parsingRFC3339: text) else {
            throw CLIError.usage("--older-than takes an age such as 30d, 12h, 90m or 45s, or an RFC 3339 time, not \"\(text)\"")
        }
        guard time <= now else { throw CLIError.badInput("--older-than \(text) is in the future") }
        return time
    }
}
