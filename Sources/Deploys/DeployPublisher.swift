import EventLog
import Foundation

/// Writes a web bundle as an update into a server directory, the layout `tools/update-server.py`
/// serves and `DeploySource.directory` reads:
///
///     SERVER_DIR/assets/NAME           each file's bytes; NAME is their base64url SHA-256
///                                      and the extension of their content type
///     SERVER_DIR/assets/NAME.type      its content type
///     SERVER_DIR/updates/RUNTIME/ID.json   the manifest (asset URLs are /assets/NAME)
///     SERVER_DIR/updates/RUNTIME/current   the id served to that runtime version
///     SERVER_DIR/updates/RUNTIME/rollout   an update offered to a share of the installs
///     SERVER_DIR/updates/RUNTIME/channels/NAME/{current,rollout}   the same, of channel NAME
///
/// (`Channel` says how a request picks among them.) Assets are content-addressed, so
/// publishing again only adds what changed; `current` (or `rollout`) is replaced last and
/// atomically, so a client never sees a manifest whose assets are missing.
public struct DeployPublisher: Sendable {
    /// The root of the layout above; created on the first publish.
    public var serverDirectory: String
    /// Asked between files, between each MiB copied and while waiting for another publish:
    /// when it says so, the publish stops, takes back what it added and throws `.cancelled`
    /// (a command line's Ctrl-C).
    public var isCancelled: @Sendable () -> Bool = { false }
    /// Told, once a publish holds the lock and before it writes an asset, of the files a killed
    /// publish left in the directories this one writes (`assets/.incoming-UUID`, `*.next-UUID`:
    /// the names only the publisher gives its temporaries), as sorted paths; not told when
    /// there are none. They stay where they are, for a person to remove: a publish removes
    /// only what it created. By default, nothing is said.
    public var leftovers: @Sendable ([String]) -> Void = { _ in }
    /// The PEM RSA private key the server is to sign manifests and directives with, and its
    /// key id (Expo's default `main`); `nil`, the default, leaves the server's signing as it was.
    /// A publish records them in `SERVER_DIR/code-signing.json` (the key's absolute path: the
    /// key itself is never copied) before the update becomes current.
    public var signing: (key: String, keyID: String)?

    /// The file naming the server directory's signing key: `{"keyId": ID, "privateKey": PATH}`.
    public static let signingFile = "code-signing.json"

    /// A publisher into `serverDirectory`; nothing is touched until `publish`.
    public init(serverDirectory: String) {
        self.serverDirectory = serverDirectory
    }

