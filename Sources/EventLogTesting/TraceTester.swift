import EventLog
import Foundation

/// A test's log and the assertions on it: drive the app on `store` (by URL, plan, effect or
/// any API call), then say what happened.
///
/// Exhaustive by default: `expect` checks every event since the previous assertion, in
/// order, with its outcome and writes; an event that happened and was not expected fails, and
/// so does one expected that did not happen. Events left unasserted when the tester is
/// released fail the test too. Bookkeeping (`ignoring`) is left out once, for every assertion.
///
/// On a failure the log is kept, and the failure says how to open it with the command line.
/// Failures are reported at the line of the assertion, under Swift Testing or XCTest.
public final class TraceTester: @unchecked Sendable {
    /// The log under test, its directory and its clock.
    public let temporary: TemporaryEventStore
    /// What every assertion leaves out.
    public var ignoring: TraceFilter
    /// Whether events left unasserted when the tester is released fail the test.
    public var exhaustive: Bool
    /// The last seq an assertion covered: the next `expect` starts after it.
    public private(set) var checkedThrough: UInt64
    /// The command that opens the log, for the hints of a failure.
    public var commandName = "eventlog"
    private let createdAt: TestLocation
    private var failed = false

    /// A fresh log in a temporary directory, its clock moved by hand (see `TemporaryEventStore`).
    /// - Parameters:
    ///   - ignoring: What every assertion leaves out, such as `EffectEngine.bookkeeping`.
    ///   - exhaustive: Whether `expect` checks every event, and events left unasserted fail
    ///     the test when the tester is released.
    ///   - name: Names the temporary directory; the calling function by default.
    /// - Throws: The errors of `TemporaryEventStore.init` when the store cannot be created.
    public init(ignoring: TraceFilter = .none, exhaustive: Bool = true,
                start: Timestamp = TemporaryEventStore.defaultStart, stepMicroseconds: Int64 = 1_000,
                keyframePolicy: KeyframePolicy = KeyframePolicy(), name: String = #function, fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column) throws {
        temporary = try TemporaryEventStore(start: start, stepMicroseconds: stepMicroseconds, keyframePolicy: keyframePolicy, name: name)
        self.ignoring = ignoring
        self.exhaustive = exhaustive
        createdAt = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
        checkedThrough = try temporary.store.lastSeq()
    }

    /// The store to drive the app on.
    public var store: EventStore { temporary.store }
    /// The store's clock: move it to let time pass between events.
    public var clock: ManualClock { temporary.clock }
    /// The database directory (kept after a failure).
    public var path: String { temporary.path }
    /// The state after the last event; throws what `EventStore.currentState` throws.
    public var state: StateValue { get throws { try store.currentState } }

    /// The events since the last assertion, without the ignored ones.
    /// - Throws: `EventStoreError` (`.corruptRecord` among them) or `LMDBError` when the log
    ///   cannot be read.
    public func unchecked() throws -> [EventRecord] {
        var records: [EventRecord] = []
        try store.forEachRecord(from: checkedThrough + 1) { records.append($0); return true }
        return ignoring.apply(to: records)
    }

    /// Checks the events since the last assertion against `expected`, then moves past them.
    /// Exhaustive as the tester is, unless said otherwise: see the type's summary. Non-exhaustive, the expected
    /// events must happen in this order with these outcomes and writes; other events and
    /// other writes pass. Returns whether the check passed.
    ///
    /// A log that cannot be read fails the test at the assertion's line.
    /// - Parameter exhaustive: Overrides the tester's `exhaustive` for this assertion only.
    @discardableResult
    public func expect(_ expected: [ExpectedEvent], exhaustive: Bool? = nil,
                       fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column) -> Bool {
        let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
        let last: UInt64
        let comparison: TraceComparison
        do {
            last = try store.lastSeq()
            let actual = try unchecked()
            comparison = exhaustive ?? self.exhaustive ? TraceComparison(exhaustive: expected, actual: actual) : TraceComparison(nonExhaustive: expected, actual: actual)
        } catch {
            return fail("Cannot read the log: \(error)", at: location)
        }
        let from = checkedThrough + 1
        checkedThrough = last
        guard comparison.failed else { return true }
        let range = from <= last ? "events #\(from)…#\(last)" : "no events (after #\(last))"
        return fail("The trace differs from the expected one (\(range); − expected, + happened, ≠ happened differently):\n"
                    + comparison.rendered, showing: comparison.firstDifferingSeq ?? from, at: location)
    }

    /// Checks values in the state after the last event: each path's value, `nil` for absent.
    /// Other paths are not looked at. Returns whether every value is as given; a state that
    /// cannot be read fails the test.
    @discardableResult
    public func expectState(_ values: KeyValuePairs<StatePath, StateValue?>,
                            fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column) -> Bool {
        let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
        let state: StateValue
        do { state = try store.currentState } catch { return fail("Cannot read the state: \(error)", at: location) }
        let differences = values.compactMap { path, want -> String? in
            let have = state[path]
            return have == want ? nil : "\(path): − \(want?.description ?? "(absent)") + \(have?.description ?? "(absent)")"
        }
        guard !differences.isEmpty else { return true }
        return fail("The state after #\(checkedThrough) differs (− expected, + actual):\n" + differences.map { "        " + $0 }.joined(separator: "\n"),
                    showing: nil, at: location)
    }

    /// Moves past the events so far without asserting them (for a test's setup).
    /// - Throws: `EventStoreError` or `LMDBError` when the log cannot be read.
    public func skipUnchecked() throws {
        checkedThrough = try store.lastSeq()
    }

    /// Records a failure with the commands that open the kept log.
    func fail(_ message: String, showing seq: UInt64? = nil, at location: TestLocation) -> Bool {
        failed = true
        var commands = ["\(commandName) log --db \(path)"]
        if let seq { commands.append("\(commandName) show \(seq) --db \(path)") }
        location.fail(message, keeping: temporary.directory, explore: commands)
        return false
    }

    deinit {
        guard exhaustive, !failed, let left = try? unchecked(), !left.isEmpty else { return }
        _ = fail("\(left.count) event\(left.count == 1 ? " was" : "s were") never asserted (call expect, or make the tester non-exhaustive):\n"
                 + left.map { "  + \($0)" }.joined(separator: "\n"), showing: left[0].seq, at: createdAt)
    }
}
