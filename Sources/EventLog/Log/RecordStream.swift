import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Wakes a waiter when the log's data file changes, in this process or any other. LMDB sends
/// no notification, but every commit writes its pages and meta page into `data.mdb` with
/// `pwrite`, which inotify reports; where inotify is unavailable (or runs out of watches),
/// the wait falls back to polling every `pollInterval`. Either way the waiter re-reads the
/// log, so a missed or spurious wake-up costs a read, never an event.
///
/// A commit becomes visible to readers just after its last write to the file, so a waiter woken
/// by that write can read too early. After a wake-up by the file, the next waits are short
/// (1 ms, doubling up to `pollInterval`), which finds such a commit within a millisecond or two.
///
/// `wait` is called from one thread at a time; `wake` from any.
final class CommitSignal: @unchecked Sendable {
    private let inotify: Int32
    /// A pipe `wake()` writes to: its read end is polled with the inotify descriptor.
    private let wakeup: (read: Int32, write: Int32)
    /// How long a wait lasts without a file event: the polling fallback's period, and the bound
    /// on how late a commit is seen if an event were ever lost.
    let pollInterval: Double
    /// The next wait's timeout while a commit may be in flight; `nil` outside one.
    private var retryDelay: Double?
    /// Where an async waiter blocks in `wait`.
    let waitingQueue = DispatchQueue(label: "eventlog.commit-signal")

    init(dataFile: String, pollInterval: Double = 0.25) {
        self.pollInterval = pollInterval
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if fd >= 0, inotify_add_watch(fd, dataFile, UInt32(IN_MODIFY)) < 0 { close(fd); inotify = -1 } else { inotify = fd }
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends { _ = fcntl(end, F_SETFL, O_NONBLOCK); _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        wakeup = (ends[0], ends[1])
    }

    deinit {
        for fd in [inotify, wakeup.read, wakeup.write] where fd >= 0 { close(fd) }
    }

    /// Whether changes come from inotify (otherwise from polling).
    var isNotified: Bool { inotify >= 0 }

    /// Blocks until the data file changes, `wake()` is called, or `pollInterval` passes.
    func wait() {
        var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeup.read, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, nfds_t(fds.count), Int32(((retryDelay ?? pollInterval) * 1_000).rounded(.up)))
        var drain = [UInt8](repeating: 0, count: 4_096)
        var fileChanged = false
        if inotify >= 0 { while read(inotify, &drain, drain.count) > 0 { fileChanged = true } }
        if fileChanged {
            retryDelay = 0.001
        } else if let delay = retryDelay {
            retryDelay = delay * 2 < pollInterval ? delay * 2 : nil
        }
        if wakeup.read >= 0 { while read(wakeup.read, &drain, drain.count) > 0 {} }
    }

    /// Ends a `wait` at once (from any thread).
    func wake() {
        var one: UInt8 = 1
        _ = write(wakeup.write, &one, 1)
    }
}

extension EventStore {
    /// The records after `seq` in order: those already in the log, then each new one as it
    /// commits, from this process or another, until the task is cancelled. Every record is
    /// delivered once, none is skipped; records are read in short read transactions (at most
    /// `chunk` at a time), so a slow consumer never holds one open, and waiting blocks a thread
    /// of its own, not the caller's.
    ///
    /// - Parameters:
    ///   - seq: The seq the stream starts after: 0 for the whole log, ``lastSeq()`` for new
    ///     records only.
    ///   - chunk: The most records one read transaction reads (at least 1).
    public func records(after seq: UInt64, chunk: Int = 1_024) -> RecordStream {
        RecordStream(store: self, after: seq, chunk: chunk)
    }

    /// Calls `body` with the records after `seq` in order, a chunk at a time: those already in
    /// the log, then new ones as they commit (from any process), until `body` returns `false`.
    /// Blocks the calling thread while it waits; `stop`, checked at every wake-up (at least
    /// every quarter second), ends it too.
    ///
    /// - Parameters:
    ///   - seq: The seq to start after: 0 for the whole log.
    ///   - chunk: The most records given to `body` at once, read in one read transaction.
    ///   - stop: Checked before each read; `true` ends the call.
    ///   - body: Takes a chunk of records, oldest first, and returns whether to go on.
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at a record that fails its
    ///   checksum or does not decode; whatever `body` throws; an ``LMDBError`` when a read fails.
    package func follow(after seq: UInt64, chunk: Int = 1_024, stop: () -> Bool = { false },
                       _ body: ([EventRecord]) throws -> Bool) throws {
        let signal = CommitSignal(dataFile: path + "/data.mdb")
        var delivered = seq
        while !stop() {
            let records = try records(after: delivered, limit: Swift.max(1, chunk))
            if records.isEmpty {
                signal.wait()
                continue
            }
            delivered = records[records.count - 1].seq
            guard try body(records) else { return }
        }
    }

    /// The records after `seq`, at most `limit`, read in one short read transaction.
    func records(after seq: UInt64, limit: Int) throws -> [EventRecord] {
        var records: [EventRecord] = []
        guard seq < UInt64.max else { return records }
        try forEachRecord(from: seq + 1) { record in
            records.append(record)
            return records.count < limit
        }
        return records
    }
}

/// The `AsyncSequence` of `EventStore.records(after:)`.
public struct RecordStream: AsyncSequence, Sendable {
    /// One record per event, in seq order.
    public typealias Element = EventRecord
    let store: EventStore
    let after: UInt64
    let chunk: Int

    /// A new iterator from the stream's starting seq; each iterator watches the data file
    /// on its own.
    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, delivered: after, chunk: Swift.max(1, chunk),
                 signal: CommitSignal(dataFile: store.path + "/data.mdb"))
    }

    /// Reads records a chunk at a time and waits for a commit when it has read them all. Use
    /// it from one task at a time: its copies share one commit signal.
    public struct Iterator: AsyncIteratorProtocol {
        let store: EventStore
        var delivered: UInt64
        let chunk: Int
        let signal: CommitSignal
        var buffer: [EventRecord] = []
        var index = 0

        /// The next record, waiting for one to commit; `nil` once the task is cancelled.
        ///
        /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at a record that fails its
        ///   checksum or does not decode; an ``LMDBError`` when a read fails.
        public mutating func next() async throws -> EventRecord? {
            while index == buffer.count {
                if Task.isCancelled { return nil }
                buffer = try store.records(after: delivered, limit: chunk)
                index = 0
                if buffer.isEmpty { await waitForCommit() }
            }
            let record = buffer[index]
            index += 1
            delivered = record.seq
            return record
        }

        /// Waits on a queue of its own, so that neither the cooperative pool nor Dispatch's
        /// global queues (as wide as the machine has cores) are ever blocked by it: a private
        /// queue gets a thread of its own while its work blocks. Cancellation wakes the wait at once.
        private func waitForCommit() async {
            let signal = self.signal
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    signal.waitingQueue.async {
                        signal.wait()
                        continuation.resume()
                    }
                }
            } onCancel: {
                signal.wake()
            }
        }
    }
}