    /// Publishes every regular file under `bundle` but hidden ones (`launchAsset` is the page
    /// the web view loads) as update `id` for `runtimeVersion`, and returns its manifest. A
    /// publish that fails takes back every file and directory it added, and leaves `current`
    /// as it was; one that was killed leaves its temporaries, which stay for a person to
    /// remove (the next publish into the directory tells `leftovers` of them, and removes
    /// none). Publishes into one server directory take turns (`SERVER_DIR/.publish-lock`):
    /// this one waits for one under way.
    /// - Parameters:
    ///   - bundle: A directory of regular files only; each file's path inside it becomes its
    ///     asset key, and its extension gives its content type. Paths with a part that begins
    ///     with `.` (`.git/`, `.DS_Store`) are left out, as static hosts leave them out.
    ///   - launchAsset: The key of the page the web view loads.
    ///   - id: The update's id, new to the server directory (under any runtime version): a published update never changes.
    ///   - createdAt: The manifest's `createdAt`.
    ///   - channel: The channel it is published on (`nil`: the default one).
    ///   - rolloutPercent: When set below 100, the update does not become the channel's
    ///     `current`: it is rolled out to this share of the installs, as `rollout` then changes.
    /// - Throws: `DeployError.usage` for a bundle that is not a directory, lacks its launch
    ///   asset, or holds a symbolic link, another non-regular file or a path that cannot be an
    ///   asset key; for a bad runtime version (see `DeployTarget`); for an id that
    ///   `AppDirectory.isSafeUpdateID` refuses, that is `rollBackToEmbedded` (the server's
    ///   word for a roll-back) or that is already published, for any runtime version; for a
    ///   server directory inside the bundle. `.refused` when an asset's name (or its type
    ///   file) is taken by other bytes; `.filesystem` when a file or directory cannot be read
    ///   or written; `.cancelled` when `isCancelled` said so. `.usage`, before anything is
    ///   written, for a `signing` key that is no unencrypted PEM RSA private key or a key id
    ///   `TrustedCertificates.isValidKeyID` refuses; for a bad channel name; on a channel with
    ///   another update's rollout under way (see `rollout`); for a rollout percent outside 0 to
    ///   100, or on a channel without a `current` update to roll out from.
    public func publish(bundle: String, runtimeVersion: String, launchAsset: String = "index.html",
                        id: String = UUID().uuidString.lowercased(), createdAt: Timestamp = .now(),
                        channel channelName: String? = nil, rolloutPercent: Int? = nil) throws(DeployError) -> UpdateManifest {
        _ = try DeployTarget(runtimeVersion: runtimeVersion)
        let channel = try Channel(channelName, runtimeVersion: runtimeVersion, serverDirectory: serverDirectory)
        if let rolloutPercent { try Self.checkPercent(rolloutPercent) }
        guard AppDirectory.isSafeUpdateID(id), id != "rollBackToEmbedded" else {
            throw .usage("the update id must be 1 to 128 letters, digits, '-', '_' or '.', not first, and not the word rollBackToEmbedded: \"\(id)\"")
        }
        let signingConfiguration = try signing.map { (signing) throws(DeployError) -> Data in
            guard TrustedCertificates.isValidKeyID(signing.keyID) else { throw .usage("--key-id: " + TrustedCertificates.keyIDRule(signing.keyID)) }
            if let problem = SigningKey.problem(signing.key) { throw .usage("\(signing.key): \(problem)") }
            guard let absolute = canonicalPath(signing.key) else { throw .usage("\(signing.key): no such key file") }
            return Data(StateValue.object(["keyId": .string(signing.keyID), "privateKey": .string(absolute)]).json().utf8)
        }
        let files = try Self.files(in: bundle)
        guard files.contains(launchAsset) else { throw .usage("\(bundle) has no \(launchAsset) (the launch asset)") }
        let runtime = serverDirectory + "/updates/" + runtimeVersion
        // The file whose change makes the update visible, written last; a rollout to 100% is
        // a publish without one.
        let rollingOut = rolloutPercent.flatMap { $0 < 100 ? Rollout(update: id, percent: $0) : nil }
        let visible = rollingOut.map { (file: channel.rolloutPath, data: $0.json) } ?? (file: channel.currentPath, data: Data((id + "\n").utf8))
        let created = CreatedPaths()
        var lock: PublishLock?
        do throws(DeployError) {
            lock = try PublishLock(serverDirectory: serverDirectory, created: created, isCancelled: isCancelled)
            // Under the lock no other publish is under way: a temporary of ours is a killed one's.
            // It stays: a publish removes only what it created itself.
            let left = Self.leftovers(in: serverDirectory + "/assets", runtime: runtime, channel: channel)
            if !left.isEmpty { leftovers(left) }
            if let server = canonicalPath(serverDirectory), let root = canonicalPath(bundle), server == root || server.hasPrefix(root + "/") {
                throw .usage("\(serverDirectory) is inside the bundle \(bundle): its files would be published")
            }
            // A published update never changes: clients that have it would never see the change.
            // Nor does its id name another runtime's update: an app directory keeps an update by
            // its id alone, so a client moved to the new runtime would take the old bundle for it.
            if let published = try Self.runtimeVersion(publishing: id, in: serverDirectory + "/updates") {
                throw .usage("update \(id) is already published for runtime version \(published); publish under a new id")
            }
            try Self.checkMayPublish(id, on: channel, rollingOut: rollingOut != nil)
            for directory in [serverDirectory + "/assets", serverDirectory + "/updates", runtime]
                + (channelName == nil ? [] : [runtime + "/channels", channel.path]) {
                try created.makeDirectoryIfMissing(directory)
            }
            var assets: [UpdateManifest.Asset] = []
            for key in files {
                guard !isCancelled() else { throw .cancelled }
                let type = Self.contentType(of: key)
                let stored = try Files.storeContentAddressed(bundle + "/" + key, in: serverDirectory + "/assets", created: created,
                                                             isCancelled: isCancelled) { Self.assetName(hash: $0, type: type) }
                try Self.storeType(type, of: serverDirectory + "/assets/" + stored.name, created: created)
                let fileExtension = (key as NSString).pathExtension
                assets.append(UpdateManifest.Asset(key: key, hash: stored.hash, contentType: type.mediaType,
                                                   fileExtension: fileExtension.isEmpty ? nil : "." + fileExtension, url: "/assets/" + stored.name))
            }
            let launch = assets.first { $0.key == launchAsset }!
            let manifest = UpdateManifest(id: id, createdAt: createdAt.description, runtimeVersion: runtimeVersion,
                                          launchAsset: launch, assets: assets.filter { $0.key != launchAsset })
            try Files.writeAtomically(Data(manifest.json.json(pretty: true).utf8), to: runtime + "/" + id + ".json", created: created)
            // A server setting, not the update's: kept even if what follows fails.
            if let signingConfiguration { try Files.writeAtomically(signingConfiguration, to: serverDirectory + "/" + Self.signingFile) }
            try Files.writeAtomically(visible.data, to: visible.file)
            lock?.release()
            return manifest
        } catch {
            // Once `current` (or `rollout`) names the update, clients may fetch it: nothing is
            // taken back (the error says what failed after, such as flushing the directory).
            if (try? Files.readSmall(visible.file)) != visible.data {
                // Still under the lock: no other publish has seen what is taken back.
                created.removeAll()
            }
            lock?.release()
            throw error
        }
    }

