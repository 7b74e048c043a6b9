extension EventStore {
    /// Calls `body` with each event from `from` through `to` that changed `path` or a path
    /// under it, and its writes as seen from `path` (`Write.seen(from:)`), in order; `body`
    /// returns `false` to stop. Decodes write sets only, never whole records, in read
    /// transactions of at most 4,096 events, so that a long scan holds no snapshot open.
    ///
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at the first record that is
    ///   missing, fails its checksum or whose writes do not decode; whatever `body` throws; an
    ///   ``LMDBError`` when a read fails.
    package func forEachChange(of path: StatePath, from: UInt64 = 1, to: UInt64 = .max,
                              _ body: (_ seq: UInt64, _ writes: [Write]) throws -> Bool) throws {
        let end = Swift.min(to, try lastSeq())
        var seq = try windowStart(from)
        while seq <= end {
            let chunkEnd = Swift.min(end, seq + 4_095)
            let chunk = try read { txn in try self.writeSets(after: seq - 1, through: chunkEnd, in: txn) }
            for (offset, writes) in chunk.enumerated() {
                let seen = writes.compactMap { $0.seen(from: path) }
                if !seen.isEmpty, try !body(seq + UInt64(offset), seen) { return }
            }
            seq = chunkEnd + 1
        }
    }
}
