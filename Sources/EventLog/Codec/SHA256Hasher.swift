import CSHA256

/// SHA-256 (FIPS 180-4), fed chunk by chunk, for the digest of what a compaction drops.
///
/// The core carries its own because it links liblmdb alone: an app built on the core (and
/// the command line of one) needs no libcrypto. Deploys, which hash whole bundles as they
/// download, use libcrypto's (CCrypto). Both use the CPU's SHA instructions where it has
/// them (CSHA256, x86-64 SHA-NI); elsewhere the blocks are compressed in Swift.
package struct SHA256Hasher {
    /// Whether this CPU has SHA instructions the hasher uses.
    package static let hardwareAvailable = eventlog_sha256_hardware_available() != 0

    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = Self.initial
    /// A block not yet full.
    private var pending: [UInt8] = []
    private var length: UInt64 = 0
    /// Whether blocks go to the CPU's SHA instructions; `false` compresses them in Swift.
    private var hardware = Self.hardwareAvailable

    /// A hasher of nothing yet; `hardware: false` keeps it off the CPU's SHA instructions
    /// (the tests compare both ways), and `true` is taken only where the CPU has them.
    package init(hardware: Bool = Self.hardwareAvailable) {
        self.hardware = hardware && Self.hardwareAvailable
        pending.reserveCapacity(64)
    }

    /// The first 32 bits of the fractional parts of the square roots of the first 8 primes.
    private static let initial: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19)

    /// The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
    private static let rounds: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        var offset = 0
        if !pending.isEmpty {
            let taken = min(64 - pending.count, bytes.count)
            pending += bytes[0..<taken]
            offset = taken
            guard pending.count == 64 else { return }
            pending.withUnsafeBytes { compressBlocks($0) }
            pending.removeAll(keepingCapacity: true)
        }
        let whole = (bytes.count - offset) / 64 * 64
        compressBlocks(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + whole]))
        pending += bytes[(offset + whole)...]
    }

    /// Compresses `blocks` (a whole number of 64-byte blocks) into the state, with the CPU's
    /// SHA instructions when `hardware`, else in Swift; both give the same state.
    private mutating func compressBlocks(_ blocks: UnsafeRawBufferPointer) {
        guard !blocks.isEmpty else { return }
        if hardware {
            withUnsafeMutableBytes(of: &state) { words in
                Self.rounds.withUnsafeBufferPointer { rounds in
                    eventlog_sha256_hardware(words.baseAddress!.assumingMemoryBound(to: UInt32.self), blocks.baseAddress, blocks.count / 64,
                                             rounds.baseAddress)
                }
            }
            return
        }
        for offset in stride(from: 0, to: blocks.count, by: 64) { compress(UnsafeRawBufferPointer(rebasing: blocks[offset..<offset + 64])) }
    }

    /// The hasher's state between two updates, to carry a digest on later (a retention policy
    /// hashes what each of its steps drops into one digest): the eight words, the length hashed
    /// and the bytes of the block not yet full; ``init(resuming:)`` reads it back.
    package var saved: [UInt8] {
        var bytes = withUnsafeBytes(of: state) { raw in
            raw.bindMemory(to: UInt32.self).flatMap { word in withUnsafeBytes(of: word.bigEndian) { Array($0) } }
        }
        withUnsafeBytes(of: length.bigEndian) { bytes += $0 }
        return bytes + pending
    }

    /// A hasher that goes on from `saved`; `nil` when it is not a saved state.
    package init?(resuming saved: UnsafeRawBufferPointer) {
        guard saved.count >= 40 else { return nil }
        let words = (0..<8).map { UInt32(bigEndian: saved.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self)) }
        length = UInt64(bigEndian: saved.loadUnaligned(fromByteOffset: 32, as: UInt64.self))
        guard saved.count - 40 == Int(length % 64) else { return nil }
        state = (words[0], words[1], words[2], words[3], words[4], words[5], words[6], words[7])
        pending = Array(saved[40...])
        pending.reserveCapacity(64)
    }

    /// The 32 bytes of the digest.
    package consuming func finalize() -> [UInt8] {
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        tail += [UInt8](repeating: 0, count: (119 - pending.count) % 64)
        tail += withUnsafeBytes(of: bits.bigEndian) { Array($0) }
        tail.withUnsafeBytes { update($0) }
        return withUnsafeBytes(of: state) { raw in
            raw.bindMemory(to: UInt32.self).flatMap { word in withUnsafeBytes(of: word.bigEndian) { Array($0) } }
        }
    }

    /// One 64-byte block into the state.
    private mutating func compress(_ block: UnsafeRawBufferPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            for i in 0..<16 { w[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
            for i in 16..<64 {
                let s0 = w[i - 15].rotatedRight(7) ^ w[i - 15].rotatedRight(18) ^ (w[i - 15] >> 3)
                let s1 = w[i - 2].rotatedRight(17) ^ w[i - 2].rotatedRight(19) ^ (w[i - 2] >> 10)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var (a, b, c, d, e, f, g, h) = state
            Self.rounds.withUnsafeBufferPointer { k in
                for i in 0..<64 {
                    let s1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
                    let choice = (e & f) ^ (~e & g)
                    let t1 = h &+ s1 &+ choice &+ k[i] &+ w[i]
                    let s0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
                    let majority = (a & b) ^ (a & c) ^ (b & c)
                    (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ s0 &+ majority)
                }
            }
            state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h)
        }
    }
}

extension UInt32 {
    fileprivate func rotatedRight(_ count: UInt32) -> UInt32 { (self >> count) | (self << (32 - count)) }
}
