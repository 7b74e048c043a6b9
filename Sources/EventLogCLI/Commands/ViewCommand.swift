import EventLog
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `view`: a range of the log as one self-contained HTML page (``ViewPage``), with what
/// `bisect --where`, `--against` and `--replay` find in it marked.
enum ViewCommand {
    /// The most events one page holds: a browser stays responsive with this many rows.
    static let eventLimit: UInt64 = 20_000

    static func spec(_ app: EventLogApp) -> CommandSpec { CommandSpec(
        name: "view",
        summary: "Write a range of the log as one HTML page: timeline, a lane per path, the state after any event, search.",
        discussion: """
            The page is self-contained (inline CSS and script, no network) and opens from disk. Rows are
            grouped by their plan, no-op skips folded; each state path written in range has a lane with a
            tick per write; the state after the selected event is shown as a tree with its writes
            highlighted. Arrow keys and the scrubber step through the events; the search box finds where
            a path or value first appears in range (the page also reads #search=TEXT and #seq=N from its
            URL). --where marks the first event after which EXPR holds, as 'bisect --where' finds it;
            --against marks the first event after which the state differs from log DB's and draws each
            lane as the two logs aligned by seq (DB's ticks below, red where the two wrote differently);
            --replay marks the first event today's code disagrees with, recorded and recomputed writes
            side by side.
            A page holds at most 20,000 events: of a longer range, the first ones from --from, else the
            newest; it says which it shows. Without --output the page goes to stdout (with --json, the
            page's data instead); with it, one line says what was written.
            """,
        options: LogCommands.rangeOptions + [
            .init(name: "where", value: "EXPR", help: "Mark the first event after which EXPR holds (as 'bisect --where')."),
            .init(name: "against", value: "DB", help: "Mark the first event after which the state differs from log DB's."),
            .init(name: "replay", value: nil, help: "Mark the first event today's code disagrees with (as 'bisect --replay')."),
            .init(name: "output", value: "FILE", help: "Write the page to FILE (replaced whole, or left as it was on failure)."),
            .init(name: "serve", value: nil, help: "Serve the page over HTTP instead, new events joining it as they commit, until Ctrl-C."),
            .init(name: "port", value: "P", help: "With --serve, the port (default 0: one the system picks)."),
            .init(name: "bind", value: "ADDR", help: "With --serve, the IPv4 address to listen on (default 127.0.0.1, this machine only)."),
        ] + [app.variantOption].compactMap { $0 }
    ) { arguments, context in
        let serve = arguments.flag("serve")
        if serve, arguments.value("output") != nil || arguments.value("to") != nil {
            throw CLIError.usage("--serve follows the log and writes no file: leave out --to and --output")
        }
        if !serve, let option = ["port", "bind"].first(where: { arguments.value($0) != nil }) { throw CLIError.usage("--\(option) goes with --serve") }
        let port = try arguments.value("port").map { (text) throws(CLIError) -> UInt16 in
            guard let port = UInt16(text) else { throw CLIError.usage("--port takes a number from 0 to 65535, not \"\(text)\"") }
            return port
        }
        let predicate = try AnalysisCommands.wherePredicate(arguments)
        let projection = arguments.flag("replay") ? try AnalysisCommands.projections(arguments, context) : nil
        let store = try context.openStore()
        let other = try arguments.value("against").map { (path) throws(CLIError) in try AnalysisCommands.otherLog(path) }
        let range = try shownRange(arguments, store)

        var page = try attempt { try ViewPage.data(of: store, range.shown, asked: range.asked, database: context.databasePath) }
        if let predicate {
            let result = try attempt { try store.firstEvent(where: predicate, from: range.shown.lowerBound, to: range.shown.upperBound) }
            page["bisect"] = ["firstBad": result.firstBad.map { .int(Int64($0)) } ?? .null, "where": .string(arguments.value("where")!)]
        }
        if let other, let path = arguments.value("against") {
            let difference = try attempt { try store.firstDifference(from: other, from: range.shown.lowerBound, to: range.shown.upperBound) }
            // The other log's writes at each event shown, for its half of the lanes; null where it has no such event.
            let writes = try attempt { () throws -> [StateValue] in
                var writes = [StateValue](repeating: .null, count: Int(range.shown.count))
                let from = max(range.shown.lowerBound, try other.firstSeq() ?? .max)
                guard from <= min(range.shown.upperBound, try other.lastSeq()) else { return writes }
                try other.forEachRecord(from: from, to: range.shown.upperBound) { record in
                    writes[Int(record.seq - range.shown.lowerBound)] = ViewPage.event(record)["writes"] ?? .null
                    return true
                }
                return writes
            }
            page["against"] = ["database": .string(path), "diff": .array((difference?.diff ?? []).map(\.jsonValue)),
                               "seq": difference.map { .int(Int64($0.seq)) } ?? .null, "writes": .array(writes)]
        }
        if let projection {
            let report = try attempt { try store.replay(through: projection, from: range.shown.lowerBound, to: range.shown.upperBound, verify: true) }
            page["replay"] = report.divergence.map { divergence in
                ["recomputed": .array(divergence.actual.writes.map(\.jsonValue)), "recomputedOutcome": .string(divergence.actual.outcome.name),
                 "recorded": .array(divergence.record.event.writes.map(\.jsonValue)),
                 "recordedOutcome": .string(divergence.record.event.outcome.name), "seq": .int(Int64(divergence.seq))]
            } ?? ["seq": .null]
        }
        if serve {
            page["live"] = ["after": .int(Int64(range.shown.upperBound))]
            let address = arguments.value("bind") ?? "127.0.0.1"
            let (server, listener, actual) = try ViewServer.listen(address: address, port: port ?? 0, page: ViewPage.html(data: .object(page), live: true),
                                                                   store: store, after: range.shown.upperBound)
            context.console.line("serving http://\(address):\(actual)/ : events \(range.shown.lowerBound)-\(range.shown.upperBound), then each new one as it commits (Ctrl-C ends)")
            context.console.flush()
            try server.serve(listener)
        }
        let html = ViewPage.html(data: .object(page))

        guard let output = arguments.value("output") else {
            if context.json { context.printJSON(.object(page)) } else { context.console.out(html) }
            return .ok
        }
        try write(html, to: output)
        let shown = "\(range.shown.lowerBound)-\(range.shown.upperBound)"
        if context.json {
            context.printJSON(["bytes": .int(Int64(html.utf8.count)), "file": .string(output), "from": .int(Int64(range.shown.lowerBound)),
                               "to": .int(Int64(range.shown.upperBound))])
        } else {
            context.console.line("wrote \(Render.escaped(output)): events \(shown) (\(Render.shortBytes(html.utf8.count)))"
                + (range.shown == range.asked ? "" : "; \(range.asked.lowerBound)-\(range.asked.upperBound) was asked, narrow with --from and --to"))
        }
        return .ok
    } }

