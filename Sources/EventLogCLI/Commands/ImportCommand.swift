import EventLog
import Foundation
import Synchronization

/// `eventlog import`: JSON lines in, streamed into the log in bounded memory.
enum ImportCommand {
    static let spec = CommandSpec(
        name: "import",
        summary: "Append events read as JSON lines (as 'export' writes them) from FILE, or stdin for -.",
        discussion: """
            Each line is one event: "stream" and "type" are required; "origin", "cause", "outcome",
            "reason", "payload", "writes" and "time" are kept; a "seq", when present, must be the seq
            the event will get; a "checksum" is ignored. Every write's old value must match the state.
            Without --batch all lines commit in one transaction: one bad line appends nothing.
            With --batch N every N events commit together, and a bad line keeps the batches before it.
            Either way the input is streamed, so memory stays bounded whatever its size, and the
            objects' read model is brought in line with the imported events.
            With --resume, lines whose seq the log already holds are skipped when they hold the same
            event and refused when they differ: run the same import again after an interruption.
            A first line {"base": …} (a compacted log's export) makes an empty log start after that
            base, the state it holds checked against its checksum; the events must follow it.
            """,
        arguments: [.init(name: "FILE", help: "A JSON-lines file, or - for stdin.")],
        options: [
            .init(name: "batch", value: "N", help: "Commit every N events (earlier batches stay if a later line is bad)."),
            .init(name: "resume", value: nil, help: "Skip the events the log already holds (same seq, same event)."),
        ],
        writes: true
    ) { arguments, context in
        let source = arguments.positionals[0]
        let batchSize = try arguments.count("batch")
        let lines = source == "-" ? context.console.stdinLines() : try LineReader(path: source)
        let interruption = InterruptionNotice.install(removingIfEmpty: NewDatabase(at: context.databasePath))
        defer { interruption.remove() }
        let store = try interruption.opening { () throws(CLIError) in try context.openStore(writable: true) }
        var run = try attempt(writingTo: context.databasePath) {
            try ImportRun(store: store, readModels: context.app.readModels(for: store), lines: lines, source: source, batchSize: batchSize, resume: arguments.flag("resume"),
                          console: context.console)
        }
        do throws(CLIError) {
            try run.readBase()
            try run.skipEventsPresent()
            try run.importRest(reportingTo: interruption) { run in continuation(of: run, arguments, context) }
        } catch {
            context.console.endProgress()
            guard let imported = run.imported else { throw error }
            var kept = error
            kept.message += "; the \(run.count) events committed before it (seq \(imported.lowerBound)-\(imported.upperBound)) are kept"
                + "; after fixing the input, continue with: \(continuation(of: run, arguments, context))"
            throw kept
        }
        context.console.endProgress()
        if context.json {
            let first: StateValue = run.imported.map { .int(Int64($0.lowerBound)) } ?? .null
            let last: StateValue = run.imported.map { .int(Int64($0.upperBound)) } ?? .null
            context.printJSON(["first": first, "imported": .int(Int64(run.count)), "last": last,
                               "skipped": .int(Int64(run.skipped))])
        } else {
            let skipped = run.skipped > 0 ? "; skipped \(run.skipped) events the log already held" : ""
            context.console.line((run.imported.map { "imported \(run.count) events (seq \($0.lowerBound)-\($0.upperBound))" }
                ?? "imported 0 events") + skipped)
        }
        return .ok
    }

    /// The command that continues an interrupted import of the same input: `--resume` when
    /// every event read so far carried its seq; else the input from the line after the last
    /// one committed.
    private static func continuation(of run: ImportRun, _ arguments: ParsedArguments, _ context: CommandContext) -> String {
        let source = arguments.positionals[0]
        var words = ["eventlog", "import"] + (run.everyEventHasSeq ? [source, "--resume"] : ["-"])
        if let batch = arguments.value("batch") { words += ["--batch", batch] }
        words += ["--db", context.databasePath]
        let command = words.map(Render.shellQuoted).joined(separator: " ")
        if run.everyEventHasSeq { return command }
        let next = run.committedThroughLine + 1
        return source == "-" ? "\(command), given the input from line \(next) on" : "tail -n +\(next) \(Render.shellQuoted(source)) | \(command)"
    }
}

/// One import: reads events line by line and appends them, a transaction per batch.
private struct ImportRun {
    let store: EventStore
    /// The app's read models, kept in line event by event.
    let readModels: [any ReadModel]
    var lines: LineReader
    let source: String
    /// Events per transaction; `nil`: all in one.
    let batchSize: Int?
    let resume: Bool
    let console: Console

    /// The line number of the last line read.
    private var lineNumber = 0
    /// An event read but not yet appended, and where its line began.
    private var lookahead: (number: Int, event: ImportedEvent, offset: UInt64)?
    /// The events of the current transaction, kept when the input cannot be read again
    /// (stdin) and a batch bounds them, so that the transaction can run again.
    private var kept: [(number: Int, event: ImportedEvent)] = []
    private var replaying: ArraySlice<(number: Int, event: ImportedEvent)> = []
    private var progress: ImportProgress

