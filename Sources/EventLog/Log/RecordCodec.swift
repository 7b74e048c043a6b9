/// The stored layout of an event record (format version 3; format 2 is the same without
/// versions, format 1 also without named origins). Keys are the sequence number as
/// 8 big-endian bytes; the value is:
///
///     signed   time (µs since 1970)
///     string   stream · string type · byte origin (0xFF: then the origin's name, format 2)
///     byte     0 no cause | 1 then string id, varint step, string source
///     byte     0 applied | 1 skipped, then string reason | 2 cancelled; with 0x80 set
///              (format 3), then varint version (above 1: version 1 is never written)
///     fixed32  payload length (LE), then the payload value
///     varint   write count, then per write: path, old value or absent, new value or absent
///     fixed32  CRC-32C of the 8 key bytes followed by every byte above
///
/// Keyframes are stored the same way under the seq they follow: a value, then its CRC-32C.
enum RecordCodec {
    static func withKey<R>(_ seq: UInt64, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: seq.bigEndian, body)
    }

    static func seq(fromKey key: UnsafeRawBufferPointer) throws(RecordDecodingError) -> UInt64 {
        guard key.count == 8 else { throw RecordDecodingError("key of \(key.count) bytes, expected 8") }
        return UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
    }

    /// What encoding a record yields besides its bytes.
    struct Encoded {
        var checksum: UInt32
        /// How the record's writes change the encoded size of the state (for `KeyframeProgress`).
        var stateDelta: Int
        /// The deepest nesting the record brings: a payload's, or a write's path plus its new value's.
        var nesting = 0
        /// Whether a payload or a write's value holds an infinity or a NaN, which JSON cannot.
        var hasNonFiniteNumber = false
        /// The record's time, which must be one RFC 3339 can write.
        var time: Timestamp
        /// The event's version, which must be one of `Event.versions`.
        var version: Int

        /// Why a record of `bytes` bytes with these properties breaks `StateLimits`, if it does.
        func limitExceeded(recordBytes bytes: Int) -> EventStoreError? {
            if !Event.versions.contains(version) {
                return .limitExceeded("the event's version is \(version); a version is 1 to \(Event.versions.upperBound)")
            }
            if !time.isRFC3339 {
                return .limitExceeded("time \(time.microsecondsSince1970) µs since 1970 is outside years 0000 to 9999")
            }
            if nesting > StateLimits.maxDepth {
                return .limitExceeded("the event nests \(nesting) levels deep; the limit is \(StateLimits.maxDepth)")
            }
            if bytes > StateLimits.maxRecordBytes {
                return .limitExceeded("the event takes \(bytes) bytes; the limit is \(StateLimits.maxRecordBytes)")
            }
            if hasNonFiniteNumber { return .limitExceeded("the event holds an infinite or NaN number, which JSON cannot carry") }
            return nil
        }
    }

    /// Appends the record's bytes to `writer`.
    @discardableResult
    static func encode(_ event: Event, seq: UInt64, time: Timestamp, into writer: inout BinaryWriter) -> Encoded {
        let start = writer.count
        writer.signed(time.microsecondsSince1970)
        writer.string(event.stream)
        writer.string(event.type)
        if let code = event.origin.code {
            writer.byte(code)
        } else {
            writer.byte(Origin.namedCode)
            writer.string(event.origin.rawValue)
        }
        if let cause = event.cause {
            writer.byte(1)
            writer.string(cause.id)
            writer.varint(cause.step)
            writer.string(cause.source)
        } else {
            writer.byte(0)
        }
        let versioned: UInt8 = event.version == 1 ? 0 : Self.versionFlag
        switch event.outcome {
        case .applied: writer.byte(0 | versioned)
        case .skipped(let reason):
            writer.byte(1 | versioned)
            writer.string(reason)
        case .cancelled: writer.byte(2 | versioned)
        }
        // A version outside `Event.versions` is refused by `limitExceeded` before it is stored.
        if versioned != 0 { writer.varint(Swift.max(event.version, 0)) }
        writer.deepest = 0
        writer.sawNonFiniteNumber = false
        let payloadLength = writer.reserveLength()
        writer.value(event.payload)
        writer.patchLength(at: payloadLength)
        var nesting = writer.deepest
        writer.varint(event.writes.count)
        var stateDelta = 0
        for write in event.writes {
            writer.path(write.path)
            let oldSize = writer.optionalValue(write.old)
            writer.deepest = 0
            let newSize = writer.optionalValue(write.new)
            nesting = max(nesting, write.path.components.count + writer.deepest)
            stateDelta += KeyframeProgress.sizeChange(write.path, oldSize: oldSize, newSize: newSize)
        }
        let checksum = withKey(seq) { writer.appendChecksum(from: start, prefix: $0) }
        return Encoded(checksum: checksum, stateDelta: stateDelta, nesting: nesting, hasNonFiniteNumber: writer.sawNonFiniteNumber, time: time,
                       version: event.version)
    }

    /// Set in the outcome byte when a version (above 1) follows it.
    static let versionFlag: UInt8 = 0x80

    /// Checks the trailing checksum and returns a reader over the body and the checksum.
    static func verified(_ bytes: UnsafeRawBufferPointer, seq: UInt64, names: NameCache? = nil) throws(RecordDecodingError) -> (BinaryReader, UInt32) {
        try withUnsafeBytes(of: seq.bigEndian) { key throws(RecordDecodingError) in try verified(bytes, key: key, names: names) }
    }

    /// Checks a trailing checksum over `key` and the bytes before it; see `verified(_:seq:names:)`.
    static func verified(_ bytes: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, names: NameCache? = nil) throws(RecordDecodingError) -> (BinaryReader, UInt32) {
        guard bytes.count >= 4 else { throw RecordDecodingError("record of \(bytes.count) bytes is too short") }
        let body = UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 4)])
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: bytes.count - 4, as: UInt32.self))
        let computed = CRC32C.checksum(body, continuing: CRC32C.checksum(key))
        guard stored == computed else {
            throw RecordDecodingError("checksum mismatch (stored \(hex(stored)), computed \(hex(computed)))")
        }
        return (BinaryReader(body, names: names), stored)
    }

    static func decode(_ bytes: UnsafeRawBufferPointer, seq: UInt64, names: NameCache? = nil) throws(RecordDecodingError) -> EventRecord {
        var stateDelta = 0
        return try decode(bytes, seq: seq, stateDelta: &stateDelta, names: names)
    }

    /// Decodes a record and adds to `stateDelta` how its writes change the encoded size of the
    /// state. Names are shared through `names`, when given (a cache for one read of many records).
    static func decode(_ bytes: UnsafeRawBufferPointer, seq: UInt64, stateDelta: inout Int,
                       names: NameCache? = nil) throws(RecordDecodingError) -> EventRecord {
        var (reader, checksum) = try verified(bytes, seq: seq, names: names)
        let time = Timestamp(microsecondsSince1970: try reader.signed())
        let stream = try reader.name()
        let type = try reader.name()
        let originCode = try reader.byte()
        let origin: Origin
        if originCode == Origin.namedCode {
            let name = try reader.name()
            guard let named = Origin(rawValue: name) else { throw RecordDecodingError("invalid origin name of \(name.utf8.count) bytes") }
            origin = named
        } else {
            guard let known = Origin(code: originCode) else { throw RecordDecodingError("unknown origin code \(originCode)") }
            origin = known
        }
        var cause: Cause?
        switch try reader.byte() {
        case 0: break
        case 1: cause = Cause(id: try reader.name(), step: try reader.int(), source: try reader.name())
        case let flag: throw RecordDecodingError("unknown cause flag \(flag)")
        }
        let outcome: Outcome
        let outcomeCode = try reader.byte()
        switch outcomeCode & ~Self.versionFlag {
        case 0: outcome = .applied
        case 1: outcome = .skipped(reason: try reader.string())
        case 2: outcome = .cancelled
        default: throw RecordDecodingError("unknown outcome code \(outcomeCode)")
        }
        var version = 1
        if outcomeCode & Self.versionFlag != 0 {
            version = try reader.int()
            guard version > 1, Event.versions.contains(version) else { throw RecordDecodingError("invalid version \(version)") }
        }
        let payloadLength = Int(try reader.fixed32())
        var payloadReader = BinaryReader(try reader.slice(payloadLength), names: names)
        let payload = try payloadReader.value()
        guard payloadReader.isAtEnd else { throw RecordDecodingError("payload has \(payloadReader.remaining) trailing bytes") }
        let writes = try decodeWrites(&reader, stateDelta: &stateDelta)
        guard reader.isAtEnd else { throw RecordDecodingError("\(reader.remaining) trailing bytes") }
        let event = Event(stream: stream, type: type, origin: origin, cause: cause, outcome: outcome, payload: payload, writes: writes,
                          version: version)
        return EventRecord(seq: seq, time: time, event: event, checksum: checksum)
    }

    /// Decodes only the write set, skipping the other fields, and adds to `stateDelta` how the
    /// writes change the encoded size of the state.
    static func decodeWrites(_ bytes: UnsafeRawBufferPointer, seq: UInt64, stateDelta: inout Int,
                             names: NameCache? = nil) throws(RecordDecodingError) -> [Write] {
        var reader = try writeSetReader(bytes, seq: seq, names: names)
        let writes = try decodeWrites(&reader, stateDelta: &stateDelta)
        guard reader.isAtEnd else { throw RecordDecodingError("\(reader.remaining) trailing bytes") }
        return writes
    }

    /// Applies the record's writes to `state` as it reads them, building neither the writes
    /// nor their old values (the fold fast path), and adds to `stateDelta` how they change the
    /// encoded size of the state. Throws `RecordDecodingError` or `StateError`; after a throw `state`
    /// may hold part of the record's writes and must be discarded.
    static func applyWrites(_ bytes: UnsafeRawBufferPointer, seq: UInt64, to state: inout StateValue,
                            stateDelta: inout Int, names: NameCache? = nil) throws {
        var reader = try writeSetReader(bytes, seq: seq, names: names)
        for _ in 0..<(try reader.count()) {
            let path = try reader.path()
            let oldStart = reader.offset
            let hadOld = try reader.skipOptionalValue()
            let newStart = reader.offset
            let new = try reader.optionalValue()
            stateDelta += KeyframeProgress.sizeChange(path, oldSize: hadOld ? newStart - oldStart : nil,
                                                      newSize: new.map { _ in reader.offset - newStart })
            try state.set(new, at: path)
        }
        guard reader.isAtEnd else { throw RecordDecodingError("\(reader.remaining) trailing bytes") }
    }

    /// A reader over a checked record, positioned at its write count.
    private static func writeSetReader(_ bytes: UnsafeRawBufferPointer, seq: UInt64, names: NameCache?) throws(RecordDecodingError) -> BinaryReader {
        var (reader, _) = try verified(bytes, seq: seq, names: names)
        _ = try reader.varint()                    // time
        try reader.skip(try reader.count())        // stream
        try reader.skip(try reader.count())        // type
        if try reader.byte() == Origin.namedCode { try reader.skip(try reader.count()) } // origin
        if try reader.byte() == 1 {                // cause
            try reader.skip(try reader.count())
            _ = try reader.varint()
            try reader.skip(try reader.count())
        }
        let outcome = try reader.byte()
        if outcome & ~versionFlag == 1 { try reader.skip(try reader.count()) } // skip reason
        if outcome & versionFlag != 0 { _ = try reader.varint() }              // version
        try reader.skip(Int(try reader.fixed32())) // payload
        return reader
    }

    private static func decodeWrites(_ reader: inout BinaryReader, stateDelta: inout Int) throws(RecordDecodingError) -> [Write] {
        let count = try reader.count()
        var writes: [Write] = []
        writes.reserveCapacity(count)
        for _ in 0..<count {
            let path = try reader.path()
            let oldStart = reader.offset
            let old = try reader.optionalValue()
            let newStart = reader.offset
            let new = try reader.optionalValue()
            stateDelta += KeyframeProgress.sizeChange(path, oldSize: old.map { _ in newStart - oldStart },
                                                      newSize: new.map { _ in reader.offset - newStart })
            writes.append(Write(path, old: old, new: new))
        }
        return writes
    }

    static func encodeKeyframe(_ state: StateValue, seq: UInt64, into writer: inout BinaryWriter) {
        writer.reset()
        writer.value(state)
        withKey(seq) { _ = writer.appendChecksum(from: 0, prefix: $0) }
    }

    static func decodeKeyframe(_ bytes: UnsafeRawBufferPointer, seq: UInt64) throws(RecordDecodingError) -> StateValue {
        var (reader, _) = try verified(bytes, seq: seq)
        let state = try reader.value()
        guard reader.isAtEnd else { throw RecordDecodingError("\(reader.remaining) trailing bytes") }
        return state
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}

