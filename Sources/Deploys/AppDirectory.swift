import Foundation

/// The directory one app install keeps its web bundles in, changed only by renames that are
/// atomic on POSIX file systems, so that a crash at any point leaves a whole working bundle:
///
///     APP_DIR/updates/ID/           a complete, verified update (files at their asset keys)
///     APP_DIR/updates/ID.json       its manifest
///     APP_DIR/updates/ID.partial/   a download in progress; never loaded
///     APP_DIR/holding -> updates/ID the downloaded update waiting to be installed
///     APP_DIR/working -> updates/ID what the web view loads (absent: the embedded bundle)
///     APP_DIR/pending               {"update": ID, "previous": ID or null, "launched": BOOL} while
///                                   a new install awaits the app's confirmation of a good launch
///
/// `holding` and `working` are symbolic links replaced with `rename(2)`; `pending` is written
/// to a temporary file and renamed. The client creates everything here; it removes only
/// what it created (partial downloads, its own links).
public struct AppDirectory: Sendable {
    public let path: String

    /// The link to the update the web view loads.
    public static let working = "working"
    /// The link to the downloaded update waiting to be installed.
    public static let holding = "holding"

    public init(path: String) throws(DeployError) {
        self.path = path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw .filesystem("\(path) is not a directory") }
        }
        try Files.makeDirectory(path)
        try Files.makeDirectory(updatesPath)
    }

    var updatesPath: String { path + "/updates" }

    /// Where update `id` lives once complete.
    public func updatePath(_ id: String) -> String { updatesPath + "/" + id }
    func partialPath(_ id: String) -> String { updatesPath + "/" + id + ".partial" }
    func manifestPath(_ id: String) -> String { updatesPath + "/" + id + ".json" }

    /// The manifest of a downloaded update.
    public func manifest(of id: String) throws(DeployError) -> UpdateManifest {
        guard let data = FileManager.default.contents(atPath: manifestPath(id)) else { throw .filesystem("\(manifestPath(id)) is missing") }
        return try UpdateManifest(json: [UInt8](data))
    }

    /// The update a link names, or `nil` when the link is absent.
    public func target(of link: String) throws(DeployError) -> String? {
        var buffer = [CChar](repeating: 0, count: 4_096)
        let count = readlink(path + "/" + link, &buffer, buffer.count - 1)
        guard count >= 0 else {
            if errno == ENOENT { return nil }
            throw .filesystem("cannot read the link \(path)/\(link): \(String(cString: strerror(errno)))")
        }
        let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard target.hasPrefix("updates/") else { throw .filesystem("\(path)/\(link) points outside the app directory: \(target)") }
        return String(target.dropFirst("updates/".count))
    }

    /// Points `link` at update `id` in one rename: before it the old target, after it the new.
    func point(_ link: String, at id: String) throws(DeployError) {
        let temporary = path + "/" + link + ".next"
        unlink(temporary)
        guard symlink("updates/" + id, temporary) == 0 else { throw .filesystem("cannot link \(temporary): \(String(cString: strerror(errno)))") }
        guard rename(temporary, path + "/" + link) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw .filesystem("cannot replace \(path)/\(link): \(reason)")
        }
        try Files.syncDirectory(path)
    }

    /// Removes `link` (never what it points at).
    func removeLink(_ link: String) throws(DeployError) {
        guard unlink(path + "/" + link) == 0 || errno == ENOENT else {
            throw .filesystem("cannot remove \(path)/\(link): \(String(cString: strerror(errno)))")
        }
        try Files.syncDirectory(path)
    }

    /// Removes what a crash mid-swap leaves: `*.next` links. Returns whether there were any.
    @discardableResult
    func removeUnfinishedLinks() -> Bool {
        var removed = false
        for link in [Self.working, Self.holding, "pending"] where unlink(path + "/" + link + ".next") == 0 { removed = true }
        return removed
    }

    /// The install awaiting confirmation, if any.
    public func pending() throws(DeployError) -> PendingInstall? {
        guard let data = FileManager.default.contents(atPath: path + "/pending") else { return nil }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let update = object["update"] as? String else {
            throw .filesystem("\(path)/pending is not a pending install")
        }
        return PendingInstall(update: update, previous: object["previous"] as? String, launched: object["launched"] as? Bool ?? false)
    }

    func setPending(_ pending: PendingInstall?) throws(DeployError) {
        guard let pending else {
            guard unlink(path + "/pending") == 0 || errno == ENOENT else { throw .filesystem("cannot remove \(path)/pending: \(String(cString: strerror(errno)))") }
            return try Files.syncDirectory(path)
        }
        let object: [String: Any] = ["update": pending.update, "previous": pending.previous ?? NSNull(), "launched": pending.launched]
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        try Files.writeAtomically(data, to: path + "/pending")
    }

    /// Whether `key` is a safe relative path inside a bundle: no `..`, `.` or empty
    /// components, not absolute, no backslash or control characters, at most 1,024 bytes.
    public static func isSafeKey(_ key: String) -> Bool {
        guard !key.isEmpty, key.utf8.count <= 1_024, !key.hasPrefix("/"),
              !key.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == "\\" || $0.value == 0x7F }) else { return false }
        return key.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { $0 != "" && $0 != "." && $0 != ".." && $0.utf8.count <= 255 }
    }

    /// Whether `id` can name an update directory.
    public static func isSafeUpdateID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 128 && id != "." && id != ".." && !id.hasSuffix(".partial")
            && id.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0) }
    }
}

