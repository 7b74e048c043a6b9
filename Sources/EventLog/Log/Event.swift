/// Where an event came from, named by the layer that records it: the log itself knows only
/// `system`; the effects layer adds `tap`, `url`, `test` and `capture`; other layers (deploys,
/// update prompts, an app's own) name theirs the same way, in an extension of their own.
///
/// A name is 1 to 64 bytes of UTF-8 without control characters.
public struct Origin: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String

    /// `nil` when `rawValue` is not a valid name.
    public init?(rawValue: String) {
        guard !rawValue.isEmpty, rawValue.utf8.count <= 64,
              !rawValue.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else { return nil }
        self.rawValue = rawValue
    }

    /// A literal name; it must be valid (an invalid literal is a programmer error).
    public init(stringLiteral value: String) {
        guard let origin = Origin(rawValue: value) else { preconditionFailure("invalid origin name \"\(value)\"") }
        self = origin
    }

    public var description: String { rawValue }

    /// What the system did on its own (a timeout, a default, an import).
    public static let system: Origin = "system"
}

/// What became of a step when it was applied.
public enum Outcome: Sendable, Hashable {
    /// The step changed the state; the event's write set says how.
    case applied
    /// The step was not applied: its guard failed, or it would have changed nothing.
    case skipped(reason: String)
    /// A newer plan interrupted this one before the step ran.
    case cancelled

    /// `applied`, `skipped` or `cancelled`.
    public var name: String {
        switch self {
        case .applied: "applied"
        case .skipped: "skipped"
        case .cancelled: "cancelled"
        }
    }
}

/// The plan or command an event belongs to: its id, the step index inside it, and the text
/// that started it (a URL, a command line), if any.
public struct Cause: Sendable, Hashable {
    /// The plan or command, such as `plan-12`.
    public var id: String
    /// The step inside it: 0 for the plan's start, then 1, 2, …
    public var step: Int
    /// The text that started it (a URL, a command line); empty when there is none.
    public var source: String

    /// A cause as given; `step` 0 is the plan's start, and `source` stays empty when no text
    /// started it.
    public init(id: String, step: Int = 0, source: String = "") {
        self.id = id
        self.step = step
        self.source = source
    }
}

/// An event as appended: everything but the sequence number, time and checksum, which the
/// store assigns.
public struct Event: Sendable, Hashable {
    /// The family of state the event belongs to, such as `messenger` or `deploys`.
    public var stream: String
    /// The name of the change, such as `clearListFilter`.
    public var type: String
    /// Who asked for it: a tap, a URL, a test, a capture script or the system.
    public var origin: Origin
    /// The plan or command it belongs to, if any. (Spelled `Optional<Cause>` so that it has no
    /// implicit `= nil`: with one, `init` assigns instead of initialising, and every event
    /// built pays a copy and a destroy of the whole struct.)
    public var cause: Optional<Cause>
    /// Applied, skipped (with the reason) or cancelled.
    public var outcome: Outcome
    /// The event's arguments, free-form.
    public var payload: StateValue
    /// Every write the event made, in order. Empty unless the outcome is `applied`.
    public var writes: [Write]
    /// The version of the event's shape (its type's payload), from 1: an app that changes the
    /// shape bumps it, and replay reads older events through the upcasters registered for
    /// them. Stored only when it is not 1, so a log of version-1 events is stored as before.
    public var version: Int

    /// An event as given, nothing checked yet (appending checks it); by default from the
    /// system, with no cause, applied, a null payload, no writes, at version 1.
    public init(stream: String, type: String, origin: Origin = .system, cause: Cause? = nil,
                outcome: Outcome = .applied, payload: StateValue = .null, writes: [Write] = [], version: Int = 1) {
        self.stream = stream
        self.type = type
        self.origin = origin
        self.cause = cause
        self.outcome = outcome
        self.payload = payload
        self.writes = writes
        self.version = version
    }

    /// The versions an event may have.
    public static let versions: ClosedRange<Int> = 1...Int(UInt32.max)
}

/// An event as stored: its dense sequence number (from 1), the time it was appended, and the
/// CRC-32C that covers the sequence number and every stored byte of the record.
public struct EventRecord: Sendable, Hashable {
    /// The dense sequence number, from 1.
    public var seq: UInt64
    /// When the event was appended, from the store's clock.
    public var time: Timestamp
    /// The event as appended: everything the record holds but its seq, time and checksum.
    public var event: Event
    /// The CRC-32C stored with the record.
    public var checksum: UInt32

    /// A record of these fields as they are: nothing is checked or computed, the checksum
    /// included (the store computes it when appending; see ``storedBytes(of:seq:time:)``).
    public init(seq: UInt64, time: Timestamp, event: Event, checksum: UInt32) {
        self.seq = seq
        self.time = time
        self.event = event
        self.checksum = checksum
    }
}
