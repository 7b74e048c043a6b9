import EventLog
import Foundation

extension Scenarios {
    /// The update server the scenario starts, from the package's `tools/`.
    static let updateServerScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("tools/update-server.py").path

    /// `eventlog deploy download` of an update of `megabytes` MB of random bytes in `files`
    /// assets, served by `tools/update-server.py` on loopback, as a child process, against
    /// `curl` and Python's `urllib` fetching the same assets from the same server. Each
    /// subject's peak resident memory is its own (`wait4`). Then a second update, one asset of
    /// the first changed, downloaded by the same client after the first: the second report,
    /// `deploy.download.second`, sets its downloaded bytes and time against the first's.
    static func deployDownload(megabytes: Int, files: Int, binary: String) throws -> [ScenarioReport] {
        let scratch = Scratch()
        let bundle = scratch.file("bundle")
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data("<!doctype html><title>bench</title>".utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
        let perFile = megabytes * 1_000_000 / files
        /// Fills asset `index` of the bundle with `perFile` new random bytes.
        func fillAsset(_ index: Int) throws {
            let path = bundle + "/asset-\(index).bin"
            guard FileManager.default.createFile(atPath: path, contents: nil) else { throw BenchmarkError(description: "cannot create \(path)") }
            let output = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            var left = perFile
            while left > 0 {
                let chunk = try random.read(upToCount: min(left, 1 << 20)) ?? Data()
                try output.write(contentsOf: chunk)
                left -= chunk.count
            }
            try output.close()
        }
        for index in 0..<files { try fillAsset(index) }
        let server = scratch.file("server")
        func publish(_ id: String) throws -> StateValue {
            try StateValue(json: ChildRun(binary, ["deploy", "publish", bundle, "--to", server, "--runtime-version", "bench",
                                                   "--id", id, "--json", "--db", scratch.file("publish.lmdb")], in: scratch).output)
        }
        let manifest = try publish("bench-1")
        let urls = ([manifest["launchAsset"]] + (manifest["assets"]?.arrayValue ?? []).map { Optional($0) })
            .compactMap { $0?["url"]?.stringValue }
        sync()

        let serverProcess = Process()
        serverProcess.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        serverProcess.arguments = ["python3", updateServerScript, "--dir", server, "--exit-with-parent"]
        let pipe = Pipe()
        serverProcess.standardOutput = pipe
        try serverProcess.run()
        defer { serverProcess.terminate(); serverProcess.waitUntilExit() }
        let line = String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self)
        guard line.hasPrefix("listening on ") else { throw BenchmarkError(description: "update-server.py did not start: \(line)") }
        let base = line.dropFirst("listening on ".count).trimmingCharacters(in: .whitespacesAndNewlines)

        let bytes = Double(megabytes * 1_000_000)
        /// `child`'s figures; with `then`, a child run after it, its time added (its memory is not).
        func measurement(_ subject: String, _ child: ChildRun, then: ChildRun? = nil) -> Measurement {
            let seconds = child.seconds + (then?.seconds ?? 0)
            return Measurement(subject: subject, operations: megabytes, seconds: seconds,
                               extra: [("child peak MiB", Double(child.peakResidentBytes) / 1_048_576), ("MB/s", bytes / 1_000_000 / seconds)])
        }
        /// `eventlog deploy download` of update `id` into the one app directory, and its `downloaded` payload.
        func download(_ id: String) throws -> (run: ChildRun, counts: StateValue) {
            let run = try ChildRun(binary, ["deploy", "download", "--server", base + "/manifest", "--runtime-version", "bench",
                                            "--app-dir", scratch.file("app"), "--db", scratch.file("client.lmdb"), "--json"], in: scratch)
            let output = try StateValue(json: run.output)
            guard output["deploy.holdingUpdate"] == .string(id),
                  let counts = output["events"]?.arrayValue?.first(where: { $0["type"] == "downloaded" })?["payload"] else {
                throw BenchmarkError(description: "eventlog deploy download did not download \(id): \(run.output.prefix(500))")
            }
            return (run, counts)
        }
        let (client, firstCounts) = try download("bench-1")
        try FileManager.default.createDirectory(atPath: scratch.file("curl"), withIntermediateDirectories: true)
        let curlFiles = urls.indices.map { scratch.file("curl/\($0)") }
        let curl = try ChildRun("/usr/bin/curl", ["-sS", "--fail"] + zip(curlFiles, urls).flatMap { ["-o", $0, base + $1] }, in: scratch)
        // What the client promises and curl does not: the files on disk (coreutils' sync fsyncs each file named).
        let curlSynced = try ChildRun("/usr/bin/sync", curlFiles, in: scratch)
        let python = try ChildRun("/usr/bin/env", ["python3", "-c", """
            import shutil, sys, urllib.request
            for index, url in enumerate(sys.argv[2:]):
                with urllib.request.urlopen(sys.argv[1] + url) as answer, open("\(scratch.path)/py-%d" % index, "wb") as out:
                    shutil.copyfileobj(answer, out, 1 << 20)
            """, base] + urls, in: scratch)
        // The second update: one asset changed, the other 20 held by the client since the first.
        try fillAsset(0)
        _ = try publish("bench-2")
        let (second, secondCounts) = try download("bench-2")
        guard secondCounts["downloadedAssets"] == 1, secondCounts["downloadedBytes"] == .int(Int64(perFile)),
              secondCounts["reusedAssets"] == .int(Int64(files)) else {
            throw BenchmarkError(description: "the second update did not reuse the \(files) assets it held: \(secondCounts)")
        }
        func update(_ subject: String, _ child: ChildRun, _ counts: StateValue) -> Measurement {
            Measurement(subject: subject, operations: megabytes, seconds: child.seconds,
                        extra: [("downloaded MB", Double(counts["downloadedBytes"]?.intValue ?? 0) / 1_000_000),
                                ("reused MB", Double(counts["reusedBytes"]?.intValue ?? 0) / 1_000_000), ("seconds", child.seconds)])
        }
        let reuse = ScenarioReport(
            name: "deploy.download.second",
            summary: "`eventlog deploy download` of a second update changing 1 of the \(files + 1) assets, after the first",
            measurements: [update("second update (1 asset new)", second, secondCounts), update("first update", client, firstCounts)],
            note: "ops/s are the update's MB over wall time; the client links the assets it holds from the first update "
                + "(hashing each again) and fetches only the new one")
        return [ScenarioReport(
            name: "deploy.download", summary: "`eventlog deploy download` of \(megabytes) MB in \(files + 1) assets from tools/update-server.py on loopback",
            measurements: [measurement("eventlog deploy download", client), measurement("curl", curl),
                           measurement("curl, then sync of its files", curl, then: curlSynced), measurement("python urllib", python)],
            note: "ops/s are MB/s of wall time, from spawning the child to its exit; eventlog also checks each asset's SHA-256 "
                + "as it streams, fsyncs each file, records the transitions in its log and moves the update into holding, "
                + "so its like among the peers is curl with its files then fsynced (`sync FILES`, its time added); "
                + "child peak MiB is each child's own peak resident memory (wait4; Linux keeps the harness's resident size "
                + "at the spawn as its floor, the peak MiB column here)"), reuse]
    }
}
