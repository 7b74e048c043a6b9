@testable import EventLog
import EventLogTesting
import Foundation
import Testing

@Suite struct PredicateTests {
    static let state: StateValue = [
        "messenger": ["selectedTab": "bots", "listFilter": .null, "inThreadSearch": "build failed"],
        "count": 7, "ratio": 0.5, "flag": true, "tags": ["a", "b"], "objects": ["Post": ["p.1": ["title": "x"]]],
    ]

    @Test(arguments: [
        ("messenger.selectedTab == \"bots\"", true),
        ("messenger.selectedTab != \"bots\"", false),
        ("messenger.listFilter == null", true),
        ("messenger.missing == null", true),
        ("count == 7", true), ("count == 7.0", true), ("count < 8", true), ("count <= 7", true),
        ("count > 7", false), ("count >= 7", true), ("ratio < 1", true), ("count > -1", true),
        ("\"abc\" < \"abd\"", true), ("count < \"8\"", false),
        ("messenger.inThreadSearch contains \"fail\"", true), ("tags contains \"b\"", true), ("tags contains \"z\"", false),
        ("messenger contains \"selectedTab\"", true),
        ("exists(messenger.listFilter)", true), ("exists(messenger.nothing)", false), ("exists(objects.Post[\"p.1\"].title)", true),
        ("flag", true), ("!flag", false), ("count", false),
        ("true || false && false", true), ("(true || false) && false", false), ("!true || true", true), ("!(true || true)", false),
        ("messenger.selectedTab == \"bots\" && messenger.listFilter != \"bots\"", true),
        ("count == 7 && !exists(nothing) && tags contains \"a\"", true),
        ("\"a\\\"b\" == \"a\\\"b\"", true),
    ])
    func evaluates(_ text: String, _ expected: Bool) throws {
        #expect(try StatePredicate(parsing: text).evaluate(Self.state) == expected, "\(text)")
    }

    @Test(arguments: [
        ("", 1, "empty expression"),
        ("count ==", 9, "expected a value after '=='"),
        ("count == == 3", 10, "expected a value after '==', found '='"),
        ("(count == 7", 12, "expected ')'"),
        ("count == 7)", 11, "unexpected ')'"),
        ("a..b == 1", 3, "in path: expected a key"),
        ("x == \"open", 6, "unterminated string"),
        ("exists count", 8, "expected '(' after exists"),
        ("x == 1.2.3", 6, "invalid number '1.2.3'"),
        ("x && && y", 6, "expected a value, found '&'"),
    ])
    func reportsTheColumn(_ text: String, _ column: Int, _ reason: String) {
        do {
            _ = try StatePredicate(parsing: text)
            Issue.record("parsed \(text)")
        } catch {
            #expect(error == ExpressionSyntaxError(column: column, reason: reason), "\(text): \(error)")
        }
    }
}

@Suite struct BisectionTests {
    /// Skipped events are never taken as good: a skipped end, skips before the first bad event
    /// in a scan, and a good end before which something is bad.
    @Test func skipsAreNeverAnsweredAsGood() {
        func verdicts(_ table: [UInt64: Verdict]) -> (UInt64) -> Verdict { { table[$0] ?? .good } }
        let skippedEnd = verdicts([10: .skip])
        #expect(Bisection.search(1...10, probe: skippedEnd).candidates == [10])
        #expect(Bisection.scan(1...10, probe: skippedEnd).candidates == [10])
        let skipsBeforeBad = verdicts([4: .skip, 5: .skip, 6: .bad, 7: .bad, 8: .bad, 9: .bad, 10: .bad])
        #expect(Bisection.scan(1...10, probe: skipsBeforeBad) == BisectResult(firstBad: nil, candidates: [4, 5, 6], probes: 6, scanned: true))
        #expect(Bisection.search(1...10, probe: skipsBeforeBad).candidates == [4, 5, 6])
        // Bad in the middle, good again at the end: the search alone would say "nothing".
        let transient = verdicts([4: .bad, 5: .bad])
        #expect(Bisection.search(1...10, probe: transient).firstBad == nil)
        #expect(Bisection.firstBad(in: 1...10, linear: false, probe: transient).firstBad == 4)
        #expect(Bisection.firstBad(in: 1...10, linear: true, probe: transient) == BisectResult(firstBad: 4, probes: 4, scanned: true))
    }