    /// The range asked for (`--from`, `--to`, clamped to the log) and the part of it a page
    /// holds: all of it, or ``eventLimit`` events from `--from` when it was given, else the newest.
    static func shownRange(_ arguments: ParsedArguments, _ store: EventStore) throws(CLIError) -> (asked: ClosedRange<UInt64>, shown: ClosedRange<UInt64>) {
        let from = try arguments.seq("from")
        let to = try arguments.seq("to")
        if let from, let to, from > to { throw CLIError.badInput("--from \(from) is after --to \(to)") }
        let (first, last) = try attempt { (try store.firstSeq(), try store.lastSeq()) }
        guard let first, last > 0 else { throw CLIError.badInput("the log is empty: nothing to view") }
        let lower = max(from ?? first, first)
        let upper = min(to ?? last, last)
        guard lower <= upper else { throw CLIError.badInput("nothing to view in \(from ?? first)-\(to ?? last): the log holds \(first)-\(last)") }
        guard upper - lower >= eventLimit else { return (lower...upper, lower...upper) }
        return (lower...upper, from != nil ? lower...(lower + eventLimit - 1) : (upper - eventLimit + 1)...upper)
    }

    /// Writes `text` to a new file beside `path` and renames it over `path`: a reader sees the
    /// old file or the whole new one, and a failure leaves no file behind.
    /// - Throws: ``CLIError`` (exit 3) with the system's reason.
    static func write(_ text: String, to path: String) throws(CLIError) {
        let temporary = path + ".partial-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw CLIError.unavailable("cannot write \(path): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        var written = 0
        var failure: Int32 = 0
        while written < bytes.count, failure == 0 {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if count > 0 { written += count } else if errno != EINTR { failure = count < 0 ? errno : EIO }
        }
        if close(fd) != 0, failure == 0 { failure = errno }
        if failure == 0, rename(temporary, path) != 0 { failure = errno }
        guard failure != 0 else { return }
        unlink(temporary)
        throw CLIError.unavailable("cannot write \(path): \(String(cString: strerror(failure)))")
    }
}