extension Origin {
    /// The stored codes of format 1's five names, fixed forever; any other name is stored as
    /// `namedCode` followed by the name (format 2).
    private static let codes: [(Origin, UInt8)] = [("tap", 0), ("url", 1), ("test", 2), ("capture", 3), (.system, 4)]
    static let namedCode: UInt8 = 0xFF

    /// The stored code, or `nil` when the name is written out after `namedCode`.
    var code: UInt8? { Self.codes.first { $0.0 == self }?.1 }

    init?(code: UInt8) {
        guard let known = Self.codes.first(where: { $0.1 == code }) else { return nil }
        self = known.0
    }
}

extension EventRecord {
    /// The bytes the store keeps for `event` as record `seq` (the current format), checksum
    /// included: for tools and benchmark peers that handle records without a store.
    public static func storedBytes(of event: Event, seq: UInt64, time: Timestamp) -> [UInt8] {
        var writer = BinaryWriter()
        RecordCodec.encode(event, seq: seq, time: time, into: &writer)
        return writer.bytes
    }

    /// Decodes stored bytes, checking their checksum against `seq`.
    ///
    /// - Throws: ``RecordDecodingError`` when the checksum does not match `seq` and the bytes,
    ///   or the bytes are not a record.
    public init(storedBytes: UnsafeRawBufferPointer, seq: UInt64) throws(RecordDecodingError) {
        self = try RecordCodec.decode(storedBytes, seq: seq)
    }
}

extension Event {
    /// Why this event, appended at `time`, would break `StateLimits` (what `AppendBatch.append`
    /// would throw for it), or `nil`: for a layer that must know an event it will need later
    /// (an object's delete) can be recorded, before it accepts what would make it too large.
    package func limitExceeded(at time: Timestamp) -> EventStoreError? {
        var writer = BinaryWriter()
        let encoded = RecordCodec.encode(self, seq: 1, time: time, into: &writer)
        return encoded.limitExceeded(recordBytes: writer.count)
    }
}
