import EventLogTesting
import EventLog
import Testing

struct EventFilterTests {
    static let events: [Event] = [
        Event(stream: "messenger", type: "selectBotTab", origin: "tap",
              writes: [Write("messenger.selectedTab", old: "chats", new: "bots"), Write("messenger.listFilter", old: nil, new: "unread")]),
        Event(stream: "messenger", type: "clearListFilter", origin: "tap", outcome: .skipped(reason: "no-op")),
        Event(stream: "messenger", type: "scroll", origin: "url", outcome: .cancelled),
        Event(stream: "system", type: "initialState", writes: [Write("messenger", old: nil, new: ["listFilter": "bots", "selectedTab": "chats"])]),
        Event(stream: "deploy", type: "checkStarted", writes: [Write("deploy.phase", old: nil, new: "checking")]),
        Event(stream: "messenger", type: "touch", writes: []),
    ]

    @Test func everyCombinationAgreesWithAScan() throws {
        let streams: [Set<String>?] = [nil, ["messenger"], ["messenger", "deploy"], ["none"]]
        let types: [Set<String>?] = [nil, ["selectBotTab", "initialState"]]
        let outcomes: [Set<String>?] = [nil, ["applied"], ["skipped", "cancelled"]]
        let paths: [StatePath?] = [nil, "messenger.listFilter", "messenger", "deploy.phase.x", "other"]
        var checked = 0
        for stream in streams {
            for type in types {
                for outcome in outcomes {
                    for hide in [false, true] {
                        for path in paths {
                            let filter = EventFilter(streams: stream, types: type, outcomes: outcome, hideNoOps: hide, touching: path)
                            for event in Self.events {
                                var expected = true
                                if let stream, !stream.contains(event.stream) { expected = false }
                                if let type, !type.contains(event.type) { expected = false }
                                if let outcome, !outcome.contains(event.outcome.name) { expected = false }
                                if hide, event.writes.isEmpty { expected = false }
                                if let path, !event.writes.contains(where: { write in
                                    let a = write.path.components, b = path.components
                                    return a.starts(with: b) || b.starts(with: a)
                                }) { expected = false }
                                #expect(filter.keeps(event) == expected, "\(filter) on \(event.type)")
                                checked += 1
                            }
                        }
                    }
                }
            }
        }
        #expect(checked == 4 * 2 * 3 * 2 * 5 * Self.events.count)
    }

    /// The store's filtered scan (write sets first when a path is given) keeps what a scan of
    /// whole records with `keeps` keeps, over chunk boundaries.
    @Test func theStoresFilteredScanAgreesWithAScanOfRecords() throws {
        let log = try TemporaryEventStore()
        var state = StateValue.emptyObject
        var events: [Event] = []
        for n in 0..<9_000 {
            let key: StatePath = n % 3 == 0 ? "a.x" : n % 3 == 1 ? "a.y" : "b"
            let write = Write(key, old: state[key], new: .int(Int64(n)))
            let writes = n % 5 == 0 ? [] : [write]
            try state.apply(writes)
            events.append(Event(stream: n % 2 == 0 ? "even" : "odd", type: "set", writes: writes))
        }
        try log.store.append(contentsOf: events)
        for filter in [EventFilter(touching: "a"), EventFilter(streams: ["even"], touching: "a.y"), EventFilter(touching: "b.deeper"),
                       EventFilter(hideNoOps: true), EventFilter(touching: "none")] {
            var scanned: [UInt64] = []
            try log.store.forEachRecord(from: 2, to: 8_500) { record in
                if filter.keeps(record.event) { scanned.append(record.seq) }
                return true
            }
            var matched: [UInt64] = []
            try log.store.forEachRecord(matching: filter, from: 2, to: 8_500) { matched.append($0.seq); return true }
            #expect(matched == scanned, "\(filter)")
        }
        var firstTwo: [UInt64] = []
        try log.store.forEachRecord(matching: EventFilter(touching: "b")) { firstTwo.append($0.seq); return firstTwo.count < 2 }
        #expect(firstTwo == [3, 9])  // n = 2 and 8 (n = 5 wrote nothing)
    }

    @Test func aWriteSeenFromAPath() {
        let whole = Write("messenger", old: ["listFilter": "bots", "x": 1], new: ["listFilter": "unread", "x": 1])
        #expect(whole.seen(from: "messenger.listFilter") == Write("messenger.listFilter", old: "bots", new: "unread"))
        #expect(whole.seen(from: "messenger.x") == nil, "an ancestor's write that left the path alone")
        let under = Write("messenger.listFilter.a", old: nil, new: 1)
        #expect(under.seen(from: "messenger.listFilter") == under)
        #expect(under.seen(from: "deploy") == nil)
        let created = Write("messenger", old: nil, new: ["listFilter": "bots"])
        #expect(created.seen(from: "messenger.listFilter") == Write("messenger.listFilter", old: nil, new: "bots"))
    }
}

struct HistoryTests {
    @Test func changesFromWriteSetsEqualAScanOfRecords() throws {
        let temporary = try TemporaryEventStore()
        let store = temporary.store
        var state = StateValue.emptyObject
        var rng = SystemRandomNumberGenerator()
        let paths: [StatePath] = ["a", "a.b", "a.b.c", "a.d", "e"]
        for index in 0..<10_000 {
            let path = paths.randomElement(using: &rng)!
            var next = state
            let value: StateValue? = index % 7 == 0 ? nil : (Bool.random(using: &rng) ? .int(Int64(index)) : ["x": .int(Int64(index))])
            do { try next.set(value, at: path) } catch { continue } // a path through a number
            guard next != state else { continue }
            try store.append(Event(stream: "t", type: "w", writes: [Write(path, old: state[path], new: value)]))
            state = next
        }
        for path in paths + ["a.b.c.x", "nothing"] as [StatePath] {
            var fromWriteSets: [UInt64] = []
            try store.forEachChange(of: path) { seq, writes in
                #expect(writes.allSatisfy { $0.path.relative(to: path) != nil })
                fromWriteSets.append(seq)
                return true
            }
            var scanned: [UInt64] = []
            try store.forEachRecord { record in
                if record.event.writes.contains(where: { $0.seen(from: path) != nil }) { scanned.append(record.seq) }
                return true
            }
            #expect(fromWriteSets == scanned, "\(path)")
            if path != "nothing" { #expect(!scanned.isEmpty, "no event changed \(path): the test checks nothing") }
        }
        #expect(try store.lastSeq() > 5_000)
    }
}
