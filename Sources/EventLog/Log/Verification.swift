/// What `EventStore.verify` found.
public struct VerificationReport: Sendable, Hashable {
    /// A report of `problem` (`nil`: nothing wrong), with nothing counted.
    public init(problem: Problem? = nil) { self.problem = problem }

    /// The first thing wrong, at the seq where it was found.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// The seq of the event concerned; 0 for the storage itself.
        public var seq: UInt64
        /// What is wrong, in one line for people.
        public var reason: String
        public var description: String { seq == 0 ? reason : "seq \(seq): \(reason)" }

        /// A problem found at `seq` (0 for the storage itself).
        public init(seq: UInt64, reason: String) {
            self.seq = seq
            self.reason = reason
        }
    }

    /// The seq of the last event found good.
    public var eventsChecked: UInt64 = 0
    /// How many keyframes matched the fold of the write sets.
    public var keyframesChecked = 0
    /// `nil` when everything checked out.
    public var problem: Problem?

    /// Whether everything checked out: `problem` is `nil`.
    public var isOK: Bool { problem == nil }
}

extension EventStore {
    /// Checks the structure of the LMDB file in directory `path` without trusting it, before
    /// anything reads it through LMDB (which follows its pages unchecked, and can fault on a
    /// damaged one): both meta pages, every page of every tree, the free list
    /// (`StorageCheck.walk`). Returns the damage found, `nil` when there is none (or no LMDB
    /// file to walk). Run it before opening a store to verify it.
    ///
    /// - Parameter path: The log's directory, which holds `data.mdb`.
    /// - Returns: The damage, at seq 0; `nil` when the file checks out or there is none.
    /// - Throws: An ``LMDBError`` when LMDB cannot open the environment read-only or begin a
    ///   read (damage that the walk finds is returned, not thrown).
    public static func verifyStorage(at path: String) throws -> VerificationReport.Problem? {
        do {
            // No file, or no LMDB file at all: nothing to walk; opening the store says which.
            guard try StorageCheck.checkHeader(path: path + "/data.mdb") != nil else { return nil }
            var options = Environment.Options()
            options.readOnly = true
            let environment = try Environment.open(path: path, options: options)
            // Beginning a read transaction touches only the meta pages, which are checked.
            for _ in 0..<8 {
                if try environment.read({ try StorageCheck.walk(path: path + "/data.mdb", txnID: $0.snapshotID) }) { return nil }
                // A writer committed twice meanwhile: walk the newer snapshot.
            }
            return nil
        } catch let damage as StorageCheck.Damage {
            return .init(seq: 0, reason: damage.description)
        }
    }

