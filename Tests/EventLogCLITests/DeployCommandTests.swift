import Deploys
import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// `eventlog deploy` from the command line: publish, deliver, break, roll back; and a crash
/// (SIGKILL) after every step of an install, recovered by the next command.
struct DeployCommandTests {
    let dir = TemporaryDirectory("deploy-cli")
    var db: String { dir.file("log.lmdb") }
    var server: String { dir.file("server") }
    var app: String { dir.file("app") }

    func bundle(_ name: String, _ index: String) throws -> String {
        let path = dir.file(name)
        try FileManager.default.createDirectory(atPath: path + "/css", withIntermediateDirectories: true)
        try Data(index.utf8).write(to: URL(fileURLWithPath: path + "/index.html"))
        try Data("body{}".utf8).write(to: URL(fileURLWithPath: path + "/css/site.css"))
        return path
    }

    func deploy(_ action: String, _ extra: [String] = []) -> CommandOutcome {
        eventlog(["deploy", action, "--db", db, "--server", server, "--app-dir", app, "--runtime-version", "1.0"] + extra)
    }

    var working: String? { try? String(contentsOfFile: app + "/working/index.html", encoding: .utf8) }

    @Test func publishDeliverConfirmAndStatus() throws {
        let published = eventlog(["deploy", "publish", try bundle("v1", "one"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        #expect(published.code == 0, "\(published.err)")
        #expect(published.out == "published update v1 for runtime version 1.0 into \(server): 2 assets\n")
        let delivered = deploy("deliver")
        #expect(delivered.code == 0, "\(delivered.err)")
        #expect(delivered.out.contains("deploy/didReloadWebView(v1)"))
        #expect(working == "one")
        #expect(deploy("confirm").code == 0)
        let status = eventlog(["deploy", "status", "--db", db, "--app-dir", app, "--runtime-version", "1.0", "--json"])
        let json = try StateValue(json: status.out)
        #expect(json["deploy.phase"] == "confirmed")
        #expect(json["appDirectory.working"] == "v1")
        #expect(json["appDirectory.pending"] == .null)
        let replay = eventlog(["replay", "--verify", "--db", db])
        #expect(replay.code == 0, "\(replay.out)")
    }

    /// A channel and a rollout from the command line: `publish --channel`, `publish --rollout`,
    /// `deploy rollout` raising it (`50%` spelled with its sign), and the client's `--channel`;
    /// a client of the default channel falls in the rollout as its install id says; bad input
    /// and a rollout that cannot be are exit 2 and change nothing.
    @Test func channelsAndRolloutsFromTheCommandLine() throws {
        func publish(_ name: String, _ extra: [String]) -> CommandOutcome {
            eventlog(["deploy", "publish", (try? bundle(name, name)) ?? "", "--server-dir", server, "--runtime-version", "1.0", "--id", name] + extra)
        }
        #expect(publish("v1", []).code == 0)
        let beta = publish("b1", ["--channel", "beta"])
        #expect(beta.out == "published update b1 for runtime version 1.0 on channel beta into \(server): 2 assets\n", "\(beta.err)")
        let rolled = publish("v2", ["--rollout", "10"])
        #expect(rolled.out == "published update v2 for runtime version 1.0 into \(server): 2 assets, offered to 10% of the installs\n", "\(rolled.err)")

        #expect(deploy("deliver", ["--channel", "beta"]).code == 0)
        #expect(working == "b1")

        func rollout(_ extra: [String]) -> CommandOutcome {
            eventlog(["deploy", "rollout", "v2", "--server-dir", server, "--runtime-version", "1.0"] + extra)
        }
        let raised = rollout(["--percent", "50%"])
        #expect(raised.out == "update v2 offered to 50% of channel default of runtime version 1.0 (was 10%)\n", "\(raised.err)")
        let json = rollout(["--percent", "50", "--json"])
        #expect(try StateValue(json: json.out) == ["update": "v2", "channel": .null, "percent": 50, "previousPercent": 50])
        // Another install, of the default channel: v2 when its bucket is under 50, else v1.
        let other = eventlog(["deploy", "check", "--db", dir.file("other.lmdb"), "--server", server, "--app-dir", dir.file("other-app"), "--runtime-version", "1.0"])
        #expect(other.code == 0, "\(other.err)")
        let installID = try String(contentsOfFile: dir.file("other-app") + "/install-id", encoding: .utf8).trimmingCharacters(in: .newlines)
        let inRollout = Rollout.bucket(installID: installID, update: "v2") < 50
        #expect(other.out.contains("newDeployAvailable(\(inRollout ? "v2" : "v1"),"), "\(other.out)")

        let before = try String(contentsOfFile: server + "/updates/1.0/rollout", encoding: .utf8)
        for (extra, message) in [
            (["--percent", "101"], "--percent must be a whole percent, 0 to 100, not \"101\""),
            (["--percent", "ten"], "--percent must be a whole percent, 0 to 100, not \"ten\""),
            ([], "deploy rollout needs --percent N"),
            (["--percent", "5", "--channel", "no/such"], "a channel name must be"),
        ] {
            let refused = rollout(extra)
            #expect(refused.code == 2 && refused.err.contains(message), "\(extra): \(refused.err)")
        }
        let underWay = publish("v3", [])
        #expect(underWay.code == 2 && underWay.err.contains("update v2 is rolling out to 50% of channel default"), "\(underWay.err)")
        #expect(try String(contentsOfFile: server + "/updates/1.0/rollout", encoding: .utf8) == before)
        let done = rollout(["--percent", "100"])
        #expect(done.out.hasSuffix("(was 50%): it is the channel's current update\n"), "\(done.out)")
        #expect(try String(contentsOfFile: server + "/updates/1.0/current", encoding: .utf8) == "v2\n")
    }

    /// `confirm --ready-timeout` later than the timeout is a failed launch (exit 1), rolled
    /// back at the next start; `--retry-rejected-after` offers the rejected update again once
    /// the delay has passed, not before; bad durations are usage errors.
    @Test func aLateConfirmationFailsAndARejectedUpdateIsRetriedAfterTheDelay() throws {
        #expect(eventlog(["deploy", "publish", try bundle("v1", "one"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"]).code == 0)
        #expect(deploy("deliver").code == 0)
        #expect(deploy("confirm", ["--ready-timeout", "600"]).code == 0)
        #expect(eventlog(["deploy", "publish", try bundle("v2", "two"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v2"]).code == 0)
        #expect(deploy("deliver").code == 0)
        let late = deploy("confirm", ["--ready-timeout", "0.000001"])
        #expect(late.code == 1 && late.err.hasPrefix("Error: launchConfirmedTooLate: update v2 was confirmed "), "\(late.err)")
        #expect(deploy("deliver").out.contains("deploy/rolledBack("))
        #expect(working == "one")

        let early = deploy("check", ["--retry-rejected-after", "1h"])
        #expect(early.out.contains("noNewDeploy(rolledBackBefore"), "\(early.out)")
        let retried = deploy("check", ["--retry-rejected-after", "0s", "--retry-attempts", "2"])
        #expect(retried.out.contains("newDeployAvailable(v2,"), "\(retried.out)")
        for (extra, message) in [(["--retry-rejected-after", "1w"], "--retry-rejected-after must be a whole number of seconds"),
                                 (["--retry-attempts", "2"], "--retry-attempts needs --retry-rejected-after DURATION"),
                                 (["--retry-rejected-after", "1h", "--retry-attempts", "0"], "--retry-attempts must be a positive whole number")] {
            let refused = deploy("check", extra)
            #expect(refused.code == 2 && refused.err.hasPrefix("Error: \(message)"), "\(extra): \(refused.err)")
        }
    }

    /// A bundle file whose name is not UTF-8 is bad input (exit 2) named by its bytes, not a
    /// false "No such file or directory" (Foundation had repaired the name into another).
    @Test func aFileNameThatIsNotUTF8IsNamedByItsBytes() throws {
        let path = try bundle("odd", "one")
        let name: [UInt8] = Array((path + "/css/").utf8) + [0x61, 0xFF, 0x2E, 0x6A, 0x73, 0]
        let fd = name.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644) } }
        #expect(fd >= 0)
        close(fd)
        let published = eventlog(["deploy", "publish", path, "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        #expect(published.code == 2)
        #expect(published.err.hasPrefix("Error: \(path)/css/a\\xFF.js: the file name is not UTF-8, which an asset key must be\n"), "\(published.err)")
        #expect(!FileManager.default.fileExists(atPath: server + "/updates"))
    }

    /// A publish killed while it copies an asset leaves `assets/.incoming-UUID`; the next
    /// publish goes through, leaves it for a person, and says where it is.
    @Test func aPublishKilledMidCopyLeavesItsTemporaryForAPerson() throws {
        let path = try bundle("big", "one")
        try Data(count: 64 << 20).write(to: URL(fileURLWithPath: path + "/big.bin"))
        let process = try spawnEventlog(["deploy", "publish", path, "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        func incoming() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: server + "/assets")) ?? []).filter { $0.hasPrefix(".incoming-") }
        }
        while process.isRunning, incoming().isEmpty { usleep(1_000) }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationStatus == SIGKILL, "the publish ended before it was killed mid-copy")
        let left = incoming()
        #expect(left.count == 1)
        let again = eventlog(["deploy", "publish", path, "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        #expect(again.code == 0, "\(again.err)")
        #expect(again.out == "published update v1 for runtime version 1.0 into \(server): 3 assets\n")
        #expect(again.err == "warning: 1 temporary file of a killed publish (.incoming-UUID, *.next-UUID) left in \(server)/assets; "
                    + "remove it while no publish is under way\n")
        #expect(incoming() == left)
    }

    @Test func refusalsExitOneAndLeaveWorkingAlone() throws {
        _ = eventlog(["deploy", "publish", try bundle("v1", "one"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        _ = deploy("deliver")
        _ = deploy("confirm")
        let manifest = try StateValue(json: eventlog(["deploy", "publish", try bundle("v2", "two"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v2", "--json"]).out)
        let url = try #require(manifest["launchAsset.url"]?.stringValue)
        try Data("tampered".utf8).write(to: URL(fileURLWithPath: server + url))
        let refused = deploy("deliver")
        #expect(refused.code == 1)
        #expect(refused.err.hasPrefix("Error: integrityFailed: asset index.html: its SHA-256 is "), "\(refused.err)")
        #expect(working == "one")
    }

    @Test func theDemoRecordsADeployHistory() throws {
        let demo = eventlog(["demo", "--db", db])
        #expect(demo.code == 0, "\(demo.err)")
        #expect(!FileManager.default.fileExists(atPath: db + ".deploy-demo"), "the demo left its deploy directories behind")
        let bisect = try StateValue(json: eventlog(["bisect", "--db", db, "--where", #"deploy.phase == "rolledBack""#, "--json"]).out)
        #expect(bisect["event.type"] == "rolledBack")
        #expect(bisect["event.payload.from"] == "web-3")
        let log = eventlog(["log", "--db", db]).out
        #expect(log.contains("deploy/integrityFailed(web-2, asset js/app.js: its SHA-256 is "))
        #expect(log.contains("deploy/noNewDeploy(rolledBackBefore, web-3)"))
        let state = try StateValue(json: eventlog(["snapshot", "--db", db, "--json"]).out)
        #expect(state["deploy.workingUpdate"] == "web-5")
        #expect(state["deploy.phase"] == "confirmed")
        // A directory left by an interrupted demo is not taken over.
        try FileManager.default.createDirectory(atPath: dir.file("other.lmdb.deploy-demo"), withIntermediateDirectories: false)
        let refused = eventlog(["demo", "--db", dir.file("other.lmdb")])
        #expect(refused.code == 2)
        #expect(refused.err.contains("left by an interrupted demo? remove it"))
    }

    @Test func aRefusalMidLaunchStillExitsOne() throws {
        _ = eventlog(["deploy", "publish", try bundle("v1", "one"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        #expect(deploy("download").code == 0)
        let manifest = try StateValue(json: eventlog(["deploy", "publish", try bundle("v2", "two"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v2", "--json"]).out)
        try Data("tampered".utf8).write(to: URL(fileURLWithPath: server + (manifest["launchAsset.url"]?.stringValue ?? "")))
        // The launch installs v1 from holding, refuses v2, and reloads v1: the refusal is the result.
        let launch = deploy("deliver")
        #expect(launch.code == 1)
        #expect(launch.err.hasPrefix("Error: integrityFailed: asset index.html"))
        #expect(working == "one")
    }

    @Test func readingCommandsCreateNoAppDirectory() throws {
        let status = eventlog(["deploy", "status", "--db", db, "--app-dir", dir.file("nowhere"), "--runtime-version", "1.0"])
        #expect(status.code == 2)
        #expect(status.err.hasPrefix("Error: \(dir.file("nowhere")) is no app directory"))
        #expect(!FileManager.default.fileExists(atPath: dir.file("nowhere")))
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir.file("a-file")))
        #expect(eventlog(["deploy", "check", "--db", db, "--server", server, "--app-dir", dir.file("a-file"), "--runtime-version", "1.0"]).code == 2)
    }

    @Test func badCommandLines() throws {
        for (arguments, message) in [
            (["deploy", "launch"], "unknown subcommand 'launch' for 'deploy'; the subcommands are: check, download, install, deliver, foreground, confirm, status, publish, rollout, gate"),
            (["deploy", "check", "--runtime-version", "1.0"], "deploy needs --server URL|DIR"),
            (["deploy", "check", "--server", server], "deploy needs --runtime-version V"),
            (["deploy", "check", "--server", server, "--runtime-version", "1.0", "--platform", "web"], "the platform must be ios or android, not \"web\""),
            (["deploy", "check", "--server", server, "--runtime-version", "../x"], "the runtime version must be 1 to 255 printable ASCII characters without spaces, / or \\, not \"../x\""),
            (["deploy", "deliver", "--server", server, "--runtime-version", "1", "--launch-behavior", "always"], "--launch-behavior must be one of none, checkNewDeploy, downloadNewDeploy, reloadNewDeploy, not \"always\""),
            (["deploy", "publish", dir.file("missing"), "--server-dir", server, "--runtime-version", "1"], "\(dir.file("missing")) is not a directory"),
            (["deploy", "publish", "--server-dir", server, "--runtime-version", "1"], "missing BUNDLE_DIR"),
            (["deploy", "check", "--server", "http://127.0.0.1:70000/manifest", "--runtime-version", "1"], "--server: port 70000 is outside 1…65535 in http://127.0.0.1:70000/manifest"),
            (["deploy", "check", "--server", "https://", "--runtime-version", "1"], "--server: no host in https://"),
            (["deploy", "check", "--server", server, "--runtime-version", "1", "--project-token", "a\nb"], "the project token must be printable ASCII without spaces"),
        ] {
            // publish writes a server directory, not an app directory
            let outcome = eventlog(arguments + ["--db", db] + (arguments.count > 1 && arguments[1] == "publish" ? [] : ["--app-dir", app]))
            #expect(outcome.code == 2, "\(arguments)")
            #expect(outcome.err.hasPrefix("Error: \(message)\n"), "\(outcome.err)")
        }
        #expect(!FileManager.default.fileExists(atPath: db), "a refused command created the database")
    }

    @Test("a crash after each install step leaves a whole working bundle, and the next start finishes or undoes the install",
          arguments: ["recordedWillUpdate", "wrotePending", "switchedWorking", "removedHolding", "recordedDidUpdate"])
    func crashDuringInstall(_ step: String) throws {
        _ = eventlog(["deploy", "publish", try bundle("v1", "one"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        _ = deploy("deliver")
        _ = deploy("confirm")
        _ = eventlog(["deploy", "publish", try bundle("v2", "two"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v2"])
        #expect(deploy("download").code == 0)
        let crashed = try runEventlog(["deploy", "install", "--db", db, "--app-dir", app, "--runtime-version", "1.0"],
                                      environment: ["EVENTLOG_DEPLOY_CRASH_AFTER": step])
        #expect(crashed.code == 9, "the install was not killed after \(step): \(crashed.err)")
        let switched = ["switchedWorking", "removedHolding", "recordedDidUpdate"].contains(step)
        #expect(working == (switched ? "two" : "one"), "working after a crash at \(step)")
        #expect(!FileManager.default.fileExists(atPath: app + "/working.next"))

        let status = eventlog(["deploy", "status", "--db", db, "--app-dir", app, "--runtime-version", "1.0", "--json"])
        #expect(status.code == 0, "\(status.err)")
        let json = try StateValue(json: status.out)
        let recovered = json["events"]?.arrayValue?.first { $0["type"] == "installRecovered" }
        if step == "recordedDidUpdate" {
            #expect(recovered == nil, "nothing to recover after the install was recorded")
        } else {
            #expect(recovered?["payload.result"] == (switched ? "finished" : "undone"))
        }
        #expect(json["appDirectory.holding"] == (switched ? .null : "v2"))
        #expect(json["appDirectory.pending"] == (switched ? "v2" : .null))
        // The next launch installs (or launches) v2, and the log replays.
        #expect(deploy("deliver").code == 0)
        #expect(working == "two")
        #expect(deploy("confirm").code == 0)
        #expect(eventlog(["replay", "--verify", "--db", db]).code == 0)
        #expect(eventlog(["verify", "--db", db]).code == 0)
    }

    @Test("a crash after each reap step leaves the kept updates whole, and the next command finishes the reap",
          arguments: DeployClient.ReapStep.allCases.map(\.rawValue))
    func crashDuringReap(_ step: String) throws {
        for (id, index) in [("v1", "one"), ("v2", "two")] {
            _ = eventlog(["deploy", "publish", try bundle(id, index), "--server-dir", server, "--runtime-version", "1.0", "--id", id])
            #expect(deploy("deliver").code == 0 && deploy("confirm").code == 0)
        }
        _ = eventlog(["deploy", "publish", try bundle("v3", "three"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v3"])
        // The launch that installs v3 reaps v1: working is v3, pending's previous v2.
        let crashed = try runEventlog(["deploy", "deliver", "--db", db, "--server", server, "--app-dir", app, "--runtime-version", "1.0"],
                                      environment: ["EVENTLOG_DEPLOY_CRASH_AFTER": step])
        #expect(crashed.code == 9, "the launch was not killed after \(step): \(crashed.err)")
        #expect(working == "three")
        let status = eventlog(["deploy", "status", "--db", db, "--app-dir", app, "--runtime-version", "1.0", "--json"])
        #expect(status.code == 0, "\(status.err)")
        let updates = try FileManager.default.contentsOfDirectory(atPath: app + "/updates").sorted()
        #expect(updates == ["v2", "v2.json", "v3", "v3.json"], "after a crash at \(step)")
        for (id, index) in [("v2", "two"), ("v3", "three")] {
            #expect(try String(contentsOfFile: app + "/updates/\(id)/index.html", encoding: .utf8) == index)
            #expect(try String(contentsOfFile: app + "/updates/\(id)/css/site.css", encoding: .utf8) == "body{}")
        }
        let types = try eventlog(["log", "--db", db, "--json"]).out.split(separator: "\n").map { try StateValue(json: String($0))["type"]?.stringValue }
        #expect(types.filter { $0 == "updatesReaped" }.count == 1 && types.filter { $0 == "reapFinished" }.count == 1, "\(types)")
        #expect(try StateValue(json: status.out)["deploy.reaping"] == nil)
        #expect(deploy("confirm").code == 0)
        #expect(eventlog(["replay", "--verify", "--db", db]).code == 0)
        #expect(eventlog(["verify", "--db", db]).code == 0)
    }

    /// Ctrl-C or SIGTERM during a download stops it at once: what it made is taken back, the
    /// stop is recorded, and the command exits as the signal says.
    @Test(arguments: [SIGTERM, SIGINT])
    func anInterruptedDownloadTakesBackWhatItMade(_ number: Int32) throws {
        let bundle = try bundle("big", "big")
        try Data(repeating: 7, count: 4 << 20).write(to: URL(fileURLWithPath: bundle + "/big.bin"))
        _ = eventlog(["deploy", "publish", bundle, "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        // 200 kB a second: the download takes 20 s unless stopped.
        let slow = try LoopbackServer(script: LoopbackServer.toolsDirectory.appendingPathComponent("update-server.py"),
                                      arguments: ["--dir", server, "--exit-with-parent", "--rate", "200000"])
        let process = try spawnEventlog(["deploy", "download", "--db", db, "--server", slow.url.appendingPathComponent("manifest").absoluteString,
                                         "--app-dir", app, "--runtime-version", "1.0"], interruptible: true)
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning, Date() < deadline,
              !((try? FileManager.default.contentsOfDirectory(atPath: app + "/updates")) ?? []).contains(where: { $0.contains(".partial-") }) {
            usleep(10_000)
        }
        usleep(300_000)
        #expect(process.isRunning, "the download ended before it could be interrupted")
        let started = Date()
        kill(process.processIdentifier, number)
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(Date().timeIntervalSince(started) < 10, "the download did not stop at the signal")
        #expect(process.terminationStatus == 128 + number, "\(message)")
        #expect(message.hasPrefix("Interrupted: the step under way was finished, or undone and recorded"), "\(message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: app + "/updates") == [], "the partial download stayed")
        let status = try StateValue(json: eventlog(["deploy", "status", "--db", db, "--app-dir", app, "--runtime-version", "1.0", "--json"]).out)
        #expect(status["deploy.phase"] == "downloadFailed" && status["deploy.lastError"] == "cancelled", "\(status)")
        #expect(status["appDirectory.holding"] == .null)
        #expect(eventlog(["verify", "--db", db]).code == 0)
    }

    /// SIGKILL at random moments of a download that reuses the held update's assets: the next
    /// download completes, the held update's files are as they were, and replay verifies.
    @Test func aDownloadReusingAssetsKilledAtRandomMomentsRecovers() throws {
        let server = dir.file("reuse-server")
        var contents: [String: [String: Data]] = [:]
        for version in ["v1", "v2"] {
            let bundle = dir.file("reuse-\(version)")
            try FileManager.default.createDirectory(atPath: bundle + "/js", withIntermediateDirectories: true)
            var files = ["index.html": Data("<h1>\(version)</h1>".utf8)]
            for index in 0..<20 { files["js/part-\(index).js"] = Data(repeating: UInt8(index), count: 200_000) }
            if version == "v2" { files["js/part-0.js"] = Data(repeating: 0xFF, count: 200_000) }
            for (key, data) in files { try data.write(to: URL(fileURLWithPath: bundle + "/" + key)) }
            contents[version] = files
            #expect(eventlog(["deploy", "publish", bundle, "--server-dir", server, "--runtime-version", "1.0", "--id", version]).code == 0)
        }
        let current = server + "/updates/1.0/current"
        var killed = 0
        try killAtRandomMoments(rounds: 0..<12) { round, runAndKill in
            let db = dir.file("reuse-\(round).lmdb"), app = dir.file("reuse-\(round)-app")
            let arguments = ["--db", db, "--server", server, "--app-dir", app, "--runtime-version", "1.0", "--json"]
            try Data("v1\n".utf8).write(to: URL(fileURLWithPath: current))
            #expect(eventlog(["deploy", "deliver"] + arguments).code == 0 && eventlog(["deploy", "confirm"] + arguments).code == 0)
            try Data("v2\n".utf8).write(to: URL(fileURLWithPath: current))
            // The first round runs to the end, to learn how long the download takes.
            let process = try spawnEventlog(["deploy", "download"] + arguments)
            try runAndKill(process)
            if process.terminationReason == .uncaughtSignal { killed += 1 }
            let next = eventlog(["deploy", "download"] + arguments)
            #expect(next.code == 0, "round \(round): \(next.err)")
            let status = try StateValue(json: eventlog(["deploy", "status"] + arguments).out)
            #expect(status["appDirectory.holding"] == "v2" && status["deploy.holdingUpdate"] == "v2", "round \(round): \(status)")
            for version in ["v1", "v2"] {
                for (key, data) in contents[version]! {
                    let held = FileManager.default.contents(atPath: app + "/updates/\(version)/" + key)
                    #expect(held == data, "round \(round): updates/\(version)/\(key)")
                }
            }
            #expect(eventlog(["replay", "--verify", "--db", db]).code == 0, "round \(round)")
        }
        #expect(killed > 0, "no download was killed before it ended")
    }

    /// SIGKILL at random moments of a rollback (a launch that finds v2 unconfirmed) and of a
    /// confirmation, with the built binary: after each kill the next command completes, the
    /// log and the app directory agree, and a rolled-back update is never installed again.
    @Test(arguments: ["deliver", "confirm"])
    func killedAtRandomMomentsTheLogAndTheDirectoryAgree(_ action: String) throws {
        // Names of this case's own: the cases may share one temporary directory.
        let server = dir.file("\(action)-server")
        let v1 = eventlog(["deploy", "publish", try bundle("\(action)-v1", "one"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v1"])
        let v2 = eventlog(["deploy", "publish", try bundle("\(action)-v2", "two"), "--server-dir", server, "--runtime-version", "1.0", "--id", "v2"])
        #expect(v1.code == 0 && v2.code == 0)
        let current = server + "/updates/1.0/current"
        try killAtRandomMoments(rounds: 0..<16) { round, runAndKill in
            let db = dir.file("\(action)-\(round).lmdb"), app = dir.file("\(action)-\(round)-app")
            func run(_ action: String) -> CommandOutcome {
                eventlog(["deploy", action, "--db", db, "--server", server, "--app-dir", app, "--runtime-version", "1.0", "--json"])
            }
            try Data("v1\n".utf8).write(to: URL(fileURLWithPath: current))
            #expect(run("deliver").code == 0 && run("confirm").code == 0)
            try Data("v2\n".utf8).write(to: URL(fileURLWithPath: current))
            #expect(run("deliver").code == 0)
            // The first round runs to the end, to learn how long the command takes.
            try runAndKill(try spawnEventlog(["deploy", action, "--db", db, "--server", server, "--app-dir", app, "--runtime-version", "1.0"]))
            // The next command completes, and leaves the log and the directory agreeing.
            let status = run("status")
            #expect(status.code == 0, "round \(round): \(status.err)")
            let json = try StateValue(json: status.out)
            #expect(json["deploy.workingUpdate"] ?? .null == json["appDirectory.working"], "round \(round): \(status.out)")
            #expect(json["deploy.pendingUpdate"] ?? .null == json["appDirectory.pending"], "round \(round): \(status.out)")
            switch action {
            case "deliver":
                let next = run("deliver")
                #expect(next.code == 0, "round \(round): \(next.err)")
                #expect(try String(contentsOfFile: app + "/working/index.html", encoding: .utf8) == "one", "round \(round): v2 was installed again")
                #expect(try StateValue(json: next.out)["deploy.rejectedUpdates.v2"] != nil, "round \(round)")
            default:
                let next = run("confirm")
                #expect(next.code == 0 || next.err.hasPrefix("Error: no install is pending confirmation"), "round \(round): \(next.err)")
                let final = run("status")
                #expect(final.code == 0, "round \(round): \(final.err)")
                let after = try StateValue(json: final.out)
                #expect(after["deploy.phase"] == "confirmed" && after["appDirectory.pending"] == .null, "round \(round): \(after)")
                #expect(after["appDirectory.working"] == "v2")
            }
            #expect(eventlog(["replay", "--verify", "--db", db]).code == 0)
        }
    }
}

/// Subcommands are commands of their own: helped, parsed and failed alike, and former option
/// names still work for a release, with a note.
struct SubcommandTests {
    @Test("help SUB equals SUB --help", arguments: [["deploy", "check"], ["deploy", "publish"], ["objects", "save"], ["fleet", "bisect"]])
    func helpOfASubcommandIsItsOwn(path: [String]) {
        let viaHelp = eventlog(["help"] + path)
        let viaFlag = eventlog(path + ["--help"])
        #expect(viaHelp.code == 0 && viaFlag.code == 0)
        #expect(viaHelp.out == viaFlag.out)
        #expect(viaHelp.out.contains("USAGE: eventlog \(path.joined(separator: " ")) "), "\(viaHelp.out)")
        #expect(!viaHelp.out.contains("SUBCOMMANDS:"))
    }

    @Test func aGroupListsItsSubcommandsAndNeedsOne() {
        let help = eventlog(["deploy", "--help"])
        #expect(help.out.contains("SUBCOMMANDS:\n  check "), "\(help.out)")
        #expect(help.out.contains("USAGE: eventlog deploy <subcommand>"))
        let bare = eventlog(["objects"])
        #expect(bare.code == 2)
        #expect(bare.err.hasPrefix("Error: objects needs a subcommand: save, get, list, delete, delete-all\n"), "\(bare.err)")
        // An option of one subcommand is not another's.
        let wrong = eventlog(["deploy", "publish", "site", "--server-dir", "x", "--runtime-version", "1", "--app-dir", "a"])
        #expect(wrong.code == 2 && wrong.err.hasPrefix("Error: unknown option '--app-dir' for 'deploy publish'\n"), "\(wrong.err)")
    }

    @Test func aFormerOptionNameWorksWithANote() throws {
        let dir = TemporaryDirectory("former-names")
        let bundle = dir.file("site")
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data("<p>one</p>".utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        let published = eventlog(["deploy", "publish", bundle, "--to", dir.file("server"), "--runtime-version", "1.0", "--id", "v1"])
        #expect(published.code == 0, "\(published.err)")
        #expect(published.err == "warning: --to is now --server-dir for 'deploy publish'; the old name goes in the next release\n")
        #expect(FileManager.default.fileExists(atPath: dir.file("server/updates/1.0/v1.json")))
        // Given under both names, it is given twice.
        let twice = eventlog(["deploy", "publish", bundle, "--to", dir.file("s2"), "--server-dir", dir.file("s3"), "--runtime-version", "1.0"])
        #expect(twice.code == 2 && twice.err.hasPrefix("Error: --server-dir is given twice\n"), "\(twice.err)")
    }
}
