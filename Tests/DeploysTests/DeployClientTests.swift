@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import HTTPFetch
import Testing

struct DeployClientTests {
    @Test func launchByDefaultChecksDownloadsInstallsAndReloads() throws {
        let harness = try DeployHarness()
        try harness.publish(["index.html": "<h1>one</h1>", "js/app.js": "go()"], id: "update-1")
        try harness.client().deliver()
        harness.trace.expect([
            .applied("deploy/checkStarted", ["deploy.phase": "checking", "deploy.lastCheck": "2025-11-30T02:05:40.123456Z"]),
            .applied("deploy/newDeployAvailable", ["deploy.phase": "updateAvailable", "deploy.availableUpdate": "update-1"]),
            .applied("deploy/downloadProgress", ["deploy.phase": "downloading", "deploy.progress": 50]),
            .applied("deploy/downloaded", ["deploy.phase": "downloaded", "deploy.holdingUpdate": "update-1", "deploy.progress": 100,
                                                 "deploy.madeUpdates.update-1": true]),
            .applied("deploy/willUpdateWorkingDirectory", ["deploy.phase": "installing"]),
            .applied("deploy/didUpdateWorkingDirectory", ["deploy.phase": "installed", "deploy.workingUpdate": "update-1", "deploy.holdingUpdate": nil,
                                                          "deploy.pendingUpdate": "update-1", "deploy.availableUpdate": nil]),
            .applied("deploy/didReloadWebView", ["deploy.phase": "launched"]),
        ], exhaustive: true)
        #expect(harness.workingFile() == "<h1>one</h1>")
        #expect(harness.workingFile("js/app.js") == "go()")
        #expect(try harness.deploy("workingUpdate") == "update-1")
        #expect(try harness.deploy("pendingUpdate") == "update-1")
        #expect(try harness.deploy("phase") == "launched")
        let did = try #require(try harness.store.record(6))
        #expect(did.event.payload["indexURL"] == "updates/update-1/index.html")
        let report = try harness.expectReplayAgrees()
        #expect(report.divergence == nil)
        #expect(report.streams["deploy"]?.recomputed == 7)
    }

