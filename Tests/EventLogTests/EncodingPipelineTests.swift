@testable import EventLog
import EventLogTesting
import Foundation
import Testing

/// Large batches encode their records on a second thread; what they store must not depend on it.
@Suite struct EncodingPipelineTests {
    /// The records and keyframes `events` become when appended one at a time.
    private func serialRecords(of events: [Event]) throws -> (records: [EventRecord], keyframes: [UInt64]) {
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(mapSize: 64 << 20))
        try store.transact { batch in for event in events { try batch.append(event) } }
        return (try store.allRecords(), try store.keyframeSeqs())
    }

    private func randomEvents(seed: UInt64, count: Int) -> [Event] {
        var session = RandomSession(seed: seed)
        return (0..<count).map { _ in session.next() }
    }

    @Test(arguments: [EncodingPipeline.minimumEvents, EncodingPipeline.firstChunkEvents + EncodingPipeline.chunkEvents * 7, 4_999])
    func storesTheSameRecordsAndKeyframesAsOneAtATime(pipelined: Int) throws {
        #expect(EncodingPipeline.isWorthwhile(for: pipelined) == (ProcessInfo.processInfo.activeProcessorCount > 1))
        let events = randomEvents(seed: UInt64(pipelined), count: 10 + pipelined)
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(mapSize: 8 << 20))
        try store.append(contentsOf: events[..<10])
        #expect(try store.append(contentsOf: events[10...]) == 11...UInt64(events.count))
        let serial = try serialRecords(of: events)
        #expect(try store.allRecords() == serial.records)
        #expect(try store.keyframeSeqs() == serial.keyframes)
        #expect(try store.verify().isOK)
    }

    @Test func aBatchThatOutgrowsTheMapRunsAgainAndIsStoredWhole() throws {
        let events = randomEvents(seed: 11, count: 20_000)
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(mapSize: 1 << 20))
        #expect(try store.append(contentsOf: events) == 1...20_000)
        #expect(store.environment.mapSize > 1 << 20)
        let serial = try serialRecords(of: events)
        // The same events and keyframes; not the same times, since each run reads the clock.
        #expect(try store.allRecords().map(\.event) == serial.records.map(\.event))
        #expect(try store.keyframeSeqs() == serial.keyframes)
        #expect(try store.verify().isOK)
    }

    @Test func aStaleWriteDeepInABatchAppendsNothingAndLeavesTheStoreUsable() throws {
        var events = randomEvents(seed: 3, count: 4_000)
        events.insert(Event(stream: "s", type: "stale", writes: [Write("nowhere.near", old: 1, new: 2)]), at: 2_500)
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(mapSize: 8 << 20))
        #expect(throws: EventStoreError.staleWrite(path: "nowhere.near", expected: 1, actual: nil)) {
            try store.append(contentsOf: events)
        }
        #expect(try store.lastSeq() == 0)
        #expect(try store.currentState == .emptyObject)
        events.remove(at: 2_500)
        #expect(try store.append(contentsOf: events) == 1...4_000)
        #expect(try store.verify().isOK)
    }

    @Test func aCallerWhoCatchesARefusalKeepsTheEventsBeforeIt() throws {
        var session = RandomSession(seed: 4)
        var events = (0..<3_000).map { _ in session.next() }
        let stateBeforeRefusal = try foldedState(of: events[..<1_800])
        events.insert(Event(stream: "s", type: "stale", writes: [Write("nowhere.near", old: 1, new: 2)]), at: 1_800)
        let dir = TemporaryDirectory()
        let store = try EventStore(path: dir.path, options: .testing(mapSize: 8 << 20))
        try store.transact { batch in
            #expect(throws: EventStoreError.self) { try batch.append(contentsOf: events) }
            #expect(batch.lastSeq == 1_800)
            #expect(batch.state == stateBeforeRefusal)
            try batch.append(Event(stream: "s", type: "after"))
        }
        #expect(try store.lastSeq() == 1_801)
        #expect(try store.snapshot(after: 1_800) == stateBeforeRefusal)
        #expect(try store.verify().isOK)
    }

    private func foldedState(of events: ArraySlice<Event>) throws -> StateValue {
        var state = StateValue.emptyObject
        for event in events { try state.apply(event.writes) }
        return state
    }
}

extension EventStore {
    func allRecords() throws -> [EventRecord] {
        var records: [EventRecord] = []
        try forEachRecord { records.append($0); return true }
        return records
    }
}
