/// One change to one place of the state: the value before and after, `nil` meaning absent.
///
/// An event's write set is a list of these; a structural diff between two states is one too,
/// so applying the diff of `a` to `b` to `a` yields `b`.
public struct Write: Sendable, Hashable {
    /// Where in the state the write lands.
    public var path: StatePath
    /// The value before; `nil` when the path did not exist. (`Optional<…>` spelled out, here
    /// and below, so that there is no implicit `= nil` and `init` initialises without a copy.)
    public var old: Optional<StateValue>
    /// The value after; `nil` when the write removed the path.
    public var new: Optional<StateValue>

    /// A write at `path` from `old` to `new`, as given: nothing is checked until it is
    /// appended or applied.
    public init(_ path: StatePath, old: StateValue?, new: StateValue?) {
        self.path = path
        self.old = old
        self.new = new
    }
}

/// A write that does not fit the state it is applied to.
public struct StateError: Error, Hashable, CustomStringConvertible {
    /// The path of the write that did not fit.
    public let path: StatePath
    /// Why it did not fit, such as `cannot write key "a" into a string`.
    public let reason: String
    public var description: String { "\(path.isRoot ? "(root)" : path.description): \(reason)" }
}

extension StateValue {
    /// The value at `path`, or `nil` when some part of the path does not exist.
    public subscript(path: StatePath) -> StateValue? {
        var current = self
        for component in path.components {
            switch component {
            case .key(let key):
                guard case .object(let object) = current, let child = object[key] else { return nil }
                current = child
            case .index(let index):
                guard case .array(let array) = current, array.indices.contains(index) else { return nil }
                current = array[index]
            }
        }
        return current
    }

    /// Puts `value` at `path` (`nil` removes it), creating missing objects on the way, and
    /// returns what was there. Throws, changing nothing, when the path crosses a value that is
    /// not an object or array.
    ///
    /// - Returns: The value that was at `path`; `nil` when there was none.
    /// - Throws: ``StateError`` when the path crosses a value that is not an object (for a
    ///   key) or an array (for an index), when an index is outside the array (one past its end
    ///   is allowed only as the last component, to append a value), or when `value` is `nil`
    ///   and `path` is the root.
    @discardableResult
    public mutating func set(_ value: StateValue?, at path: StatePath) throws(StateError) -> StateValue? {
        var createdAt: Int?
        return try set(value, at: path, from: 0, createdAt: &createdAt)
    }

    /// Puts `value` at `path` as `set(_:at:)` does, and says in `createdAt` at which depth of
    /// the path it had to create the first missing object (`nil` when none), so that
    /// `revert` can take the write back exactly.
    mutating func set(_ value: StateValue?, at path: StatePath, createdAt: inout Int?) throws(StateError) -> StateValue? {
        try set(value, at: path, from: 0, createdAt: &createdAt)
    }

    /// Takes back a write made by `set(_:at:createdAt:)` that returned `old`: the objects it
    /// created on the way are removed with it.
    mutating func revert(_ path: StatePath, to old: StateValue?, createdAt: Int?) {
        if let createdAt {
            _ = try? set(nil, at: StatePath(Array(path.components[...createdAt])))
        } else {
            _ = try? set(old, at: path)
        }
    }

    /// Applies one write. Its old value is not checked; see `EventStore` for that guarantee.
    ///
    /// - Throws: ``StateError`` as ``set(_:at:)`` does, changing nothing.
    public mutating func apply(_ write: Write) throws(StateError) {
        _ = try set(write.new, at: write.path)
    }

    /// Applies writes in order.
    ///
    /// - Throws: ``StateError`` at the first write that does not fit, as ``set(_:at:)`` does;
    ///   the writes before it stay applied.
    public mutating func apply(_ writes: [Write]) throws(StateError) {
        for write in writes { _ = try set(write.new, at: write.path) }
    }

    private mutating func set(_ value: StateValue?, at path: StatePath, from depth: Int,
                              createdAt: inout Int?) throws(StateError) -> StateValue? {
        guard depth < path.components.count else {
            guard let value else { throw StateError(path: path, reason: "cannot remove the root") }
            defer { self = value }
            return self
        }
        let isLast = depth == path.components.count - 1
        // Bind the child container with `guard case` (not a tuple switch, which would hold a
        // second reference) and clear `self`, so that the container is uniquely referenced
        // and mutates in place instead of being copied.
        switch path.components[depth] {
        case .key(let key):
            guard case .object(var object) = self else {
                throw StateError(path: path, reason: "cannot write key \"\(key)\" into a \(kindName)")
            }
            self = .null
            defer { self = .object(object) }
            if isLast { return object.replaceValue(value, forKey: key) }
            let previous = try object.withValue(forKey: key, insertingAnObject: value != nil) {
                (child, inserted) throws(StateError) in
                let previous = try child.set(value, at: path, from: depth + 1, createdAt: &createdAt)
                if inserted { createdAt = depth }
                return previous
            }
            return previous ?? nil
        case .index(let index):
            guard case .array(var array) = self else {
                throw StateError(path: path, reason: "cannot write index \(index) into a \(kindName)")
            }
            guard array.indices.contains(index) || (isLast && index == array.count && value != nil) else {
                throw StateError(path: path, reason: "index \(index) is outside an array of \(array.count)")
            }
            self = .null
            defer { self = .array(array) }
            guard isLast else { return try array[index].set(value, at: path, from: depth + 1, createdAt: &createdAt) }
            let previous: StateValue? = index < array.count ? array[index] : nil
            if let value {
                if index == array.count { array.append(value) } else { array[index] = value }
            } else {
                array.remove(at: index)
            }
            return previous
        }
    }

    /// The writes that turn `self` into `other`: per key for objects, per element for arrays
    /// of equal length, and whole values otherwise. Their paths start with `path`, where the
    /// two values sit in a larger state (the root by default).
    public func diff(to other: StateValue, at path: StatePath = .root) -> [Write] {
        var writes: [Write] = []
        Self.diff(self, other, at: path, into: &writes)
        return writes
    }

    private static func diff(_ a: StateValue, _ b: StateValue, at path: StatePath, into writes: inout [Write]) {
        switch (a, b) {
        case (.object(let x), .object(let y)) where x.hasSameKeyOrder(as: y):
            for ((key, old), (_, new)) in zip(x, y) where old != new { diff(old, new, at: path.appending(key), into: &writes) }
        case (.object(let x), .object(let y)):
            for (key, old) in x {
                if let new = y[key] {
                    if old != new { diff(old, new, at: path.appending(key), into: &writes) }
                } else {
                    writes.append(Write(path.appending(key), old: old, new: nil))
                }
            }
            for (key, new) in y where x[key] == nil {
                writes.append(Write(path.appending(key), old: nil, new: new))
            }
        case (.array(let x), .array(let y)) where x.count == y.count:
            for i in x.indices where x[i] != y[i] { diff(x[i], y[i], at: path.appending(index: i), into: &writes) }
        default:
            if a != b { writes.append(Write(path, old: a, new: b)) }
        }
    }
}
