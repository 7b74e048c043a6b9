import EventLog
import EventLogTesting
import Testing

/// Events recorded by an older release read through upcasters, and `replay --verify` proves
/// them: today's code, fed the upcast events, must write what the original recorded.
struct UpcasterTests {
    /// Today's code (version 2): `selectTab {"tab": T, "filter": {"name": F}}` writes the tab
    /// and, when given, the filter's name; `setFilter {"name": F}` writes the filter alone.
    struct TabCode: Projection {
        func recompute(_ record: EventRecord, in state: StateValue) -> Recomputed? {
            let payload = record.event.payload
            switch record.event.type {
            case "selectTab":
                let tab = Write("app.tab", old: state["app.tab"], new: payload["tab"])
                guard payload["filter"] != nil else { return Recomputed(outcome: .applied, writes: [tab]) }
                return Recomputed(outcome: .applied, writes: [tab, Write("app.filter", old: state["app.filter"], new: payload["filter.name"])])
            case "setFilter":
                return Recomputed(outcome: .applied, writes: [Write("app.filter", old: state["app.filter"], new: payload["name"])])
            default:
                return nil
            }
        }
    }

    /// A log as release 1 recorded it: `selectTab {"filter": F}` (the tab was always bots),
    /// version 1, and a `pickBotsFiltered {"filter": F}` that release 2 split in two.
    static func releaseOneLog() throws -> TemporaryEventStore {
        let log = try TemporaryEventStore()
        try log.store.transact { batch in
            for filter in ["unread", "all", "unread"] {
                try batch.append(Event(stream: "app", type: "selectTab", payload: ["filter": .string(filter)],
                                       writes: [Write("app.tab", old: batch.state["app.tab"], new: "bots"),
                                                Write("app.filter", old: batch.state["app.filter"], new: .string(filter))]))
            }
            try batch.append(Event(stream: "app", type: "pickBotsFiltered", payload: ["filter": "mentions"],
                                   writes: [Write("app.tab", old: "bots", new: "bots"), Write("app.filter", old: "unread", new: "mentions")]))
        }
        return log
    }

    /// Release 2's code: `selectTab` v1 → v2 nests the filter and names the tab;
    /// `pickBotsFiltered` v1 becomes a `selectTab` and a `setFilter` (version 1 types of their own).
    static func releaseTwo(droppingTheFilter: Bool = false) -> Projections {
        var code = Projections()
        code.recompute(["app"], with: TabCode())
        code.upcast("app", "selectTab", from: 1) { event in
            let filter = droppingTheFilter ? StateValue.null : event.payload["filter"] ?? .null
            return [Event(stream: "app", type: "selectTab", payload: ["tab": "bots", "filter": ["name": filter]])]
        }
        code.upcast("app", "pickBotsFiltered", from: 1) { event in
            [Event(stream: "app", type: "selectTab", payload: ["tab": "bots"], version: 2),
             Event(stream: "app", type: "setFilter", payload: ["name": event.payload["filter"] ?? .null])]
        }
        return code
    }

    @Test func aReleaseOneLogVerifiesThroughReleaseTwosUpcasters() throws {
        let log = try Self.releaseOneLog()
        let code = Self.releaseTwo()
        #expect(code.currentVersion(of: "app", "selectTab") == 2 && code.currentVersion(of: "app", "setFilter") == 1)
        let report = try log.store.replay(through: code, verify: true)
        #expect(report.divergence == nil, "\(String(describing: report.divergence))")
        #expect(report.streams["app"]?.recomputed == 4)
        #expect(report.state == ["app": ["tab": "bots", "filter": "mentions"]])
    }

