import EventLog
import EventLogTesting
import Foundation
import Testing

/// The change stream: events committed by other processes reach a follower in order, none
/// missing or twice; cancellation and a closed pipe end it.
struct FollowTests {
    let dir = TemporaryDirectory("follow")
    var db: String { dir.file("shared.lmdb") }

    /// Two child processes importing `count` counter events each, in small batches.
    func startWriters(count: Int) throws -> [Process] {
        try ["a", "b"].map { name in
            try counterEvents(key: name, count: count).write(toFile: dir.file("\(name).jsonl"), atomically: true, encoding: .utf8)
            let process = try spawnEventlog(["import", dir.file("\(name).jsonl"), "--batch", "7", "--db", db])
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            return process
        }
    }

    @Test func aFollowerSeesEveryEventOfOtherProcessesOnceInOrder() async throws {
        try counterEvents(key: "start", count: 1).write(toFile: dir.file("start.jsonl"), atomically: true, encoding: .utf8)
        #expect(eventlog(["import", dir.file("start.jsonl"), "--db", db]).code == 0)
        let store = try EventStore(path: db, options: { var o = EventStore.Options(); o.readOnly = true; return o }())
        let writers = try startWriters(count: 1_000)
        var seqs: [UInt64] = []
        var values: [String: Int64] = [:]
        for try await record in store.records(after: 0) {
            seqs.append(record.seq)
            for write in record.event.writes { values[write.path.description] = write.new?.intValue }
            if seqs.count == 2_001 { break }
        }
        for writer in writers { writer.waitUntilExit() }
        #expect(seqs == Array(1...2_001))
        #expect(values["a"] == 999 && values["b"] == 999)
    }

    /// Opening a database while other processes commit is never taken for damage: the check
    /// before LMDB maps the file can read its meta pages in the middle of a commit.
    @Test func readersOpeningDuringCommitsNeverSeeDamage() throws {
        try counterEvents(key: "start", count: 1).write(toFile: dir.file("start.jsonl"), atomically: true, encoding: .utf8)
        #expect(eventlog(["import", dir.file("start.jsonl"), "--db", db]).code == 0)
        let writers = try ["a", "b"].map { name in
            try counterEvents(key: name, count: 3_000).write(toFile: dir.file("\(name).jsonl"), atomically: true, encoding: .utf8)
            let process = try spawnEventlog(["import", dir.file("\(name).jsonl"), "--batch", "1", "--db", db])
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            return process
        }
        var opens = 0
        var failures: [String] = []
        while writers.contains(where: \.isRunning) {
            let info = try runEventlog(["info", "--json", "--db", db])
            if info.code != 0 { failures.append(info.err) }
            opens += 1
        }
        for writer in writers { writer.waitUntilExit() }
        #expect(writers.allSatisfy { $0.terminationStatus == 0 })
        #expect(failures.isEmpty, "\(failures.count) of \(opens) opens failed, the first: \(failures.first ?? "")")
        #expect(opens > 0)
    }

    /// The data file after importing 20,000 events in 2,000 commits into a fresh database,
    /// while `consumer` (started after the first event) does what it does.
    func fileSizeAfterImport(_ name: String, consumer: (String) async throws -> (() -> Void)) async throws -> Int {
        let db = dir.file(name)
        try counterEvents(key: "n", count: 1).write(toFile: dir.file("\(name)-first.jsonl"), atomically: true, encoding: .utf8)
        try counterEvents(key: "n", count: 20_000, start: 1).write(toFile: dir.file("\(name).jsonl"), atomically: true, encoding: .utf8)
        #expect(eventlog(["import", dir.file("\(name)-first.jsonl"), "--db", db]).code == 0)
        let finish = try await consumer(db)
        #expect(try runEventlog(["import", dir.file("\(name).jsonl"), "--batch", "10", "--db", db]).code == 0)
        finish()
        return try #require(try FileManager.default.attributesOfItem(atPath: db + "/data.mdb")[.size] as? Int)
    }

