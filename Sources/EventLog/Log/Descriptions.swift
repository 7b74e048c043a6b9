/// Text for people and for test failures: every value prints as what it means, never as its
/// Swift structure (`"chats"`, not `StateValue.string("chats")`).

extension StateValue: CustomStringConvertible, CustomDebugStringConvertible {
    /// Compact JSON: `"unread"`, `null`, `{"a":[1,2]}`.
    public var description: String { json() }
    public var debugDescription: String { json() }
}

extension StateObject: CustomStringConvertible, CustomDebugStringConvertible {
    /// Compact JSON, keys in order.
    public var description: String { StateValue.object(self).json() }
    public var debugDescription: String { description }
}

extension Write: CustomStringConvertible, CustomDebugStringConvertible {
    /// `messenger.listFilter: "unread" → null`; an absent side prints as `(absent)`.
    public var description: String {
        "\(path.isRoot ? "(root)" : path.description): \(old?.json() ?? "(absent)") → \(new?.json() ?? "(absent)")"
    }
    public var debugDescription: String { description }
}

extension Outcome: CustomStringConvertible {
    /// `applied`, `skipped ("reason")` or `cancelled`.
    public var description: String {
        if case .skipped(let reason) = self { return "skipped (\(StateValue.string(reason).json()))" }
        return name
    }
}

extension Event: CustomStringConvertible, CustomDebugStringConvertible {
    /// `messenger/selectBotTab [tap] applied: messenger.selectedTab: "home" → "bots"; …`
    public var description: String {
        var text = "\(stream)/\(type) [\(origin)] \(outcome)"
        if payload != .null { text += " payload \(payload.json())" }
        if !writes.isEmpty { text += ": " + writes.map(\.description).joined(separator: "; ") }
        return text
    }
    public var debugDescription: String { description }
}

extension EventRecord: CustomStringConvertible, CustomDebugStringConvertible {
    /// `#12 messenger/selectBotTab [tap] applied: …`
    public var description: String { "#\(seq) \(event)" }
    public var debugDescription: String { description }
}
