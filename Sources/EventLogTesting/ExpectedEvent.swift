import EventLog

/// An event a test expects: its name, its outcome and what it writes. Its payload and origin
/// are checked only when given; the old values of its writes never are (the store checks
/// every write's old value against the state when the event is appended).
///
///     .applied("messenger/selectBotTab", ["messenger.selectedTab": "bots", "messenger.listFilter": "unread"])
///     .skipped("messenger/clearListFilter", reason: "listFilter is already null")
///     .cancelled("scrollToAvatarRow")
public struct ExpectedEvent: Sendable, Hashable, CustomStringConvertible {
    /// The stream, or `nil` for any stream (a name without `/`).
    public var stream: String?
    /// The event's type, such as `selectBotTab`.
    public var type: String
    /// The outcome the event must have.
    public var outcome: ExpectedOutcome
    /// The value each path is left with, `nil` for a removed path, in the order written.
    public var writes: [ExpectedWrite]
    /// The event's whole payload; `nil`: not checked.
    public var payload: StateValue?
    /// Where the event came from; `nil`: not checked.
    public var origin: Origin?

    /// `name` is `stream/type`, or `type` alone to match it in any stream.
    public init(_ name: String, _ outcome: ExpectedOutcome, writes: [ExpectedWrite] = [], payload: StateValue? = nil, origin: Origin? = nil) {
        if let slash = name.firstIndex(of: "/") {
            stream = String(name[..<slash])
            type = String(name[name.index(after: slash)...])
        } else {
            stream = nil
            type = name
        }
        self.outcome = outcome
        self.writes = writes
        self.payload = payload
        self.origin = origin
    }

    /// An event applied with these writes: each path and the value it is left with (`nil` removes it).
    public static func applied(_ name: String, _ writes: KeyValuePairs<StatePath, StateValue?> = [:],
                               payload: StateValue? = nil, origin: Origin? = nil) -> ExpectedEvent {
        ExpectedEvent(name, .applied, writes: writes.map { ExpectedWrite($0.key, $0.value) }, payload: payload, origin: origin)
    }

    /// An event skipped; with `reason`, for exactly that reason.
    public static func skipped(_ name: String, reason: String? = nil, payload: StateValue? = nil, origin: Origin? = nil) -> ExpectedEvent {
        ExpectedEvent(name, .skipped(reason: reason), payload: payload, origin: origin)
    }

    /// An event cancelled by a newer plan.
    public static func cancelled(_ name: String, payload: StateValue? = nil, origin: Origin? = nil) -> ExpectedEvent {
        ExpectedEvent(name, .cancelled, payload: payload, origin: origin)
    }

    /// `messenger/selectBotTab`, or the type alone when any stream matches.
    public var name: String { stream.map { "\($0)/\(type)" } ?? type }

    public var description: String {
        var text = "\(name) \(outcome)"
        if !writes.isEmpty { text += ": " + writes.map(\.description).joined(separator: "; ") }
        return text
    }

    /// Whether `event` has this name (the pairing of expected and actual events goes by it).
    func names(_ event: Event) -> Bool {
        event.type == type && (stream == nil || event.stream == stream)
    }
}

/// The outcome an event is expected to have.
public enum ExpectedOutcome: Sendable, Hashable, CustomStringConvertible {
    /// Applied, with the writes the expectation gives.
    case applied
    /// Skipped; for exactly this reason when it is not `nil`.
    case skipped(reason: String?)
    /// Cancelled by a newer plan.
    case cancelled

    func matches(_ outcome: Outcome) -> Bool {
        switch (self, outcome) {
        case (.applied, .applied), (.cancelled, .cancelled), (.skipped(nil), .skipped): true
        case (.skipped(let expected?), .skipped(let actual)): expected == actual
        default: false
        }
    }

    public var description: String {
        switch self {
        case .applied: "applied"
        case .skipped(let reason?): Outcome.skipped(reason: reason).description
        case .skipped(nil): "skipped"
        case .cancelled: "cancelled"
        }
    }
}

/// The value an event is expected to leave at a path; `nil` when it removes the path.
public struct ExpectedWrite: Sendable, Hashable, CustomStringConvertible {
    /// The path written.
    public var path: StatePath
    /// The value the path is left with; `nil` when the write removes it.
    public var new: StateValue?

    /// Expects `path` to be left with `new` (`nil`: removed).
    public init(_ path: StatePath, _ new: StateValue?) {
        self.path = path
        self.new = new
    }

    public var description: String { "\(path) = \(new.map(\.description) ?? "(removed)")" }
}

/// What the trace assertions leave out once for every assertion: bookkeeping such as a plan's
/// start event and the `plan.id` it writes.
public struct TraceFilter: Sendable, Hashable {
    /// Streams whose events are left out.
    public var streams: Set<String>
    /// Paths whose writes (and the writes under them) are left out.
    public var paths: [StatePath]

    /// A filter leaving out the events of `streams` and the writes at or under `paths`.
    public init(streams: Set<String> = [], paths: [StatePath] = []) {
        self.streams = streams
        self.paths = paths
    }

    /// Nothing left out.
    public static let none = TraceFilter()

    /// The records an assertion sees: without the left-out streams, and each without its
    /// left-out writes.
    func apply(to records: [EventRecord]) -> [EventRecord] {
        records.compactMap { record in
            guard !streams.contains(record.event.stream) else { return nil }
            var kept = record
            if !paths.isEmpty {
                kept.event.writes.removeAll { write in paths.contains { write.path.relative(to: $0) != nil } }
            }
            return kept
        }
    }
}
