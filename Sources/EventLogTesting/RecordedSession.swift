import EventLog
import Foundation

/// A session recorded once to a fixture and replayed through today's code by every run: a
/// regression test in one line.
///
///     verifyRecordedSession("Fixtures/bots-tab.jsonl", through: EventLogApp.demoProjections(model)) { store, clock in
///         let engine = try EffectEngine(store: store, model: model)
///         try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url)
///     }
///
/// The fixture is JSON lines, one event each as `eventlog export` writes it (less the
/// checksums), so it is stable and reads well in a diff. A relative path is taken from the
/// test file's directory. A run verifies: the fixture's events are replayed through
/// `projections` (`eventlog replay --verify`), and the first event today's code computes
/// differently fails the test with its seq, event, cause and a −/+ diff of the state after it.
/// Events of streams the projections do not know fail it too: nothing passes unchecked.
///
/// Recording is explicit: with `EVENTLOG_RECORD=1` in the environment, `session` runs on a
/// fresh log (its clock moved by hand) and its events replace the fixture; the test then fails
/// so that a run that records is never taken for one that verified. A missing fixture fails
/// with the command that records it.
@discardableResult
public func verifyRecordedSession(_ fixture: String, through projections: some Projection,
                                  fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column,
                                  session: (EventStore, ManualClock) throws -> Void) -> Bool {
    let location = TestLocation(fileID: fileID, filePath: filePath, line: line, column: column)
    let file = fixture.hasPrefix("/") ? fixture : URL(fileURLWithPath: "\(location.filePath)").deletingLastPathComponent().appendingPathComponent(fixture).path
    do {
        if RecordedSession.isRecording {
            let count = try RecordedSession.record(to: file, session)
            location.fail("Recorded \(count) events to \(file) (EVENTLOG_RECORD is set). Run again without it to verify.")
            return false
        }
        guard FileManager.default.fileExists(atPath: file) else {
            location.fail("No recorded session at \(file). Record it with EVENTLOG_RECORD=1 in the environment.")
            return false
        }
        return try RecordedSession.verify(file, through: projections, location: location)
    } catch {
        location.fail("Recorded session \(file): \(error)")
        return false
    }
}

/// The recording and verifying of sessions behind `verifyRecordedSession`.
public enum RecordedSession {
    /// Whether this run records sessions: `EVENTLOG_RECORD` is `1`, `true` or `yes`.
    public static var isRecording: Bool {
        ["1", "true", "yes"].contains(ProcessInfo.processInfo.environment["EVENTLOG_RECORD"]?.lowercased() ?? "")
    }

    /// Runs `session` on a fresh log and writes its events to `file`; returns how many.
    static func record(to file: String, _ session: (EventStore, ManualClock) throws -> Void) throws -> Int {
        let log = try TemporaryEventStore(name: "recording")
        try session(log.store, log.clock)
        var lines = ""
        var count = 0
        try log.store.forEachRecord { record in
            guard case .object(var object) = record.jsonValue else { return true }
            object["checksum"] = nil
            lines += StateValue.object(object).json() + "\n"
            count += 1
            return true
        }
        try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(lines.utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
        return count
    }

    /// Loads `file` into a fresh log and replays it through `projections`, verifying.
    static func verify(_ file: String, through projections: some Projection, location: TestLocation) throws -> Bool {
        let log = try TemporaryEventStore(name: "recordedSession")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        try log.store.transact { batch in
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
                do {
                    let imported = try ImportedEvent(json: try StateValue(json: String(line)))
                    _ = try batch.append(imported.event, time: imported.time)
                } catch {
                    throw FixtureError(description: "line \(index + 1): \(error)")
                }
            }
        }
        let report = try log.store.replay(through: projections, verify: true)
        let explore = ["eventlog replay --verify --db \(log.path)"]
        if let divergence = report.divergence {
            let event = divergence.record.event
            var lines = ["Recorded session \(file) diverges from today's code at #\(divergence.seq) \(event.stream)/\(event.type):",
                         "    recorded: \(event.outcome)\(event.writes.isEmpty ? "" : ": " + event.writes.map(\.description).joined(separator: "; "))",
                         "    today:    \(divergence.actual.outcome)\(divergence.actual.writes.isEmpty ? "" : ": " + divergence.actual.writes.map(\.description).joined(separator: "; "))"]
            if let cause = event.cause {
                lines.append("    cause:    \(cause.id) step \(cause.step)\(cause.source.isEmpty ? "" : " (\(cause.source))")")
            }
            lines.append("    state after it (− recorded + today):")
            lines += divergence.diff.map { "        \($0.path): − \($0.old?.description ?? "(absent)") + \($0.new?.description ?? "(absent)")" }
            location.fail(lines.joined(separator: "\n"), keeping: log.directory, explore: explore + ["eventlog show \(divergence.seq) --db \(log.path)"])
            return false
        }
        if !report.unknownStreams.isEmpty {
            location.fail("Recorded session \(file) has events no code knows, which nothing checked: streams \(report.unknownStreams.joined(separator: ", "))",
                          keeping: log.directory, explore: explore)
            return false
        }
        return true
    }

    struct FixtureError: Error, CustomStringConvertible {
        let description: String
    }
}