/// File-system steps that are whole or not at all, flushed so that they survive a power cut.
enum Files {
    /// Writes a file whole or not at all: a temporary file, flushed, renamed over the old one.
    static func writeAtomically(_ data: Data, to target: String) throws(DeployError) {
        let temporary = target + ".next"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .filesystem("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced, rename(temporary, target) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw .filesystem("cannot write \(target): \(reason)")
        }
        try Files.syncDirectory((target as NSString).deletingLastPathComponent)
    }

    /// Flushes a directory's entries, so that a rename in it survives a power cut.
    static func syncDirectory(_ directory: String) throws(DeployError) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .filesystem("cannot open \(directory): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .filesystem("cannot flush \(directory): \(String(cString: strerror(errno)))") }
    }

    static func makeDirectory(_ directory: String) throws(DeployError) {
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
            throw .filesystem("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
    }

    /// Streams `source` into a new file in `directory`, hashing it on the way, and renames it
    /// to its base64url SHA-256 (unless one is there already). Returns the hash.
    static func storeContentAddressed(_ source: String, in directory: String) throws(DeployError) -> String {
        guard let input = FileHandle(forReadingAtPath: source) else { throw .filesystem("cannot read \(source)") }
        defer { try? input.close() }
        let temporary = directory + "/.incoming-" + UUID().uuidString
        guard FileManager.default.createFile(atPath: temporary, contents: nil), let output = FileHandle(forWritingAtPath: temporary) else {
            throw .filesystem("cannot write \(temporary)")
        }
        var hasher = SHA256()
        do {
            defer { try? output.close() }
            while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
                hasher.update(chunk)
                try output.write(contentsOf: chunk)
            }
            try output.synchronize()
        } catch {
            unlink(temporary)
            throw .filesystem("cannot copy \(source): \(error.localizedDescription)")
        }
        let hash = hasher.finalizeBase64URL()
        let target = directory + "/" + hash
        if FileManager.default.fileExists(atPath: target) {
            unlink(temporary)
        } else if rename(temporary, target) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw .filesystem("cannot write \(target): \(reason)")
        }
        return hash
    }
}

/// A new install awaiting the app's confirmation of a good launch, and what it replaced.
public struct PendingInstall: Sendable, Hashable {
    public var update: String
    /// The update it replaced; `nil`: the embedded bundle.
    public var previous: String?
    /// Whether the web view has loaded it: a launch that finds it still unconfirmed rolls back.
    public var launched = false
}

/// Why a deploy step failed, in one line.
public enum DeployError: Error, Sendable, Hashable, CustomStringConvertible {
    case badManifest(String)
    case refused(String)
    case transport(String)
    case integrity(key: String, expected: String, actual: String)
    case filesystem(String)
    case usage(String)

    public var description: String {
        switch self {
        case .badManifest(let reason): "bad manifest: \(reason)"
        case .refused(let reason), .transport(let reason), .filesystem(let reason), .usage(let reason): reason
        case .integrity(let key, let expected, let actual): "asset \(key): its SHA-256 is \(actual), the manifest says \(expected)"
        }
    }
}