    /// Offers update `id`, published for `runtimeVersion`, to `percent` of the installs of
    /// `channel`: raising the percent keeps the installs that had it, lowering or 0 (a
    /// revert) stops offering it to those above it (installs that took it keep it until a
    /// newer update comes), and 100 makes it the channel's `current`. Returns the rollout it
    /// replaced, if any. Takes turns with publishes into the directory.
    /// - Throws: `DeployError.usage` for a percent outside 0 to 100, a bad channel name, an
    ///   update not published for `runtimeVersion`, one already the channel's `current` (no
    ///   rollout of it under way), a channel with no `current` to roll out from, or another
    ///   update's rollout under way (between 1 and 99 percent: finish or revert it first);
    ///   `.badManifest` for a rollout file that does not read; `.filesystem` when a file
    ///   cannot be read or written; `.cancelled` when `isCancelled` said so while waiting.
    @discardableResult
    public func rollout(_ id: String, runtimeVersion: String, channel channelName: String? = nil, percent: Int) throws(DeployError) -> Rollout? {
        _ = try DeployTarget(runtimeVersion: runtimeVersion)
        try Self.checkPercent(percent)
        let channel = try Channel(channelName, runtimeVersion: runtimeVersion, serverDirectory: serverDirectory)
        try checkPublished(id, runtimeVersion: runtimeVersion)
        let lock = try PublishLock(serverDirectory: serverDirectory, created: CreatedPaths(), isCancelled: isCancelled)
        defer { lock.release() }
        let previous = try channel.rollout()
        if previous?.update != id { try Self.checkMayPublish(id, on: channel, rollingOut: true) }
        // Current first: while the rollout file still says less than 100, its installs take the
        // update anyway, and every other install now does too.
        if percent == 100 { try Files.writeAtomically(Data((id + "\n").utf8), to: channel.currentPath) }
        try Files.writeAtomically(Rollout(update: id, percent: percent).json, to: channel.rolloutPath)
        return previous
    }

