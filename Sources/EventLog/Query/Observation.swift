/// Something of the state kept current event by event, for observations: `apply` takes an
/// event's writes and says whether `value` changed.
public protocol StateTracker: Sendable {
    associatedtype Value: Sendable & Equatable
    var value: Value { get }
    mutating func apply(_ writes: [Write]) throws -> Bool
}

/// The value at one path, kept current from write sets alone: a write at the path or above it
/// replaces it, a write under it changes part of it. Nothing else of the state is held.
public struct ObservedValue: StateTracker, Hashable {
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
    public let predicate: StatePredicate
    private var state: StateValue
    /// Whether `predicate` holds in the state now.
    public private(set) var value: Bool

    public init(_ predicate: StatePredicate, in state: StateValue) {
        self.predicate = predicate
        self.state = state
        value = predicate.evaluate(state)
    }

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
    public func observe(_ path: StatePath, after seq: UInt64? = nil) throws -> StateObservation<ObservedValue> {
        let start = try seq ?? lastSeq()
        return StateObservation(records: records(after: start), start: start, tracker: ObservedValue(path, in: try snapshot(after: start)))
    }

    /// Whether `predicate` holds after `seq` (default: now), then each time that changes, as
    /// `observe(_:after:)` does for a path.
    public func observe(_ predicate: StatePredicate, after seq: UInt64? = nil) throws -> StateObservation<ObservedPredicate> {
        let start = try seq ?? lastSeq()
        return StateObservation(records: records(after: start), start: start, tracker: ObservedPredicate(predicate, in: try snapshot(after: start)))
    }
}

/// The `AsyncSequence` of `EventStore.observe`: `(seq, value)` pairs, the first the starting
/// value, then one for each change (never two equal values in a row).
public struct StateObservation<Tracker: StateTracker>: AsyncSequence, Sendable {
    public typealias Element = (seq: UInt64, value: Tracker.Value)
    let records: RecordStream
    let start: UInt64
    let tracker: Tracker

    public func makeAsyncIterator() -> Iterator {
        Iterator(records: records.makeAsyncIterator(), start: start, tracker: tracker)
    }

    public struct Iterator: AsyncIteratorProtocol {
        var records: RecordStream.Iterator
        var start: UInt64?
        var tracker: Tracker

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