    /// The seqs this import committed, and how many events that is.
    private(set) var imported: ClosedRange<UInt64>?
    private(set) var count = 0
    /// Events skipped by `--resume`.
    private(set) var skipped = 0
    /// The line of the last event committed (0 before any).
    private(set) var committedThroughLine = 0
    /// Whether every event read so far carried its seq, so that `--resume` can skip them.
    private(set) var everyEventHasSeq = true
    /// The line of the last event appended to the transaction under way.
    private var appendedThroughLine = 0
    /// The base the input starts with, to install in the first transaction; `nil` once committed.
    private var base: (base: LogBase, state: StateValue)?

    init(store: EventStore, readModels: [any ReadModel], lines: LineReader, source: String, batchSize: Int?, resume: Bool, console: Console) throws {
        self.store = store
        self.readModels = readModels
        self.lines = lines
        self.source = source
        self.batchSize = batchSize
        self.resume = resume
        self.console = console
        progress = ImportProgress(totalBytes: lines.totalBytes)
        // A transaction that outgrows the map runs again from its first line; make that rare
        // (a map is address space, not disk), and impossible to need for a stream read whole.
        let room = lines.totalBytes.map { Int(clamping: $0) * 3 + (64 << 20) } ?? (batchSize == nil ? 16 << 30 : 64 << 20)
        try store.reserveCapacity(room)
    }

    /// Reads a base on the input's first line: for an empty log, installed with the first
    /// transaction; for a log with the same base, passed over; otherwise refused.
    mutating func readBase() throws(CLIError) {
        guard let (number, json, offset) = try nextLine() else { return }
        guard LogBase.isBase(json) else {
            lookahead = (number, try event(json, line: number), offset)
            return
        }
        let parsed: (base: LogBase, state: StateValue)
        do { parsed = try LogBase.parse(json: json) } catch { throw CLIError.badInput("\(source) line \(number): \(error)") }
        let current = try attempt { try store.base() }
        if current == parsed.base { return }
        guard current == nil, try attempt({ try store.lastSeq() }) == 0 else {
            throw CLIError.badInput("\(source) line \(number): the input starts after event \(parsed.base.seq) from its base, but the log already holds events")
        }
        base = parsed
    }

    /// With `--resume`: skips the leading lines whose seq the log holds, after checking that
    /// each holds the very event stored there.
    mutating func skipEventsPresent() throws(CLIError) {
        guard resume else { return }
        let last = try attempt { try store.lastSeq() }
        while let (number, item, offset) = try nextEvent() {
            guard let seq = item.seq else {
                throw CLIError.badInput("\(source) line \(number): --resume needs the \"seq\" of every event, as 'export' writes it")
            }
            guard seq <= last else {
                lookahead = (number, item, offset)
                return
            }
            guard let stored = try attempt({ try store.record(seq) }), stored.event == item.event, item.time.map({ $0 == stored.time }) ?? true else {
                throw CLIError.badInput("\(source) line \(number): event \(seq) differs from the one the log holds; nothing more was imported")
            }
            skipped += 1
        }
    }

    /// Appends the rest of the input, a transaction per batch; `command` says how to continue
    /// after what has been committed.
    mutating func importRest(reportingTo interruption: InterruptionNotice, command: (ImportRun) -> String) throws(CLIError) {
        while true {
            let mark = (offset: lookahead?.offset ?? lines.offset, line: lookahead.map { $0.number - 1 } ?? lineNumber)
            kept.removeAll(keepingCapacity: true)
            var runs = 0
            let (appended, last) = try attempt(writingTo: store.environment.path) {
                try store.transact { batch in
                    runs += 1
                    if runs > 1 { try restart(at: mark) }
                    if let base { try batch.installBase(base.base, state: base.state) }
                    return (try appendEvents(to: &batch), batch.lastSeq)
                }
            }
            base = nil
            if appended > 0 {
                imported = (imported?.lowerBound ?? last - UInt64(appended) + 1)...last
                count += appended
                committedThroughLine = appendedThroughLine
                interruption.committed("the \(count) events committed before it (seq \(imported!.lowerBound)-\(imported!.upperBound)) are kept; continue with: \(command(self))")
            }
            guard let batchSize, appended == batchSize else { return }
        }
    }

    /// Reads the transaction's events again from its first line, after a map growth.
    private mutating func restart(at mark: (offset: UInt64, line: Int)) throws {
        if lines.canRewind {
            try lines.rewind(to: mark.offset)
            lineNumber = mark.line
            lookahead = nil
        } else if batchSize != nil {
            replaying = kept[...]
            kept.removeAll(keepingCapacity: true)
        } else {
            throw CLIError.unavailable("the database's map had to grow in the middle of reading stdin; import from a file, or with --batch")
        }
    }