    /// The rollout of update `id` under way on `channel` of `runtimeVersion`: between 0 (reverted
    /// or halted) and 99 percent, of an update still published, so that `rollout(_:…)` can
    /// change it.
    /// - Throws: `DeployError.usage` for a bad channel name, an update not published for
    ///   `runtimeVersion`, or a channel whose rollout is of another update, finished (100: the
    ///   update is `current`), or none; `.badManifest` for a rollout file that does not read;
    ///   `.filesystem` when it cannot be read.
    public func rolloutUnderWay(of id: String, runtimeVersion: String, channel channelName: String? = nil) throws(DeployError) -> Rollout {
        _ = try DeployTarget(runtimeVersion: runtimeVersion)
        let channel = try Channel(channelName, runtimeVersion: runtimeVersion, serverDirectory: serverDirectory)
        try checkPublished(id, runtimeVersion: runtimeVersion)
        guard let rollout = try channel.rollout(), rollout.update == id, rollout.percent < 100 else {
            throw .usage("update \(id) is not rolling out on channel \(channel.displayName) of runtime version \(runtimeVersion) in \(serverDirectory)"
                         + " (deploy publish --rollout PERCENT starts a rollout)")
        }
        return rollout
    }

    /// Update `id` must be published for `runtimeVersion` here.
    private func checkPublished(_ id: String, runtimeVersion: String) throws(DeployError) {
        guard AppDirectory.isSafeUpdateID(id), FileManager.default.fileExists(atPath: serverDirectory + "/updates/" + runtimeVersion + "/" + id + ".json") else {
            throw .usage("no update \(id) is published for runtime version \(runtimeVersion) in \(serverDirectory)")
        }
    }

    private static func checkPercent(_ percent: Int) throws(DeployError) {
        guard (0...100).contains(percent) else { throw .usage("a rollout's percent is 0 to 100, not \(percent)") }
    }

    /// Making `id` current on `channel`, or starting its rollout (`rollingOut`), needs no other
    /// update's rollout under way there (its installs would keep being offered the older
    /// update); a rollout needs a `current` other than `id` to roll out from.
    private static func checkMayPublish(_ id: String, on channel: Channel, rollingOut: Bool) throws(DeployError) {
        if rollingOut {
            let current = try channel.current()
            guard let current, current != "rollBackToEmbedded" else {
                throw .usage("channel \(channel.displayName) has no current update to roll out from: publish one without --rollout first")
            }
            guard current != id else { throw .usage("update \(id) is already the current update of channel \(channel.displayName)") }
        }
        if let under = try channel.rollout(), under.update != id, (1...99).contains(under.percent) {
            throw .usage("update \(under.update) is rolling out to \(under.percent)% of channel \(channel.displayName): "
                         + "finish it (--percent 100) or revert it (--percent 0) first")
        }
    }