    @Test func manualCallsStepThroughTheLifecycle() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        #expect(try client.check()?.id == "u1")
        #expect(harness.workingFile() == nil)
        #expect(try client.download() == "u1")
        #expect(try client.directory.target(of: AppDirectory.holding) == "u1")
        #expect(harness.workingFile() == nil, "a download must not touch working")
        #expect(try client.install() == "u1")
        #expect(harness.workingFile() == "one")
        #expect(try client.directory.target(of: AppDirectory.holding) == nil)
        try client.confirmLaunch()
        #expect(try client.directory.pending() == nil)
        #expect(try harness.deploy("phase") == "confirmed")
        #expect(throws: DeployError.self) { try client.confirmLaunch() }
        // Nothing new: the server answers noUpdateAvailable for the update the app runs.
        let before = try harness.store.lastSeq()
        #expect(try client.check() == nil)
        #expect(try harness.transitions(after: before) == ["checkStarted", "noNewDeploy"])
        #expect(try harness.store.record(before + 2)?.event.payload["reason"] == "noUpdateAvailable")
        #expect(try client.install() == nil)
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    @Test func downloadNewDeployInstallsAtTheNextLaunch() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        client.launchBehavior = .downloadNewDeploy
        try harness.publish(["index.html": "one"], id: "u1")
        try client.deliver()
        #expect(harness.workingFile() == nil)
        #expect(try client.directory.target(of: AppDirectory.holding) == "u1")
        try client.deliver()
        #expect(harness.workingFile() == "one")
        #expect(try harness.deploy("phase") != "rolledBack")
    }

    @Test func theForegroundChecksOnceADay() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try client.enterForeground()
        #expect(try harness.transitions(after: 0) == ["checkStarted", "newDeployAvailable"])
        try client.enterForeground()
        #expect(try harness.store.lastSeq() == 2, "a second foreground within a day checked again")
        harness.trace.clock.advance(microseconds: 86_400_000_000)
        try client.enterForeground()
        #expect(try harness.transitions(after: 2) == ["checkStarted", "newDeployAvailable"])
        #expect(harness.workingFile() == nil, "checkNewDeploy must not install")
    }

    /// A last check recorded in the future (the clock was moved back, or set to 2099 once)
    /// counts as stale: the foreground checks again, and records it.
    @Test func aLastCheckInTheFutureIsStale() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try client.enterForeground()
        #expect(try harness.deploy("lastCheck") == "2025-11-30T02:05:40.123456Z")
        var future = Event(stream: DeployRules.stream, type: "checkStarted", origin: .deploy, payload: ["source": "elsewhere", "runtimeVersion": "1.0"])
        let time = try #require(Timestamp(rfc3339: "2099-01-01T00:00:00Z"))
        future.writes = try DeployRules.writes(for: future, in: try harness.store.currentState, at: time).get()
        try harness.store.transact { batch in try batch.append(future, time: time) }
        let before = try harness.store.lastSeq()
        try client.enterForeground()
        #expect(try harness.transitions(after: before) == ["checkStarted", "newDeployAvailable"])
        #expect(try harness.deploy("lastCheck") != "2099-01-01T00:00:00.000000Z")
        // And the check it recorded is now, so the next foreground within a day waits.
        try client.enterForeground()
        #expect(try harness.store.lastSeq() == before + 2)
    }

    @Test func anUpdateForAnotherRuntimeIsNeverOffered() throws {
        let harness = try DeployHarness()
        try harness.publish(["index.html": "for two"], id: "u2", runtime: "2.0")
        let client = try harness.client(runtime: "1.0")
        try client.deliver()
        #expect(try harness.transitions(after: 0) == ["checkStarted", "checkFailed"])
        #expect(try harness.deploy("lastError")?.stringValue?.contains("HTTP 404") == true)
        // A server that sends another runtime's manifest anyway is refused by the client.
        try FileManager.default.createDirectory(atPath: harness.serverDirectory + "/updates/1.0", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: harness.serverDirectory + "/updates/2.0/u2.json", toPath: harness.serverDirectory + "/updates/1.0/u2.json")
        try Data("u2\n".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/current"))
        #expect(try client.check() == nil)
        #expect(try harness.deploy("lastError") == "update u2 is for runtime version 2.0, this app runs 1.0")
        #expect(harness.workingFile() == nil)
    }

    /// A native release of another runtime version launches its embedded bundle: the update
    /// working for the old one is let go, recorded with both versions, and reaped; an update
    /// for the new version is then taken as usual.
    @Test func aNewRuntimeVersionStartsFromTheEmbeddedBundle() throws {
        let harness = try DeployHarness()
        try harness.publish(["index.html": "for one"], id: "u1", runtime: "1.0")
        try harness.launchAndConfirm(runtime: "1.0")
        #expect(harness.workingFile() == "for one")
        let before = try harness.store.lastSeq()
        try harness.client(runtime: "2.0").deliver()
        #expect(try harness.transitions(after: before) == ["rolledBack", "checkStarted", "checkFailed", "updatesReaped", "reapFinished"])
        #expect(try harness.store.record(before + 4)?.event.payload["updates"] == ["u1": "otherRuntimeVersion"])
        let reset = try #require(try harness.store.record(before + 1))
        #expect(reset.event.payload["fromRuntimeVersion"] == "1.0" && reset.event.payload["toRuntimeVersion"] == "2.0")
        #expect(reset.event.payload["reason"] == "the app's runtime version changed from 1.0 to 2.0, so the embedded bundle is used")
        #expect(try harness.workingFile() == nil && harness.deploy("workingUpdate") == nil)
        #expect(!FileManager.default.fileExists(atPath: harness.appDirectory + "/updates/u1"))
        #expect(!FileManager.default.fileExists(atPath: harness.appDirectory + "/updates/u1.json"))
        try harness.publish(["index.html": "for two"], id: "u2", runtime: "2.0")
        try harness.client(runtime: "2.0").deliver()
        #expect(harness.workingFile() == "for two")
        // Launched again on the same version, nothing is reset.
        let settled = try harness.store.lastSeq()
        try {
            let same = try harness.client(runtime: "2.0")
            try same.confirmLaunch()
            try same.deliver()
        }()
        #expect(try !harness.transitions(after: settled).contains("rolledBack"))
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// Expo Updates v1: the client "MUST load the most recent update": an update created
    /// before the working one is not taken, and says so.
    @Test func anUpdateOlderThanTheWorkingOneIsNotTaken() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "new"], id: "u2", createdAt: Timestamp(microsecondsSince1970: 1_800_000_000_000_000))
        try client.deliver()
        try client.confirmLaunch()
        let before = try harness.store.lastSeq()
        try harness.publish(["index.html": "old"], id: "u1", createdAt: Timestamp(microsecondsSince1970: 1_700_000_000_000_000))
        #expect(try client.check() == nil)
        #expect(try harness.transitions(after: before) == ["checkStarted", "noNewDeploy"])
        let refused = try #require(try harness.store.record(before + 2))
        #expect(refused.event.payload["reason"] == "olderThanWorking" && refused.event.payload["updateId"] == "u1")
        try client.deliver()
        #expect(try harness.deploy("workingUpdate") == "u2" && harness.workingFile() == "new")
        // A newer one is taken.
        try harness.publish(["index.html": "newest"], id: "u3", createdAt: Timestamp(microsecondsSince1970: 1_900_000_000_000_000))
        try client.deliver()
        #expect(try harness.deploy("workingUpdate") == "u3")
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// The reference client checks an asset by its hash; this one also wants its content type
    /// to mean the manifest's, whatever its spelling.
    @Test(arguments: [("image/jpeg", "image/jpg", true), ("text/javascript; charset=utf-8", "application/javascript", true),
                      ("application/x-javascript", "text/javascript", true), ("IMAGE/JPG", "image/pjpeg", true),
                      ("text/plain", "application/javascript", false), ("image/png", "image/jpeg", false), (nil, "image/png", false)])
    func contentTypesCompareByMeaning(_ served: String?, _ declared: String, _ accepted: Bool) throws {
        let asset = UpdateManifest.Asset(key: "a", hash: "h", contentType: declared, url: "/a")
        if accepted {
            try DeploySource.checkContentType(served, of: asset)
        } else {
            #expect(throws: DeployError.self) { try DeploySource.checkContentType(served, of: asset) }
        }
    }

    @Test func rollBackToEmbeddedLeavesTheShippedBundle() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try client.deliver()
        try client.confirmLaunch()
        try Data("rollBackToEmbedded\n".utf8).write(to: URL(fileURLWithPath: harness.serverDirectory + "/updates/1.0/current"))
        #expect(try client.check() == nil)
        #expect(try harness.deploy("phase") == "rolledBack")
        #expect(try harness.deploy("workingUpdate") == nil)
        #expect(try harness.deploy("lastError") == "the server sent rollBackToEmbedded")
        #expect(harness.workingFile() == nil)
    }

    @Test func aLaunchNeverConfirmedRollsBackAndSaysWhy() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.deliverTwoUpdates(by: client, confirmingTheSecond: false)
        #expect(harness.workingFile() == "two")
        // The app crashed before confirming: the next launch rolls back, and never reinstalls u2.
        let before = try harness.store.lastSeq()
        try client.deliver()
        #expect(harness.workingFile() == "one")
        let types = try harness.transitions(after: before)
        #expect(types == ["rolledBack", "checkStarted", "noNewDeploy", "updatesReaped", "reapFinished"])
        // The rejected update's directory was the client's: it goes, its rejection stays.
        #expect(try harness.store.record(before + 4)?.event.payload["updates"] == ["u2": "rejected"])
        #expect(!FileManager.default.fileExists(atPath: harness.appDirectory + "/updates/u2"))
        #expect(try harness.deploy("rejectedUpdates")?["u2"] != nil)
        let rolledBack = try #require(try harness.store.record(before + 1))
        #expect(rolledBack.event.payload["reason"] == "update u2 was launched but the app never confirmed a good launch (confirmLaunch)")
        #expect(rolledBack.event.payload["to"] == "u1")
        #expect(try harness.store.record(before + 3)?.event.payload["reason"] == "rolledBackBefore")
        let found = try harness.store.firstEvent(where: try StatePredicate(parsing: #"deploy.phase == "rolledBack""#))
        #expect(found.firstBad == before + 1)
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    @Test func progressIsBoundedAndIncreasing() throws {
        let harness = try DeployHarness()
        var files = ["index.html": "start"]
        for index in 0..<200 { files["assets/file-\(index).txt"] = String(repeating: "x", count: 1_000 + index) }
        try harness.publish(files, id: "many")
        try harness.client().download()
        var percents: [Int64] = []
        try harness.store.forEachRecord { record in
            if record.event.type == "downloadProgress" { percents.append(record.event.payload["percent"]!.intValue!) }
            return true
        }
        #expect(percents.count <= 19)
        #expect(percents.count >= 10)
        #expect(percents == percents.sorted() && Set(percents).count == percents.count)
        #expect(percents.allSatisfy { $0 % DeployClient.progressStep == 0 && $0 > 0 && $0 < 100 })
        #expect(try harness.deploy("phase") == "downloaded")
    }

    @Test func aLocalDirectoryServesTheSameUpdates() throws {
        let harness = try DeployHarness(serve: false)
        try harness.publish(["index.html": "offline"], id: "u1")
        try harness.client(overHTTP: false).deliver()
        #expect(harness.workingFile() == "offline")
    }

    /// The same bytes under two types (empty files are the common case) are two assets, each
    /// served as its own type, over HTTP and from a directory alike; publishing those bytes
    /// again under a third type changes neither.
    @Test func theSameBytesUnderTwoTypesAreTwoAssets() throws {
        for overHTTP in [true, false] {
            let harness = try DeployHarness(serve: overHTTP)
            let manifest = try harness.publish(["index.html": "<p>one</p>", "a.css": "", "b.js": "", "c.bin": ""], id: "u1")
            let names = manifest.assets.map { String($0.url.dropFirst("/assets/".count)) }
            #expect(Set(manifest.assets.map(\.hash)).count == 1)
            #expect(Set(names).count == 3 && names.allSatisfy(DeploySource.isAssetName), "\(names)")
            let client = try harness.client(overHTTP: overHTTP)
            try client.deliver()
            try client.confirmLaunch()
            #expect(harness.workingFile() == "<p>one</p>")
            try harness.publish(["index.html": "<p>two</p>", "a.css": "", "d.txt": ""], id: "u2")
            try client.deliver()
            #expect(harness.workingFile() == "<p>two</p>")
            for file in ["u1/a.css", "u1/b.js", "u1/c.bin", "u2/a.css", "u2/d.txt"] {
                #expect(try Data(contentsOf: URL(fileURLWithPath: harness.appDirectory + "/updates/" + file)).isEmpty, "\(file)")
            }
        }
    }

    /// What the client's own code throws while an asset streams in (the log refusing a
    /// progress event) comes out as it is, not as a failed download, from either source.
    @Test func theClientsOwnFailureWhileStreamingIsNotATransportError() throws {
        struct LogRefused: Error {}
        let harness = try DeployHarness()
        let manifest = try harness.publish(["index.html": "<p>one</p>"], id: "u1")
        for source in [DeploySource.server(harness.manifestURL), .directory(harness.serverDirectory)] {
            #expect(throws: LogRefused.self) {
                try source.download(manifest.launchAsset, headers: [:], target: try DeployTarget(runtimeVersion: "1.0"),
                                    fetch: HTTPFetch(), expectedLength: { _ in }, body: { _ in throw LogRefused() })
            }
        }
    }
}
