/// Appends the compact binary encoding used by stored records: LEB128 varints, zigzag
/// signed integers, length-prefixed UTF-8 strings and little-endian fixed-width numbers.
///
/// Reuse one writer (`removeAll(keepingCapacity:)`) to encode many records without allocating.
struct BinaryWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    var count: Int { bytes.count }

    mutating func reset() { bytes.removeAll(keepingCapacity: true) }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func varint(_ value: Int) { varint(UInt64(value)) }

    mutating func signed(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    mutating func fixed32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    /// Reserves a fixed-width slot for a length that is only known later; see `patchLength`.
    mutating func reserveLength() -> Int {
        let at = bytes.count
        fixed32(0)
        return at
    }

    /// Writes the number of bytes appended since `reserveLength()` returned `at` into its slot.
    mutating func patchLength(at: Int) {
        let length = UInt32(bytes.count - at - 4).littleEndian
        withUnsafeBytes(of: length) { raw in
            for i in 0..<4 { bytes[at + i] = raw[i] }
        }
    }

    /// Appends the CRC-32C of everything written so far, preceded (in the checksum only)
    /// by `prefix`, and returns it.
    @discardableResult
    mutating func appendChecksum(prefix: UnsafeRawBufferPointer) -> UInt32 {
        let crc = bytes.withUnsafeBytes { CRC32C.checksum($0, continuing: CRC32C.checksum(prefix)) }
        fixed32(crc)
        return crc
    }
}
