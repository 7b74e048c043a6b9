import EventLog
import Foundation

/// Encodes `Encodable` values straight to state values, with what the store's JSON coders
/// produced before (Foundation's `JSONEncoder` with `.sortedKeys`, read back by the
/// project's JSON parser):
///
/// - the keys of every object in sorted order (`String` `<`), so that the same object always
///   encodes to the same events; a key encoded twice keeps its last value;
/// - integers as `.int`; a floating-point number whose shortest text ends in `.0` as `.int`
///   (`JSONEncoder` wrote `1.0` as `1`), any other as `.double`; non-finite ones refused;
/// - `nil` optionals left out (`encodeIfPresent`), an explicit `encodeNil` as `.null`;
/// - dates as text in the format `dateFormats` gives their key, or RFC 3339 otherwise;
///   `Data` as base64, `URL` as its absolute string, `Decimal` as the number its text reads as;
/// - a nested value that encodes nothing as an empty object.
struct StateValueEncoder {
    /// Date formats by key: the last key of a date's coding path.
    var dateFormats: [String: String] = [:]

    func encode<T: Encodable>(_ value: T) throws(StateCodingError) -> StateValue {
        let node: EncodedNode
        do {
            node = try EncodedNode.box(value, path: nil, key: nil, formats: dateFormats)
        } catch let error as StateCodingError {
            throw error
        } catch {
            throw StateCodingError(message: "\(error)")
        }
        if case .encoder(let encoder) = node, encoder.node == nil {
            throw StateCodingError(message: "\(T.self) did not encode any value")
        }
        return node.value
    }
}

/// Why a value could not be encoded or decoded, with the coding path where it happened.
struct StateCodingError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }

    init(message: String) { self.message = message }

    init(_ reason: String, at path: CodingPathNode?) {
        message = path.map { "\($0.description): \(reason)" } ?? reason
    }
}

/// A coding path as a linked list, built only when asked for: most values never need theirs.
final class CodingPathNode: CustomStringConvertible {
    let key: any CodingKey
    let parent: CodingPathNode?

    init(_ key: any CodingKey, parent: CodingPathNode?) {
        self.key = key
        self.parent = parent
    }

    static func path(_ node: CodingPathNode?) -> [any CodingKey] {
        var keys: [any CodingKey] = []
        var node = node
        while let current = node {
            keys.append(current.key)
            node = current.parent
        }
        return keys.reversed()
    }

    /// `tags[2].name`: keys joined by dots, array positions in brackets.
    var description: String {
        var text = ""
        for key in Self.path(self) {
            if let index = key.intValue, key.stringValue == "Index \(index)" {
                text += "[\(index)]"
            } else {
                if !text.isEmpty { text += "." }
                text += key.stringValue
            }
        }
        return text
    }
}

/// The key of an array element, spelled as Foundation's coders spell it.
struct IndexCodingKey: CodingKey {
    let intValue: Int?
    let stringValue: String

    init(_ index: Int) {
        intValue = index
        stringValue = "Index \(index)"
    }

    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.init(intValue) }
}

/// The `super` key of `superEncoder()` and `superDecoder()`.
struct SuperCodingKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) { guard stringValue == "super" else { return nil } }
    init?(intValue: Int) { nil }
}

// MARK: The tree being built

/// An object being encoded: its entries in encoding order, sorted once at the end.
final class EncodedObject {
    var entries: [(key: String, node: EncodedNode)] = []

    func set(_ key: String, _ node: EncodedNode) { entries.append((key, node)) }

    /// The nested object already under `key`, as `JSONEncoder` reuses it.
    func existingObject(_ key: String) -> EncodedObject? {
        for entry in entries.reversed() where entry.key == key {
            if case .object(let object) = entry.node { return object }
            return nil
        }
        return nil
    }

    func existingArray(_ key: String) -> EncodedArray? {
        for entry in entries.reversed() where entry.key == key {
            if case .array(let array) = entry.node { return array }
            return nil
        }
        return nil
    }

    var value: StateObject {
        var sorted = entries
        if !Self.isStrictlyAscending(sorted) {
            // Stable, so that of a key encoded twice the later value comes last and wins.
            sorted = sorted.enumerated()
                .sorted { $0.element.key < $1.element.key || ($0.element.key == $1.element.key && $0.offset < $1.offset) }
                .map(\.element)
        }
        var object = StateObject()
        object.reserveCapacity(sorted.count)
        var index = 0
        while index < sorted.count {
            var last = index
            while last + 1 < sorted.count, sorted[last + 1].key == sorted[index].key { last += 1 }
            object[sorted[index].key] = sorted[last].node.value
            index = last + 1
        }
        return object
    }