    /// The files a killed publish left, sorted: regular files (never links or directories)
    /// named as only the publisher names its temporaries, `assets/.incoming-UUID`,
    /// `assets/NAME.type.next-UUID` and, for the runtime being published, `ID.json.next-UUID`,
    /// and `current.next-UUID` and `rollout.next-UUID` of the channel (a lowercase UUID, as
    /// `Files.uniqueSuffix` makes). Called under the publish lock, so no publish under way
    /// owns one. Only read: they stay for a person.
    static func leftovers(in assets: String, runtime: String, channel: Channel) -> [String] {
        func isUUID(_ text: Substring) -> Bool {
            let utf8 = Array(text.utf8)
            return utf8.count == 36 && utf8.enumerated().allSatisfy { index, byte in
                [8, 13, 18, 23].contains(index) ? byte == UInt8(ascii: "-") : (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)
            }
        }
        func isLeftover(_ name: String, temporaryOf isTarget: (Substring) -> Bool) -> Bool {
            guard let range = name.range(of: ".next-", options: .backwards) else { return false }
            return isUUID(name[range.upperBound...]) && isTarget(name[..<range.lowerBound])
        }
        let rules: [(String, (String) -> Bool)] = [
            (assets, { name in
                (name.hasPrefix(".incoming-") && isUUID(name.dropFirst(".incoming-".count)))
                    || isLeftover(name) { $0.hasSuffix(".type") && DeploySource.isAssetName(String($0.dropLast(".type".count))) }
            }),
            (runtime, { name in isLeftover(name) { $0.hasSuffix(".json") && AppDirectory.isSafeUpdateID(String($0.dropLast(".json".count))) } }),
            // The runtime's own directory again for the default channel: the names differ.
            (channel.path, { name in isLeftover(name) { $0 == "current" || $0 == "rollout" } }),
        ]
        var found: [String] = []
        for (directory, isOurs) in rules {
            guard let names = try? Files.names(in: directory) else { continue }
            for bytes in names {
                guard let name = String(validating: bytes, as: UTF8.self), isOurs(name) else { continue }
                var info = stat()
                let path = directory + "/" + name
                if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG { found.append(path) }
            }
        }
        return found.sorted()
    }

    /// The runtime version update `id` is already published for (its manifest there), or `nil`.
    private static func runtimeVersion(publishing id: String, in updates: String) throws(DeployError) -> String? {
        guard FileManager.default.fileExists(atPath: updates) else { return nil }
        let runtimes: [String]
        do { runtimes = try FileManager.default.contentsOfDirectory(atPath: updates) } catch {
            throw .filesystem("cannot read \(updates): \((error as NSError).localizedFailureReason ?? error.localizedDescription)")
        }
        return runtimes.sorted().first { runtime in
            var info = stat()
            return lstat(updates + "/" + runtime + "/" + id + ".json", &info) == 0
        }
    }

    /// Writes `asset`'s type file, or checks the one there: an asset's type never changes either.
    private static func storeType(_ type: ContentType, of asset: String, created: CreatedPaths) throws(DeployError) {
        let file = asset + ".type"
        let text = type.mediaType + "\n"
        if let existing = try Files.readSmall(file) {
            guard existing == Data(text.utf8) else {
                throw .refused("\(file) is already there, but it does not say \(type.mediaType); remove it and publish again")
            }
            return
        }
        try Files.writeAtomically(Data(text.utf8), to: file)
        created.record(file: file)
    }

