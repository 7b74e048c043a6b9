/// What a probe says of the state after one event.
public enum Verdict: Sendable, Hashable {
    case good
    case bad
    /// The probe cannot tell (`git bisect run`'s exit code 125).
    case skip
}

/// The answer of a bisection.
public struct BisectResult: Sendable, Hashable {
    /// The first bad seq; `nil` when every probed event was good or skips hid the answer.
    public var firstBad: UInt64?
    /// When skipped events hid the answer: the seqs the first bad event may be, in order.
    public var candidates: [UInt64] = []
    /// How many events were probed.
    public var probes: Int
    /// Whether every event was scanned in order rather than binary-searched.
    public var scanned = false

    /// A result as given; ``Bisection`` makes these.
    public init(firstBad: UInt64?, candidates: [UInt64] = [], probes: Int, scanned: Bool = false) {
        self.firstBad = firstBad
        self.candidates = candidates
        self.probes = probes
        self.scanned = scanned
    }
}

/// Finding the first bad event of a range.
public enum Bisection {
    /// Binary search for the first bad seq in `range`, assuming that once bad, the state stays
    /// bad. Probes about log2(range) events: first the last one (if it is good, nothing in
    /// the range is bad), then halves. A skipped event is replaced by the nearest untested one;
    /// if only skipped events are left between the last good and the first bad one, the answer
    /// is the list of candidates.
    ///
    /// - Parameters:
    ///   - range: The seqs to search; the event before it is taken as good.
    ///   - probe: Judges the state after one seq; called once per seq at most.
    /// - Throws: Whatever `probe` throws, which ends the search.
    public static func search(_ range: ClosedRange<UInt64>, probe: (UInt64) throws -> Verdict) rethrows -> BisectResult {
        var probes = 0
        var skipped: Set<UInt64> = []
        func test(_ seq: UInt64) throws -> Verdict {
            probes += 1
            let verdict = try probe(seq)
            if verdict == .skip { skipped.insert(seq) }
            return verdict
        }
        // A bad upper bound: the last event, or the nearest below it that is not skipped.
        var bad = range.upperBound
        while true {
            switch try test(bad) {
            case .bad: break
            case .good:
                // The events above it were skipped, never judged: the first bad may be one.
                let unjudged = bad < range.upperBound ? Array(bad + 1...range.upperBound) : []
                return BisectResult(firstBad: nil, candidates: unjudged, probes: probes)
            case .skip:
                guard bad > range.lowerBound else { return BisectResult(firstBad: nil, candidates: Array(range), probes: probes) }
                bad -= 1
                continue
            }
            break
        }
        // Invariant: every event at or before `good` is good (the one before the range is
        // taken as good), `bad` is bad.
        var good = Int64(range.lowerBound) - 1
        while true {
            let low = UInt64(good + 1)
            if low == bad { return BisectResult(firstBad: bad, probes: probes) }
            let middle = UInt64((good + Int64(bad)) / 2)
            guard let next = nearestUntested(to: middle, in: low..<bad, skipped: skipped) else {
                return BisectResult(firstBad: nil, candidates: Array(low...bad), probes: probes)
            }
            switch try test(next) {
            case .good: good = Int64(next)
            case .bad: bad = next
            case .skip: break
            }
        }
    }

    private static func nearestUntested(to middle: UInt64, in range: Range<UInt64>, skipped: Set<UInt64>) -> UInt64? {
        var distance: UInt64 = 0
        while distance <= range.upperBound - range.lowerBound {
            if middle + distance < range.upperBound, !skipped.contains(middle + distance) { return middle + distance }
            if distance <= middle, middle - distance >= range.lowerBound, !skipped.contains(middle - distance) { return middle - distance }
            distance += 1
        }
        return nil
    }

    /// The first bad seq scanning `range` in order; exact whether or not bad stays bad. A
    /// skipped event is not taken as good: when skips come right before the first bad event
    /// (or end the range), the answer is the list of candidates, as `search` gives.
    ///
    /// - Parameters:
    ///   - range: The seqs to scan, in order; it stops at the first bad one.
    ///   - probe: Judges the state after one seq; called once per seq at most.
    /// - Throws: Whatever `probe` throws, which ends the scan.
    public static func scan(_ range: ClosedRange<UInt64>, probe: (UInt64) throws -> Verdict) rethrows -> BisectResult {
        var probes = 0
        var skippedSinceGood: [UInt64] = []
        for seq in range {
            probes += 1
            switch try probe(seq) {
            case .good: skippedSinceGood.removeAll()
            case .skip: skippedSinceGood.append(seq)
            case .bad:
                guard skippedSinceGood.isEmpty else { return BisectResult(firstBad: nil, candidates: skippedSinceGood + [seq], probes: probes, scanned: true) }
                return BisectResult(firstBad: seq, probes: probes, scanned: true)
            }
        }
        return BisectResult(firstBad: nil, candidates: skippedSinceGood, probes: probes, scanned: true)
    }

