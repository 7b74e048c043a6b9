@testable import Deploys
import EventLog
import Foundation
import HTTPFetch
import Testing

/// Channels and rollouts (issue 30, point 4): what a server directory serves to which install,
/// over HTTP from `tools/update-server.py` and from the directory itself, alike.
struct DeployRolloutTests {
    private let bundle = ["index.html": "<h1>rollout</h1>"]

    /// The update each install is served by `source`, in order.
    private func served(to installs: [String], from source: DeploySource, channel: String? = nil) throws -> [String] {
        let target = try DeployTarget(runtimeVersion: "1.0", channel: channel)
        let fetch = HTTPFetch(idleTimeout: 10, totalTimeout: 60)
        return try installs.map { install in
            let (answer, _) = try source.latest(for: target, current: nil, installID: install, fetch: fetch)
            guard case .update(let manifest, _) = answer else { Issue.record("\(answer)"); return "" }
            return manifest.id
        }
    }

    /// 1,000 installs: at 10% between 7% and 13% take the update, the same ones on every
    /// request and from either source (the server's hash and the client library's agree);
    /// raised to 50% they keep it; reverted to 0 none is offered it, and at 100 every install
    /// is, and it is the channel's current.
    @Test func aRolloutOffersTheUpdateToAStableShareOfInstalls() throws {
        let harness = try DeployHarness()
        try harness.publish(bundle, id: "u1")
        try harness.publish(bundle.merging(["app.js": "2"]) { $1 }, id: "u2", rolloutPercent: 10)
        let installs = (0..<1_000).map { _ in UUID().uuidString.lowercased() }
        let server = DeploySource.server(harness.manifestURL), directory = DeploySource.directory(harness.serverDirectory)
        func taking(_ source: DeploySource, of installs: [String] = installs) throws -> Set<String> {
            let answers = try served(to: installs, from: source)
            #expect(Set(answers).isSubset(of: ["u1", "u2"]))
            return Set(zip(installs, answers).filter { $0.1 == "u2" }.map(\.0))
        }

        let tenth = try taking(server)
        #expect((70...130).contains(tenth.count), "\(tenth.count) of 1,000")
        #expect(try taking(server) == tenth)
        #expect(try taking(directory) == tenth)
        #expect(tenth == Set(installs.filter { Rollout(update: "u2", percent: 10).includes($0) }))

        let publisher = DeployPublisher(serverDirectory: harness.serverDirectory)
        #expect(try publisher.rollout("u2", runtimeVersion: "1.0", percent: 50) == Rollout(update: "u2", percent: 10))
        let half = try taking(server)
        #expect((400...600).contains(half.count), "\(half.count) of 1,000")
        #expect(half.isSuperset(of: tenth))
        #expect(try taking(directory) == half)

        // The first 200 are enough to see none, then all.
        let some = Array(installs.prefix(200))
        try publisher.rollout("u2", runtimeVersion: "1.0", percent: 0)
        #expect(try taking(server, of: some).isEmpty)
        try publisher.rollout("u2", runtimeVersion: "1.0", percent: 100)
        #expect(try taking(server, of: some) == Set(some))
        #expect(try String(contentsOfFile: harness.serverDirectory + "/updates/1.0/current", encoding: .utf8) == "u2\n")
        // Without an install id, no request is in a rollout.
        try harness.publish(bundle.merging(["app.js": "3"]) { $1 }, id: "u3", rolloutPercent: 99)
        let (answer, _) = try server.latest(for: try DeployTarget(runtimeVersion: "1.0"), current: nil, fetch: HTTPFetch())
        guard case .update(let manifest, _) = answer else { Issue.record("\(answer)"); return }
        #expect(manifest.id == "u2")
    }

    /// A channel serves its own current update; the default channel and the others are
    /// untouched by it. A client sends its channel and its install id, the same id on every
    /// request (kept in the app directory), and a channel the server lacks is a failed check.
    @Test func aChannelServesItsOwnUpdatesAndTheClientSaysWhichAndWho() throws {
        let harness = try DeployHarness()
        try harness.publish(bundle, id: "stable-1")
        try harness.publish(bundle.merging(["beta.js": "b"]) { $1 }, id: "beta-1", channel: "beta")
        #expect(try served(to: ["someone"], from: .server(harness.manifestURL)) == ["stable-1"])
        #expect(try served(to: ["someone"], from: .server(harness.manifestURL), channel: "beta") == ["beta-1"])
        #expect(try served(to: ["someone"], from: .directory(harness.serverDirectory), channel: "beta") == ["beta-1"])

        let before = try harness.manifestRequests().count
        do {
            // One client holds the app directory at a time: this one is let go at the end of the block.
            let client = try harness.client(channel: "beta")
            #expect(try client.check()?.id == "beta-1")
            #expect(try client.check()?.id == "beta-1")
        }
        let installID = try String(contentsOfFile: harness.appDirectory + "/install-id", encoding: .utf8).trimmingCharacters(in: .newlines)
        #expect(UUID(uuidString: installID) != nil)
        for request in try harness.manifestRequests().dropFirst(before) {
            #expect(request["expo-channel-name"] == "beta")
            #expect(request["eas-client-id"]?.stringValue == installID)
        }

        let seq = try harness.store.lastSeq()
        #expect(try harness.client(channel: "alpha").check() == nil)
        #expect(try harness.transitions(after: seq) == ["checkStarted", "checkFailed"])
        #expect(try harness.deploy("lastError")?.stringValue?.contains("HTTP 404") == true)
    }

