import EventLog
import Foundation

/// What a running command can reach: the chosen database, the output mode and the console.
public struct CommandContext: Sendable {
    /// `--db`, else `$EVENTLOG_DB`, else `./eventlog.lmdb`.
    public var databasePath: String
    /// Whether `--json` was given: print one JSON document for machines instead of text for people.
    public var json: Bool
    /// Where the command prints: results on stdout, errors and progress on stderr.
    public var console: Console
    /// The app whose code replays the log.
    public var app: EventLogApp

    static let defaultDatabasePath = "./eventlog.lmdb"

    init(arguments: ParsedArguments, environment: [String: String], console: Console, app: EventLogApp) {
        self.app = app
        databasePath = arguments.value("db") ?? environment["EVENTLOG_DB"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.defaultDatabasePath
        json = arguments.flag("json")
        self.console = console
    }

    /// Prints one compact JSON document on its own line, keys sorted.
    public func printJSON(_ value: StateValue) { console.line(value.json()) }

    /// Opens the event log; read-only unless `writable`, in which case it is created when
    /// missing, and its retention policy never drops what a family of the app shipped from
    /// it but the stream does not hold yet (``EventStore/Options/retentionHold``, with the
    /// families' `shippedThrough`; a log never shipped is not held). Failures become exit code
    /// 3 with a one-line reason; damage, exit code 1.
    /// - Parameters:
    ///   - writable: Open for appending, creating the log when missing. Only a command declared
    ///     with `writes: true` may ask for it: it alone removes a log it created when it fails.
    ///   - clock: The clock that stamps appended events.
    /// - Throws: ``CLIError``, ready to print.
    public func openStore(writable: Bool = false, clock: EventClock = .system) throws(CLIError) -> EventStore {
        var options = EventStore.Options()
        options.readOnly = !writable
        options.clock = clock
        // A log that a family ships keeps, under a retention policy, what it has not shipped.
        let shippers = app.families.compactMap(\.shippedThrough)
        if writable, !shippers.isEmpty {
            options.retentionHold = { store in try shippers.compactMap { try $0(store) }.min() }
        }
        do {
            return try EventStore(path: databasePath, options: options)
        } catch let error as EventStoreError {
            guard case .damaged = error else { throw CLIError.unavailable("cannot open \(databasePath): \(error)") }
            throw damaged(databasePath, error)
        } catch let error as LMDBError where error.isDamage {
            throw damaged(databasePath, error)
        } catch {
            throw CLIError.unavailable("cannot open \(databasePath): \(error)")
        }
    }
}

/// The name of the program whose command runs now, for messages that say what to run next.
enum Program {
    @TaskLocal static var name = "eventlog"
}

/// Damage found in the database at `path`: exit 1, with where to go next.
func damaged(_ path: String, _ error: any Error) -> CLIError {
    CLIError.problem("\(path): \(error); '\(Program.name) verify' says where, '\(Program.name) salvage' copies what is good")
}

/// Runs library code and turns its errors into the CLI's (see ``CLIError/init(classifying:writingTo:)``).
package func attempt<R>(writingTo database: String? = nil, _ body: () throws -> R) throws(CLIError) -> R {
    do {
        return try body()
    } catch {
        throw CLIError(classifying: error, writingTo: database)
    }
}

extension CLIError {
    /// `error` as the command line reports it: bad references are usage errors (2), damage and
    /// corruption are a problem found (1), storage trouble (a database that cannot be opened or
    /// written) is exit 3, naming the database when `writingTo` it. A `CLIError` stays as it is.
    init(classifying error: any Error, writingTo database: String?) {
        func unavailable(_ error: any Error) -> CLIError {
            CLIError.unavailable(database.map { "cannot write to \($0): \(error)" } ?? "\(error)")
        }
        switch error {
        case let error as CLIError:
            self = error
        case let error as LMDBError where error.isDamage:
            self = damaged(database ?? "the database", error)
        case let error as EventStoreError:
            switch error {
            case .noSuchEvent, .compacted, .staleWrite, .invalidWrite, .limitExceeded, .readOnly: self = .badInput("\(error)")
            case .corruptRecord, .damaged, .outOfSequence, .otherLog: self = .problem("\(error)")
            case .notFound, .notAnEventLog, .newerFormat, .busy: self = unavailable(error)
            }
        default:
            self = unavailable(error)
        }
    }
}

extension ParsedArguments {
    /// `--from` and `--to` over `store`'s events: by default its first event (1, or the one
    /// after its base) and the newest (`UInt64.max`, for the caller to clamp).
    /// - Throws: a bad-input ``CLIError`` when either names an event a compaction dropped.
    package func range(in store: EventStore) throws(CLIError) -> (from: UInt64, to: UInt64) {
        let base = try attempt { try store.base()?.seq ?? 0 }
        return (Swift.max(try retained("from", base) ?? 0, base + 1), try retained("to", base) ?? .max)
    }

    /// `--to` over `store`'s events, for a command that always starts at the first: by
    /// default `UInt64.max`, for the caller to clamp.
    /// - Throws: a bad-input ``CLIError`` when it names an event a compaction dropped.
    package func last(in store: EventStore) throws(CLIError) -> UInt64 {
        try retained("to", try attempt { try store.base()?.seq ?? 0 }) ?? .max
    }

    /// The option's seq, refused when a compaction dropped it (1 through `base`).
    private func retained(_ name: String, _ base: UInt64) throws(CLIError) -> UInt64? {
        let value = try seq(name)
        if let value, value > 0, value <= base { throw CLIError.badInput("\(EventStoreError.compacted(seq: value, base: base))") }
        return value
    }
}
