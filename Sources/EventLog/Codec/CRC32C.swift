import CCRC32C

/// CRC-32C (Castagnoli), the checksum stored in every record and keyframe.
///
/// The CPU's CRC32 instruction where there is one (x86-64 with SSE 4.2), otherwise software
/// slicing-by-8: eight bytes per step through eight 256-entry tables. Both give the same values.
package enum CRC32C {
    private static let polynomial: UInt32 = 0x82F6_3B78 // reflected 0x1EDC6F41

    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for i in 0..<256 {
            var crc = UInt32(i)
            for _ in 0..<8 { crc = (crc >> 1) ^ (crc & 1 == 1 ? polynomial : 0) }
            tables[i] = crc
        }
        for i in 0..<256 {
            for t in 1..<8 {
                let previous = tables[(t - 1) * 256 + i]
                tables[t * 256 + i] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    /// Whether `checksum` uses the CPU's instruction.
    static let usesHardware = eventlog_crc32c_hardware_available() != 0

    /// Continues a checksum `crc` (start with 0) over `bytes`.
    package static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard usesHardware else { return softwareChecksum(bytes, continuing: crc) }
        return ~eventlog_crc32c_hardware(~crc, bytes.baseAddress, bytes.count)
    }

    /// `checksum` without the CPU's instruction.
    static func softwareChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var crc = ~crc
        var index = 0
        let count = bytes.count
        tables.withUnsafeBufferPointer { t in
            while count - index >= 8 {
                let low = bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self).littleEndian ^ crc
                let high = bytes.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self).littleEndian
                crc = t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = (crc >> 8) ^ t[Int((crc ^ UInt32(bytes[index])) & 0xFF)]
                index += 1
            }
        }
        return ~crc
    }
}
