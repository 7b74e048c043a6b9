@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// A log, an app directory, a server directory and (when asked) the update server on loopback.
final class DeployHarness {
    /// The log, with the assertions of `EventLogTesting` (non-exhaustive: most tests here look
    /// at a few transitions and at the files).
    let trace: TraceTester
    let root = TemporaryDirectory("deploys")
    private(set) var server: LoopbackServer?
    var store: EventStore { trace.store }
    var serverDirectory: String { root.file("server") }
    var appDirectory: String { root.file("app") }
    var manifestURL: URL { server!.url.appendingPathComponent("manifest") }

    init(serve: Bool = true, name: String = #function) throws {
        trace = try TraceTester(exhaustive: false, stepMicroseconds: 1_000, name: name)
        try FileManager.default.createDirectory(atPath: root.file("server"), withIntermediateDirectories: true)
        if serve { try startServer() }
    }

    func startServer(rate: Int? = nil) throws {
        server = try LoopbackServer(script: LoopbackServer.toolsDirectory.appendingPathComponent("update-server.py"),
                                    arguments: ["--dir", serverDirectory, "--exit-with-parent", "--request-log", root.file("requests.jsonl"),
                                                "--asset-log", root.file("assets.jsonl")]
                                        + (rate.map { ["--rate", String($0)] } ?? []))
    }

    /// Writes a bundle of `files` (path: content) and publishes it, telling `leftovers` what a
    /// killed publish left.
    @discardableResult
    func publish(_ files: [String: String], id: String, runtime: String = "1.0", createdAt: Timestamp = .now(),
                 channel: String? = nil, rolloutPercent: Int? = nil,
                 leftovers: @escaping @Sendable ([String]) -> Void = { _ in }) throws -> UpdateManifest {
        let bundle = root.file("bundle-\(id)")
        for (path, content) in files {
            let file = bundle + "/" + path
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(content.utf8).write(to: URL(fileURLWithPath: file))
        }
        var publisher = DeployPublisher(serverDirectory: serverDirectory)
        publisher.leftovers = leftovers
        return try publisher.publish(bundle: bundle, runtimeVersion: runtime, id: id, createdAt: createdAt,
                                     channel: channel, rolloutPercent: rolloutPercent)
    }

    func client(runtime: String = "1.0", channel: String? = nil, embeddedUpdateID: String? = nil, overHTTP: Bool = true) throws -> DeployClient {
        let client = DeployClient(store: store, directory: try AppDirectory(path: appDirectory),
                                  source: overHTTP ? .server(manifestURL) : .directory(serverDirectory),
                                  target: try DeployTarget(runtimeVersion: runtime, channel: channel, embeddedUpdateID: embeddedUpdateID))
        client.timeout = 10
        return client
    }

    /// A launch of the app on `runtime` that the app confirms, by a client let go at once (one
    /// client holds the app directory at a time).
    func launchAndConfirm(runtime: String = "1.0") throws {
        let client = try client(runtime: runtime)
        try client.deliver()
        try client.confirmLaunch()
    }

    /// Update u1 (`index.html` "one") delivered by `client` and confirmed, then u2 ("two")
    /// delivered, and confirmed only with `confirmingTheSecond`: where the rollback tests start.
    func deliverTwoUpdates(by client: DeployClient, confirmingTheSecond: Bool) throws {
        try publish(["index.html": "one"], id: "u1")
        try client.deliver()
        try client.confirmLaunch()
        try publish(["index.html": "two"], id: "u2")
        try client.deliver()
        if confirmingTheSecond { try client.confirmLaunch() }
    }

    /// The types of the events after `seq`.
    func transitions(after seq: UInt64) throws -> [String] {
        var types: [String] = []
        try store.forEachRecord(from: seq + 1) { types.append($0.event.type); return true }
        return types
    }

    func deploy(_ key: String) throws -> StateValue? { try store.currentState[DeployRules.path(key)] }

    /// The headers of every manifest request the server got, in order, names lowercased.
    func manifestRequests() throws -> [StateValue] {
        let text = (try? String(contentsOfFile: root.file("requests.jsonl"), encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { try StateValue(json: String($0)) }
    }

    /// The key (`HASH.EXT`, as after `/assets/`) of every asset request the server got, in order.
    func assetRequests() throws -> [String] {
        let text = (try? String(contentsOfFile: root.file("assets.jsonl"), encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { try #require(try StateValue(json: String($0)).stringValue) }
    }

    /// Writes one of the server directory's one-line files (`current`, `manifest-filters`, …),
    /// or removes it when `line` is `nil`.
    func serve(_ line: String?, as name: String) throws {
        let path = serverDirectory + "/" + name
        guard let line else { try? FileManager.default.removeItem(atPath: path); return }
        try Data((line + "\n").utf8).write(to: URL(fileURLWithPath: path))
    }

    /// What the web view would load now.
    func workingFile(_ path: String = "index.html") -> String? {
        try? String(contentsOfFile: appDirectory + "/working/" + path, encoding: .utf8)
    }

    /// Every entry of the app directory, for "nothing changed" checks.
    func appDirectoryListing() -> [String] {
        (FileManager.default.subpaths(atPath: appDirectory) ?? []).sorted()
    }

    func expectReplayAgrees() throws -> ReplayReport {
        try store.replay(through: RulesProjection(DeployRules.self), verify: true)
    }
}
