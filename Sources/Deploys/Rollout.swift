import EventLog
import Foundation

/// What a channel of a server directory serves: its `current` update, and the update of its
/// rollout to a share of the installs. `DeployPublisher` writes these files,
/// `tools/update-server.py` and `DeploySource.directory` read them alike:
///
///     updates/RUNTIME/current                 the default channel (a request without expo-channel-name)
///     updates/RUNTIME/rollout                 its rollout, if any: {"update": ID, "percent": N}
///     updates/RUNTIME/channels/NAME/current   channel NAME
///     updates/RUNTIME/channels/NAME/rollout   its rollout
///
/// Manifests stay at `updates/RUNTIME/ID.json` whatever the channel. An install takes the
/// rollout's update instead of `current` when its `bucket` is below the percent: the bucket is
/// a stable hash of the install's id (`eas-client-id`) and the update's, so the same installs
/// take it on every request, raising the percent keeps them, and each update picks its own
/// share. An install that sends no id is never in a rollout.
public struct Channel: Sendable, Hashable {
    /// The channel's name; `nil` for the default channel.
    public let name: String?
    /// Where the channel's `current` and `rollout` files live.
    let path: String

    /// The word `deploy rollout` prints for the default channel.
    public var displayName: String { name ?? "default" }

    /// Channel `name` (`nil`: the default) of runtime version `runtimeVersion` in server
    /// directory `serverDirectory`.
    /// - Throws: `DeployError.usage` for a name `Channel.isValidName` refuses.
    public init(_ name: String?, runtimeVersion: String, serverDirectory: String) throws(DeployError) {
        if let name, let problem = Self.problem(with: name) { throw .usage(problem) }
        self.name = name
        let runtime = serverDirectory + "/updates/" + runtimeVersion
        path = name.map { runtime + "/channels/" + $0 } ?? runtime
    }

    /// Why `name` cannot name a channel (it must be 1 to 64 letters, digits, `-`, `_` or `.`,
    /// not first `.`: it travels as a header and names a directory), or `nil` when it can.
    public static func problem(with name: String) -> String? {
        let valid = (1...64).contains(name.utf8.count) && !name.hasPrefix(".")
            && name.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || [0x2D, 0x2E, 0x5F].contains(byte)
            }
        return valid ? nil : "a channel name must be 1 to 64 letters, digits, '-', '_' or '.', not first '.': \(name.debugDescription)"
    }

    var currentPath: String { path + "/current" }
    var rolloutPath: String { path + "/rollout" }

    /// The id `current` names (or the word `rollBackToEmbedded`), or `nil` when there is none.
    func current() throws(DeployError) -> String? {
        try Files.readSmall(currentPath, limit: 4_096).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    /// The channel's rollout, or `nil` when it has none.
    /// - Throws: `DeployError.badManifest` for a rollout file that does not read as one.
    func rollout() throws(DeployError) -> Rollout? {
        guard let data = try Files.readSmall(rolloutPath, limit: 4_096) else { return nil }
        return try Rollout(json: [UInt8](data), file: rolloutPath)
    }

    /// What the channel serves to install `installID`: the rollout's update when the install
    /// falls in its share, else `current`; `nil` when the channel has no `current`.
    func served(to installID: String?) throws(DeployError) -> String? {
        if let rollout = try rollout(), rollout.includes(installID) { return rollout.update }
        return try current()
    }
}

/// A rollout of an update to `percent` of a channel's installs.
public struct Rollout: Sendable, Hashable {
    /// The update rolled out.
    public var update: String
    /// The share of installs offered it, 0 (reverted: none) to 100 (all, and it is the
    /// channel's `current`).
    public var percent: Int

    /// A rollout of `update` to `percent` of the installs.
    public init(update: String, percent: Int) {
        self.update = update
        self.percent = percent
    }

    /// Reads a rollout file.
    /// - Throws: `DeployError.badManifest` for anything but `{"update": ID, "percent": 0...100}`.
    init(json bytes: [UInt8], file: String) throws(DeployError) {
        let value: StateValue
        do { value = try StateValue(jsonUTF8: bytes) } catch { throw .badManifest("\(file) is not JSON: \(error)") }
        guard let update = value["update"]?.stringValue, AppDirectory.isSafeUpdateID(update),
              let percent = value["percent"]?.intValue, (0...100).contains(percent) else {
            throw .badManifest("\(file) is not {\"update\": ID, \"percent\": 0 to 100}")
        }
        self.init(update: update, percent: Int(percent))
    }

    var json: Data { Data((StateValue.object(["update": .string(update), "percent": .int(Int64(percent))]).json() + "\n").utf8) }

    /// Whether install `installID` is offered the update (never, without an id).
    public func includes(_ installID: String?) -> Bool {
        guard let installID else { return false }
        return Self.bucket(installID: installID, update: update) < percent
    }

    /// The install's place, 0 to 99, in the rollouts of `update`: the first 8 bytes of the
    /// SHA-256 of `INSTALL_ID:UPDATE_ID`, big-endian, modulo 100 (the update server computes
    /// the same).
    public static func bucket(installID: String, update: String) -> Int {
        var hash = SHA256()
        hash.update(Data("\(installID):\(update)".utf8))
        let digest = hash.finalize()
        return Int(digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 100)
    }
}
