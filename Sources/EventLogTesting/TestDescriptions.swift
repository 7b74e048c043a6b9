import EventLog
import Testing

// What `#expect` prints for the engine's values: the same text as their `description`, so
// that a failed `#expect(state["messenger.listFilter"] == "unread")` reads `null == "unread"`.

extension StateValue: CustomTestStringConvertible {
    public var testDescription: String { description }
}

extension StatePath: CustomTestStringConvertible {
    public var testDescription: String { description }
}

extension Write: CustomTestStringConvertible {
    public var testDescription: String { description }
}

extension Event: CustomTestStringConvertible {
    public var testDescription: String { description }
}

extension EventRecord: CustomTestStringConvertible {
    public var testDescription: String { description }
}
