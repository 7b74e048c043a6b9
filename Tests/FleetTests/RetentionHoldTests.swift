import EventLog
import EventLogTesting
import Fleet
import Foundation
import LoopbackServer
import Testing

/// A retention policy held at what a stream acknowledged (`retentionHold` with
/// `Shipper.shippedThrough`) never drops an event the fleet has not got.
@Suite(.serialized) struct RetentionHoldTests {
    @Test func aPolicyKeepsWhatWasNotShippedAndDropsTheRestOnceItIs() throws {
        let nats = try NATSServers()
        let directory = TemporaryDirectory()
        var options = EventStore.Options()
        options.retention = .keepLast(100)
        options.retentionHold = { store in try Shipper.shippedThrough(store) }
        let store = try EventStore(path: directory.file("log.lmdb"), options: options)
        // Shipped through 50, within the policy: a thousand events more, none of them dropped
        // until shipped.
        try appendCounter(50, to: store)
        try Shipper(store: store, servers: nats.urls).ship()
        let shipped = try store.lastSeq()
        for _ in 0..<100 { try appendCounter(10, to: store) }
        #expect(try store.base()?.seq ?? 0 <= shipped)
        #expect(try store.firstEvent(where: try StatePredicate(parsing: "count == \(shipped + 1)"), linear: true).firstBad == shipped + 1)
        #expect(store.retentionError == nil)
        // Once they are shipped, the next appends let the policy catch up, a step at a time.
        try Shipper(store: store, servers: nats.urls).ship()
        for _ in 0..<20 { try appendCounter(10, to: store) }
        let base = try #require(try store.base()?.seq), last = try store.lastSeq()
        #expect(base > shipped && last - base <= 100 + 100, "base \(base) of \(last)")
        #expect(try store.verify().isOK)
    }
}