    /// An install id the client did not write is refused, never replaced: a new id would move
    /// the install to other rollouts.
    @Test func anInstallIDTheClientDidNotWriteIsRefusedAndKept() throws {
        let harness = try DeployHarness()
        try harness.publish(bundle, id: "u1")
        try FileManager.default.createDirectory(atPath: harness.appDirectory, withIntermediateDirectories: false)
        try Data("not an id\n".utf8).write(to: URL(fileURLWithPath: harness.appDirectory + "/install-id"))
        #expect(throws: DeployError.self) { try harness.client().check() }
        #expect(try String(contentsOfFile: harness.appDirectory + "/install-id", encoding: .utf8) == "not an id\n")
    }

    /// Every refusal of a rollout says why and changes nothing in the server directory.
    @Test func aRolloutThatCannotBeIsRefusedAndChangesNothing() throws {
        let harness = try DeployHarness(serve: false)
        let publisher = DeployPublisher(serverDirectory: harness.serverDirectory)
        func refusal(_ body: () throws -> Void) -> String? {
            do { try body(); return nil } catch {
                guard case .usage(let reason) = error as? DeployError else { return "\(error)" }
                return reason
            }
        }
        // Nothing to roll out from yet.
        #expect(refusal { _ = try harness.publish(bundle, id: "early", rolloutPercent: 5) }?.contains("no current update to roll out from") == true)
        #expect(!FileManager.default.fileExists(atPath: harness.serverDirectory + "/updates/1.0/early.json"))
        try harness.publish(bundle, id: "u1")
        try harness.publish(bundle.merging(["app.js": "3"]) { $1 }, id: "u3")
        try harness.publish(bundle.merging(["app.js": "2"]) { $1 }, id: "u2", rolloutPercent: 20)
        // Nor a publish while it rolls out (its installs would stay on the older update).
        #expect(refusal { _ = try harness.publish(bundle.merging(["app.js": "4"]) { $1 }, id: "u4") }?.contains("u2 is rolling out to 20%") == true)
        #expect(!FileManager.default.fileExists(atPath: harness.serverDirectory + "/updates/1.0/u4.json"))
        let files = ["current", "rollout"].map { harness.serverDirectory + "/updates/1.0/" + $0 }
        let before = try files.map { try String(contentsOfFile: $0, encoding: .utf8) }
        #expect(before == ["u3\n", "{\"update\":\"u2\",\"percent\":20}\n"])

        let reasons = [
            refusal { try publisher.rollout("u2", runtimeVersion: "1.0", percent: 101) },
            refusal { try publisher.rollout("nope", runtimeVersion: "1.0", percent: 10) },
            refusal { try publisher.rollout("u2", runtimeVersion: "2.0", percent: 10) },
            refusal { try publisher.rollout("u3", runtimeVersion: "1.0", percent: 10) },
            refusal { try publisher.rollout("u1", runtimeVersion: "1.0", percent: 10) },
            refusal { try publisher.rollout("u2", runtimeVersion: "1.0", channel: "../x", percent: 10) },
            refusal { try publisher.rollout("u2", runtimeVersion: "1.0", channel: "beta", percent: 10) },
        ]
        #expect(reasons[0]?.contains("0 to 100, not 101") == true)
        #expect(reasons[1]?.contains("no update nope is published for runtime version 1.0") == true)
        #expect(reasons[2]?.contains("no update u2 is published for runtime version 2.0") == true)
        #expect(reasons[3] == "update u3 is already the current update of channel default")
        #expect(reasons[4] == "update u2 is rolling out to 20% of channel default: finish it (--percent 100) or revert it (--percent 0) first")
        #expect(reasons[5]?.contains("a channel name must be") == true)
        #expect(reasons[6] == "channel beta has no current update to roll out from: publish one without --rollout first")
        #expect(try files.map { try String(contentsOfFile: $0, encoding: .utf8) } == before)
        #expect(!FileManager.default.fileExists(atPath: harness.serverDirectory + "/updates/1.0/channels"))

        // Once the rollout is reverted, another may start.
        try publisher.rollout("u2", runtimeVersion: "1.0", percent: 0)
        #expect(try publisher.rollout("u1", runtimeVersion: "1.0", percent: 10) == Rollout(update: "u2", percent: 0))
    }
}
