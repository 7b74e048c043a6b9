import Dispatch
import EventLog
import Foundation

extension Scenarios {
    /// `follow.latency`: from an append's commit returning to the event reaching a follower,
    /// one event at a time: a `records(after:)` stream in this process, and `eventlog log
    /// --follow --json` in a child process reading the same database.
    static func followLatency(events: Int, binary: String) throws -> ScenarioReport {
        let scratch = Scratch()
        let store = try EventStore(path: scratch.file("follow.lmdb"))
        try store.append(Event(stream: "bench", type: "start", writes: [Write("n", old: nil, new: 0)]))

        // In this process: the stream signals each delivery with its time.
        let delivered = DeliveryTimes()
        let follower = Task.detached {
            for try await record in store.records(after: 1) {
                delivered.add(record.seq)
                if record.seq == UInt64(events) + 1 { break }
            }
        }
        // In another process: the child's stdout, a line per event, read on a thread of its own.
        let child = Process()
        child.executableURL = URL(fileURLWithPath: binary)
        child.arguments = ["log", "--follow", "--json", "--from", "2", "--db", scratch.file("follow.lmdb")]
        let pipe = Pipe()
        child.standardOutput = pipe
        try child.run()
        let childDelivered = DeliveryTimes()
        let reader = Thread {
            var pending = Data()
            while true {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { return }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    pending.removeSubrange(...newline)
                    childDelivered.add(0)
                }
            }
        }
        reader.start()
        // Let the child start and reach its wait before the first commit.
        Thread.sleep(forTimeInterval: 1)

        var local: [Double] = []
        var remote: [Double] = []
        for n in 1...events {
            try store.append(Event(stream: "bench", type: "tick", writes: [Write("n", old: .int(Int64(n - 1)), new: .int(Int64(n)))]))
            let committed = DispatchTime.now().uptimeNanoseconds
            local.append(try delivered.wait(forCount: n, after: committed))
            remote.append(try childDelivered.wait(forCount: n, after: committed))
        }
        // The child waits for the next commit; SIGTERM ends it, and the reader sees end of file.
        child.terminate()
        child.waitUntilExit()
        follower.cancel()
        return ScenarioReport(
            name: "follow.latency", summary: "commit to delivery of one event at a time, \(events) events",
            measurements: [Measurement(subject: "records(after:), same process", operations: events, seconds: local.reduce(0, +) / 1e6, latencies: local),
                           Measurement(subject: "log --follow, another process", operations: events, seconds: remote.reduce(0, +) / 1e6, latencies: remote)],
            note: "latencies are from append() returning to the follower holding the event; ops/s is 1 / the mean latency",
            comparesThroughput: false)
    }
}

/// When each delivery happened, waited on by count.
private final class DeliveryTimes: @unchecked Sendable {
    private let condition = NSCondition()
    private var times: [UInt64] = []

    func add(_: UInt64) {
        condition.lock()
        times.append(DispatchTime.now().uptimeNanoseconds)
        condition.broadcast()
        condition.unlock()
    }

    /// The microseconds from `start` to delivery number `count` (from 1), waiting up to 10 s.
    func wait(forCount count: Int, after start: UInt64) throws -> Double {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(10)
        while times.count < count {
            guard condition.wait(until: deadline) else { throw BenchmarkError(description: "event \(count) was not delivered within 10 s") }
        }
        return Double(Int64(times[count - 1]) - Int64(start)) / 1_000
    }
}
