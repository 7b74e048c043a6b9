import EventLog
import Foundation

/// What a running command can reach: the chosen database, the output mode and the console.
struct Context: Sendable {
    /// `--db`, else `$EVENTLOG_DB`, else `./eventlog.lmdb`.
    var databasePath: String
    var json: Bool
    var console: Console
    /// The app whose code replays the log.
    var app: EventLogApp

    static let defaultDatabasePath = "./eventlog.lmdb"

    init(arguments: ParsedArguments, environment: [String: String], console: Console, app: EventLogApp) {
        self.app = app
        databasePath = arguments.value("db") ?? environment["EVENTLOG_DB"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.defaultDatabasePath
        json = arguments.flag("json")
        self.console = console
    }

    /// Prints one compact JSON document on its own line.
    func printJSON(_ value: StateValue) { console.line(value.json()) }

    /// Opens the event log; read-only unless `writable`, in which case it is created when
    /// missing. Failures become exit code 3 with a one-line reason; damage, exit code 1.
    func openStore(writable: Bool = false, clock: EventClock = .system) throws(CLIError) -> EventStore {
        var options = EventStore.Options()
        options.readOnly = !writable
        options.clock = clock
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

/// Damage found in the database at `path`: exit 1, with where to go next.
func damaged(_ path: String, _ error: any Error) -> CLIError {
    CLIError.problem("\(path): \(error); 'eventlog verify' says where, 'eventlog salvage' copies what is good")
}

/// Runs library code and turns its errors into the CLI's: bad references are usage errors
/// (2), corruption is a problem found (1), storage trouble (a database that cannot be opened
/// or written) is exit 3, naming the database when `writingTo` it.
func attempt<R>(writingTo database: String? = nil, _ body: () throws -> R) throws(CLIError) -> R {
    func unavailable(_ error: any Error) -> CLIError {
        CLIError.unavailable(database.map { "cannot write to \($0): \(error)" } ?? "\(error)")
    }
    do {
        return try body()
    } catch let error as CLIError {
        throw error
    } catch let error as LMDBError where error.isDamage {
        throw damaged(database ?? "the database", error)
    } catch let error as EventStoreError {
        switch error {
        case .noSuchEvent, .staleWrite, .invalidWrite, .limitExceeded, .readOnly: throw CLIError.badInput("\(error)")
        case .corruptRecord, .damaged, .outOfSequence, .otherLog: throw CLIError.problem("\(error)")
        case .notFound, .notAnEventLog, .newerFormat: throw unavailable(error)
        }
    } catch {
        throw unavailable(error)
    }
}
