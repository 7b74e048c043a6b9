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
    /// Told of each message on a log's subject that `logs()` and `bisect` skip because it is
    /// not the log's next record, and of records missing; by default, a line on standard error.
    public var foreign: @Sendable (StreamNotice) -> Void = { notice in
        FileHandle.standardError.write(Data("warning: \(notice)\n".utf8))
    }

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
        /// Where copies of the log refused as forks first differ from these records: each
        /// such seq once, in order; empty when no copy was.
        public var forkedAt: [UInt64] = []
    }

    /// Every log in the stream, by id, each as the stream holds its records: a message on a
    /// log's subject that is not its next record (someone else's, a damaged record, a second
    /// one for a seq) is told to `foreign` and skipped, as are subjects that name no log, and
    /// records missing before one are told as well; the other logs are listed all the same.
    /// - Throws: `FleetError` of kind `.unavailable` when the servers cannot be reached or do
    ///   not answer in time; `.refused` when the stream cannot be read (it does not exist, say).
    public func logs() throws -> [LogSummary] {
        let js = try JetStream(servers: servers, timeout: timeout)
        return try logIDs(js).compactMap { logID, messages, forkNotices -> LogSummary? in
            let subject = JetStream.Subjects.of(logID)
            guard let last = try js.lastMessage(stream: stream, subject: subject) else { return nil }
            var summary: LogSummary
            // As a shipper leaves it: the newest message is the subject's message n, of n,
            // and carries records through its last.
            if let run = try? Shipment(last, of: logID), run.ordinal == messages,
               let record = try? run.record(run.seqs.upperBound).withUnsafeBytes({ try EventStore.decode($0, seq: run.seqs.upperBound) }) {
                summary = LogSummary(logID: logID, events: run.seqs.upperBound, lastSeq: run.seqs.upperBound, lastTime: record.time)
            } else {
                guard let read = try self.summary(of: logID, js, through: last.sequence) else { return nil }
                summary = read
            }
            if forkNotices > 0 { summary.forkedAt = try forks(of: logID, js, notices: forkNotices) }
            return summary
        }.sorted { $0.logID.uuidString < $1.logID.uuidString }
    }

    /// The logs of the stream's subjects, with how many messages each holds and how many
    /// notices of forks its forks subject holds; a subject that names no log is told to
    /// `foreign`.
    private func logIDs(_ js: JetStream) throws -> [(logID: UUID, messages: UInt64, forkNotices: UInt64)] {
        var logs: [(logID: UUID, messages: UInt64)] = [], forkNotices: [UUID: UInt64] = [:]
        for entry in try js.subjects(stream: stream, filter: JetStream.Subjects.all) {
            switch JetStream.Subjects.log(of: entry.subject) {
            case let (logID, forks)? where forks: forkNotices[logID] = entry.messages
            case let (logID, _)?: logs.append((logID, entry.messages))
            case nil:
                let newest = try js.lastMessage(stream: stream, subject: entry.subject)
                foreign(StreamNotice(logID: nil, subject: entry.subject, streamSequence: newest?.sequence ?? 0,
                                     finding: "\(entry.messages) message\(entry.messages == 1 ? "" : "s") on it, not a log's records; skipped"))
            }
        }
        return logs.map { ($0.logID, $0.messages, forkNotices[$0.logID] ?? 0) }
    }

    /// The seqs the `notices` fork notices of `logID` name, each once, in order; a message
    /// there that is no notice is told to `foreign` and skipped.
    private func forks(of logID: UUID, _ js: JetStream, notices: UInt64) throws -> [UInt64] {
        let subject = JetStream.Subjects.forks(of: logID)
        let messages = try js.messages(stream: stream, subject: subject, from: 1)
        var seqs = Set<UInt64>()
        for _ in 0..<notices {
            guard let message = try messages.next(timeout: timeout) else { break }
            guard let seq = ForkNotice.seq(message.data) else {
                foreign(StreamNotice(logID: logID, subject: subject, streamSequence: message.sequence, finding: "not a notice of a fork; skipped"))
                continue
            }
            seqs.insert(seq)
        }
        return seqs.sorted()
    }

    /// A log read through from the start to the stream sequence `last`, telling `foreign` of
    /// every message that is not its next record and of records missing; `nil` when the
    /// subject holds none of its records.
    private func summary(of logID: UUID, _ js: JetStream, through last: UInt64) throws -> LogSummary? {
        let messages = try js.messages(stream: stream, subject: JetStream.Subjects.of(logID), from: 1)
        var expected: UInt64 = 1, events: UInt64 = 0
        var newest: Shipment?
        func take(_ run: Shipment) {
            events += UInt64(run.seqs.count)
            expected = run.seqs.upperBound + 1
            newest = run
        }
        while true {
            guard let message = try messages.next(timeout: timeout) else {
                throw FleetError(.unavailable, "the stream stopped delivering log \(logID.uuidString.lowercased()) before stream seq \(last)")
            }
            switch Delivery(message, of: logID, expected: expected, decoding: true, had: 0) {
            case .foreign(let reason): foreign(.skipped(message, of: logID, reason))
            case .after(let gap, let run):
                foreign(.missing(gap, before: message, of: logID))
                take(run)
            case .run(let run): take(run)
            }
            if message.sequence >= last { break }
        }
        guard let newest else { return nil }
        let seq = newest.seqs.upperBound
        let record = try newest.record(seq).withUnsafeBytes { try EventStore.decode($0, seq: seq) }
        return LogSummary(logID: logID, events: events, lastSeq: seq, lastTime: record.time)
    }

    /// Where one log first went wrong: reached the state a predicate describes, or, replayed,
    /// first disagreed with today's code.
    public struct Finding: Sendable {
        /// The log the finding is about.
        public var logID: UUID
        /// The first bad event; `nil` when the log has none.
        public var firstBad: EventRecord?
        /// How many events of the log were searched: the last seq of its copy.
        public var events: UInt64
        /// Replayed: today's code against the recording at the first bad event, when it
        /// recomputed it.
        public var divergence: Divergence?
        /// Replayed: why today's code cannot read the first bad event (an old version no
        /// upcaster reads).
        public var unreadable: String?
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
    ///   - examine: Called with each copy, while it is still open, and its finding, from any
    ///     thread (to ask more of the copy: the CLI checks the predicate's paths); what it
    ///     throws is that log's failure.
    ///   - progress: Called with the number of logs searched so far after each one, from any
    ///     thread.
    /// - Throws: `FleetError` as `logs()` throws it when no logs are given; otherwise the first failure,
    ///   in the order of the logs, among the copies: `FleetError` as `Puller.pull` throws it,
    ///   `EventStoreError` or `LMDBError` when a copy cannot be made or searched. Every log is
    ///   searched even when one fails. A message on a log's subject that is not its next
    ///   record is told to `foreign` and skipped, as `logs()` does, never a failure.
    public func bisect(where predicate: StatePredicate, logs requested: [UUID]? = nil, scratch: String,
                       examine: @escaping @Sendable (_ copy: EventStore, _ finding: Finding) throws -> Void = { _, _ in },
                       progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> [Finding] {
        try survey(requested, scratch: scratch, progress: progress) { logID, copy, through in
            let found = try copy.firstEvent(where: predicate)
            let finding = Finding(logID: logID, firstBad: try found.firstBad.flatMap { try copy.record($0) }, events: through)
            try examine(copy, finding)
            return finding
        }
    }

    /// Copies each log as ``bisect(where:logs:scratch:examine:progress:)`` does and replays
    /// it through the code `code` makes, verifying, as `bisect --replay` does: the first bad
    /// event is the first that code disagrees with or cannot read.
    /// - Parameters:
    ///   - code: Makes the app's code (today's, or a faulty variant), once for each log, on
    ///     the thread that replays it.
    ///   - requested: The logs to replay; `nil` for every log in the stream.
    ///   - scratch: As for ``bisect(where:logs:scratch:examine:progress:)``.
    ///   - progress: Called with the number of logs replayed so far after each one, from any
    ///     thread.
    /// - Throws: What ``bisect(where:logs:scratch:examine:progress:)`` throws, and what `code` throws.
    public func bisect<Code: Projection>(replayingThrough code: @escaping @Sendable () throws -> Code, logs requested: [UUID]? = nil,
                                         scratch: String, progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> [Finding] {
        try survey(requested, scratch: scratch, progress: progress) { logID, copy, through in
            let report = try copy.replay(through: try code(), verify: true)
            let firstBad = report.unreadable?.record ?? report.divergence?.record
            return Finding(logID: logID, firstBad: firstBad, events: through, divergence: report.divergence, unreadable: report.unreadable?.reason)
        }
    }

    /// How the logs that ended with one value at a path did.
    public struct Group: Sendable, Equatable {
        /// The value at the path after each log's newest event; `nil`: the path is absent.
        public var value: StateValue?
        /// How many logs ended with it.
        public var logs = 0
        /// How many of them reached the state sought.
        public var reached = 0
        /// What first took each of those there (``cause(of:)``), and how many times.
        public var causes: [String: Int] = [:]

        /// The cause that took the most logs there (the first by name among equals); `nil`
        /// when none reached it.
        public var commonestCause: String? {
            causes.max { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }?.key
        }
    }

    /// What the fleet did: each log (`logs`, or every log in the stream) copied, examined and
    /// removed as `bisect` does, and counted in the group of the value `path` holds after its
    /// newest event (one group for all when `nil`): how many logs, how many reached
    /// `predicate` (none sought when `nil`), and what first took them there. Memory holds one
    /// group per value, never the logs' findings: a fleet of any size.
    /// - Returns: The groups, the most logs first (then by value).
    /// - Throws: What ``bisect(where:logs:scratch:examine:progress:)`` throws.
    public func stats(groupingBy path: StatePath?, reaching predicate: StatePredicate?, logs requested: [UUID]? = nil, scratch: String,
                      progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> [Group] {
        let groups = Locked<[String: Group]>([:])
        _ = try survey(requested, scratch: scratch, progress: progress) { _, copy, _ in
            let value = try path.flatMap { try copy.currentState[$0] }
            let firstBad = try predicate.flatMap { try copy.firstEvent(where: $0).firstBad }.flatMap { try copy.record($0) }
            groups.withLock { groups in
                let key = value?.json() ?? ""
                var group = groups[key] ?? Group(value: value)
                group.logs += 1
                if let firstBad {
                    group.reached += 1
                    group.causes[Self.cause(of: firstBad), default: 0] += 1
                }
                groups[key] = group
            }
        }
        return groups.withLock { $0.values }.sorted { a, b in
            a.logs != b.logs ? a.logs > b.logs : (a.value?.json() ?? "") < (b.value?.json() ?? "")
        }
    }

    /// One log of those that entered a state (``cohort(entering:reaching:logs:scratch:progress:)``).
    public struct CohortMember: Sendable {
        /// The log's id.
        public var logID: UUID
        /// The first event after which the log was in the entering state.
        public var entered: EventRecord
        /// The first event from `entered` on after which the state sought held; `nil` when
        /// none did.
        public var reached: EventRecord?
    }

    /// The logs (`logs`, or every log in the stream) that were ever in the state `entering`
    /// describes (the installs that took an update, say), each with the first event from then
    /// on after which `reaching` held (a rollback, say). Both are found by folding every event
    /// in order, so a state left again is still seen, and each log is copied, examined and
    /// removed as `stats` does. Members come in the order of `logs`, or of the stream's subjects.
    /// - Throws: as ``stats(groupingBy:reaching:logs:scratch:progress:)`` does.
    public func cohort(entering: StatePredicate, reaching: StatePredicate, logs requested: [UUID]? = nil, scratch: String,
                       progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> [CohortMember] {
        try survey(requested, scratch: scratch, progress: progress) { logID, copy, _ -> CohortMember? in
            guard let seq = try copy.firstEvent(where: entering, linear: true).firstBad, let entered = try copy.record(seq) else { return nil }
            let reached = try copy.firstEvent(where: reaching, from: seq, linear: true).firstBad.flatMap { try copy.record($0) }
            return CohortMember(logID: logID, entered: entered, reached: reached)
        }.compactMap { $0 }
    }

    /// What started an event: its plan's source (a URL), else its origin, stream and type.
    public static func cause(of record: EventRecord) -> String {
        if let cause = record.event.cause, !cause.source.isEmpty { return cause.source }
        return "\(record.event.origin) \(record.event.stream)/\(record.event.type)"
    }

    /// Pulls each log (`requested`, or every log in the stream) into a directory of its own
    /// in `scratch`, hands the copy to `examine` with how far it was pulled, and removes it;
    /// as many logs at once as the machine has cores. The results come in the order of the
    /// logs; the first failure among them is thrown once every log was tried.
    private func survey<T: Sendable>(_ requested: [UUID]?, scratch: String, progress: @escaping @Sendable (Int) -> Void,
                                     _ examine: @escaping @Sendable (_ logID: UUID, _ copy: EventStore, _ through: UInt64) throws -> T) throws -> [T] {
        let ids = try requested ?? logIDs(try JetStream(servers: servers, timeout: timeout)).map(\.logID)
        let results = Results<T>(count: ids.count)
        DispatchQueue.concurrentPerform(iterations: ids.count) { index in
            results.set(index, Result { try copy(ids[index], into: scratch + "/" + ids[index].uuidString.lowercased(), examine) })
            progress(results.done)
        }
        return try results.values.map { try $0!.get() }
    }

    /// Pulls one log into `scratch` (a directory this call creates) and examines the copy,
    /// which is removed when done.
    private func copy<T>(_ logID: UUID, into scratch: String, _ examine: (UUID, EventStore, UInt64) throws -> T) throws -> T {
        try EventStore.makeScratch(at: scratch)
        defer { EventStore.removeScratch(at: scratch) }
        // The copy is closed when the closure returns, before the defer removes its files.
        return try {
            let copy = try EventStore(path: scratch, options: { var options = EventStore.Options(); options.durability = .lastCommitMayBeLost; return options }())
            var puller = Puller(servers: servers)
            puller.stream = stream
            puller.timeout = timeout
            puller.foreign = foreign
            let report = try puller.pull(logID, into: copy)
            return try examine(logID, copy, report.through)
        }()
    }

    /// Results filled in from several threads.
    private final class Results<T: Sendable>: Sendable {
        private let state: Locked<(values: [Result<T, any Error>?], finished: Int)>

        init(count: Int) { state = Locked((Array(repeating: nil, count: count), 0)) }

        func set(_ index: Int, _ value: Result<T, any Error>) {
            state.withLock {
                $0.values[index] = value
                $0.finished += 1
            }
        }

        var values: [Result<T, any Error>?] { state.withLock { $0.values } }
        var done: Int { state.withLock { $0.finished } }
    }
}