    @Test func predicatesListTheirPathsAndRefuseRunawayNesting() throws {
        #expect(try StatePredicate(parsing: #"a.b == "x" && (exists(c[0]) || !a.b)"#).paths == ["a.b", "c[0]"])
        for text in [String(repeating: "(", count: 20_000) + "x" + String(repeating: ")", count: 20_000),
                     String(repeating: "!", count: 100_000) + "x",
                     (0..<100_000).map { "k\($0) == 1" }.joined(separator: " && ")] {
            #expect(throws: ExpressionSyntaxError.self) { try StatePredicate(parsing: text) }
        }
        #expect(throws: Never.self) { try StatePredicate(parsing: String(repeating: "(", count: 100) + "x" + String(repeating: ")", count: 100)) }
    }

    @Test func binarySearchAgreesWithALinearScanOnRandomMonotonePredicates() {
        var rng = SplitMix64(seed: 11)
        for _ in 0..<500 {
            let lower = UInt64.random(in: 1...50, using: &rng)
            let upper = lower + UInt64.random(in: 0...300, using: &rng)
            let threshold = UInt64.random(in: lower...(upper + 5), using: &rng)
            let probe = { (seq: UInt64) in seq >= threshold ? Verdict.bad : .good }
            let binary = Bisection.search(lower...upper, probe: probe)
            let linear = Bisection.scan(lower...upper, probe: probe)
            #expect(binary.firstBad == linear.firstBad)
            let range = Double(upper - lower + 1)
            #expect(Double(binary.probes) <= log2(range) + 2, "\(binary.probes) probes over \(range)")
        }
    }

    @Test func binarySearchAgreesWithLinearOnRandomLogsAndPredicates() throws {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing())
        // A counter that only grows, so "count >= k" is monotone; plus random noise.
        var session = RandomSession(seed: 3)
        try store.transact { batch in
            for i in 1...600 {
                var event = session.next()
                event.writes.append(Write("count", old: i == 1 ? nil : .int(Int64(i - 1) / 3), new: .int(Int64(i) / 3)))
                try batch.append(event)
            }
        }
        var rng = SplitMix64(seed: 8)
        for _ in 0..<40 {
            let k = Int.random(in: 0...210, using: &rng)
            let predicate = try StatePredicate(parsing: "count >= \(k)")
            let from = UInt64.random(in: 1...300, using: &rng)
            let binary = try store.firstEvent(where: predicate, from: from, to: 600)
            let linear = try store.firstEvent(where: predicate, from: from, to: 600, linear: true)
            #expect(binary.firstBad == linear.firstBad, "count >= \(k) from \(from)")
            if let first = linear.firstBad { #expect(first == max(from, UInt64(k * 3))) }
        }
    }

    @Test func skippedEventsAreReplacedByTheirNeighbours() {
        let probe = { (seq: UInt64) -> Verdict in
            if [50, 51, 49].contains(seq) { return .skip }
            return seq >= 70 ? .bad : .good
        }
        #expect(Bisection.search(1...100, probe: probe).firstBad == 70)
    }

    @Test func skipsAroundTheAnswerLeaveCandidates() {
        let probe = { (seq: UInt64) -> Verdict in
            if (68...70).contains(seq) { return .skip }
            return seq >= 69 ? .bad : .good
        }
        let result = Bisection.search(1...100, probe: probe)
        #expect(result.firstBad == nil)
        #expect(result.candidates == [68, 69, 70, 71])
    }

    @Test func aGoodLastEventMeansNothingIsBad() {
        var probed: [UInt64] = []
        let result = Bisection.search(1...100) { probed.append($0); return .good }
        #expect(result == BisectResult(firstBad: nil, probes: 1))
        #expect(probed == [100])
    }

    @Test func aSkippedLastEventStepsDown() {
        let result = Bisection.search(1...10) { $0 == 10 ? .skip : ($0 >= 4 ? .bad : .good) }
        #expect(result.firstBad == 4)
    }
}
