import Dispatch
import EventLog
import Foundation

/// The logs a stream holds, and questions asked of all of them at once.
public struct Fleet: Sendable {
    /// `nats://host:port`, or several, comma-separated, for a cluster.
    public let servers: String
    /// The JetStream stream the logs were shipped to.
    public var stream = "EVENTLOG"
    /// Seconds a request may wait for an answer.
    public var timeout = 5.0

    /// The logs of the default stream at `servers`; nothing is connected until a question
    /// is asked.
    public init(servers: String) {
        self.servers = servers
    }

    /// One log in the stream: how many events it holds, and its newest.
    public struct LogSummary: Sendable, Equatable {
        /// The log's id, as its subject `eventlog.<log id>` names it.
        public var logID: UUID
        /// How many of its records the stream holds.
        public var events: UInt64
        /// The seq of the newest record the stream holds.
        public var lastSeq: UInt64
        /// When the newest record was appended, as it records.
        public var lastTime: Timestamp
    }

    /// Every log in the stream, by id. A subject whose newest message is not one of its
    /// log's records is left out.
    /// - Throws: `FleetError` of kind `.unavailable` when the servers cannot be reached or do
    ///   not answer in time; `.refused` when the stream cannot be read (it does not exist,
    ///   say) or a log's newest record fails its checksum.
    public func logs() throws -> [LogSummary] {
        let js = try JetStream(servers: servers, timeout: timeout)
        return try js.subjects(stream: stream, filter: JetStream.Subjects.all).compactMap { entry -> LogSummary? in
            guard let logID = UUID(uuidString: String(entry.subject.dropFirst(JetStream.Subjects.prefix.count))),
                  let last = try js.lastMessage(stream: stream, subject: entry.subject),
                  let seq = MessageID.seq(last.id, of: logID) else { return nil }
            let record = try last.data.withUnsafeBytes { bytes -> EventRecord in
                do { return try EventStore.decode(bytes, seq: seq) } catch {
                    throw FleetError(.refused, "the newest record of log \(logID.uuidString.lowercased()) in the stream is damaged: \(error)")
                }
            }
            return LogSummary(logID: logID, events: entry.messages, lastSeq: seq, lastTime: record.time)
        }.sorted { $0.logID.uuidString < $1.logID.uuidString }
    }

    /// Where one log first reached the state the predicate describes.
    public struct Finding: Sendable {
        /// The log the finding is about.
        public var logID: UUID
        /// The first event after which the predicate holds, with its state's value at the
        /// predicate's paths; `nil` when the log never reaches it.
        public var firstBad: EventRecord?
        /// How many events of the log were searched: the last seq of its copy.
        public var events: UInt64
    }

    /// Copies each log (`logs`, or every log in the stream) into a directory of its own in
    /// `scratch` (an existing directory), removed when done, and finds the first
    /// event after which `predicate` holds, as `bisect --where` does; as many logs at once as
    /// the machine has cores. Findings come in the order of `logs`, or by id.
    /// - Parameters:
    ///   - predicate: The state sought, as `bisect --where` takes it.
    ///   - requested: The logs to search; `nil` for every log in the stream.
    ///   - scratch: An existing directory; each log's copy is made in a directory of its own
    ///     in it, named by the log's id, and removed when its search ends. A directory of that
    ///     name already there is refused for that log (an `LMDBError` of `EEXIST`), never used
    ///     or removed.
    ///   - progress: Called with the number of logs searched so far after each one, from any
    ///     thread.
    /// - Throws: The errors of `logs()` when no logs are given; otherwise the first failure,
    ///   in the order of the logs, among the copies: `FleetError` as `Puller.pull` throws it,
    ///   `EventStoreError` or `LMDBError` when a copy cannot be made or searched. Every log is
    ///   searched even when one fails.
    public func bisect(where predicate: StatePredicate, logs requested: [UUID]? = nil, scratch: String,
                       progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> [Finding] {
        let ids = try requested ?? logs().map(\.logID)
        let results = Results(count: ids.count)
        DispatchQueue.concurrentPerform(iterations: ids.count) { index in
            results.set(index, Result { try find(ids[index], predicate, scratch: scratch + "/" + ids[index].uuidString.lowercased()) })
            progress(results.done)
        }
        return try results.values.map { try $0!.get() }
    }

    /// Pulls one log into `scratch` (a directory this call creates) and bisects it; the copy
    /// is removed when done.
    private func find(_ logID: UUID, _ predicate: StatePredicate, scratch: String) throws -> Finding {
        try EventStore.makeScratch(at: scratch)
        defer { EventStore.removeScratch(at: scratch) }
        // The copy is closed when the closure returns, before the defer removes its files.
        let finding = try {
            let copy = try EventStore(path: scratch, options: { var options = EventStore.Options(); options.durability = .lastCommitMayBeLost; return options }())
            var puller = Puller(servers: servers)
            puller.stream = stream
            puller.timeout = timeout
            let report = try puller.pull(logID, into: copy)
            let found = try copy.firstEvent(where: predicate)
            return Finding(logID: logID, firstBad: try found.firstBad.flatMap { try copy.record($0) }, events: report.through)
        }()
        return finding
    }

    /// Results filled in from several threads.
    private final class Results: Sendable {
        private let state: Locked<(values: [Result<Finding, any Error>?], finished: Int)>

        init(count: Int) { state = Locked((Array(repeating: nil, count: count), 0)) }

        func set(_ index: Int, _ value: Result<Finding, any Error>) {
            state.withLock {
                $0.values[index] = value
                $0.finished += 1
            }
        }

        var values: [Result<Finding, any Error>?] { state.withLock { $0.values } }
        var done: Int { state.withLock { $0.finished } }
    }
}
