import Glibc

/// The names recently decoded by one read (types, causes and keys too long to be stored
/// inline in a `String`, and whole write paths), so that records repeating them share one
/// copy instead of allocating their own.
///
/// Direct-mapped: each slot keeps the last name whose bytes hashed to it, and a miss simply
/// replaces it, so the memory is fixed and a run of unique names costs a hash and a copy
/// each. A hit is confirmed byte for byte; a cached name is never returned for other bytes.
package final class NameCache {
    /// A name and its encoded bytes (compared instead of the string's, which is slower to reach).
    private struct Slot<Name> {
        var hash: UInt32 = 0
        var bytes: [UInt8] = []
        var name: Name
    }

    private static let stringSlotCount = 256
    private static let pathSlotCount = 128

    // Plain pointers rather than arrays: a class's array properties would pay a dynamic
    // exclusivity check on every access, which costs more than the lookup itself.
    private let strings = UnsafeMutablePointer<Slot<String>>.allocate(capacity: stringSlotCount)
    private let paths = UnsafeMutablePointer<Slot<StatePath>>.allocate(capacity: pathSlotCount)

    init() {
        strings.initialize(repeating: Slot(name: ""), count: Self.stringSlotCount)
        paths.initialize(repeating: Slot(name: .root), count: Self.pathSlotCount)
    }

    deinit {
        strings.deinitialize(count: Self.stringSlotCount).deallocate()
        paths.deinitialize(count: Self.pathSlotCount).deallocate()
    }

    /// The string with UTF-8 `bytes`, from the cache when it holds it.
    func string(_ bytes: UnsafeRawBufferPointer) -> String {
        Self.lookup(bytes, in: strings, slots: Self.stringSlotCount) { BinaryReader.makeString(bytes) }
    }

    /// The path encoded as `bytes`, from the cache or else from `decode`.
    func path(_ bytes: UnsafeRawBufferPointer, decode: () throws(RecordDecodingError) -> StatePath) throws(RecordDecodingError) -> StatePath {
        try Self.lookup(bytes, in: paths, slots: Self.pathSlotCount, decode)
    }

    @inline(__always)
    private static func lookup<Name, E: Error>(_ bytes: UnsafeRawBufferPointer, in table: UnsafeMutablePointer<Slot<Name>>, slots: Int,
                                               _ decode: () throws(E) -> Name) throws(E) -> Name {
        // CRC-32C is a good enough hash for short names, and the CPU computes it.
        let hash = CRC32C.checksum(bytes)
        let slot = table + (Int(hash) & (slots - 1))
        if slot.pointee.hash == hash, slot.pointee.bytes.withUnsafeBytes({ equal($0, bytes) }) {
            return slot.pointee.name
        }
        let decoded = try decode()
        slot.pointee = Slot(hash: hash, bytes: Array(bytes), name: decoded)
        return decoded
    }

    private static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
    }
}

/// The name caches of one store, kept between its reads: a short read (a snapshot's handful
/// of write sets) neither builds nor frees one, which would cost more than the read itself,
/// and finds the names earlier reads decoded. Each cache serves one read at a time.
final class NameCaches: Sendable {
    private let idle = Locked<[NameCache]>([])
    /// The most kept idle: as many as reads usually run at once.
    private static let kept = 4

    /// Runs `body` with a cache no other read is using.
    func using<Result>(_ body: (NameCache) throws -> Result) rethrows -> Result {
        let cache = idle.withLock { $0.popLast() } ?? NameCache()
        defer { idle.withLock { if $0.count < Self.kept { $0.append(cache) } } }
        return try body(cache)
    }
}
