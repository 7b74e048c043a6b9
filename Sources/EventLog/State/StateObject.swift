/// An object of a state tree: string keys in insertion order, looked up in O(1).
///
/// Small objects (the common case) are searched linearly; a hash index is built once an
/// object grows past `indexThreshold` keys, so a collection of 100,000 objects stays fast.
/// Equality and hashing ignore key order.
public struct StateObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// The keys, in insertion order.
    public private(set) var keys: [String] = []
    /// The values, in the order of `keys`.
    public private(set) var values: [StateValue] = []
    private var index: [String: Int] = [:]

    static let indexThreshold = 32

    public init() {}

    public init(dictionaryLiteral elements: (String, StateValue)...) {
        for (key, value) in elements { self[key] = value }
    }

    /// Makes room for `count` keys without regrowing.
    mutating func reserveCapacity(_ count: Int) {
        keys.reserveCapacity(count)
        values.reserveCapacity(count)
    }

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }

    /// The position of `key`, if present.
    func position(of key: String) -> Int? {
        if keys.count > Self.indexThreshold { return index[key] }
        return keys.firstIndex(of: key)
    }

    /// The value under `key`; assigning `nil` removes the key, assigning a new key appends it.
    public subscript(key: String) -> StateValue? {
        get { position(of: key).map { values[$0] } }
        set {
            if let position = position(of: key) {
                if let newValue { values[position] = newValue } else { remove(at: position) }
            } else if let newValue {
                append(key, newValue)
            }
        }
    }

    /// Mutates the value under `key` in place (no copy of the child), inserting `default` first
    /// when the key is absent; an inserted value is removed again if `body` throws.
    mutating func withValue<R, E: Error>(forKey key: String, default: StateValue?,
                                         _ body: (inout StateValue) throws(E) -> R) throws(E) -> R? {
        if let position = self.position(of: key) { return try body(&values[position]) }
        guard let initial = `default` else { return nil }
        append(key, initial)
        do {
            return try body(&values[keys.count - 1])
        } catch {
            remove(at: keys.count - 1)
            throw error
        }
    }

    /// Puts `value` under `key` (`nil` removes it) and returns what was there.
    mutating func replaceValue(_ value: StateValue?, forKey key: String) -> StateValue? {
        if let position = position(of: key) {
            let previous = values[position]
            if let value { values[position] = value } else { remove(at: position) }
            return previous
        }
        if let value { append(key, value) }
        return nil
    }

    private mutating func append(_ key: String, _ value: StateValue) {
        keys.append(key)
        values.append(value)
        if keys.count > Self.indexThreshold {
            if index.isEmpty {
                index.reserveCapacity(keys.count * 2)
                for (i, k) in keys.enumerated() { index[k] = i }
            } else {
                index[key] = keys.count - 1
            }
        }
    }

    private mutating func remove(at position: Int) {
        keys.remove(at: position)
        values.remove(at: position)
        if keys.count > Self.indexThreshold {
            index.removeAll(keepingCapacity: true)
            for (i, k) in keys.enumerated() { index[k] = i }
        } else {
            index = [:]
        }
    }

    public func makeIterator() -> Zip2Sequence<[String], [StateValue]>.Iterator {
        zip(keys, values).makeIterator()
    }

    public static func == (lhs: StateObject, rhs: StateObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (key, value) in lhs where rhs[key] != value { return false }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        var combined = 0
        for (key, value) in self {
            var entry = Hasher()
            entry.combine(key)
            entry.combine(value)
            combined ^= entry.finalize()
        }
        hasher.combine(count)
        hasher.combine(combined)
    }
}
