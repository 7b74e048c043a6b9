/// Something of the state kept current event by event, for observations: `apply` takes an
/// event's writes and says whether `value` changed.
public protocol StateTracker: Sendable {
    /// What is tracked; an observation reports it each time it changes.
    associatedtype Value: Sendable & Equatable
    /// What is tracked, as of the writes applied so far.
    var value: Value { get }
    /// Applies one event's writes, in order, and returns whether `value` changed. A throw
    /// ends the observation with the error.
    mutating func apply(_ writes: [Write]) throws -> Bool
}

/// The value at one path, kept current from write sets alone: a write at the path or above it
/// replaces it, a write under it changes part of it. Nothing else of the state is held.
public struct ObservedValue: StateTracker, Hashable {
    /// Where the observed value lives in the state.
    public let path: StatePath
    /// The value at `path`; `nil` when there is none.
    public private(set) var value: StateValue?

    /// Starts from `state`, the whole state at some event.
    public init(_ path: StatePath, in state: StateValue) {
        self.path = path
        value = state[path]
    }

    /// Applies an event's writes; returns whether the value changed.
    @discardableResult
    public mutating func apply(_ writes: [Write]) -> Bool {
        let before = value
        for write in writes {
            if let below = path.relative(to: write.path) {
                value = write.new?[below]
            } else if let inside = write.path.relative(to: path) {
                var current = value ?? .emptyObject
                // A write the log accepted applies to the state, so under the path it applies here too.
                do throws(StateError) { try current.set(write.new, at: inside) } catch { continue }
                value = current
            }
        }
        return value != before
    }
}

/// Whether a predicate holds, kept current: it needs the whole state, which it holds.
public struct ObservedPredicate: StateTracker {
    /// The predicate evaluated after each event's writes.
    public let predicate: StatePredicate
    private var state: StateValue
    /// Whether `predicate` holds in the state now.
    public private(set) var value: Bool

    /// Starts from `state`, the whole state at some event, evaluating `predicate` there.
    public init(_ predicate: StatePredicate, in state: StateValue) {
        self.predicate = predicate
        self.state = state
        value = predicate.evaluate(state)
    }

    /// Applies an event's writes to the state it holds and evaluates the predicate again;
    /// returns whether its truth changed.
    ///
    /// - Throws: ``EventStoreError/invalidWrite(_:)`` when a write does not fit the state; the
    ///   writes before it stay applied, so the tracker is of no further use.
    @discardableResult
    public mutating func apply(_ writes: [Write]) throws -> Bool {
        do throws(StateError) { try state.apply(writes) } catch { throw EventStoreError.invalidWrite(error) }
        let before = value
        value = predicate.evaluate(state)
        return value != before
    }
}

extension EventStore {
    /// The value at `path` after `seq` (default: now), then each distinct value it takes as
    /// events commit, from any process, with the seq of the event that set it (GRDB's
    /// `ValueObservation` shape over `records(after:)`), kept from write sets alone. Ends when
    /// the task is cancelled.
    ///
    /// - Parameters:
    ///   - path: Where the value lives; a value absent there is `nil`.
    ///   - seq: The event whose state gives the first value; `nil` for the newest.
    /// - Throws: ``EventStoreError/noSuchEvent(seq:last:)`` when `seq` is past the newest event;
    ///   ``EventStoreError/corruptRecord(seq:reason:)`` or ``EventStoreError/invalidWrite(_:)``
    ///   when the state after `seq` cannot be read; an ``LMDBError`` when a read fails.
    ///   Iterating throws ``EventStoreError/corruptRecord(seq:reason:)`` or an ``LMDBError``
    ///   as ``RecordStream`` does.
    public func observe(_ path: StatePath, after seq: UInt64? = nil) throws -> StateObservation<ObservedValue> {
        let start = try seq ?? lastSeq()
        return StateObservation(records: records(after: start), start: start, tracker: ObservedValue(path, in: try snapshot(after: start)))
    }

    /// Whether `predicate` holds after `seq` (default: now), then each time that changes, as
    /// `observe(_:after:)` does for a path.
    ///
    /// - Throws: What `observe(_:after:)` throws for a path. Iterating throws as that one's
    ///   iteration does, and ``EventStoreError/invalidWrite(_:)`` when a new event's write does
    ///   not fit the state.
    public func observe(_ predicate: StatePredicate, after seq: UInt64? = nil) throws -> StateObservation<ObservedPredicate> {
        let start = try seq ?? lastSeq()
        return StateObservation(records: records(after: start), start: start, tracker: ObservedPredicate(predicate, in: try snapshot(after: start)))
    }
}

/// The `AsyncSequence` of `EventStore.observe`: `(seq, value)` pairs, the first the starting
/// value, then one for each change (never two equal values in a row).
public struct StateObservation<Tracker: StateTracker>: AsyncSequence, Sendable {
    /// The seq of the event that set the value (the starting seq, for the first), and the value.
    public typealias Element = (seq: UInt64, value: Tracker.Value)
    let records: RecordStream
    let start: UInt64
    let tracker: Tracker

    /// A new iterator from the observation's starting value; each iterator follows the log
    /// on its own.
    public func makeAsyncIterator() -> Iterator {
        Iterator(records: records.makeAsyncIterator(), start: start, tracker: tracker)
    }

    /// Gives the starting value, then follows the log's records. Use it from one task at a
    /// time, as ``RecordStream/Iterator``.
    public struct Iterator: AsyncIteratorProtocol {
        var records: RecordStream.Iterator
        var start: UInt64?
        var tracker: Tracker

        /// The starting value first, then the next change, waiting for events to commit;
        /// `nil` once the task is cancelled.
        ///
        /// - Throws: What reading the log throws (see ``RecordStream/Iterator/next()``), and
        ///   what the tracker's `apply` throws.
        public mutating func next() async throws -> Element? {
            if let first = start {
                start = nil
                return (first, tracker.value)
            }
            while let record = try await records.next() {
                if try tracker.apply(record.event.writes) { return (record.seq, tracker.value) }
            }
            return nil
        }
    }
}