    private static func isStrictlyAscending(_ entries: [(key: String, node: EncodedNode)]) -> Bool {
        var index = 1
        while index < entries.count {
            guard entries[index - 1].key < entries[index].key else { return false }
            index += 1
        }
        return true
    }
}

final class EncodedArray {
    var elements: [EncodedNode] = []
    var value: [StateValue] { elements.map(\.value) }
}

enum EncodedNode {
    case value(StateValue)
    case object(EncodedObject)
    case array(EncodedArray)
    /// A value that encoded itself through an encoder of its own (or a super encoder).
    case encoder(StateValueEncoding)

    var value: StateValue {
        switch self {
        case .value(let value): value
        case .object(let object): .object(object.value)
        case .array(let array): .array(array.value)
        case .encoder(let encoder): encoder.node?.value ?? .emptyObject
        }
    }

    static func box<T: Encodable>(_ value: T, path: CodingPathNode?, key: (any CodingKey)?,
                                  formats: [String: String]) throws -> EncodedNode {
        if T.self == Date.self {
            return .value(.string(ObjectCoding.format(value as! Date, key: key?.stringValue, formats: formats)))
        }
        if T.self == String.self { return .value(.string(value as! String)) }
        if T.self == Int.self { return .value(.int(Int64(value as! Int))) }
        if T.self == Double.self { return .value(try number(value as! Double, path: path)) }
        if T.self == Bool.self { return .value(.bool(value as! Bool)) }
        if T.self == Data.self { return .value(.string((value as! Data).base64EncodedString())) }
        if T.self == URL.self { return .value(.string((value as! URL).absoluteString)) }
        if T.self == Decimal.self { return .value(try decimal(value as! Decimal, path: path)) }
        // The commonest array of a stored object, without a container per element.
        if T.self == [String].self { return .value(.array((value as! [String]).map(StateValue.string))) }
        let encoder = StateValueEncoding(path: path, formats: formats)
        try value.encode(to: encoder)
        return .encoder(encoder)
    }

    /// A floating-point number as `JSONEncoder` wrote it and the JSON parser read it back:
    /// its shortest text, without a trailing `.0`, so that `1.0` is the integer 1.
    static func number<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F, path: CodingPathNode?) throws -> StateValue {
        guard value.isFinite else { throw StateCodingError("\(value) (\(F.self)) cannot be stored", at: path) }
        if F.self == Double.self {
            let double = Double(value)
            // Below 10^15 an integral double is always printed without an exponent.
            if double.rounded(.towardZero) == double, double.magnitude < 1e15 { return .int(Int64(double)) }
            if double.rounded(.towardZero) != double { return .double(double) }
        }
        return try numberText(value.description, path: path)
    }

    static func decimal(_ value: Decimal, path: CodingPathNode?) throws -> StateValue {
        guard !value.isNaN else { throw StateCodingError("NaN (Decimal) cannot be stored", at: path) }
        return try numberText(value.description, path: path)
    }

    /// A number from its text, as `JSONEncoder` wrote it and the JSON parser read it.
    private static func numberText(_ text: String, path: CodingPathNode?) throws -> StateValue {
        var text = text
        if text.hasSuffix(".0") { text.removeLast(2) }
        if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
            guard let int = Int64(text) else { throw StateCodingError("integer \(text) is beyond 64 bits", at: path) }
            return .int(int)
        }
        guard let double = Double(text), double.isFinite else {
            throw StateCodingError("number \(text) is beyond the range of a double", at: path)
        }
        let mantissa = text.prefix { $0 != "e" && $0 != "E" }
        guard double != 0 || !mantissa.contains(where: { ("1"..."9").contains($0) }) else {
            throw StateCodingError("number \(text) is too small for a double", at: path)
        }
        return .double(double)
    }

    static func integer<I: BinaryInteger>(_ value: I, path: CodingPathNode?) throws -> StateValue {
        guard let int = Int64(exactly: value) else { throw StateCodingError("integer \(value) is beyond 64 bits", at: path) }
        return .int(int)
    }
}

// MARK: Encoder

final class StateValueEncoding: Encoder {
    let path: CodingPathNode?
    let formats: [String: String]
    /// What was encoded; `nil` while nothing was.
    var node: EncodedNode?

    init(path: CodingPathNode?, formats: [String: String]) {
        self.path = path
        self.formats = formats
    }

    var codingPath: [any CodingKey] { CodingPathNode.path(path) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object: EncodedObject
        if case .object(let existing)? = node {
            object = existing
        } else {
            object = EncodedObject()
            node = .object(object)
        }
        return KeyedEncodingContainer(StateKeyedEncodingContainer<Key>(object: object, path: path, formats: formats))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: EncodedArray
        if case .array(let existing)? = node {
            array = existing
        } else {
            array = EncodedArray()
            node = .array(array)
        }
        return StateUnkeyedEncodingContainer(array: array, path: path, formats: formats)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }
}

