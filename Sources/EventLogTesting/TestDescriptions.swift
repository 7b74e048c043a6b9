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

extension StateValue {
    /// The value of a JSON literal written in a test (as `eventlog testgen` writes them). Invalid
    /// JSON is a mistake in the test's source and stops the test process with the reason.
    public init(jsonLiteral text: String) {
        do { self = try StateValue(json: text) } catch { preconditionFailure("invalid JSON literal: \(error)") }
    }
}
