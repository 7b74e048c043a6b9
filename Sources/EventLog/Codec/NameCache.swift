import Glibc

/// The names recently decoded by one read (streams, types, causes, object keys and write
/// paths), so that records repeating them share one copy instead of allocating their own.
///
/// Direct-mapped: each slot keeps the last name whose bytes hashed to it, and a miss simply
/// replaces it, so the memory is fixed and a run of unique names costs one hash each. A hit
/// is confirmed byte for byte; a cached name is never returned for other bytes.
final class NameCache {
    private struct StringSlot {
        var hash: UInt64 = 0
        var string = ""
    }

    private struct PathSlot {
        var hash: UInt64 = 0
        var bytes: [UInt8] = []
        var path = StatePath.root
    }

    private static let stringSlotCount = 256
    private static let pathSlotCount = 128

    // Plain pointers rather than arrays: a class's array properties would pay a dynamic
    // exclusivity check on every access, which costs more than the lookup itself.
    private let strings = UnsafeMutablePointer<StringSlot>.allocate(capacity: stringSlotCount)
    private let paths = UnsafeMutablePointer<PathSlot>.allocate(capacity: pathSlotCount)

    init() {
        strings.initialize(repeating: StringSlot(), count: Self.stringSlotCount)
        paths.initialize(repeating: PathSlot(), count: Self.pathSlotCount)
    }

    deinit {
        strings.deinitialize(count: Self.stringSlotCount).deallocate()
        paths.deinitialize(count: Self.pathSlotCount).deallocate()
    }

    /// The string with UTF-8 `bytes`, from the cache when it holds it.
    func string(_ bytes: UnsafeRawBufferPointer) -> String {
        let hash = Self.hash(bytes)
        let slot = strings + (Int(truncatingIfNeeded: hash) & (Self.stringSlotCount - 1))
        if slot.pointee.hash == hash, slot.pointee.string.utf8.count == bytes.count,
           slot.pointee.string.utf8.withContiguousStorageIfAvailable({ Self.equal(UnsafeRawBufferPointer($0), bytes) }) == true {
            return slot.pointee.string
        }
        let decoded = BinaryReader.makeString(bytes)
        slot.pointee = StringSlot(hash: hash, string: decoded)
        return decoded
    }

    /// The path encoded as `bytes`, from the cache or else from `decode`.
    func path(_ bytes: UnsafeRawBufferPointer, decode: () throws(DecodingError) -> StatePath) throws(DecodingError) -> StatePath {
        let hash = Self.hash(bytes)
        let slot = paths + (Int(truncatingIfNeeded: hash) & (Self.pathSlotCount - 1))
        if slot.pointee.hash == hash, slot.pointee.bytes.withUnsafeBytes({ Self.equal($0, bytes) }) {
            return slot.pointee.path
        }
        let decoded = try decode()
        slot.pointee = PathSlot(hash: hash, bytes: Array(bytes), path: decoded)
        return decoded
    }

    private static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
    }

    /// A 64-bit hash of `bytes`, eight at a time (names are short).
    private static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var index = 0
        while bytes.count - index >= 8 {
            hash = (hash ^ bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            hash ^= hash >> 32
            index += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count {
            tail |= UInt64(bytes[index]) << shift
            shift += 8
            index += 1
        }
        hash = (hash ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        return hash ^ (hash >> 29)
    }
}
