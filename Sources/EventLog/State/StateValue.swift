/// The self-describing value every snapshot is made of: enough structure for the CLI to show,
/// diff and query the state of any log without the domain code that produced it.
///
/// Objects keep their keys in insertion order; equality ignores that order.
public enum StateValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([StateValue])
    case object(StateObject)

    /// An empty object, the state of a log before its first event.
    public static let emptyObject = StateValue.object(StateObject())

    /// The name of this value's kind, as used in error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .int: "integer"
        case .double: "double"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// The string, when this is `.string`; otherwise `nil`.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }

    /// The value as the words of a step's name, such as `selectBotTab(bots, unread)`: a string
    /// as itself, an object as its values' words in order, anything else as its JSON.
    public var argumentWords: [String] {
        switch self {
        case .string(let text): [text]
        case .object(let object): object.values.flatMap(\.argumentWords)
        default: [json()]
        }
    }
    /// The integer, when this is `.int`; otherwise `nil` (a `.double` is never converted).
    public var intValue: Int64? { if case .int(let i) = self { i } else { nil } }
    /// The boolean, when this is `.bool`; otherwise `nil`.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// The elements, when this is `.array`; otherwise `nil`.
    public var arrayValue: [StateValue]? { if case .array(let a) = self { a } else { nil } }
    /// The object, when this is `.object`; otherwise `nil`.
    public var objectValue: StateObject? { if case .object(let o) = self { o } else { nil } }
    /// A number as a `Double`, whether stored as integer or double.
    public var numberValue: Double? {
        switch self {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }
}

// Deliberately not ExpressibleByNilLiteral: `nil` must always mean an absent value
// (`StateValue?.none`), never `.null`, or `state[path] == nil` would change meaning.
extension StateValue: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: StateValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, StateValue)...) {
        var object = StateObject()
        object.reserveCapacity(elements.count)
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }

}

extension StateValue {
    /// An optional string as a value: `nil` becomes `.null`.
    public init(_ string: String?) { self = string.map(StateValue.string) ?? .null }
}