    /// The bundle's regular files as sorted relative paths, hidden ones (a part that begins
    /// with `.`) left out. A directory that cannot be read is an error, never skipped.
    static func files(in bundle: String) throws(DeployError) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: bundle, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .usage("\(bundle) is not a directory")
        }
        var files: [String] = []
        var directories = [""]
        while let directory = directories.popLast() {
            for bytes in try Files.names(in: bundle + "/" + directory).sorted(by: { $0.lexicographicallyPrecedes($1) }) where bytes.first != 0x2E {
                let within = directory.isEmpty ? "" : directory + "/"
                guard let name = String(validating: bytes, as: UTF8.self) else {
                    throw .usage("\(bundle)/\(within)\(Files.escaped(name: bytes)): the file name is not UTF-8, which an asset key must be")
                }
                let relative = within + name
                var info = stat()
                guard lstat(bundle + "/" + relative, &info) == 0 else {
                    throw .filesystem("cannot read \(bundle)/\(relative): \(String(cString: strerror(errno)))")
                }
                switch info.st_mode & S_IFMT {
                case S_IFREG:
                    if let problem = AppDirectory.keyProblem(relative) { throw .usage("\(bundle)/\(relative): the path cannot be an asset key: it \(problem)") }
                    files.append(relative)
                case S_IFDIR: directories.append(relative)
                case S_IFLNK: throw .usage("\(bundle)/\(relative) is a symbolic link; a bundle holds regular files only")
                default: throw .usage("\(bundle)/\(relative) is not a regular file")
                }
            }
        }
        return files.sorted()
    }

    /// A content type the publisher names, with the file extensions it goes by.
    struct ContentType: Sendable {
        var mediaType: String
        /// The extensions, the first being the one asset names carry; none for the default.
        var extensions: [String]
    }

    /// The content types by file extension; anything else is `application/octet-stream`.
    static let contentTypes: [ContentType] = [
        .init(mediaType: "text/html", extensions: ["html", "htm"]),
        .init(mediaType: "application/javascript", extensions: ["js", "mjs"]),
        .init(mediaType: "text/css", extensions: ["css"]),
        .init(mediaType: "application/json", extensions: ["json", "map"]),
        .init(mediaType: "image/png", extensions: ["png"]),
        .init(mediaType: "image/jpeg", extensions: ["jpg", "jpeg"]),
        .init(mediaType: "image/gif", extensions: ["gif"]),
        .init(mediaType: "image/svg+xml", extensions: ["svg"]),
        .init(mediaType: "image/webp", extensions: ["webp"]),
        .init(mediaType: "image/x-icon", extensions: ["ico"]),
        .init(mediaType: "font/woff", extensions: ["woff"]),
        .init(mediaType: "font/woff2", extensions: ["woff2"]),
        .init(mediaType: "font/ttf", extensions: ["ttf"]),
        .init(mediaType: "text/plain", extensions: ["txt"]),
        .init(mediaType: "application/wasm", extensions: ["wasm"]),
    ]

    /// The content type of a bundle file, by its extension.
    static func contentType(of key: String) -> ContentType {
        let fileExtension = (key as NSString).pathExtension.lowercased()
        return contentTypes.first { $0.extensions.contains(fileExtension) } ?? ContentType(mediaType: "application/octet-stream", extensions: [])
    }

    /// The name an asset's bytes are stored and served under: their SHA-256, then the type's
    /// extension for a named type. The same bytes published as two types (an empty `a.css`
    /// and an empty `b.js`) are two assets, each served as its own type.
    static func assetName(hash: String, type: ContentType) -> String {
        type.extensions.first.map { hash + "." + $0 } ?? hash
    }
}

/// The publish lock of a server directory (`SERVER_DIR/.publish-lock`): publishes into one
/// directory take turns, so that one that fails takes back only what no other publish has
/// seen. Waits for a publish under way. The lock file, and the directory, are this call's
/// own when it created them, and go with the rest if it fails.
private final class PublishLock {
    private var descriptor: Int32

    init(serverDirectory: String, created: CreatedPaths, isCancelled: () -> Bool) throws(DeployError) {
        let path = serverDirectory + "/.publish-lock"
        while true {
            guard !isCancelled() else { throw .cancelled }
            try created.makeDirectoryIfMissing(serverDirectory)
            var fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
            let isNew = fd >= 0
            if !isNew && errno == EEXIST {
                fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
                if fd < 0 && errno == ENOENT { continue } // taken back by a failed publish meanwhile
            }
            guard fd >= 0 else { throw .filesystem("cannot open \(path): \(String(cString: strerror(errno)))") }
            // Polled, so that a cancelled publish stops waiting.
            while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let failure = errno
                guard failure == EWOULDBLOCK || failure == EINTR, !isCancelled() else {
                    close(fd)
                    if failure == EWOULDBLOCK || failure == EINTR { throw .cancelled }
                    throw .filesystem("cannot lock \(path): \(String(cString: strerror(failure)))")
                }
                usleep(20_000)
            }
            // The publish this one waited for may have failed and removed the file it locked.
            var held = stat(), there = stat()
            if fstat(fd, &held) == 0, stat(path, &there) == 0, held.st_dev == there.st_dev, held.st_ino == there.st_ino {
                if isNew { created.record(file: path) }
                descriptor = fd
                return
            }
            close(fd)
        }
    }

    /// Lets the next publish go on.
    func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}

/// The canonical path of an existing file, or `nil`.
private func canonicalPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}
