import EventLog
import Foundation

extension Scenarios {
    /// The update server the scenario starts, from the package's `tools/`.
    static let updateServerScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("tools/update-server.py").path

    /// `eventlog deploy download` of an update of `megabytes` MB of random bytes in `files`
    /// assets, served by `tools/update-server.py` on loopback, as a child process, against
    /// `curl` and Python's `urllib` fetching the same assets from the same server. Each
    /// subject's peak resident memory is its own (`wait4`).
    static func deployDownload(megabytes: Int, files: Int, binary: String) throws -> ScenarioReport {
        let scratch = Scratch()
        let bundle = scratch.file("bundle")
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data("<!doctype html><title>bench</title>".utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
        let perFile = megabytes * 1_000_000 / files
        for index in 0..<files {
            guard FileManager.default.createFile(atPath: bundle + "/asset-\(index).bin", contents: nil) else {
                throw BenchmarkError(description: "cannot create \(bundle)/asset-\(index).bin")
            }
            let output = try FileHandle(forWritingTo: URL(fileURLWithPath: bundle + "/asset-\(index).bin"))
            var left = perFile
            while left > 0 {
                let chunk = try random.read(upToCount: min(left, 1 << 20)) ?? Data()
                try output.write(contentsOf: chunk)
                left -= chunk.count
            }
            try output.close()
        }
        let server = scratch.file("server")
        let published = try ChildRun(binary, ["deploy", "publish", bundle, "--to", server, "--runtime-version", "bench",
                                              "--id", "bench-1", "--json", "--db", scratch.file("publish.lmdb")], in: scratch)
        let manifest = try StateValue(json: published.output)
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
        func measurement(_ subject: String, _ child: ChildRun) -> Measurement {
            Measurement(subject: subject, operations: megabytes, seconds: child.seconds,
                        extra: [("child peak MiB", Double(child.peakResidentBytes) / 1_048_576), ("MB/s", bytes / 1_000_000 / child.seconds)])
        }
        let client = try ChildRun(binary, ["deploy", "download", "--server", base + "/manifest", "--runtime-version", "bench",
                                           "--app-dir", scratch.file("app"), "--db", scratch.file("client.lmdb"), "--json"], in: scratch)
        guard (try StateValue(json: client.output))["deploy.holdingUpdate"] == "bench-1" else {
            throw BenchmarkError(description: "eventlog deploy download did not download: \(client.output.prefix(500))")
        }
        try FileManager.default.createDirectory(atPath: scratch.file("curl"), withIntermediateDirectories: true)
        let curl = try ChildRun("/usr/bin/curl", ["-sS", "--fail"] + urls.enumerated().flatMap { ["-o", scratch.file("curl/\($0.offset)"), base + $0.element] },
                                in: scratch)
        let python = try ChildRun("/usr/bin/env", ["python3", "-c", """
            import shutil, sys, urllib.request
            for index, url in enumerate(sys.argv[2:]):
                with urllib.request.urlopen(sys.argv[1] + url) as answer, open("\(scratch.path)/py-%d" % index, "wb") as out:
                    shutil.copyfileobj(answer, out, 1 << 20)
            """, base] + urls, in: scratch)
        return ScenarioReport(
            name: "deploy.download", summary: "`eventlog deploy download` of \(megabytes) MB in \(files + 1) assets from tools/update-server.py on loopback",
            measurements: [measurement("eventlog deploy download", client), measurement("curl", curl), measurement("python urllib", python)],
            note: "ops/s are MB/s of wall time, from spawning the child to its exit; eventlog also checks each asset's SHA-256 "
                + "as it streams, fsyncs each file, records the transitions in its log and moves the update into holding; "
                + "child peak MiB is each child's own peak resident memory (wait4; Linux keeps the harness's resident size "
                + "at the spawn as its floor, the peak MiB column here)")
    }
}
