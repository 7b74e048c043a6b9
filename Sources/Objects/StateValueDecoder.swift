import EventLog
import Foundation

/// Decodes `Decodable` values straight from state values, accepting what Foundation's
/// `JSONDecoder` accepted from their JSON text before:
///
/// - integers of every width from `.int`, range-checked, and from an integral `.double`;
/// - `Double` and `Float` from `.double` or `.int` (a `Float` out of range is refused);
/// - dates as text in the format `dateFormats` gives their key (strictly: the text must
///   print back the same), or RFC 3339 otherwise; `Data` from base64, `URL` from its string,
///   `Decimal` from a number;
/// - a missing key or `.null` as `nil` for optionals (`decodeIfPresent`).
struct StateValueDecoder {
    /// Date formats by key: the last key of a date's coding path.
    var dateFormats: [String: String] = [:]

    func decode<T: Decodable>(_ type: T.Type, from value: StateValue) throws(StateCodingError) -> T {
        do {
            return try StateValueDecoding.unbox(value, as: T.self, path: nil, formats: dateFormats)
        } catch let error as StateCodingError {
            throw error
        } catch let error as DecodingError {
            throw StateCodingError(message: Self.describe(error))
        } catch {
            throw StateCodingError(message: "\(error)")
        }
    }

    /// A `DecodingError` thrown by a type's own `init(from:)`, in the words of ours.
    static func describe(_ error: DecodingError) -> String {
        let (context, reason): (DecodingError.Context, String) = switch error {
        case .typeMismatch(let type, let context): (context, "expected \(type)")
        case .valueNotFound(let type, let context): (context, "no value of type \(type)")
        case .keyNotFound(let key, let context): (context, "missing key \"\(key.stringValue)\"")
        case .dataCorrupted(let context): (context, "invalid value")
        @unknown default: (DecodingError.Context(codingPath: [], debugDescription: ""), "\(error)")
        }
        var node: CodingPathNode?
        for key in context.codingPath { node = CodingPathNode(key, parent: node) }
        let detail = context.debugDescription.isEmpty ? reason : "\(reason): \(context.debugDescription)"
        return StateCodingError(detail, at: node).message
    }
}

final class StateValueDecoding: Decoder {
    let value: StateValue
    let path: CodingPathNode?
    let formats: [String: String]

    init(_ value: StateValue, path: CodingPathNode?, formats: [String: String]) {
        self.value = value
        self.path = path
        self.formats = formats
    }

    var codingPath: [any CodingKey] { CodingPathNode.path(path) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw Self.mismatch("an object", value, path) }
        return KeyedDecodingContainer(StateKeyedDecodingContainer<Key>(object: object, path: path, formats: formats))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw Self.mismatch("an array", value, path) }
        return StateUnkeyedDecodingContainer(elements: elements, path: path, formats: formats)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: Conversions

    static func mismatch(_ expected: String, _ found: StateValue, _ path: CodingPathNode?) -> StateCodingError {
        if case .null = found { return StateCodingError("expected \(expected), found null", at: path) }
        return StateCodingError("expected \(expected), found \(article(found.kindName)) \(found.kindName)", at: path)
    }

    private static func article(_ word: String) -> String { word.first.map { "aeiou".contains($0) } == true ? "an" : "a" }

    static func bool(_ value: StateValue, _ path: CodingPathNode?) throws -> Bool {
        guard case .bool(let bool) = value else { throw mismatch("a bool", value, path) }
        return bool
    }

    static func string(_ value: StateValue, _ path: CodingPathNode?) throws -> String {
        guard case .string(let string) = value else { throw mismatch("a string", value, path) }
        return string
    }

    static func integer<I: FixedWidthInteger>(_ value: StateValue, _ path: CodingPathNode?) throws -> I {
        switch value {
        case .int(let int):
            guard let result = I(exactly: int) else { throw StateCodingError("\(int) does not fit in \(I.self)", at: path) }
            return result
        case .double(let double):
            guard let result = I(exactly: double) else { throw StateCodingError("\(double) is not an integer that fits in \(I.self)", at: path) }
            return result
        default:
            throw mismatch("an integer", value, path)
        }
    }

    static func double(_ value: StateValue, _ path: CodingPathNode?) throws -> Double {
        switch value {
        case .double(let double): return double
        case .int(let int): return Double(int)
        default: throw mismatch("a number", value, path)
        }
    }

    static func float(_ value: StateValue, _ path: CodingPathNode?) throws -> Float {
        switch value {
        case .int(let int): return Float(int)
        case .double(let double):
            let float = Float(double)
            guard float.isFinite || !double.isFinite, float != 0 || double == 0 else {
                throw StateCodingError("\(double) does not fit in Float", at: path)
            }
            return float
        default: throw mismatch("a number", value, path)
        }
    }

    static func unbox<T: Decodable>(_ value: StateValue, as type: T.Type, path: CodingPathNode?,
                                    formats: [String: String]) throws -> T {
        if T.self == Date.self {
            let text = try string(value, path)
            let key = path?.key.stringValue
            guard let date = ObjectCoding.parse(text, key: key, formats: formats) else {
                throw StateCodingError("\"\(text)\" is not a date in the format of \(key ?? "this key")", at: path)
            }
            return date as! T
        }
        if T.self == String.self { return try string(value, path) as! T }
        // The commonest array of a stored object, without a container per element; the
        // path of an element that is not a string is made only to name it in the error.
        if T.self == [String].self, case .array(let elements) = value {
            return try elements.indices.map { index in
                if case .string(let text) = elements[index] { return text }
                return try string(elements[index], CodingPathNode(IndexCodingKey(index), parent: path))
            } as! T
        }
        if T.self == Int.self { return try integer(value, path) as Int as! T }
        if T.self == Double.self { return try double(value, path) as! T }
        if T.self == Bool.self { return try bool(value, path) as! T }
        if T.self == Data.self {
            guard let data = Data(base64Encoded: try string(value, path)) else {
                throw StateCodingError("the string is not valid base64", at: path)
            }
            return data as! T
        }
        if T.self == URL.self {
            guard let url = URL(string: try string(value, path)) else { throw StateCodingError("the string is not a valid URL", at: path) }
            return url as! T
        }
        if T.self == Decimal.self {
            switch value {
            case .int(let int): return Decimal(int) as! T
            case .double(let double):
                guard let decimal = Decimal(string: "\(double)") else { throw StateCodingError("\(double) does not fit in Decimal", at: path) }
                return decimal as! T
            default: throw mismatch("a number", value, path)
            }
        }
        return try T(from: StateValueDecoding(value, path: path, formats: formats))
    }
}

