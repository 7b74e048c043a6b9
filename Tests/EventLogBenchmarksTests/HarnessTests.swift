@testable import EventLogBenchmarks
import Testing

/// How the harness turns several runs into one report: ratios are taken within a run, then
/// summarised, never taken between figures of different runs.
@Suite struct HarnessTests {
    private func report(engine: Double, peer: Double, peak: Int) -> ScenarioReport {
        ScenarioReport(name: "append", summary: "", measurements: [
            Measurement(subject: "eventlog", operations: Int(engine), seconds: 1, extra: [("heap growth MiB", Double(peak))]),
            Measurement(subject: "peer", operations: Int(peer), seconds: 1),
        ], peakResidentBytes: peak)
    }

    @Test func medianOfOddAndEvenCounts() {
        #expect(median([3, 1, 2]) == 2)
        #expect(median([4, 1, 3, 2]) == 2.5)
        #expect(median([7]) == 7)
    }

    @Test func oneRunIsReportedAsItIs() {
        let combined = ScenarioReport(combining: [report(engine: 50, peer: 100, peak: 7)])
        #expect(combined.ratio(against: combined.measurements[1]) == 0.5)
        #expect(combined.ratioRange(against: combined.measurements[1]) == nil)
        #expect(combined.peakResidentBytes == 7)
    }

    @Test func severalRunsGiveTheMedianRunAndTheRatiosWithinEachRun() {
        // Run 2 is slow for both subjects: its ratio is still 0.5, and must not be mixed with
        // the other runs' figures (80 / 100 would be 0.8, 200 / 400 would be 0.5).
        let runs = [report(engine: 80, peer: 100, peak: 5), report(engine: 10, peer: 20, peak: 9), report(engine: 200, peer: 400, peak: 6)]
        let combined = ScenarioReport(combining: runs)
        #expect(combined.measurements.map(\.operations) == [80, 100]) // each subject's median run
        let peer = combined.measurements[1]
        #expect(peer.runRatios == [0.8, 0.5, 0.5])
        #expect(combined.ratio(against: peer) == 0.5)
        #expect(combined.ratioRange(against: peer) == 0.5...0.8)
        #expect(combined.ratio(against: combined.measurements[0]) == nil) // the engine's own row
        // Memory is the first run's: later runs start with what earlier ones left resident.
        #expect(combined.peakResidentBytes == 5)
        #expect(combined.measurements[0].extra.map(\.1) == [5])
        #expect(Table.render([combined]).contains("0.50× (0.50–0.80)"))
    }
}
