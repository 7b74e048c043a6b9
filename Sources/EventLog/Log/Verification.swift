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

    /// Reads the whole log in one snapshot and checks, stopping at the first problem: every
    /// record's checksum and encoding; a dense sequence from 1; every write's old value
    /// against the fold of the writes before it; every keyframe's checksum, its place (where
    /// the keyframe policy puts one, and nowhere else) and its equality with that fold.
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
            return try txn.withCursor(events) { events in
                try txn.withCursor(keyframes) { keyframes in
                    var keyframe = try keyframes.first()
                    var entry = try events.first()
                    var expected: UInt64 = 1
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
                                return fail(seq, "write to \(write.path) expects \(write.old?.json() ?? "absent") but the state holds \(actual?.json() ?? "absent")")
                            }
                        }
                        let due = keyframeProgress.record(current.value.count, stateDelta: stateDelta, policy: keyframePolicy)
                        if let stored = keyframe, let at = try? RecordCodec.seq(fromKey: stored.key), at <= seq {
                            guard at == seq else { return fail(at, "keyframe stored between events") }
                            guard due else { return fail(seq, "keyframe where the policy puts none") }
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
                        } else if due {
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
}
