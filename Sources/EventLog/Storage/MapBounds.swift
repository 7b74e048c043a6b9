#if canImport(Glibc)
import Glibc
#endif

/// The addresses an environment's file is mapped at. LMDB takes a value's size from its page
/// unchecked, and a damaged size would send a reader past the end of the map, where the fault
/// cannot be told from a bug; so every value a transaction borrows is checked against these.
struct MapBounds: Sendable, Equatable {
    let start: UInt
    let end: UInt

    /// Bounds that check nothing, for a map that could not be found.
    static let unknown = MapBounds(start: 0, end: 0)

    /// The size of the mapped range in bytes.
    var size: Int { Int(end - start) }

    /// Whether `bytes` begin inside the map and run past its end. Bytes outside the map (a
    /// write transaction's dirty pages, in memory LMDB allocated) are not checked.
    func isOverrun(by bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        let address = UInt(bitPattern: base)
        return address >= start && address < end && UInt(bytes.count) > end - address
    }

    /// Where this process maps `file`, from `/proc/self/maps` (LMDB does not say; its
    /// `me_mapaddr` is set only for fixed maps): the lines with the file's inode and its
    /// device, or its name where the two devices differ (overlay file systems show the one
    /// below), joined where they are contiguous (the kernel may split one mapping in
    /// several). `nil` when the file is not mapped or the table cannot be read.
    static func find(mappingOf file: String) -> MapBounds? {
        var status = stat()
        guard stat(file, &status) == 0, let table = readProcessMaps() else { return nil }
        // glibc's gnu_dev_major and gnu_dev_minor.
        let device = (major: (status.st_dev >> 8) & 0xFFF | (status.st_dev >> 32) & 0xFFFF_F000,
                      minor: status.st_dev & 0xFF | (status.st_dev >> 12) & 0xFFFF_FF00)
        let name = "/" + (file.split(separator: "/").last.map(String.init) ?? file)
        var found: MapBounds?
        // Each line: "start-end perms offset major:minor inode path".
        for line in table.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 6, number(fields[4], radix: 10) == UInt64(status.st_ino) else { continue }
            let deviceFields = fields[3].split(separator: UInt8(ascii: ":"))
            let range = fields[0].split(separator: UInt8(ascii: "-")).compactMap { number($0, radix: 16) }
            let sameDevice = deviceFields.count == 2 && number(deviceFields[0], radix: 16) == UInt64(device.major)
                && number(deviceFields[1], radix: 16) == UInt64(device.minor)
            let sameName = String(decoding: fields[5], as: UTF8.self).hasSuffix(name)
            guard sameDevice || sameName, range.count == 2, range[1] > range[0] else { continue }
            let piece = MapBounds(start: UInt(range[0]), end: UInt(range[1]))
            if let joined = found, joined.end == piece.start {
                found = MapBounds(start: joined.start, end: piece.end)
            } else if found == nil {
                found = piece
            }
        }
        return found
    }

    /// The whole of `/proc/self/maps`. The kernel hands it over a page at a time, so it is
    /// read until the end rather than trusted to arrive in one read (Foundation's
    /// `String(contentsOfFile:)` stops after the first, about 4 KiB, 70 mappings).
    static func readProcessMaps() -> [UInt8]? {
        let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var table: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count == 0 { return table }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            table.append(contentsOf: chunk[..<count])
        }
    }

    private static func number(_ digits: ArraySlice<UInt8>, radix: Int) -> UInt64? {
        UInt64(String(decoding: digits, as: UTF8.self), radix: radix)
    }
}
