/// An object of a state tree: string keys in insertion order, each looked up, added or
/// removed in O(1) (amortised).
///
/// Small objects (the common case) are searched linearly; a hash index is built once an
/// object grows past `indexThreshold` keys, so a collection of 100,000 objects stays fast.
/// Equality and hashing ignore key order.
public struct StateObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// The keys and values side by side in insertion order: one allocation per object, one
    /// reference to copy. A removal from an indexed object leaves a hole so that it costs
    /// O(1); holes are squeezed out once they are half the entries.
    private var entries: [Entry] = []
    /// The position of every present key, once `entries` is longer than `indexThreshold`;
    /// empty (and `entries` free of holes) until then. Two references in all, so that a
    /// `StateValue` stays 16 bytes of payload.
    private var index: [String: Int] = [:]

    struct Entry: Sendable {
        var key: String
        var value: StateValue
        /// Left by a removal: no longer part of the object (its value is `.null`).
        var isHole = false
    }

    static let indexThreshold = 32

    /// An empty object.
    public init() {}

    public init(dictionaryLiteral elements: (String, StateValue)...) {
        reserveCapacity(elements.count)
        for (key, value) in elements { self[key] = value }
    }

    /// Makes room for `count` keys without regrowing.
    public mutating func reserveCapacity(_ count: Int) {
        entries.reserveCapacity(count)
    }

    /// The keys, in insertion order.
    public var keys: [String] { map(\.key) }
    /// The values, in the order of `keys`.
    public var values: [StateValue] { map(\.value) }
    /// How many keys the object holds, in O(1).
    public var count: Int { isIndexed ? index.count : entries.count }
    /// Whether the object holds no key, in O(1).
    public var isEmpty: Bool { count == 0 }

    private var isIndexed: Bool { entries.count > Self.indexThreshold }

    /// The position of `key` in `entries`, if present.
    func position(of key: String) -> Int? {
        if isIndexed { return index[key] }
        return entries.firstIndex { $0.key == key }
    }

    /// The value under `key`; assigning `nil` removes the key, assigning a new key appends it.
    public subscript(key: String) -> StateValue? {
        get { position(of: key).map { entries[$0].value } }
        set {
            if let position = position(of: key) {
                if let newValue { entries[position].value = newValue } else { remove(at: position) }
            } else if let newValue {
                append(key, newValue)
            }
        }
    }

    /// Mutates the value under `key` in place (no copy of the child), inserting an empty object
    /// first when the key is absent and `insertingAnObject` (`body` is told whether it did); an
    /// inserted value is removed again if `body` throws.
    mutating func withValue<R, E: Error>(forKey key: String, insertingAnObject: Bool,
                                         _ body: (inout StateValue, _ inserted: Bool) throws(E) -> R) throws(E) -> R? {
        if let position = self.position(of: key) { return try body(&entries[position].value, false) }
        guard insertingAnObject else { return nil }
        append(key, .emptyObject)
        let position = entries.count - 1
        do {
            return try body(&entries[position].value, true)
        } catch {
            remove(at: position)
            throw error
        }
    }

    /// Puts `value` under `key` (`nil` removes it) and returns what was there.
    mutating func replaceValue(_ value: StateValue?, forKey key: String) -> StateValue? {
        if let position = position(of: key) {
            guard var value else { return remove(at: position) }
            swap(&entries[position].value, &value)
            return value
        }
        if let value { append(key, value) }
        return nil
    }

    private mutating func append(_ key: String, _ value: StateValue) {
        entries.append(Entry(key: key, value: value))
        guard isIndexed else { return }
        if index.isEmpty {
            index.reserveCapacity(entries.count * 2)
            for (i, entry) in entries.enumerated() { index[entry.key] = i }
        } else {
            index[key] = entries.count - 1
        }
    }

    @discardableResult
    private mutating func remove(at position: Int) -> StateValue {
        guard isIndexed else { return entries.remove(at: position).value }
        var removed = StateValue.null
        swap(&entries[position].value, &removed)
        entries[position].isHole = true
        index[entries[position].key] = nil
        if index.count * 2 <= entries.count { squeezeOutHoles() }
        return removed
    }

    private mutating func squeezeOutHoles() {
        entries.removeAll { $0.isHole }
        index.removeAll(keepingCapacity: true)
        if isIndexed {
            for (i, entry) in entries.enumerated() { index[entry.key] = i }
        }
    }

    /// The keys and values in insertion order.
    public struct Iterator: IteratorProtocol {
        fileprivate var entries: IndexingIterator<[Entry]>

        public mutating func next() -> (key: String, value: StateValue)? {
            while let entry = entries.next() {
                if !entry.isHole { return (entry.key, entry.value) }
            }
            return nil
        }
    }

    public func makeIterator() -> Iterator { Iterator(entries: entries.makeIterator()) }

    /// Whether `other` holds the same keys in the same order (the common case of an object and
    /// its next version), found in one pass; their entries can then be walked side by side.
    /// Only small objects (unindexed, so without holes) are compared; a large one says `false`.
    func hasSameKeyOrder(as other: StateObject) -> Bool {
        guard !isIndexed, !other.isIndexed, entries.count == other.entries.count else { return false }
        for position in entries.indices where entries[position].key != other.entries[position].key { return false }
        return true
    }

    public static func == (lhs: StateObject, rhs: StateObject) -> Bool {
        if lhs.hasSameKeyOrder(as: rhs) { return zip(lhs.entries, rhs.entries).allSatisfy { $0.value == $1.value } }
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
