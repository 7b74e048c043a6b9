/// The JSON form of records: what `eventlog show --json` and `export` print and `import`
/// reads. Keys are sorted; a write's `old` or `new` is left out when absent.
extension EventRecord {
    /// The record as a JSON object: `seq`, `time` (RFC 3339), `stream`, `type`, `origin`,
    /// `outcome` (and `reason` when skipped), `cause` when there is one, `payload`, `writes`,
    /// `version` when it is not 1, and `checksum` (8 hex digits). ``ImportedEvent/init(json:)``
    /// reads it back.
    public var jsonValue: StateValue {
        var object = StateObject()
        if let cause = event.cause {
            object["cause"] = ["id": .string(cause.id), "source": .string(cause.source), "step": .int(Int64(cause.step))]
        }
        object["checksum"] = .string(RecordCodec.hex(checksum))
        object["origin"] = .string(event.origin.rawValue)
        object["outcome"] = .string(event.outcome.name)
        object["payload"] = event.payload
        if case .skipped(let reason) = event.outcome { object["reason"] = .string(reason) }
        object["seq"] = .int(Int64(seq))
        object["stream"] = .string(event.stream)
        object["time"] = .string(time.description)
        object["type"] = .string(event.type)
        if event.version != 1 { object["version"] = .int(Int64(event.version)) }
        object["writes"] = .array(event.writes.map(\.jsonValue))
        return .object(object)
    }
}

extension Write {
    /// `{"path": …, "old": …, "new": …}`, leaving out `old` or `new` when absent;
    /// ``init(json:)`` reads it back.
    public var jsonValue: StateValue {
        var object = StateObject()
        if let new { object["new"] = new }
        if let old { object["old"] = old }
        object["path"] = .string(path.description)
        return .object(object)
    }

    /// Reads `{"path": …, "old": …, "new": …}`.
    ///
    /// - Throws: ``RecordFormatError`` when `json` is not an object, has a key other than
    ///   those three, or has no `path` that is a string in ``StatePath``'s text form.
    public init(json: StateValue) throws(RecordFormatError) {
        let object = try RecordFormatError.object(json, "write")
        try RecordFormatError.onlyKeys(object, ["path", "old", "new"], in: "write")
        guard let text = object["path"]?.stringValue else { throw RecordFormatError("write needs a string \"path\"") }
        do { self.init(try StatePath(parsing: text), old: object["old"], new: object["new"]) } catch {
            throw RecordFormatError("write path \"\(text)\": \(error)")
        }
    }
}

/// A JSON record that does not describe an event.
public struct RecordFormatError: Error, Hashable, CustomStringConvertible {
    /// What is wrong with the record, in one line, naming the key concerned.
    public let reason: String
    public var description: String { reason }
    init(_ reason: String) { self.reason = reason }

    static func object(_ value: StateValue, _ what: String) throws(RecordFormatError) -> StateObject {
        guard let object = value.objectValue else { throw RecordFormatError("\(what) must be a JSON object, not \(value.kindName)") }
        return object
    }

    static func onlyKeys(_ object: StateObject, _ allowed: Set<String>, in what: String) throws(RecordFormatError) {
        if let unknown = object.keys.first(where: { !allowed.contains($0) }) {
            throw RecordFormatError("unknown key \"\(unknown)\" in \(what)")
        }
    }
}

/// An event read from its JSON form, with the seq and time it carried, if any.
public struct ImportedEvent: Sendable, Hashable {
    /// The `seq` the JSON carried (positive); `nil` when it had none.
    public var seq: UInt64?
    /// The `time` the JSON carried; `nil` when it had none.
    public var time: Timestamp?
    /// The event, ready to append; the store checks it then.
    public var event: Event

    /// Reads the JSON form written by `EventRecord.jsonValue`. `stream` and `type` are
    /// required; `origin` defaults to `system`, `outcome` to `applied`, `payload` to null,
    /// `version` to 1. A `checksum` is accepted and ignored: the store computes its own.
    ///
    /// - Throws: ``RecordFormatError`` when `json` is not an object or has an unknown key;
    ///   when `stream` or `type` is missing or empty; when `origin` is not a valid ``Origin``,
    ///   `outcome` is not `applied`, `skipped` or `cancelled`, or `cause` is not an object with a
    ///   string `id` and a step that is not negative; when a write does not read (as
    ///   ``Write/init(json:)``); when `seq` is not a positive integer, `time` not RFC 3339, or
    ///   `version` not an integer in ``Event/versions``.
    public init(json: StateValue) throws(RecordFormatError) {
        let object = try RecordFormatError.object(json, "event")
        try RecordFormatError.onlyKeys(object, ["seq", "time", "checksum", "stream", "type", "origin", "cause", "outcome", "reason", "payload", "writes", "version"], in: "event")
        func string(_ key: String) throws(RecordFormatError) -> String? {
            guard let value = object[key] else { return nil }
            guard let string = value.stringValue else { throw RecordFormatError("\"\(key)\" must be a string") }
            return string
        }
        guard let stream = try string("stream"), !stream.isEmpty else { throw RecordFormatError("event needs a non-empty string \"stream\"") }
        guard let type = try string("type"), !type.isEmpty else { throw RecordFormatError("event needs a non-empty string \"type\"") }
        var event = Event(stream: stream, type: type, payload: object["payload"] ?? .null)
        if let name = try string("origin") {
            guard let origin = Origin(rawValue: name) else {
                throw RecordFormatError("origin \"\(name)\" must be 1 to 64 bytes without control characters")
            }
            event.origin = origin
        }
        switch try string("outcome") ?? "applied" {
        case "applied": event.outcome = .applied
        case "cancelled": event.outcome = .cancelled
        case "skipped": event.outcome = .skipped(reason: try string("reason") ?? "")
        case let other: throw RecordFormatError("unknown outcome \"\(other)\" (expected applied, skipped, cancelled)")
        }
        if let cause = object["cause"] {
            let fields = try RecordFormatError.object(cause, "cause")
            try RecordFormatError.onlyKeys(fields, ["id", "step", "source"], in: "cause")
            guard let id = fields["id"]?.stringValue else { throw RecordFormatError("cause needs a string \"id\"") }
            let step = try fields["step"].map { (value) throws(RecordFormatError) -> Int in
                guard let step = value.intValue.flatMap(Int.init(exactly:)), step >= 0 else { throw RecordFormatError("cause step must be an integer, 0 or more, written without a fraction or exponent") }
                return step
            } ?? 0
            event.cause = Cause(id: id, step: step, source: fields["source"]?.stringValue ?? "")
        }
        if let writes = object["writes"] {
            guard let list = writes.arrayValue else { throw RecordFormatError("\"writes\" must be an array") }
            event.writes = try list.map { (json) throws(RecordFormatError) in try Write(json: json) }
        }
        if let version = object["version"] {
            guard let value = version.intValue.flatMap(Int.init(exactly:)), Event.versions.contains(value) else {
                throw RecordFormatError("\"version\" must be an integer from 1 to \(Event.versions.upperBound), written without a fraction or exponent")
            }
            event.version = value
        }
        if let seq = object["seq"] {
            guard let value = seq.intValue, value > 0 else { throw RecordFormatError("\"seq\" must be a positive integer") }
            self.seq = UInt64(value)
        }
        if let text = try string("time") {
            do { self.time = try Timestamp(parsingRFC3339: text) } catch {
                throw RecordFormatError("\"time\" \(text): \(error.reason)")
            }
        }
        self.event = event
    }
}