    /// Reads the whole log in one snapshot and checks, stopping at the first problem: the
    /// retention policy's checksum; a compacted log's base (its checksum, the one the meta
    /// records, the dropped counts and ranges covering every seq before it, and the running
    /// digest a policy's steps keep, which must give the last range's SHA-256); every record's checksum and encoding; a dense
    /// sequence from 1 (or from the base); every write's old value against the fold of the
    /// writes before it (from the base, whose disagreement with its first event is named);
    /// every keyframe's checksum, its place (where the keyframe policy puts one, and nowhere
    /// else) and its equality with that fold. After a base, the first keyframe stands where
    /// the keyframes compaction dropped put it, so the policy is checked from that one on.
    ///
    /// `progress` is called every 65,536 events with the number checked so far.
    ///
    /// - Returns: What was checked, and the first problem found, if any.
    /// - Throws: An ``LMDBError`` when a read fails. Damage in the log is never thrown: it is
    ///   the report's `problem`.
    public func verify(progress: ((UInt64) -> Void)? = nil) throws -> VerificationReport {
        try environment.read { txn in
            var report = VerificationReport()
            var state = StateValue.emptyObject
            var keyframeProgress = KeyframeProgress()
            let names = NameCache()
            func fail(_ seq: UInt64, _ reason: String) -> VerificationReport {
                report.problem = .init(seq: seq, reason: reason)
                return report
            }
            let base: LogBase?
            do { base = try self.base(in: txn) } catch { return fail(0, "\(error)") }
            do { _ = try retentionPolicy(in: txn) } catch { return fail(0, "\(error)") }
            if let problem = runningDigestProblem(base, in: txn) { return fail(base?.seq ?? 0, problem) }
            return try txn.withCursor(events) { events in
                try txn.withCursor(keyframes) { keyframes in
                    var keyframe = try keyframes.first()
                    var entry = try events.first()
                    var expected: UInt64 = 1
                    // Until the first keyframe after a base, keyframes are not checked against the policy.
                    var placedByDroppedKeyframes = false
                    if let base {
                        if let problem = Self.check(base) { return fail(base.seq, problem) }
                        guard let stored = keyframe, (try? RecordCodec.seq(fromKey: stored.key)) == base.seq else {
                            return fail(base.seq, "the base (the state after event \(base.seq)) is missing")
                        }
                        do throws(RecordDecodingError) { state = try RecordCodec.decodeKeyframe(stored.value, seq: base.seq) } catch {
                            return fail(base.seq, "the base: \(error.reason)")
                        }
                        let checksum = UInt32(littleEndian: stored.value.loadUnaligned(fromByteOffset: stored.value.count - 4, as: UInt32.self))
                        guard checksum == base.checksum else {
                            return fail(base.seq, "the base's checksum is \(RecordCodec.hex(checksum)), but the meta records \(RecordCodec.hex(base.checksum))")
                        }
                        keyframeProgress = KeyframeProgress(stateBytes: stored.value.count)
                        keyframe = try keyframes.next()
                        expected = base.firstSeq
                        placedByDroppedKeyframes = true
                    }
                    while let current = entry {
                        let seq: UInt64
                        let record: EventRecord
                        var stateDelta = 0
                        do throws(RecordDecodingError) {
                            seq = try RecordCodec.seq(fromKey: current.key)
                            guard seq == expected else {
                                return fail(expected, seq > expected ? "missing (the next stored event is \(seq))" : "stored out of order")
                            }
                            record = try RecordCodec.decode(current.value, seq: seq, stateDelta: &stateDelta, names: names)
                        } catch {
                            return fail(expected, error.reason)
                        }
                        for write in record.event.writes {
                            // One walk down the path: apply, then compare what it replaced (a
                            // failed check ends the run, so the state needs no undoing).
                            let actual: StateValue?
                            do { actual = try state.set(write.new, at: write.path) } catch { return fail(seq, "\(error)") }
                            guard actual == write.old else {
                                if let base, seq == base.firstSeq {
                                    return fail(seq, "the base disagrees with the event after it: write to \(write.path) expects \(write.old?.json() ?? "absent") but the base holds \(actual?.json() ?? "absent")")
                                }
                                return fail(seq, "write to \(write.path) expects \(write.old?.json() ?? "absent") but the state holds \(actual?.json() ?? "absent")")
                            }
                        }
                        let due = keyframeProgress.record(current.value.count, stateDelta: stateDelta, policy: keyframePolicy)
                        if let stored = keyframe, let at = try? RecordCodec.seq(fromKey: stored.key), at <= seq {
                            guard at == seq else { return fail(at, "keyframe stored between events") }
                            guard due || placedByDroppedKeyframes else { return fail(seq, "keyframe where the policy puts none") }
                            placedByDroppedKeyframes = false
                            let snapshot: StateValue
                            do throws(RecordDecodingError) { snapshot = try RecordCodec.decodeKeyframe(stored.value, seq: at) } catch {
                                return fail(at, "keyframe: \(error.reason)")
                            }
                            if let difference = snapshot.diff(to: state).first {
                                return fail(at, "keyframe differs from the fold of the write sets at \(difference.path.isRoot ? "(root)" : difference.path.description)")
                            }
                            report.keyframesChecked += 1
                            keyframeProgress.keyframeWritten(stored.value.count)
                            keyframe = try keyframes.next()
                        } else if due && !placedByDroppedKeyframes {
                            return fail(seq, "keyframe missing")
                        }
                        report.eventsChecked = seq
                        if seq & 0xFFFF == 0 { progress?(seq) }
                        expected += 1
                        entry = try events.next()
                    }
                    if let stored = keyframe {
                        let at = (try? RecordCodec.seq(fromKey: stored.key)) ?? 0
                        return fail(at, "keyframe after the last event")
                    }
                    return report
                }
            }
        }
    }

    /// What is wrong with a base's account of what was dropped, if anything: the counts by
    /// stream must add up to its seq, and the ranges must cover 1 through it in order.
    private static func check(_ base: LogBase) -> String? {
        let counted = base.dropped.values.reduce(0, +)
        guard counted == base.seq else { return "the base counts \(counted) events dropped, but it follows event \(base.seq)" }
        var next: UInt64 = 1
        for range in base.digests {
            guard range.seqs.lowerBound == next else { return "the base's dropped ranges leave out or repeat events from \(next)" }
            next = range.seqs.upperBound + 1
        }
        return next == base.seq + 1 ? nil : "the base's dropped ranges end at \(next - 1), not at \(base.seq)"
    }
}
