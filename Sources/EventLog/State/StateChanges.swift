/// Writes made one by one against a state, each recorded only when it changes the value:
/// how a projection derives an event's write set from the state before it. Keys are read and
/// written under `root` (a stream's key, say).
public struct StateChanges: Sendable {
    /// Where `self[key]` reads and writes.
    public let root: StatePath
    /// The state with every change so far applied.
    public private(set) var state: StateValue
    /// The writes so far, in order, each with the value it replaced.
    public private(set) var writes: [Write] = []
    /// The first write that could not be made (its path crosses a value that is not an object
    /// or array); the writes after it are not attempted.
    public private(set) var failure: StateError?

    /// Starts from `state` with no writes; `self[key]` reads and writes under `root`.
    public init(_ state: StateValue, under root: StatePath = .root) {
        self.state = state
        self.root = root
    }

    /// The value at `key` under `root`; setting it records a write when it changes (`nil` removes it).
    public subscript(key: String) -> StateValue? {
        get { state[root.appending(key)] }
        set { set(newValue, at: root.appending(key)) }
    }

    /// Puts `value` at `path` (`nil` removes it), unless it is there already.
    public mutating func set(_ value: StateValue?, at path: StatePath) {
        guard failure == nil else { return }
        let old = state[path]
        guard old != value else { return }
        do throws(StateError) { try state.set(value, at: path) } catch { failure = error; return }
        writes.append(Write(path, old: old, new: value))
    }
}
