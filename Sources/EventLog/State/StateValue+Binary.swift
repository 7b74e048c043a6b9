/// The stored encoding of state values: a tag byte, then the payload.
///
///     0 null · 1 false · 2 true · 3 integer (zigzag varint) · 4 double (8 bytes LE)
///     5 string (varint length, UTF-8) · 6 array (varint count, elements)
///     7 object (varint count, then key string and value per entry)
///     8 absent (only where a value is optional: a write's old or new value)
enum ValueTag: UInt8 {
    case null = 0, `false`, `true`, int, double, string, array, object, absent
}

extension BinaryWriter {
    mutating func value(_ value: StateValue) { self.value(value, depth: 0) }

    /// Writes `value`, found `depth` levels down, noting in `deepest` the deepest level
    /// below it holds and in `sawNonFiniteNumber` whether it holds an infinity or a NaN.
    private mutating func value(_ value: StateValue, depth: Int) {
        switch value {
        case .null: byte(ValueTag.null.rawValue)
        case .bool(let b): byte(b ? ValueTag.true.rawValue : ValueTag.false.rawValue)
        case .int(let i):
            byte(ValueTag.int.rawValue)
            signed(i)
        case .double(let d):
            if !d.isFinite { sawNonFiniteNumber = true }
            byte(ValueTag.double.rawValue)
            fixed64(d.bitPattern)
        case .string(let s):
            byte(ValueTag.string.rawValue)
            string(s)
        case .array(let elements):
            byte(ValueTag.array.rawValue)
            varint(elements.count)
            if !elements.isEmpty, depth >= deepest { deepest = depth + 1 }
            for element in elements { self.value(element, depth: depth + 1) }
        case .object(let object):
            byte(ValueTag.object.rawValue)
            varint(object.count)
            if !object.isEmpty, depth >= deepest { deepest = depth + 1 }
            for (key, element) in object {
                string(key)
                self.value(element, depth: depth + 1)
            }
        }
    }

    /// Writes `value`, or the absent tag, and returns the bytes the value took (`nil` when absent).
    @discardableResult
    mutating func optionalValue(_ value: StateValue?) -> Int? {
        guard let value else {
            byte(ValueTag.absent.rawValue)
            return nil
        }
        let start = count
        self.value(value)
        return count - start
    }

    mutating func path(_ path: StatePath) {
        varint(path.components.count)
        for component in path.components {
            switch component {
            case .key(let key):
                byte(0)
                string(key)
            case .index(let index):
                byte(1)
                varint(index)
            }
        }
    }
}

extension BinaryReader {
    mutating func value(depth: Int = 0) throws(RecordDecodingError) -> StateValue {
        guard let value = try optionalValue(depth: depth) else { throw absentValue() }
        return value
    }

    mutating func optionalValue(depth: Int = 0) throws(RecordDecodingError) -> StateValue? {
        guard depth < StateLimits.maxReadDepth else { throw nestedTooDeep() }
        let tag = try byte()
        switch ValueTag(rawValue: tag) {
        case .null: return .null
        case .false: return .bool(false)
        case .true: return .bool(true)
        case .int: return .int(try signed())
        case .double: return .double(Double(bitPattern: try fixed64()))
        case .string: return .string(try string())
        case .array:
            let count = try self.count()
            var elements: [StateValue] = []
            elements.reserveCapacity(count)
            for _ in 0..<count { elements.append(try value(depth: depth + 1)) }
            return .array(elements)
        case .object:
            let count = try self.count()
            var object = StateObject()
            object.reserveCapacity(count)
            for _ in 0..<count {
                let key = try name()
                object[key] = try value(depth: depth + 1)
            }
            return .object(object)
        case .absent: return nil
        case nil: throw RecordDecodingError("unknown value tag \(tag) at byte \(offset - 1)")
        }
    }

