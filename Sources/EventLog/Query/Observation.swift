/// The value at one path, kept current from write sets alone: a write at the path or above it
/// replaces it, a write under it changes part of it. Nothing else of the state is held.
public struct ObservedValue: Sendable, Hashable {
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

extension EventStore {
    /// The value at `path` after `seq` (default: now), then each distinct value it takes as
    /// events commit, from any process, with the seq of the event that set it (GRDB's
    /// `ValueObservation` shape over `records(after:)`). Ends when the task is cancelled.
    public func observe(_ path: StatePath, after seq: UInt64? = nil) throws -> PathObservation {
        let start = try seq ?? lastSeq()
        return PathObservation(records: records(after: start), start: start, value: ObservedValue(path, in: try snapshot(after: start)))
    }
}

/// The `AsyncSequence` of `EventStore.observe(_:after:)`: `(seq, value)` pairs, the first the
/// starting value, then one for each change (never two equal values in a row).
public struct PathObservation: AsyncSequence, Sendable {
    public typealias Element = (seq: UInt64, value: StateValue?)
    let records: RecordStream
    let start: UInt64
    let value: ObservedValue

    public func makeAsyncIterator() -> Iterator {
        Iterator(records: records.makeAsyncIterator(), start: start, value: value)
    }

    public struct Iterator: AsyncIteratorProtocol {
        var records: RecordStream.Iterator
        var start: UInt64?
        var value: ObservedValue

        public mutating func next() async throws -> Element? {
            if let first = start {
                start = nil
                return (first, value.value)
            }
            while let record = try await records.next() {
                if value.apply(record.event.writes) { return (record.seq, value.value) }
            }
            return nil
        }
    }
}
