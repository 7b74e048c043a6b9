import Dispatch
import Foundation
import Synchronization

/// Encodes a large batch's records on a second thread while the appending thread checks write
/// sets and stores the records already encoded.
///
/// Encoding a record needs only the event, its seq and a time, never the state, so it can run
/// ahead of the checks that must follow the log's order. The worker fills a ring of
/// `depth` chunks of `chunkEvents` records each and waits when the ring is full, so memory
/// stays bounded whatever the batch's size. Records reach the appending thread in order.
final class EncodingPipeline: @unchecked Sendable {
    /// Records per chunk handed over at once (one semaphore round trip per chunk).
    static let chunkEvents = 256
    /// Records in the first chunk: fewer, so that the appending thread starts soon after the
    /// worker (a full first chunk kept it waiting about 0.3 ms per batch of 10,000, twice the
    /// wait that starting the thread costs).
    static let firstChunkEvents = 32
    /// Chunks in flight; bounds the encoded bytes held at once.
    static let depth = 4
    /// The smallest batch worth a second thread; smaller ones encode on the calling thread.
    static let minimumEvents = 1_024

    /// Whether a batch of `count` events should be pipelined on this machine.
    static func isWorthwhile(for count: Int) -> Bool {
        count >= minimumEvents && hasSecondCore
    }

    /// Read once: Foundation reads the process's CPU set and quota from files for every call.
    private static let hasSecondCore = ProcessInfo.processInfo.activeProcessorCount > 1

    /// One chunk's records: their bytes back to back, where each ends, and what encoding found.
    /// (The semaphores below make every access exclusive, so Swift's run-time checks are off.)
    private final class Chunk {
        @exclusivity(unchecked) var writer = BinaryWriter(capacity: 64 << 10)
        @exclusivity(unchecked) var ends: [Int] = []
        @exclusivity(unchecked) var encodings: [RecordCodec.Encoded] = []
    }

    private let events: [Event]
    private let firstSeq: UInt64
    private let clock: EventClock
    private let chunks = (0..<depth).map { _ in Chunk() }
    // The semaphores order every access to a chunk: the worker fills chunk i after `emptied`
    // says the reader is done with it and signals `filled`; the reader reads it after `filled`
    // and signals `emptied`. Both start at 0 (libdispatch traps on releasing a semaphore whose
    // count is below its initial value, which a cancelled run could leave behind).
    private let filled = DispatchSemaphore(value: 0)
    private let emptied = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let cancelled = Atomic<Bool>(false)

    private init(events: [Event], firstSeq: UInt64, clock: EventClock) {
        self.events = events
        self.firstSeq = firstSeq
        self.clock = clock
        for _ in 0..<Self.depth { emptied.signal() }
    }

    /// Calls `body` on the calling thread with each event's index, stored record (seq
    /// `firstSeq + index`, time from `clock`) and what encoding found, in order, while a second thread
    /// encodes the records ahead. When `body` throws, the worker is stopped before this returns.
    static func encode(_ events: [Event], firstSeq: UInt64, clock: EventClock,
                       _ body: (Int, UnsafeRawBufferPointer, RecordCodec.Encoded) throws -> Void) throws {
        let pipeline = EncodingPipeline(events: events, firstSeq: firstSeq, clock: clock)
        // A thread of its own rather than a pool's: the caller blocks on the worker, which must
        // never wait for a pool thread that the caller (or its own callers) might be holding.
        Thread { pipeline.produce() }.start()
        defer { pipeline.stop() }
        try pipeline.consume(body)
    }

    private var chunkCount: Int { 1 + (max(0, events.count - Self.firstChunkEvents) + Self.chunkEvents - 1) / Self.chunkEvents }

    /// The indices of the events chunk `number` holds.
    private func range(ofChunk number: Int) -> Range<Int> {
        let start = number == 0 ? 0 : Self.firstChunkEvents + (number - 1) * Self.chunkEvents
        let end = Self.firstChunkEvents + number * Self.chunkEvents
        return min(start, events.count)..<min(end, events.count)
    }

    /// The worker: encodes chunk after chunk until all are done or the reader has stopped.
    private func produce() {
        defer { finished.signal() }
        for number in 0..<chunkCount {
            emptied.wait()
            if cancelled.load(ordering: .relaxed) { return }
            let chunk = chunks[number % Self.depth]
            chunk.writer.reset()
            chunk.ends.removeAll(keepingCapacity: true)
            chunk.encodings.removeAll(keepingCapacity: true)
            let range = range(ofChunk: number)
            events.withUnsafeBufferPointer { events in
                for index in range {
                    let encoded = RecordCodec.encode(events[index], seq: firstSeq + UInt64(index), time: clock.now(), into: &chunk.writer)
                    chunk.ends.append(chunk.writer.count)
                    chunk.encodings.append(encoded)
                }
            }
            filled.signal()
        }
    }

    private func consume(_ body: (Int, UnsafeRawBufferPointer, RecordCodec.Encoded) throws -> Void) throws {
        for number in 0..<chunkCount {
            filled.wait()
            let chunk = chunks[number % Self.depth]
            let first = range(ofChunk: number).lowerBound
            try chunk.writer.withUnsafeBytes { bytes in
                var start = 0
                for (offset, end) in chunk.ends.enumerated() {
                    try body(first + offset, UnsafeRawBufferPointer(rebasing: bytes[start..<end]), chunk.encodings[offset])
                    start = end
                }
            }
            emptied.signal()
        }
    }

    /// Stops the worker (if it is still running) and waits for it to finish.
    private func stop() {
        cancelled.store(true, ordering: .relaxed)
        emptied.signal()
        finished.wait()
    }
}