    /// Steps over a value or the absent tag, checking its structure as `optionalValue` does
    /// but building nothing; returns whether a value was there.
    mutating func skipOptionalValue(depth: Int = 0) throws(RecordDecodingError) -> Bool {
        guard depth < StateLimits.maxReadDepth else { throw nestedTooDeep() }
        let tag = try byte()
        switch ValueTag(rawValue: tag) {
        case .null, .false, .true: break
        case .int: _ = try varint()
        case .double: try skip(8)
        case .string: try skip(try count())
        case .array:
            for _ in 0..<(try count()) { guard try skipOptionalValue(depth: depth + 1) else { throw absentValue() } }
        case .object:
            for _ in 0..<(try count()) {
                try skip(try count())
                guard try skipOptionalValue(depth: depth + 1) else { throw absentValue() }
            }
        case .absent: return false
        case nil: throw RecordDecodingError("unknown value tag \(tag) at byte \(offset - 1)")
        }
        return true
    }

    private func absentValue() -> RecordDecodingError { RecordDecodingError("absent value where one is required") }
    private func nestedTooDeep() -> RecordDecodingError { RecordDecodingError("values nested deeper than \(StateLimits.maxReadDepth) levels") }

    mutating func path() throws(RecordDecodingError) -> StatePath {
        guard let names else { return try decodePath() }
        let start = offset
        try skipPath()
        let encoded = UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
        return try names.path(encoded) { () throws(RecordDecodingError) in
            var reader = BinaryReader(encoded)
            return try reader.decodePath()
        }
    }

    private mutating func decodePath() throws(RecordDecodingError) -> StatePath {
        let count = try self.count()
        var components: [StatePath.Component] = []
        components.reserveCapacity(count)
        for _ in 0..<count {
            switch try byte() {
            case 0: components.append(.key(try string()))
            case 1: components.append(.index(try int()))
            case let kind: throw RecordDecodingError("unknown path component kind \(kind)")
            }
        }
        return StatePath(components)
    }

    private mutating func skipPath() throws(RecordDecodingError) {
        for _ in 0..<(try count()) {
            if try byte() == 0 { try skip(try count()) } else { _ = try varint() }
        }
    }
}

extension StateValue {
    /// The compact binary encoding of the value, as records and keyframes store it.
    public var encoded: [UInt8] {
        var writer = BinaryWriter()
        writer.value(self)
        return writer.bytes
    }

    /// Decodes `encoded` bytes; throws on anything malformed or left over.
    ///
    /// - Throws: ``RecordDecodingError`` when the bytes end early, hold an unknown tag or a
    ///   malformed number, nest deeper than the decoders accept, or go on after the value.
    public init(encoded bytes: UnsafeRawBufferPointer) throws(RecordDecodingError) {
        var reader = BinaryReader(bytes)
        self = try reader.value()
        guard reader.isAtEnd else { throw RecordDecodingError("\(reader.remaining) trailing bytes") }
    }
}

extension StateValue {
    /// The encoding followed by a CRC-32C of `key` and the encoding: how read models kept
    /// beside the log store values, so that a damaged one is found, not read.
    public func checkedEncoding(key: UnsafeRawBufferPointer) -> [UInt8] {
        var writer = BinaryWriter()
        writer.value(self)
        writer.appendChecksum(from: 0, prefix: key)
        return writer.bytes
    }

    /// Decodes what `checkedEncoding(key:)` wrote under `key`; throws when the checksum or
    /// the encoding is wrong.
    ///
    /// - Throws: ``RecordDecodingError`` when the checksum does not match `key` and the
    ///   bytes, or the encoding is malformed or followed by more bytes.
    public init(checkedEncoding bytes: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer) throws(RecordDecodingError) {
        var (reader, _) = try RecordCodec.verified(bytes, key: key)
        self = try reader.value()
        guard reader.isAtEnd else { throw RecordDecodingError("\(reader.remaining) trailing bytes") }
    }
}
