/// Why a stored record could not be decoded.
public struct RecordDecodingError: Error, Hashable, CustomStringConvertible {
    /// What is wrong with the bytes, in one line.
    public let reason: String
    public var description: String { reason }
    init(_ reason: String) { self.reason = reason }
}

/// Reads the encoding written by `BinaryWriter` from borrowed bytes, never past their end.
/// Every read that would overrun, and every malformed varint, throws `RecordDecodingError`.
struct BinaryReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset: Int
    /// Where names (`name()`, paths) are shared across the records of one read, if anywhere.
    let names: NameCache?

    init(_ bytes: UnsafeRawBufferPointer, offset: Int = 0, names: NameCache? = nil) {
        self.bytes = bytes
        self.offset = offset
        self.names = names
    }

    var isAtEnd: Bool { offset >= bytes.count }
    var remaining: Int { bytes.count - offset }

    @inline(__always)
    mutating func byte() throws(RecordDecodingError) -> UInt8 {
        guard offset < bytes.count else { throw truncated() }
        defer { offset += 1 }
        return bytes[offset]
    }

    @inline(__always)
    mutating func varint() throws(RecordDecodingError) -> UInt64 {
        // One-byte values (lengths, counts, tags' payloads) are the common case.
        if offset < bytes.count, bytes[offset] < 0x80 {
            defer { offset += 1 }
            return UInt64(bytes[offset])
        }
        return try longVarint()
    }

    private mutating func longVarint() throws(RecordDecodingError) -> UInt64 {
        // A varint of up to 8 bytes (56 bits: every record's time) read as one word when 8
        // bytes are left: the first byte with its high bit clear ends it.
        if remaining >= 8 {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            let ends = ~word & 0x8080_8080_8080_8080
            if ends != 0 {
                let length = ends.trailingZeroBitCount / 8 + 1
                var result: UInt64 = 0
                for index in 0..<length { result |= (word >> (8 * index) & 0x7F) << (7 * index) }
                offset += length
                return result
            }
        }
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            if shift == 63 && b > 1 { throw RecordDecodingError("varint overflows 64 bits at byte \(offset)") }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
        }
    }

    /// The error for a read past the end, built out of line to keep the reads small.
    @inline(never)
    private func truncated() -> RecordDecodingError { RecordDecodingError("truncated at byte \(offset)") }

    @inline(__always)
    mutating func count() throws(RecordDecodingError) -> Int {
        let value = try varint()
        guard value <= UInt64(remaining) else { throw tooLong(value) }
        return Int(value)
    }

    @inline(never)
    private func tooLong(_ length: UInt64) -> RecordDecodingError {
        RecordDecodingError("length \(length) exceeds the \(remaining) bytes left")
    }

    mutating func int() throws(RecordDecodingError) -> Int {
        let value = try varint()
        guard value <= UInt64(Int.max) else { throw RecordDecodingError("integer \(value) out of range") }
        return Int(value)
    }

    mutating func signed() throws(RecordDecodingError) -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    mutating func fixed32() throws(RecordDecodingError) -> UInt32 {
        guard remaining >= 4 else { throw truncated() }
        defer { offset += 4 }
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    mutating func fixed64() throws(RecordDecodingError) -> UInt64 {
        guard remaining >= 8 else { throw truncated() }
        defer { offset += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    mutating func string() throws(RecordDecodingError) -> String {
        let length = try count()
        defer { offset += length }
        return Self.makeString(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]))
    }

    /// A string that records tend to repeat (a stream, type, cause or key): shared through
    /// `names` when there is a cache and it is too long to be stored inline in a `String`
    /// (15 UTF-8 bytes); otherwise the same as `string()`, since creating it costs less.
    mutating func name() throws(RecordDecodingError) -> String {
        let length = try count()
        defer { offset += length }
        let utf8 = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
        guard let names, length > 15 else { return Self.makeString(utf8) }
        return names.string(utf8)
    }

    /// A string copied straight from `utf8`; invalid UTF-8 is repaired, never trusted.
    static func makeString(_ utf8: UnsafeRawBufferPointer) -> String {
        guard let start = utf8.baseAddress, !utf8.isEmpty else { return "" }
        return String(unsafeUninitializedCapacity: utf8.count) { buffer in
            UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(start: start, count: utf8.count))
            return utf8.count
        }
    }

    /// Skips `length` bytes.
    mutating func skip(_ length: Int) throws(RecordDecodingError) {
        guard length <= remaining else { throw truncated() }
        offset += length
    }

    /// A sub-view of the next `length` bytes, consumed from this reader.
    mutating func slice(_ length: Int) throws(RecordDecodingError) -> UnsafeRawBufferPointer {
        guard length <= remaining else { throw truncated() }
        defer { offset += length }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
    }
}
