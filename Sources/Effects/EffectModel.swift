import EventLog

/// An app's effects: how each one reads the state and what it would write. Pure: no clocks,
/// no I/O, no hand-written no-op checks (the engine compares old and new values itself).
public protocol EffectModel: Sendable {
    /// The app's effects, each with a name and arguments that go into its event.
    associatedtype Effect: NamedEffect

    /// The stream of the app's effect events, and the key its properties live under.
    var stream: String { get }

    /// The app's properties before anything happened; written once by the first engine.
    var initialState: StateObject { get }

    /// Checks the effect's guard against `state` and says what it would write.
    func resolve(_ effect: Effect, in state: StateValue) -> Resolution

    /// The guard of a navigation step (pushing a screen for an unknown id, say): the reason
    /// to skip it, or `nil` to let it run. By default every navigation step may run.
    func guardNavigation(_ step: Step<Effect>, in state: StateValue) -> String?
}

extension EffectModel {
    /// Lets every navigation step run.
    public func guardNavigation(_ step: Step<Effect>, in state: StateValue) -> String? { nil }
}

/// What an effect would do in a given state.
public enum Resolution: Sendable {
    /// The guard failed (an unknown id, a missing precondition): record `skipped` with the
    /// reason and go on with the plan.
    case skip(String)
    /// Write each value at its path, once `wait` (if any) holds.
    case assign([Assignment], wait: WaitCondition? = nil)
}

/// One property write an effect intends; the engine records it only if it changes the value.
public struct Assignment: Sendable, Hashable {
    /// Where the value goes in the state.
    public var path: StatePath
    /// The new value; `nil` removes the property.
    public var value: StateValue?

    /// An assignment of `value` at `path`; `nil` removes what is there.
    public init(_ path: StatePath, _ value: StateValue?) {
        self.path = path
        self.value = value
    }
}

/// A condition a step waits for before it writes (a scroll waits until its list is on
/// screen), and how long it may wait before it is skipped.
public struct WaitCondition: Sendable {
    /// What is awaited, for people: `the conversation list is on screen`.
    public var description: String
    /// The longest wait, in microseconds.
    public var boundMicroseconds: Int64
    /// Whether the state satisfies the condition.
    public var isSatisfied: @Sendable (StateValue) -> Bool

    /// A condition described for people by `description`, waited for at most
    /// `boundMicroseconds`, that holds when `isSatisfied` returns `true` for the state.
    public init(_ description: String, boundMicroseconds: Int64, isSatisfied: @escaping @Sendable (StateValue) -> Bool) {
        self.description = description
        self.boundMicroseconds = boundMicroseconds
        self.isSatisfied = isSatisfied
    }
}
