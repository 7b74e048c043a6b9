import EventLog
import Foundation

/// Writes a web bundle as an update into a server directory, the layout `tools/update-server.py`
/// serves and `DeploySource.directory` reads:
///
///     SERVER_DIR/assets/NAME           each file's bytes; NAME is their base64url SHA-256
///                                      and the extension of their content type
///     SERVER_DIR/assets/NAME.type      its content type
///     SERVER_DIR/updates/RUNTIME/ID.json   the manifest (asset URLs are /assets/KEY)
///     SERVER_DIR/updates/RUNTIME/current   the id served to that runtime version
///
/// Assets are content-addressed, so publishing again only adds what changed; `current` is
/// replaced last and atomically, so a client never sees a manifest whose assets are missing.
public struct DeployPublisher: Sendable {
    /// The root of the layout above; created on the first publish.
    public var serverDirectory: String

    /// A publisher into `serverDirectory`; nothing is touched until `publish`.
    public init(serverDirectory: String) {
        self.serverDirectory = serverDirectory
    }

    /// Publishes every regular file under `bundle` but hidden ones (`launchAsset` is the page
    /// the web view loads) as update `id` for `runtimeVersion`, and returns its manifest. A
    /// publish that fails takes back every file and directory it added, and leaves `current`
    /// as it was.
    /// - Parameters:
    ///   - bundle: A directory of regular files only; each file's path inside it becomes its
    ///     asset key, and its extension gives its content type. Paths with a part that begins
    ///     with `.` (`.git/`, `.DS_Store`) are left out, as static hosts leave them out.
    ///   - launchAsset: The key of the page the web view loads.
    ///   - id: The update's id, new for this runtime version: a published update never changes.
    ///   - createdAt: The manifest's `createdAt`.
    /// - Throws: `DeployError.usage` for a bundle that is not a directory, lacks its launch
    ///   asset, or holds a symbolic link, another non-regular file or a path that cannot be an
    ///   asset key; for a bad runtime version (see `DeployTarget`); for an id that
    ///   `AppDirectory.isSafeUpdateID` refuses or that is already published for
    ///   `runtimeVersion`. `.refused` when an asset's name is taken by other bytes;
    ///   `.filesystem` when a file cannot be read or written.
    public func publish(bundle: String, runtimeVersion: String, launchAsset: String = "index.html",
                        id: String = UUID().uuidString.lowercased(), createdAt: Timestamp = .now()) throws(DeployError) -> UpdateManifest {
        _ = try DeployTarget(runtimeVersion: runtimeVersion)
        guard AppDirectory.isSafeUpdateID(id) else { throw .usage("the update id must be letters, digits, '-', '_' or '.', not \"\(id)\"") }
        let files = try Self.files(in: bundle)
        guard files.contains(launchAsset) else { throw .usage("\(bundle) has no \(launchAsset) (the launch asset)") }
        let runtime = serverDirectory + "/updates/" + runtimeVersion
        // A published update never changes: clients that have it would never see the change.
        guard !FileManager.default.fileExists(atPath: runtime + "/" + id + ".json") else {
            throw .usage("update \(id) is already published for runtime version \(runtimeVersion); publish under a new id")
        }
        let created = CreatedPaths()
        do {
            for directory in [serverDirectory, serverDirectory + "/assets", serverDirectory + "/updates", runtime] {
                try created.makeDirectoryIfMissing(directory)
            }
            var assets: [UpdateManifest.Asset] = []
            for key in files {
                let type = Self.contentType(of: key)
                let stored = try Files.storeContentAddressed(bundle + "/" + key, in: serverDirectory + "/assets", created: created) {
                    Self.assetName(hash: $0, type: type)
                }
                let typeFile = serverDirectory + "/assets/" + stored.name + ".type"
                if access(typeFile, F_OK) != 0 {
                    try Files.writeAtomically(Data((type.mediaType + "\n").utf8), to: typeFile)
                    created.record(file: typeFile)
                }
                let fileExtension = (key as NSString).pathExtension
                assets.append(UpdateManifest.Asset(key: key, hash: stored.hash, contentType: type.mediaType,
                                                   fileExtension: fileExtension.isEmpty ? nil : "." + fileExtension, url: "/assets/" + stored.name))
            }
            let launch = assets.first { $0.key == launchAsset }!
            let manifest = UpdateManifest(id: id, createdAt: createdAt.description, runtimeVersion: runtimeVersion,
                                          launchAsset: launch, assets: assets.filter { $0.key != launchAsset })
            try Files.writeAtomically(Data(manifest.json.json(pretty: true).utf8), to: runtime + "/" + id + ".json")
            created.record(file: runtime + "/" + id + ".json")
            try Files.writeAtomically(Data((id + "\n").utf8), to: runtime + "/current")
            return manifest
        } catch {
            created.removeAll()
            throw error
        }
    }

    /// The bundle's regular files as sorted relative paths, hidden ones left out.
    static func files(in bundle: String) throws(DeployError) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: bundle, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .usage("\(bundle) is not a directory")
        }
        guard let walker = FileManager.default.enumerator(atPath: bundle) else { throw .filesystem("cannot read \(bundle)") }
        var files: [String] = []
        while let relative = walker.nextObject() as? String {
            if relative.split(separator: "/").contains(where: { $0.hasPrefix(".") }) {
                walker.skipDescendants()
                continue
            }
            var info = stat()
            guard lstat(bundle + "/" + relative, &info) == 0 else { throw .filesystem("cannot read \(bundle)/\(relative)") }
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                guard AppDirectory.isSafeKey(relative) else { throw .usage("\(bundle)/\(relative): the path cannot be an asset key") }
                files.append(relative)
            case S_IFDIR: continue
            case S_IFLNK: throw .usage("\(bundle)/\(relative) is a symbolic link; a bundle holds regular files only")
            default: throw .usage("\(bundle)/\(relative) is not a regular file")
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