    /// The first bad seq in `range`: a binary `search` unless `linear`, and a `scan` when the
    /// search finds nothing bad, since a good end says nothing about the events before it
    /// unless bad stays bad. Give a `probe` that remembers its verdicts so no event runs twice.
    ///
    /// - Parameters:
    ///   - range: The seqs to search.
    ///   - linear: Scan every event in order from the start, without a binary search first.
    ///   - probe: Judges the state after one seq; the scan after a search may ask again about
    ///     a seq the search probed.
    /// - Throws: Whatever `probe` throws, which ends the search.
    public static func firstBad(in range: ClosedRange<UInt64>, linear: Bool, probe: (UInt64) throws -> Verdict) rethrows -> BisectResult {
        guard !linear else { return try scan(range, probe: probe) }
        let binary = try search(range, probe: probe)
        guard binary.firstBad == nil else { return binary }
        var scanned = try scan(range, probe: probe)
        scanned.probes += binary.probes
        return scanned
    }
}

extension EventStore {
    /// Calls `body` with each record from `from` through `to` and the state right after it,
    /// folding write sets forward from the snapshot before `from` (one snapshot, then one
    /// write set per event). `body` returns `false` to stop.
    ///
    /// - Throws: ``EventStoreError/noSuchEvent(seq:last:)`` when `from` is more than one past
    ///   the newest event; ``EventStoreError/corruptRecord(seq:reason:)`` at a record that is
    ///   missing, fails its checksum or does not decode; ``EventStoreError/invalidWrite(_:)``
    ///   when a write does not fit the state; whatever `body` throws; an ``LMDBError`` when a
    ///   read fails.
    package func fold(from: UInt64 = 1, to: UInt64 = .max, _ body: (EventRecord, StateValue) throws -> Bool) throws {
        let from = try windowStart(from)
        var state = try snapshot(after: from - 1)
        try forEachRecord(from: from, to: to) { record in
            do throws(StateError) { try state.apply(record.event.writes) } catch { throw EventStoreError.invalidWrite(error) }
            return try body(record, state)
        }
    }

    /// The first event in `from...to` after which `predicate` holds.
    ///
    /// By default a binary search over snapshots (each from the nearest keyframe), which
    /// assumes that once the predicate holds it keeps holding. When the last event is good
    /// that assumption says nothing, so every event is scanned instead, as with `linear`:
    /// folding write sets forward, which finds the exact first event in any case.
    ///
    /// - Parameters:
    ///   - predicate: What "bad" means: the first event after which it holds is the answer.
    ///   - from: The first event considered.
    ///   - to: The last event considered, clamped to the newest; `nil` for the newest.
    ///   - linear: Scan every event instead of searching first.
    /// - Returns: The first event after which `predicate` holds (`firstBad`), or `nil` there
    ///   when it holds after none, and how many events were probed.
    /// - Throws: ``EventStoreError/corruptRecord(seq:reason:)`` at a record that is missing, fails its checksum or does not decode;
    ///   ``EventStoreError/invalidWrite(_:)`` when a write does not fit the state; an
    ///   ``LMDBError`` when a read fails.
    public func firstEvent(where predicate: StatePredicate, from: UInt64 = 1, to: UInt64? = nil, linear: Bool = false) throws -> BisectResult {
        let newest = try lastSeq()
        let last = min(to ?? newest, newest)
        let from = try windowStart(from)
        guard from <= last else { return BisectResult(firstBad: nil, probes: 0) }
        var probes = 0
        if !linear {
            let binary = try Bisection.search(from...last) { seq in predicate.evaluate(try snapshot(after: seq)) ? .bad : .good }
            guard binary.firstBad == nil else { return binary }
            probes = binary.probes
        }
        var result = BisectResult(firstBad: nil, probes: probes, scanned: true)
        try forEachState(from: from, to: last) { seq, state in
            result.probes += 1
            if predicate.evaluate(state) { result.firstBad = seq }
            return result.firstBad == nil
        }
        return result
    }
}
