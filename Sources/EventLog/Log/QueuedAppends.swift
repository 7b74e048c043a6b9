import Foundation

/// An event queued by ``EventStore/enqueue(_:)``: where it stands, and a way to wait until it
/// is committed.
public final class QueuedAppend: @unchecked Sendable {
    /// Appends the event to the commit's transaction, after the events queued before it.
    fileprivate let append: @Sendable (inout AppendBatch) throws -> EventRecord
    /// Guarded by the queue's lock.
    fileprivate var result: Result<EventRecord, any Error>?
    /// When it was queued (monotonic microseconds).
    fileprivate let queuedAt: Int64
    fileprivate let queue: AppendQueue

    fileprivate init(_ append: @escaping @Sendable (inout AppendBatch) throws -> EventRecord, queue: AppendQueue, at time: Int64) {
        self.append = append
        self.queue = queue
        queuedAt = time
    }

    /// Waits until the event's commit, and returns the record as stored: durable as the
    /// store's ``EventStore/Options/durability`` makes a commit.
    /// - Throws: What ``EventStore/append(_:)`` throws for it (a stale write refuses it alone;
    ///   a commit that fails fails every event of its batch); what made it threw (the `make` of
    ///   ``EventStore/enqueue(making:)``, the rules of ``EventRules/enqueue(_:to:)``).
    public func committed() throws -> EventRecord {
        try queue.wait(for: self).get()
    }

    /// The record once committed, the error once refused; `nil` while it waits.
    public var outcome: Result<EventRecord, any Error>? {
        queue.withLock { result }
    }
}

/// The queue of appends that return before they commit. One writer thread, started when the
/// first event of a burst arrives, commits what is queued in one transaction once the first
/// waiting event has lingered `linger` or `maxEvents` are waiting, then the next batch; it
/// stops when nothing is left. While it runs it holds the store, so a store is never closed
/// with events still queued (``EventStore/flush()`` waits for them; an exiting process should
/// call it).
final class AppendQueue: @unchecked Sendable {
    /// How long the first event of a batch waits for others, in microseconds.
    static let linger: Int64 = 2_000
    /// The most events one commit takes.
    static let maxEvents = 1_000

    private let condition = NSCondition()
    private var waiting: [QueuedAppend] = []
    /// Events taken by the writer and not yet settled.
    private var inFlight = 0
    private var writerRunning = false

    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        condition.lock()
        defer { condition.unlock() }
        return try body()
    }

    func enqueue(_ append: @escaping @Sendable (inout AppendBatch) throws -> EventRecord, to store: EventStore) -> QueuedAppend {
        let queued = QueuedAppend(append, queue: self, at: Self.now())
        condition.lock()
        waiting.append(queued)
        let start = !writerRunning
        writerRunning = true
        condition.broadcast()
        condition.unlock()
        if start {
            let thread = Thread { [self] in write(to: store) }
            thread.name = "eventlog.enqueue"
            thread.start()
        }
        return queued
    }

    /// Blocks until `queued` is settled.
    func wait(for queued: QueuedAppend) -> Result<EventRecord, any Error> {
        condition.lock()
        defer { condition.unlock() }
        while queued.result == nil { condition.wait() }
        return queued.result!
    }

    /// Blocks until every event queued before the call is settled.
    func flush() {
        condition.lock()
        defer { condition.unlock() }
        guard let last = waiting.last else {
            while inFlight > 0 { condition.wait() }
            return
        }
        while last.result == nil { condition.wait() }
    }

    /// The writer: batches until nothing waits.
    private func write(to store: EventStore) {
        condition.lock()
        while !waiting.isEmpty {
            // Linger for company, unless the batch is full already.
            while waiting.count < Self.maxEvents {
                let remaining = waiting[0].queuedAt + Self.linger - Self.now()
                guard remaining > 0 else { break }
                _ = condition.wait(until: Date().addingTimeInterval(Double(remaining) / 1_000_000))
            }
            let batch = Array(waiting.prefix(Self.maxEvents))
            waiting.removeFirst(batch.count)
            inFlight = batch.count
            condition.unlock()
            let results = Self.commit(batch, to: store)
            condition.lock()
            for (queued, result) in zip(batch, results) { queued.result = result }
            inFlight = 0
            condition.broadcast()
        }
        writerRunning = false
        condition.unlock()
    }

    /// Appends a batch in one transaction, each event made from the state the ones before it
    /// left. One that is refused gets its error and the others still commit; a failed commit
    /// fails them all.
    private static func commit(_ batch: [QueuedAppend], to store: EventStore) -> [Result<EventRecord, any Error>] {
        do {
            return try store.transact { transaction in
                batch.map { queued in Result { try queued.append(&transaction) } }
            }
        } catch {
            return batch.map { _ in .failure(error) }
        }
    }

    private static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1_000
    }
}

extension EventStore {
    /// Queues `event` and returns at once, before it commits: one writer thread commits what is
    /// queued together, in one transaction (one fsync) once the first of them has waited 2 ms or
    /// 1,000 are waiting, in the order queued. For an app that appends an event per tap: the tap
    /// never waits for the disk, and a burst costs one commit.
    ///
    /// Its writes are checked against the state when its batch commits, after every event queued
    /// before it: build them from that state with ``enqueue(making:)`` when they depend on it.
    /// What is acknowledged is what ``QueuedAppend/committed()`` returned or ``flush()`` waited
    /// for: a crash (SIGKILL, power loss) loses only events not yet committed, whole batches at a
    /// time, never a committed one.
    @discardableResult
    public func enqueue(_ event: Event) -> QueuedAppend {
        enqueue(making: { _ in event })
    }

    /// Queues the event `make` builds from the state it is appended to (called on the writer
    /// thread, inside the batch's transaction, after every event queued before it): what
    /// ``EventRules/append(_:at:to:)`` does in a transaction, for a queued append. A `make`
    /// that throws refuses its event alone.
    @discardableResult
    public func enqueue(making make: @escaping @Sendable (StateValue) throws -> Event) -> QueuedAppend {
        enqueue(appending: { batch in try batch.append(try make(batch.state)) })
    }

    /// Queues what `append` adds to its batch's transaction (on the writer thread, after every
    /// event queued before it): the one event it appends, at the time it chooses.
    package func enqueue(appending append: @escaping @Sendable (inout AppendBatch) throws -> EventRecord) -> QueuedAppend {
        appendQueue.enqueue(append, to: self)
    }

    /// Waits until every event queued before the call has committed (or been refused).
    public func flush() {
        appendQueue.flush()
    }
}
