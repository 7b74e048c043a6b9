/// Appends the compact binary encoding used by stored records: LEB128 varints, zigzag
/// signed integers, length-prefixed UTF-8 strings and little-endian fixed-width numbers.
///
/// It owns one growable buffer: reuse a writer (`reset()`) to encode many records without
/// allocating. It cannot be copied, so its bytes have exactly one owner.
struct BinaryWriter: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0
    /// The deepest nesting of the values written since it was last reset to 0: 0 for a
    /// scalar or an empty container, one more per level of non-empty containers.
    var deepest = 0
    /// Whether a value written since it was last reset held an infinity or a NaN.
    var sawNonFiniteNumber = false

    init(capacity: Int = 256) {
        self.capacity = max(capacity, 16)
        base = .allocate(byteCount: self.capacity, alignment: 8)
    }

    deinit { base.deallocate() }

    /// The bytes written so far, copied.
    var bytes: [UInt8] { Array(UnsafeRawBufferPointer(start: base, count: count)) }

    /// Lends the bytes written so far, without copying.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    mutating func reset() { count = 0 }

    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(toAtLeast: count + extra) }
    }

    private mutating func grow(toAtLeast needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        grown.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }

    @inline(__always)
    mutating func byte(_ value: UInt8) {
        reserve(1)
        base.storeBytes(of: value, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    mutating func varint(_ value: UInt64) {
        reserve(10)
        // One-byte values (lengths, counts) are the common case.
        guard value >= 0x80 else {
            base.storeBytes(of: UInt8(value), toByteOffset: count, as: UInt8.self)
            count += 1
            return
        }
        longVarint(value)
    }

    private mutating func longVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            base.storeBytes(of: UInt8(truncatingIfNeeded: value) | 0x80, toByteOffset: count, as: UInt8.self)
            count += 1
            value >>= 7
        }
        base.storeBytes(of: UInt8(value), toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    mutating func varint(_ value: Int) { varint(UInt64(value)) }

    @inline(__always)
    mutating func signed(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    mutating func fixed32(_ value: UInt32) {
        reserve(4)
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt32.self)
        count += 4
    }

    mutating func fixed64(_ value: UInt64) {
        reserve(8)
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt64.self)
        count += 8
    }

    @inline(__always)
    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        reserve(bytes.count)
        if let source = bytes.baseAddress { (base + count).copyMemory(from: source, byteCount: bytes.count) }
        count += bytes.count
    }

    @inline(__always)
    mutating func string(_ value: String) {
        // Native and small strings lend their UTF-8 directly; others are made native first.
        if value.utf8.withContiguousStorageIfAvailable({ utf8Bytes($0) }) == nil {
            var native = value
            native.withUTF8 { utf8Bytes($0) }
        }
    }

    @inline(__always)
    private mutating func utf8Bytes(_ utf8: UnsafeBufferPointer<UInt8>) {
        varint(utf8.count)
        raw(UnsafeRawBufferPointer(utf8))
    }

    /// Reserves a fixed-width slot for a length that is only known later; see `patchLength`.
    mutating func reserveLength() -> Int {
        let at = count
        fixed32(0)
        return at
    }

    /// Writes the number of bytes appended since `reserveLength()` returned `at` into its slot.
    mutating func patchLength(at: Int) {
        base.storeBytes(of: UInt32(count - at - 4).littleEndian, toByteOffset: at, as: UInt32.self)
    }

    /// Appends the CRC-32C of the bytes written from offset `start` on, preceded (in the
    /// checksum only) by `prefix`, and returns it.
    @discardableResult
    mutating func appendChecksum(from start: Int, prefix: UnsafeRawBufferPointer) -> UInt32 {
        let crc = CRC32C.checksum(UnsafeRawBufferPointer(start: base + start, count: count - start),
                                  continuing: CRC32C.checksum(prefix))
        fixed32(crc)
        return crc
    }
}
