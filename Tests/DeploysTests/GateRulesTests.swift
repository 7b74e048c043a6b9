import Deploys
import EventLog
import Testing

/// A gate's decision is checked against its counts on replay.
struct GateRulesTests {
    func decision(_ type: GateRules.Decision, took: Int, reached: Int, maxShare: Int = 2, wasPercent: Int = 10) -> Event {
        Event(stream: GateRules.stream, type: type.rawValue, origin: "gate",
              payload: ["update": "u2", "took": .int(Int64(took)), "reached": .int(Int64(reached)), "maxShare": .int(Int64(maxShare)), "wasPercent": .int(Int64(wasPercent))])
    }

    @Test func aDecisionWritesTheUpdatesLatestAndMustFollowFromItsCounts() throws {
        let halted = try GateRules.writes(for: decision(.rolloutHalted, took: 100, reached: 3), in: [:], at: Timestamp(microsecondsSince1970: 0)).get()
        #expect(halted.count == 1 && halted[0].path == StatePath([.key("deployGate"), .key("u2")]))
        #expect(halted[0].new?["decision"] == "halted" && halted[0].new?["percent"] == 0 && halted[0].new?["wasPercent"] == 10)
        let kept = try GateRules.writes(for: decision(.rolloutKept, took: 100, reached: 2), in: [:], at: Timestamp(microsecondsSince1970: 0)).get()
        #expect(kept[0].new?["decision"] == "kept" && kept[0].new?["percent"] == 10)
        // Exactly the share allowed is within it; none took it: nothing trips.
        #expect(!GateRules.trips(reached: 2, of: 100, maxShare: 2) && GateRules.trips(reached: 3, of: 100, maxShare: 2))
        #expect(!GateRules.trips(reached: 0, of: 0, maxShare: 0))
        for (event, reason) in [(decision(.rolloutKept, took: 100, reached: 3), "3 of 100 is more than 2%, not a rolloutKept"),
                                (decision(.rolloutHalted, took: 100, reached: 2), "2 of 100 is within 2%, not a rolloutHalted"),
                                (decision(.rolloutHalted, took: 2, reached: 3), "the payload needs"),
                                (decision(.rolloutKept, took: 10, reached: 0, maxShare: 101), "the payload needs"),
                                (Event(stream: GateRules.stream, type: "rolloutMaybe"), "unknown decision \"rolloutMaybe\"")] {
            let refused = GateRules.writes(for: event, in: [:], at: Timestamp(microsecondsSince1970: 0))
            guard case .failure(let error) = refused else { Issue.record("\(event.type) was taken"); continue }
            #expect(error.reason.hasPrefix(reason), "\(error.reason)")
        }
    }
}