    /// Appends events until the batch is full or the input ends; returns how many.
    private mutating func appendEvents(to batch: inout AppendBatch) throws -> Int {
        var appended = 0
        while batchSize.map({ appended < $0 }) ?? true {
            let next: (number: Int, event: ImportedEvent)?
            if let replayed = replaying.popFirst() { next = replayed } else { next = try nextEvent().map { ($0.number, $0.event) } }
            guard let (number, item) = next else { break }
            if batchSize != nil && !lines.canRewind { kept.append((number, item)) }
            if item.seq == nil { everyEventHasSeq = false }
            if let seq = item.seq, seq != batch.lastSeq + 1 {
                throw CLIError.badInput("\(source) line \(number): seq \(seq) does not follow the log's last seq \(batch.lastSeq)"
                    + (seq <= batch.lastSeq && !resume ? " (to skip the events the log holds, add --resume)" : ""))
            }
            do {
                try batch.append(item.event, time: item.time)
            } catch let error as EventStoreError {
                throw CLIError.badInput("\(source) line \(number): \(error)")
            }
            for readModel in readModels { try readModel.keepInLine(after: item.event.writes, in: &batch) }
            appended += 1
            appendedThroughLine = number
            progress.event(count + appended, bytesRead: lines.offset, console: console)
        }
        return appended
    }

    /// The next event of the input (the lookahead first) and the offset where its line
    /// begins, or `nil` at the input's end.
    private mutating func nextEvent() throws(CLIError) -> (number: Int, event: ImportedEvent, offset: UInt64)? {
        if let lookahead {
            self.lookahead = nil
            return lookahead
        }
        return try nextLine().map { (number, json, offset) throws(CLIError) in (number, try event(json, line: number), offset) }
    }

    /// Line `number`'s event.
    private func event(_ json: StateValue, line number: Int) throws(CLIError) -> ImportedEvent {
        if LogBase.isBase(json) { throw CLIError.badInput("\(source) line \(number): a base belongs on the first line, before every event") }
        do { return try ImportedEvent(json: json) } catch { throw CLIError.badInput("\(source) line \(number): \(error)") }
    }

    /// The next line of the input that is not blank, as JSON, and the offset where it begins.
    private mutating func nextLine() throws(CLIError) -> (number: Int, json: StateValue, offset: UInt64)? {
        while true {
            let start = lines.offset
            let line: ArraySlice<UInt8>
            do {
                guard let next = try lines.next() else { return nil }
                line = next
            } catch let error as LineReader.LineTooLong {
                throw CLIError.badInput("\(source) line \(lineNumber + 1): \(error)")
            } catch {
                throw CLIError.badInput("cannot read \(source): \(error.localizedDescription)")
            }
            lineNumber += 1
            let text = line.trimmingJSONSpace()
            if text.isEmpty { continue }
            do throws(JSONSyntaxError) {
                return (lineNumber, try StateValue(jsonUTF8: Array(text)), start)
            } catch {
                throw CLIError.badInput("\(source) line \(lineNumber), column \(error.column): \(error.reason)")
            }
        }
    }
}

extension ArraySlice<UInt8> {
    /// Without the JSON white space (space, tab, CR, LF) at either end: a CRLF line's CR goes.
    fileprivate func trimmingJSONSpace() -> ArraySlice<UInt8> {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return [] }
        return self[first...last]
    }
}

/// Progress on stderr (only on a terminal): events, bytes read of the total, rate, time left.
private struct ImportProgress {
    let totalBytes: UInt64?
    private let started = ContinuousClock.now
    private var lastDrawn = ContinuousClock.now

    init(totalBytes: UInt64?) { self.totalBytes = totalBytes }

    mutating func event(_ events: Int, bytesRead: UInt64, console: Console) {
        guard console.showsProgress, events % 1024 == 0 else { return }
        let now = ContinuousClock.now
        guard now - lastDrawn >= .milliseconds(250) else { return }
        lastDrawn = now
        let seconds = max(Self.seconds(now - started), 0.001)
        var parts = ["imported \(events) events"]
        if let totalBytes, totalBytes > 0 {
            let fraction = Double(bytesRead) / Double(totalBytes)
            parts.append("\(Render.shortBytes(Int(bytesRead))) of \(Render.shortBytes(Int(totalBytes))) (\(Int(fraction * 100))%)")
            parts.append("\(Int(Double(events) / seconds)) events/s")
            if fraction > 0 { parts.append("\(Render.duration(seconds / fraction - seconds)) left") }
        } else {
            parts.append("\(Render.shortBytes(Int(bytesRead))) read")
            parts.append("\(Int(Double(events) / seconds)) events/s")
        }
        console.progress(parts.joined(separator: " · "))
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
