import Deploys
import EventLog
import Foundation

/// The demo app's web bundle deploys: a few updates published into a server directory and
/// delivered into an app directory, through the real client and real files. One update
/// carries a corrupted asset (refused), one is launched and never confirmed (rolled back).
public struct DemoDeploys: Sendable {
    /// Holds `server/` and `app/`; the caller creates it empty and removes it afterwards.
    public var directory: String

    /// Deploys into `directory`; nothing is written until the session runs a moment.
    public init(directory: String) { self.directory = directory }

    /// One moment of the deploy history, run at a launch of the app.
    enum Moment: CaseIterable {
        /// Publish the next update; the launch installs it; the app confirms it.
        case goodUpdate
        /// Publish an update whose script is corrupted on the server; the launch refuses it.
        case corruptedUpdate
        /// Publish an update the app launches and never confirms (it crashes at start).
        case crashingUpdate
        /// The next launch rolls the crashing update back and does not take it again.
        case launchAfterCrash
    }

    static let moments: [Moment] = [.goodUpdate, .corruptedUpdate, .crashingUpdate, .launchAfterCrash, .goodUpdate]

    /// Runs moment `index` (beyond the history, nothing) and returns how many events it appended.
    func run(_ index: Int, store: EventStore, clock: ManualClock) throws -> Int {
        guard index < Self.moments.count else { return 0 }
        let before = try store.lastSeq()
        let client = DeployClient(store: store, directory: try AppDirectory(path: directory + "/app"),
                                  source: .directory(directory + "/server"), target: try DeployTarget(runtimeVersion: "3.4"))
        let version = "web-\(index + 1)"
        switch Self.moments[index] {
        case .goodUpdate:
            try publish(version, clock: clock)
            try client.deliver()
            try client.confirmLaunch()
        case .corruptedUpdate:
            let manifest = try publish(version, clock: clock)
            let script = manifest.assets.first { $0.key == "js/app.js" }!
            try Data("alert('tampered')".utf8).write(to: URL(fileURLWithPath: directory + "/server" + script.url))
            try client.deliver()
        case .crashingUpdate:
            try publish(version, clock: clock)
            try client.deliver()
        case .launchAfterCrash:
            try client.deliver()
        }
        return Int(try store.lastSeq() - before)
    }

    @discardableResult
    private func publish(_ version: String, clock: ManualClock) throws -> UpdateManifest {
        let bundle = directory + "/bundles/" + version
        try FileManager.default.createDirectory(atPath: bundle + "/js", withIntermediateDirectories: true)
        try Data("<!doctype html><title>botmessages \(version)</title><script src=js/app.js></script>".utf8)
            .write(to: URL(fileURLWithPath: bundle + "/index.html"))
        try Data("render('\(version)')".utf8).write(to: URL(fileURLWithPath: bundle + "/js/app.js"))
        return try DeployPublisher(serverDirectory: directory + "/server").publish(bundle: bundle, runtimeVersion: "3.4", id: version, createdAt: clock.now)
    }
}