extension StateValueEncoding: SingleValueEncodingContainer {
    private func set(_ value: StateValue) { node = .value(value) }

    func encodeNil() throws { set(.null) }
    func encode(_ value: Bool) throws { set(.bool(value)) }
    func encode(_ value: String) throws { set(.string(value)) }
    func encode(_ value: Double) throws { set(try EncodedNode.number(value, path: path)) }
    func encode(_ value: Float) throws { set(try EncodedNode.number(value, path: path)) }
    func encode(_ value: Int) throws { set(.int(Int64(value))) }
    func encode(_ value: Int8) throws { set(.int(Int64(value))) }
    func encode(_ value: Int16) throws { set(.int(Int64(value))) }
    func encode(_ value: Int32) throws { set(.int(Int64(value))) }
    func encode(_ value: Int64) throws { set(.int(value)) }
    func encode(_ value: UInt) throws { set(try EncodedNode.integer(value, path: path)) }
    func encode(_ value: UInt8) throws { set(.int(Int64(value))) }
    func encode(_ value: UInt16) throws { set(.int(Int64(value))) }
    func encode(_ value: UInt32) throws { set(.int(Int64(value))) }
    func encode(_ value: UInt64) throws { set(try EncodedNode.integer(value, path: path)) }
    func encode<T: Encodable>(_ value: T) throws {
        node = try EncodedNode.box(value, path: path, key: path?.key, formats: formats)
    }
}

struct StateKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let object: EncodedObject
    let path: CodingPathNode?
    let formats: [String: String]

    var codingPath: [any CodingKey] { CodingPathNode.path(path) }

    private func set(_ value: StateValue, _ key: Key) { object.set(key.stringValue, .value(value)) }
    private func child(_ key: Key) -> CodingPathNode { CodingPathNode(key, parent: path) }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(try EncodedNode.number(value, path: child(key)), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(try EncodedNode.number(value, path: child(key)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(try EncodedNode.integer(value, path: child(key)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(try EncodedNode.integer(value, path: child(key)), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        object.set(key.stringValue, try EncodedNode.box(value, path: child(key), key: key, formats: formats))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = object.existingObject(key.stringValue) ?? {
            let nested = EncodedObject()
            object.set(key.stringValue, .object(nested))
            return nested
        }()
        return KeyedEncodingContainer(StateKeyedEncodingContainer<NestedKey>(object: nested, path: child(key), formats: formats))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = object.existingArray(key.stringValue) ?? {
            let nested = EncodedArray()
            object.set(key.stringValue, .array(nested))
            return nested
        }()
        return StateUnkeyedEncodingContainer(array: nested, path: child(key), formats: formats)
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: SuperCodingKey()) }

    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key) }

    private func superEncoder(named key: any CodingKey) -> any Encoder {
        let encoder = StateValueEncoding(path: CodingPathNode(key, parent: path), formats: formats)
        object.set(key.stringValue, .encoder(encoder))
        return encoder
    }
}

struct StateUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let array: EncodedArray
    let path: CodingPathNode?
    let formats: [String: String]

    var codingPath: [any CodingKey] { CodingPathNode.path(path) }
    var count: Int { array.elements.count }

    private func append(_ value: StateValue) { array.elements.append(.value(value)) }
    private var nextKey: IndexCodingKey { IndexCodingKey(array.elements.count) }
    private var child: CodingPathNode { CodingPathNode(nextKey, parent: path) }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(try EncodedNode.number(value, path: child)) }
    mutating func encode(_ value: Float) throws { append(try EncodedNode.number(value, path: child)) }
    mutating func encode(_ value: Int) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { append(.int(value)) }
    mutating func encode(_ value: UInt) throws { append(try EncodedNode.integer(value, path: child)) }
    mutating func encode(_ value: UInt8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { append(try EncodedNode.integer(value, path: child)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let key = nextKey
        array.elements.append(try EncodedNode.box(value, path: CodingPathNode(key, parent: path), key: key, formats: formats))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = EncodedObject()
        let path = child
        array.elements.append(.object(nested))
        return KeyedEncodingContainer(StateKeyedEncodingContainer<NestedKey>(object: nested, path: path, formats: formats))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = EncodedArray()
        let path = child
        array.elements.append(.array(nested))
        return StateUnkeyedEncodingContainer(array: nested, path: path, formats: formats)
    }

    mutating func superEncoder() -> any Encoder {
        let encoder = StateValueEncoding(path: child, formats: formats)
        array.elements.append(.encoder(encoder))
        return encoder
    }
}