    /// A consumer that stops reading holds no read transaction, so LMDB goes on reusing the
    /// pages each commit frees and the file does not grow because of it. The control, a reader
    /// that holds one snapshot through the import, shows what growth looks like.
    @Test func aStalledConsumerDoesNotGrowTheFile() async throws {
        let baseline = try await fileSizeAfterImport("baseline") { _ in {} }
        let pinned = try await fileSizeAfterImport("pinned") { db in
            let store = try EventStore(path: db, options: { var o = EventStore.Options(); o.readOnly = true; return o }())
            let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                try? store.read { _ in
                    holding.signal()
                    release.wait()
                }
            }
            holding.wait()
            return { release.signal() }
        }
        let stalledStream = try await fileSizeAfterImport("stalled-stream") { db in
            let store = try EventStore(path: db, options: { var o = EventStore.Options(); o.readOnly = true; return o }())
            var iterator = store.records(after: 0).makeAsyncIterator()
            #expect(try await iterator.next()?.seq == 1)
            // It reads no further until the import is done.
            return { withExtendedLifetime(iterator) {} }
        }
        let stalledChild = try await fileSizeAfterImport("stalled-child") { db in
            // `log --follow` whose reader never reads: once the pipe is full it blocks writing.
            let follower = try spawnEventlog(["log", "--follow", "--db", db])
            let output = Pipe()
            follower.standardOutput = output
            try follower.run()
            return {
                try? output.fileHandleForReading.close()
                kill(follower.processIdentifier, SIGKILL)
                follower.waitUntilExit()
            }
        }
        #expect(pinned > baseline * 2, "the control did not grow the file: \(pinned) against \(baseline) bytes")
        #expect(stalledStream <= baseline + baseline / 10, "\(stalledStream) against \(baseline) bytes")
        #expect(stalledChild <= baseline + baseline / 10, "\(stalledChild) against \(baseline) bytes")
    }

    @Test func cancellationEndsAWaitingStream() async throws {
        try counterEvents(key: "c", count: 3).write(toFile: dir.file("c.jsonl"), atomically: true, encoding: .utf8)
        _ = eventlog(["import", dir.file("c.jsonl"), "--db", db])
        let store = try EventStore(path: db)
        let follower = Task {
            var count = 0
            for try await _ in store.records(after: 0) { count += 1 }
            return count
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        follower.cancel()
        // The wait is woken at once, not at the next poll: well under a second even on a busy machine.
        let count = try await follower.value
        #expect(count == 3)
    }

    @Test func logFollowPrintsNewEventsAndEndsWhenThePipeCloses() throws {
        try counterEvents(key: "start", count: 1).write(toFile: dir.file("start.jsonl"), atomically: true, encoding: .utf8)
        _ = eventlog(["import", dir.file("start.jsonl"), "--db", db])
        let follower = try spawnEventlog(["log", "--follow", "--json", "--db", db])
        let output = Pipe(), errors = Pipe()
        follower.standardOutput = output
        follower.standardError = errors
        try follower.run()
        let writers = try startWriters(count: 200)
        var text = ""
        let reader = output.fileHandleForReading
        while text.split(separator: "\n").count < 401 {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        for writer in writers { writer.waitUntilExit() }
        let seqs = text.split(separator: "\n").compactMap { try? StateValue(json: String($0))["seq"]?.intValue }
        #expect(seqs == Array(1...401))
        try reader.close()
        let diagnostics = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        follower.waitUntilExit()
        #expect(follower.terminationReason == .exit && follower.terminationStatus == 0, "\(diagnostics)")
    }

    @Test func watchPrintsDistinctValuesOnly() throws {
        // 1, 1, 2, 2, 3: the watcher prints 1 (the start), then 2 and 3.
        let lines = [1, 1, 2, 2, 3].enumerated().map { index, value in
            #"{"stream":"t","type":"set","writes":[{"path":"v",\#(index == 0 ? "" : #""old":\#([1, 1, 2, 2, 3][index - 1]),"#)"new":\#(value)}]}"#
        }
        try lines[0].write(toFile: dir.file("first.jsonl"), atomically: true, encoding: .utf8)
        _ = eventlog(["import", dir.file("first.jsonl"), "--db", db])
        let watcher = try spawnEventlog(["watch", "v", "--db", db])
        let output = Pipe()
        watcher.standardOutput = output
        try watcher.run()
        var text = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self) // its start, before any change
        for (index, line) in lines.enumerated().dropFirst() {
            try line.write(toFile: dir.file("\(index).jsonl"), atomically: true, encoding: .utf8)
            #expect(eventlog(["import", dir.file("\(index).jsonl"), "--db", db]).code == 0)
        }
        while text.split(separator: "\n").count < 3 {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        // Not `terminate()`: a child spawned from a Dispatch thread inherits its blocked signals.
        try output.fileHandleForReading.close()
        watcher.waitUntilExit()
        #expect(text == "1  1\n3  2\n5  3\n")
        #expect(watcher.terminationReason == .exit && watcher.terminationStatus == 0)
    }
}