extension StateValueDecoding: SingleValueDecodingContainer {
    func decodeNil() -> Bool { value == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try Self.bool(value, path) }
    func decode(_ type: String.Type) throws -> String { try Self.string(value, path) }
    func decode(_ type: Double.Type) throws -> Double { try Self.double(value, path) }
    func decode(_ type: Float.Type) throws -> Float { try Self.float(value, path) }
    func decode(_ type: Int.Type) throws -> Int { try Self.integer(value, path) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Self.integer(value, path) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Self.integer(value, path) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Self.integer(value, path) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Self.integer(value, path) }
    func decode(_ type: UInt.Type) throws -> UInt { try Self.integer(value, path) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Self.integer(value, path) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Self.integer(value, path) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Self.integer(value, path) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Self.integer(value, path) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try Self.unbox(value, as: T.self, path: path, formats: formats) }
}

struct StateKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: StateObject
    let path: CodingPathNode?
    let formats: [String: String]

    var codingPath: [any CodingKey] { CodingPathNode.path(path) }
    var allKeys: [Key] { object.keys.compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    private func child(_ key: Key) -> CodingPathNode { CodingPathNode(key, parent: path) }

    private func value(_ key: Key) throws -> StateValue {
        guard let value = object[key.stringValue] else { throw StateCodingError("missing key \"\(key.stringValue)\"", at: path) }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { try value(key) == .null }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try StateValueDecoding.bool(value(key), child(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try StateValueDecoding.string(value(key), child(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try StateValueDecoding.double(value(key), child(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try StateValueDecoding.float(value(key), child(key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try StateValueDecoding.integer(value(key), child(key)) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try StateValueDecoding.integer(value(key), child(key)) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try StateValueDecoding.unbox(value(key), as: T.self, path: child(key), formats: formats)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try StateValueDecoding(value(key), path: child(key), formats: formats).container(keyedBy: NestedKey.self)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try StateValueDecoding(value(key), path: child(key), formats: formats).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { superDecoder(named: SuperCodingKey()) }

    func superDecoder(forKey key: Key) throws -> any Decoder { superDecoder(named: key) }

    /// As `JSONDecoder`: a missing key gives a decoder of `null`.
    private func superDecoder(named key: any CodingKey) -> any Decoder {
        StateValueDecoding(object[key.stringValue] ?? .null, path: CodingPathNode(key, parent: path), formats: formats)
    }
}

struct StateUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let elements: [StateValue]
    let path: CodingPathNode?
    let formats: [String: String]
    private(set) var currentIndex = 0

    init(elements: [StateValue], path: CodingPathNode?, formats: [String: String]) {
        self.elements = elements
        self.path = path
        self.formats = formats
    }

    var codingPath: [any CodingKey] { CodingPathNode.path(path) }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private var child: CodingPathNode { CodingPathNode(IndexCodingKey(currentIndex), parent: path) }

    /// The next element; the index moves on only once it decoded.
    private mutating func next<T>(_ body: (StateValue, CodingPathNode) throws -> T) throws -> T {
        guard !isAtEnd else { throw StateCodingError("the array has no element \(currentIndex)", at: path) }
        let result = try body(elements[currentIndex], child)
        currentIndex += 1
        return result
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { throw StateCodingError("the array has no element \(currentIndex)", at: path) }
        guard elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(StateValueDecoding.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try next(StateValueDecoding.string) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(StateValueDecoding.double) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(StateValueDecoding.float) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(StateValueDecoding.integer) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(StateValueDecoding.integer) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let formats = formats
        return try next { try StateValueDecoding.unbox($0, as: T.self, path: $1, formats: formats) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let formats = formats
        return try next { try StateValueDecoding($0, path: $1, formats: formats).container(keyedBy: NestedKey.self) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let formats = formats
        return try next { try StateValueDecoding($0, path: $1, formats: formats).unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        let formats = formats
        return try next { StateValueDecoding($0, path: $1, formats: formats) }
    }
}