    /// The same rename written as a change in place reads and proves the same, counts the
    /// same, chains into an upcaster of the other kind, and a wrong one is caught as well.
    @Test func anUpcasterThatChangesTheEventInPlaceReadsAsOneThatReturnsIt() throws {
        let log = try Self.releaseOneLog()
        func code(droppingTheFilter: Bool) -> Projections {
            var code = Projections()
            code.recompute(["app"], with: TabCode())
            code.upcast("app", "selectTab", from: 1, changing: { event in
                let filter = droppingTheFilter ? StateValue.null : event.payload["filter"] ?? .null
                event.payload = ["tab": "bots", "filter": ["name": filter]]
            })
            code.upcast("app", "pickBotsFiltered", from: 1, changing: { event in event.payload = ["chosen": event.payload["filter"] ?? .null] })
            code.upcast("app", "pickBotsFiltered", from: 2) { event in
                [Event(stream: "app", type: "selectTab", payload: ["tab": "bots"], version: 2),
                 Event(stream: "app", type: "setFilter", payload: ["name": event.payload["chosen"] ?? .null])]
            }
            return code
        }
        let changed = try log.store.replay(through: code(droppingTheFilter: false), verify: true)
        let returned = try log.store.replay(through: Self.releaseTwo(), verify: true)
        #expect(changed.divergence == nil, "\(String(describing: changed.divergence))")
        #expect(changed.state == returned.state)
        #expect(changed.upcast == [EventShape(stream: "app", type: "selectTab", version: 1): 3,
                                   EventShape(stream: "app", type: "pickBotsFiltered", version: 1): 1])
        let wrong = try #require(try log.store.replay(through: code(droppingTheFilter: true), verify: true).divergence)
        #expect(wrong.seq == 1 && wrong.missing == [Write("app.filter", old: nil, new: "unread")])
        #expect(wrong.upcast.map(\.payload) == [["tab": "bots", "filter": ["name": .null]]] && wrong.upcast.map(\.version) == [2])
    }

    @Test func aWrongUpcasterIsCaughtAtItsFirstEventNamingTheWrite() throws {
        let log = try Self.releaseOneLog()
        let report = try log.store.replay(through: Self.releaseTwo(droppingTheFilter: true), verify: true)
        let divergence = try #require(report.divergence)
        #expect(divergence.seq == 1)
        #expect(divergence.missing == [Write("app.filter", old: nil, new: "unread")])
    }

    @Test func aMissingUpcasterIsItsOwnError() throws {
        let log = try Self.releaseOneLog()
        var code = Projections()
        code.recompute(["app"], with: TabCode())
        code.upcast("app", "selectTab", from: 2) { [$0] } // today's selectTab is v3; nothing reads v1
        let report = try log.store.replay(through: code, verify: true)
        let unreadable = try #require(report.unreadable)
        #expect(unreadable.record.seq == 1 && report.events == 0 && report.divergence == nil)
        #expect(unreadable.reason == "no upcaster for app/selectTab v1 → v2")
    }

    @Test func aNewerVersionReplaysAsRecordedAndIsCounted() throws {
        let log = try TemporaryEventStore()
        try log.store.append(Event(stream: "app", type: "setFilter", payload: ["name": "x"],
                                   writes: [Write("app.filter", old: nil, new: "x")], version: 4))
        let report = try log.store.replay(through: Self.releaseTwo(), verify: true)
        #expect(report.divergence == nil && report.unreadable == nil)
        #expect(report.newer == [EventShape(stream: "app", type: "setFilter", version: 4): 1])
        #expect(report.state == ["app": ["filter": "x"]])
    }

    @Test func twoUpcastersForOneVersionAreSaid() throws {
        var code = Self.releaseTwo()
        code.upcast("app", "selectTab", from: 1) { [$0] }
        let report = try Self.releaseOneLog().store.replay(through: code, verify: true)
        #expect(report.unreadable?.reason == "two upcasters read app/selectTab v1")
    }

    @Test func upcastEventsAreCountedByShape() throws {
        let report = try Self.releaseOneLog().store.replay(through: Self.releaseTwo(), verify: false)
        #expect(report.upcast == [EventShape(stream: "app", type: "selectTab", version: 1): 3,
                                  EventShape(stream: "app", type: "pickBotsFiltered", version: 1): 1])
    }

    /// Events of a stream taken as recorded are read as they are, whatever their version.
    @Test func inputsAreReadAsTheyAreWhateverTheirVersion() throws {
        var code = Self.releaseTwo()
        code.takeAsRecorded(["plans"])
        #expect(code.upcasting(Event(stream: "plans", type: "selectTab", version: 1)) == .current)
        #expect(code.upcasting(Event(stream: "app", type: "selectTab", version: 3)) == .newer(today: 2))
    }

    @Test func nothingStoredIsRewritten() throws {
        let log = try Self.releaseOneLog()
        var before: [EventRecord] = []
        try log.store.forEachRecord { before.append($0); return true }
        _ = try log.store.replay(through: Self.releaseTwo(), verify: true)
        var after: [EventRecord] = []
        try log.store.forEachRecord { after.append($0); return true }
        #expect(after == before && before.allSatisfy { $0.event.version == 1 })
    }
}
