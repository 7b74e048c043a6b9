import EventLog
import Foundation

/// The directory one app install keeps its web bundles in, changed only by renames that are
/// atomic on POSIX file systems, so that a crash at any point leaves a whole working bundle:
///
///     APP_DIR/updates/ID/           a complete, verified update (files at their asset keys)
///     APP_DIR/updates/ID.json       its manifest
///     APP_DIR/updates/.ID.reaping.json the manifest of an update being reaped
///     APP_DIR/updates/ID.partial-N/ a download in progress; never loaded
///     APP_DIR/holding -> updates/ID the downloaded update waiting to be installed
///     APP_DIR/working -> updates/ID what the web view loads (absent: the embedded bundle)
///     APP_DIR/pending               {"update": ID, "previous": ID or null, "launched": BOOL,
///                                   "launchedAt": MICROSECONDS once launched} while a new
///                                   install awaits the app's confirmation of a good launch
///     APP_DIR/install-id            the install's id (a UUID made once), sent as eas-client-id
///
/// `holding` and `working` are symbolic links replaced with `rename(2)`; `pending` is written
/// to a temporary file and renamed. Every temporary name is new to the call that makes it
/// (created exclusively), and a call takes back only what it created itself, file by file,
/// never recursively. Besides, the lifecycle removes the client's own `holding` and `pending`
/// once it has checked they are ones it wrote, and reaps update directories its own downloads
/// made (`removeUpdate`: the files the manifest names, then directories once empty); what a
/// killed call left (`*.partial-N`, `*.next-N`) stays until a person removes it. One client
/// at a time: opening takes an exclusive lock (`flock` on `APP_DIR/lock`) held until the
/// value is released.
public struct AppDirectory: Sendable {
    /// The app directory's path, as given.
    public let path: String
    private let lock: DirectoryLock

    /// The link to the update the web view loads.
    public static let working = "working"
    /// The link to the downloaded update waiting to be installed.
    public static let holding = "holding"

    /// Opens (with `create`, makes) the app directory, takes its lock and checks that its
    /// links and pending install are ones this client writes.
    /// - Throws: `DeployError.usage` for a path that is not an app directory (a file, links
    ///   this client did not make, a pending install it cannot read), `.busy` when another
    ///   client holds the lock, `.filesystem` when it cannot be created or locked.
    public init(path: String, create: Bool = true) throws(DeployError) {
        self.path = path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw .usage("\(path) is not a directory") }
        } else if !create {
            throw .usage("\(path) is no app directory (nothing was delivered into it yet)")
        }
        try Files.makeDirectory(path)
        lock = try DirectoryLock(path + "/lock")
        try Files.makeDirectory(updatesPath)
        do {
            _ = try target(of: Self.working)
            _ = try target(of: Self.holding)
            _ = try pending()
        } catch {
            throw .usage("\(path) is not an app directory this client keeps: \(error)")
        }
    }

    var updatesPath: String { path + "/updates" }

    /// Where update `id` lives once complete.
    public func updatePath(_ id: String) -> String { updatesPath + "/" + id }
    /// A new name for a download of update `id` in progress: no update id contains `.partial`.
    func newPartialPath(_ id: String) -> String { updatesPath + "/" + id + ".partial-" + Files.uniqueSuffix() }
    func manifestPath(_ id: String) -> String { updatesPath + "/" + id + ".json" }

    /// The manifest of a downloaded update.
    /// - Throws: `DeployError.filesystem` when the manifest is missing, not a regular file,
    ///   larger than 4 MiB or unreadable; `.badManifest` when it does not parse.
    public func manifest(of id: String) throws(DeployError) -> UpdateManifest {
        guard let data = try Files.readSmall(manifestPath(id)) else { throw .filesystem("\(manifestPath(id)) is missing") }
        return try UpdateManifest(json: [UInt8](data))
    }

    /// Whether update `id` is complete on disk (its directory and its manifest).
    func hasUpdate(_ id: String) -> Bool {
        var info = stat()
        return lstat(updatePath(id), &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && lstat(manifestPath(id), &info) == 0
    }

    /// The update a link names, or `nil` when the link is absent.
    /// - Parameter link: `AppDirectory.working` or `AppDirectory.holding`.
    /// - Throws: `DeployError.filesystem` when the link cannot be read (it is not a symbolic
    ///   link, say) or points anywhere but at an update id in `updates/`.
    public func target(of link: String) throws(DeployError) -> String? {
        var buffer = [CChar](repeating: 0, count: 4_096)
        let count = readlink(path + "/" + link, &buffer, buffer.count - 1)
        guard count >= 0 else {
            if errno == ENOENT { return nil }
            throw .filesystem("cannot read the link \(path)/\(link): \(String(cString: strerror(errno)))")
        }
        let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let id = String(target.dropFirst("updates/".count))
        guard target.hasPrefix("updates/"), Self.isSafeUpdateID(id) else { throw .filesystem("\(path)/\(link) points outside the app's updates: \(target)") }
        return id
    }

    /// Points `link` at update `id` in one rename: before it the old target, after it the new.
    /// The link is first made under a name new to this call (`symlink` never replaces one).
    func point(_ link: String, at id: String) throws(DeployError) {
        let temporary = path + "/" + link + ".next-" + Files.uniqueSuffix()
        guard symlink("updates/" + id, temporary) == 0 else { throw .filesystem("cannot link \(temporary): \(String(cString: strerror(errno)))") }
        guard rename(temporary, path + "/" + link) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw .filesystem("cannot replace \(path)/\(link): \(reason)")
        }
        try Files.syncDirectory(path)
    }

    /// Removes `link` (never what it points at), once it is known to be one of this client's
    /// links into `updates/`: anything else there is refused, not removed.
    func removeLink(_ link: String) throws(DeployError) {
        guard try target(of: link) != nil else { return }
        guard unlink(path + "/" + link) == 0 || errno == ENOENT else {
            throw .filesystem("cannot remove \(path)/\(link): \(String(cString: strerror(errno)))")
        }
        try Files.syncDirectory(path)
    }

    /// Removes update `id`, made by this client's download, as far as it is the client's. Its
    /// manifest is first renamed to `.ID.reaping.json` (no update id begins with a dot), and the
    /// rename flushed, so that the update is no longer complete before any file goes; then each
    /// file the manifest names that is still a regular file of the bytes its SHA-256 says, the
    /// directories on their way and the update's own once empty (never recursively, never
    /// through a symbolic link), and the renamed manifest last. What is already gone is skipped, so a removal cut short finishes
    /// here. Returns the files removed, and why anything stays (a file this client did not make
    /// keeps its directory, and so does one whose bytes are no longer the manifest's; a removal
    /// the file system refuses is named); `nil` when all is gone. It never fails: what it
    /// cannot remove stays, and is named.
    func removeUpdate(_ id: String) -> (removedFiles: Int, left: String?) {
        func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
        guard Self.isSafeUpdateID(id) else { return (0, "\"\(id)\" is no update id") }
        // `updates/` itself may be a link a person made (to another volume, say): the client
        // writes through it, so it removes through it; below it nothing is followed.
        let updates = open(updatesPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard updates >= 0 else { return (0, "cannot open \(updatesPath): \(reason(errno))") }
        defer { close(updates) }
        let reaping = "." + id + ".reaping.json"
        var info = stat()
        if fstatat(updates, reaping, &info, AT_SYMLINK_NOFOLLOW) != 0 {
            guard fstatat(updates, id + ".json", &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                // Gone with its manifest (a removal finished before), or never complete.
                return (0, fstatat(updates, id, &info, AT_SYMLINK_NOFOLLOW) == 0 ? "updates/\(id) has no manifest" : nil)
            }
            guard renameat(updates, id + ".json", updates, reaping) == 0 else { return (0, "cannot rename updates/\(id).json: \(reason(errno))") }
            guard fsync(updates) == 0 else { return (0, "cannot flush \(updatesPath): \(reason(errno))") }
        }
        let assets: [UpdateManifest.Asset]
        do throws(DeployError) {
            guard let data = try Files.readSmall(updatesPath + "/" + reaping) else { return (0, "updates/\(reaping) is missing") }
            assets = try UpdateManifest(json: [UInt8](data)).allAssets.filter { Self.isSafeKey($0.key) }
        } catch {
            return (0, "updates/\(reaping) cannot be read (\(error)), so nothing of updates/\(id) is removed")
        }
        var removed = 0
        var left: String?
        /// Takes the outcome `code` of removing `path` (under `updates/`): gone, or staying with
        /// why (the first reason is kept).
        func note(_ path: String, _ code: Int32) {
            guard code != 0, code != ENOENT, left == nil else { return }
            left = switch code {
            case ENOTEMPTY, EEXIST: "updates/\(path) holds files this client did not make"
            case ENOTDIR, ELOOP: "updates/\(path) is reached through a link or file this client did not make"
            case EISDIR: "updates/\(path) is not the file this client downloaded"
            default: "cannot remove updates/\(path): \(reason(code))"
            }
        }
        /// Removes `path` (under `updates/`) with `body`, given its directory, opened without
        /// crossing a link, and its name; `body` returns 0 or an errno, which is noted.
        func remove(_ path: String, _ body: (_ directory: Int32, _ name: String) -> Int32) {
            var parts = path.split(separator: "/").map(String.init)
            let name = parts.removeLast()
            let (fd, code) = Self.openDirectory(parts, under: updates)
            guard fd >= 0 else { return note(path, code) }
            defer { close(fd) }
            note(path, body(fd, name))
        }
        for asset in assets {
            remove(id + "/" + asset.key) { directory, name in
                guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return errno }
                // Only the bytes the client downloaded: a file put there since is someone's own.
                guard info.st_mode & S_IFMT == S_IFREG, let hash = asset.hash, Files.sha256(of: name, in: directory) == hash else { return EISDIR }
                guard unlinkat(directory, name, 0) == 0 else { return errno }
                removed += 1
                return 0
            }
        }
        // The directories on the keys' way, deepest first, then the update's own.
        let directories = Set(assets.map(\.key).flatMap { key in
            let parts = key.split(separator: "/").dropLast()
            return parts.indices.map { parts[...$0].joined(separator: "/") }
        }).sorted { ($0.split(separator: "/").count, $0) > ($1.split(separator: "/").count, $1) }
        for directory in directories + [""] {
            remove(directory.isEmpty ? id : id + "/" + directory) { unlinkat($0, $1, AT_REMOVEDIR) == 0 ? 0 : errno }
        }
        // The manifest last: until it goes, a removal cut short knows what to remove.
        remove(reaping) { unlinkat($0, $1, 0) == 0 ? 0 : errno }
        if fsync(updates) != 0, left == nil { left = "cannot flush \(updatesPath): \(reason(errno))" }
        return (removed, left)
    }

    /// Opens directory `components` under descriptor `fd`, crossing no symbolic link: the
    /// descriptor, or -1 and the errno.
    private static func openDirectory(_ components: [String], under fd: Int32) -> (fd: Int32, errno: Int32) {
        var current = dup(fd)
        guard current >= 0 else { return (-1, errno) }
        for component in components {
            let next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let code = errno
            close(current)
            guard next >= 0 else { return (-1, code) }
            current = next
        }
        return (current, 0)
    }

    /// The install awaiting confirmation, if any.
    /// - Throws: `DeployError.filesystem` when `pending` is not a regular file of at most
    ///   4,096 bytes, cannot be read, or is not a pending install as this client writes it.
    public func pending() throws(DeployError) -> PendingInstall? {
        guard let data = try Files.readSmall(path + "/pending", limit: 4_096) else { return nil }
        let value = try? StateValue(jsonUTF8: [UInt8](data))
        guard let update = value?["update"]?.stringValue, Self.isSafeUpdateID(update), let launched = value?["launched"]?.boolValue,
              let previous = value?["previous"], previous == .null || previous.stringValue.map(Self.isSafeUpdateID) == true else {
            throw .filesystem("\(path)/pending is not a pending install")
        }
        let launchedAt = value?["launchedAt"]
        guard launchedAt == nil || launchedAt?.intValue != nil else { throw .filesystem("\(path)/pending is not a pending install") }
        return PendingInstall(update: update, previous: previous.stringValue, launched: launched,
                              launchedAt: launchedAt?.intValue.map(Timestamp.init(microsecondsSince1970:)))
    }

    /// The install's id (`APP_DIR/install-id`, a lowercase UUID), made on the first call and
    /// kept: a server places the install in a rollout by it.
    /// - Throws: `DeployError.filesystem` when `install-id` is not one this client wrote
    ///   (it is never replaced: a new id would move the install to other rollouts), or cannot
    ///   be read or written.
    public func installID() throws(DeployError) -> String {
        let file = path + "/install-id"
        if let data = try Files.readSmall(file, limit: 4_096) {
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let id = UUID(uuidString: text), id.uuidString.lowercased() == text else {
                throw .filesystem("\(file) is not an install id (a lowercase UUID): remove it, and a new one is made")
            }
            return text
        }
        let id = UUID().uuidString.lowercased()
        try Files.writeAtomically(Data((id + "\n").utf8), to: file)
        return id
    }

    func setPending(_ pending: PendingInstall?) throws(DeployError) {
        guard let pending else {
            // Only a pending install this client wrote (`pending()` reads it or refuses it).
            guard try self.pending() != nil else { return }
            guard unlink(path + "/pending") == 0 || errno == ENOENT else { throw .filesystem("cannot remove \(path)/pending: \(String(cString: strerror(errno)))") }
            return try Files.syncDirectory(path)
        }
        var object: StateObject = ["launched": .bool(pending.launched), "previous": StateValue(pending.previous), "update": .string(pending.update)]
        if let launchedAt = pending.launchedAt { object["launchedAt"] = .int(launchedAt.microsecondsSince1970) }
        try Files.writeAtomically(Data(StateValue.object(object).json().utf8), to: path + "/pending")
    }

    /// Whether `key` is a safe relative path inside a bundle: no `..`, `.` or empty
    /// components, not absolute, no backslash or control characters, at most 1,024 bytes, and
    /// no component longer than 255 bytes (a file name's limit).
    public static func isSafeKey(_ key: String) -> Bool { keyProblem(key) == nil }

    /// Why `key` cannot be a path inside a bundle, as words that follow the key ("escapes the
    /// update's directory", "is 1,100 bytes long, …"), or `nil` when `isSafeKey` holds.
    public static func keyProblem(_ key: String) -> String? {
        if key.isEmpty { return "is empty" }
        if key.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) { return "holds a control character" }
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        if key.hasPrefix("/") || key.contains("\\") || parts.contains(where: { $0 == "" || $0 == "." || $0 == ".." }) {
            return "escapes the update's directory"
        }
        if key.utf8.count > 1_024 { return "is \(key.utf8.count) bytes long; an asset key is at most 1,024" }
        if let long = parts.first(where: { $0.utf8.count > 255 }) {
            return "has a part of \(long.utf8.count) bytes; a file name is at most 255"
        }
        return nil
    }

    /// Whether `id` can name an update directory: 1 to 128 letters, digits, `-`, `_` and `.`,
    /// not beginning with `.` (as the update server's ids do not), not ending in `.json` and not holding `.partial` or `.next`, as this
    /// client's own files do.
    public static func isSafeUpdateID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 128 && !id.hasPrefix(".")
            && !id.hasSuffix(".json") && !id.contains(".partial") && !id.contains(".next")
            && id.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0) }
    }
}

/// File-system steps that are whole or not at all, flushed so that they survive a power cut.
enum Files {
    /// A suffix no earlier name has: a random UUID.
    static func uniqueSuffix() -> String { UUID().uuidString.lowercased() }

    /// Writes a file whole or not at all: a temporary file new to this call (created
    /// exclusively), flushed, renamed over the old one. A `target` that was not there is
    /// recorded in `created` as soon as it is, before its directory is flushed.
    static func writeAtomically(_ data: Data, to target: String, created: CreatedPaths? = nil) throws(DeployError) {
        let temporary = target + ".next-" + uniqueSuffix()
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .filesystem("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        var info = stat()
        let isNew = lstat(target, &info) != 0 && errno == ENOENT
        guard written == data.count, synced, rename(temporary, target) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw .filesystem("cannot write \(target): \(reason)")
        }
        if isNew { created?.record(file: target) }
        try Files.syncDirectory((target as NSString).deletingLastPathComponent)
    }

    /// Writes all of `chunk` to descriptor `fd` (of file `path`), resuming after a signal.
    static func writeAll(_ chunk: Data, to fd: Int32, path: String) throws(DeployError) {
        // The errno of a failed write, or 0.
        let failure = chunk.withUnsafeBytes { bytes -> Int32 in
            var offset = 0
            while offset < bytes.count {
                let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return 0
        }
        guard failure == 0 else { throw .filesystem("cannot write \(path): \(String(cString: strerror(failure)))") }
    }

    /// Flushes a directory's entries, so that a rename in it survives a power cut.
    static func syncDirectory(_ directory: String) throws(DeployError) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .filesystem("cannot open \(directory): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .filesystem("cannot flush \(directory): \(String(cString: strerror(errno)))") }
    }

    /// The SHA-256 of a regular file, base64url as manifests spell it; `nil` when it is missing
    /// or not a regular file.
    static func sha256(of path: String) -> String? {
        sha256(opened: open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC))
    }

    /// The SHA-256 of regular file `name` in the directory open as `directory`, as `sha256(of:)`.
    static func sha256(of name: String, in directory: Int32) -> String? {
        sha256(opened: openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC))
    }

    /// The SHA-256 of the file open as `fd` (closed here); `nil` for -1 or a file that is not regular.
    private static func sha256(opened fd: Int32) -> String? {
        guard fd >= 0 else { return nil }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var hasher = SHA256()
        while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(chunk) }
        return hasher.finalizeBase64URL()
    }

    static func makeDirectory(_ directory: String) throws(DeployError) {
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
            throw .filesystem("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
    }

    /// The names in `directory` but `.` and `..`, as their bytes: Foundation repairs a name
    /// that is not UTF-8 into another string, which then names no file.
    static func names(in directory: String) throws(DeployError) -> [[UInt8]] {
        guard let stream = opendir(directory) else { throw .filesystem("cannot read \(directory): \(String(cString: strerror(errno)))") }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw .filesystem("cannot read \(directory): \(String(cString: strerror(errno)))") }
                return names
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if name != [0x2E], name != [0x2E, 0x2E] { names.append(name) }
        }
    }

    /// A file name's bytes for people: UTF-8 as it is, any other byte (and a control
    /// character) as `\xNN`.
    static func escaped(name: [UInt8]) -> String {
        var text = ""
        var index = 0
        while index < name.count {
            let lead = name[index]
            let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0
            if length > 0, index + length <= name.count, let character = String(validating: name[index..<index + length], as: UTF8.self),
               !character.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
                text += character
                index += length
            } else {
                text += "\\x" + String(lead, radix: 16, uppercase: true).leftPadded(to: 2)
                index += 1
            }
        }
        return text
    }

    /// The bytes of a regular file of at most `limit` bytes; `nil` when there is none. Links,
    /// FIFOs and devices are refused (a FIFO would block, a device never end).
    static func readSmall(_ path: String, limit: Int = 4 << 20) throws(DeployError) -> Data? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw .filesystem("\(path) is a symbolic link, not a regular file") }
            throw .filesystem("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { throw .filesystem("\(path) is not a regular file") }
        guard info.st_size <= limit else { throw .filesystem("\(path) is larger than \(limit) bytes") }
        do { return try handle.readToEnd() ?? Data() } catch { throw .filesystem("cannot read \(path): \(error.localizedDescription)") }
    }

    /// Streams `source` into a new file in `directory`, hashing it on the way, and links it
    /// as `name(hash)`, its base64url SHA-256 with what the caller adds. A file already there
    /// is kept when it holds the same bytes, and refused otherwise (it is never replaced); a
    /// file linked here is recorded in `created`. Returns the hash and the name. Throws
    /// `.cancelled`, the temporary file removed, when `isCancelled` says so between chunks.
    static func storeContentAddressed(_ source: String, in directory: String, created: CreatedPaths, isCancelled: () -> Bool = { false },
                                      name: (_ hash: String) -> String) throws(DeployError) -> (hash: String, name: String) {
        guard let input = FileHandle(forReadingAtPath: source) else { throw .filesystem("cannot read \(source)") }
        defer { try? input.close() }
        let temporary = directory + "/.incoming-" + uniqueSuffix()
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .filesystem("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let output = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var hasher = SHA256()
        do {
            defer { try? output.close() }
            while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
                guard !isCancelled() else { throw DeployError.cancelled }
                hasher.update(chunk)
                try output.write(contentsOf: chunk)
            }
            try output.synchronize()
        } catch {
            unlink(temporary)
            if case DeployError.cancelled = error { throw .cancelled }
            throw .filesystem("cannot copy \(source): \(error.localizedDescription)")
        }
        let hash = hasher.finalizeBase64URL()
        let target = directory + "/" + name(hash)
        // Linked into place only where nothing is (never over another file), then the temporary name goes.
        let linked = link(temporary, target) == 0 ? 0 : errno
        unlink(temporary)
        if linked == EEXIST {
            // An asset never changes: one already there must be these bytes.
            guard sha256(of: target) == hash else {
                throw .refused("\(target) is already there, but it is not these bytes (damaged, or not a regular file); remove it and publish again")
            }
        } else if linked != 0 {
            throw .filesystem("cannot write \(target): \(String(cString: strerror(linked)))")
        } else {
            created.record(file: target)
        }
        return (hash, name(hash))
    }
}

/// The files and directories one call created, so that it can take back exactly those:
/// files are unlinked and directories removed only once empty (never recursively), newest first.
final class CreatedPaths {
    private var paths: [(path: String, isDirectory: Bool)] = []

    /// Makes directory `path`, which must not exist yet.
    func makeDirectory(_ path: String) throws(DeployError) {
        guard mkdir(path, 0o755) == 0 else { throw .filesystem("cannot create \(path): \(String(cString: strerror(errno)))") }
        paths.append((path, true))
    }

    /// Makes directory `path` unless it is there already (then it is not this call's to remove).
    func makeDirectoryIfMissing(_ path: String) throws(DeployError) {
        guard mkdir(path, 0o755) != 0 else {
            paths.append((path, true))
            return
        }
        guard errno == EEXIST else { throw .filesystem("cannot create \(path): \(String(cString: strerror(errno)))") }
    }

    /// Records a file this call put where nothing was, by a link or an atomic rename.
    func record(file path: String) {
        paths.append((path, false))
    }

    /// Creates file `path`, which must not exist yet, and returns its descriptor.
    func createFile(_ path: String) throws(DeployError) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .filesystem("cannot create \(path): \(String(cString: strerror(errno)))") }
        paths.append((path, false))
        return fd
    }

    /// Removes file `path`, which this call created, and forgets it; a path it did not
    /// record is left alone.
    func remove(file path: String) throws(DeployError) {
        guard paths.contains(where: { $0.path == path && !$0.isDirectory }) else { return }
        guard unlink(path) == 0 || errno == ENOENT else { throw .filesystem("cannot remove \(path): \(String(cString: strerror(errno)))") }
        paths.removeAll { $0.path == path && !$0.isDirectory }
    }

    /// Flushes every directory recorded, so that the names made in them survive a power cut.
    func syncDirectories() throws(DeployError) {
        for (path, isDirectory) in paths where isDirectory { try Files.syncDirectory(path) }
    }

    /// Removes everything recorded, newest first.
    func removeAll() {
        for (path, isDirectory) in paths.reversed() { _ = isDirectory ? rmdir(path) : unlink(path) }
        paths.removeAll()
    }
}

/// Files flushed to disk on a thread of their own while the caller writes the next one, so
/// that a download waits for the disk once, at its end, not once per file. A file handed over
/// is the flusher's: it is `fsync`ed, then closed. At most 16 wait at a time (each holds its
/// descriptor open); `flush` blocks while that many do.
final class BackgroundFlusher: @unchecked Sendable {
    private let queue = DispatchQueue(label: "eventlog.deploys.flush")
    private let slots = DispatchSemaphore(value: 16)
    /// The first file that could not be flushed; touched only on `queue`.
    private var failure: DeployError?

    /// Runs `body` with a flusher and returns once every file it handed over is flushed and
    /// closed, whether `body` returned or threw. Throws what `body` threw, else the first
    /// file that could not be flushed.
    static func flushing<T>(_ body: (BackgroundFlusher) throws -> T) throws -> T {
        let flusher = BackgroundFlusher()
        let result = Result { try body(flusher) }
        let failure = flusher.queue.sync { flusher.failure }
        if let failure, case .success = result { throw failure }
        return try result.get()
    }

    private init() {}

    /// Flushes and closes `fd`, the descriptor of file `path`, on the flusher's thread.
    func flush(_ fd: Int32, path: String) {
        slots.wait()
        queue.async { [self] in
            if fsync(fd) != 0, failure == nil { failure = .filesystem("cannot flush \(path): \(String(cString: strerror(errno)))") }
            close(fd)
            slots.signal()
        }
    }
}

/// An exclusive `flock` on a file, released when the value is.
final class DirectoryLock: Sendable {
    private let descriptor: Int32

    init(_ path: String) throws(DeployError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw .filesystem("cannot open \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            close(fd)
            if busy { throw .busy("another deploy client is using \((path as NSString).deletingLastPathComponent)") }
            throw .filesystem("cannot lock \(path): \(reason)")
        }
        descriptor = fd
    }

    deinit { close(descriptor) }
}

/// A new install awaiting the app's confirmation of a good launch, and what it replaced.
public struct PendingInstall: Sendable, Hashable {
    /// The update installed into working.
    public var update: String
    /// The update it replaced; `nil`: the embedded bundle.
    public var previous: String?
    /// Whether the web view has loaded it: a launch that finds it still unconfirmed rolls back.
    public var launched = false
    /// When the web view loaded it, by the log's clock; `nil` before, and in a pending file
    /// written before ready timeouts.
    public var launchedAt: Timestamp?
}

/// Why a deploy step failed, in one line.
public enum DeployError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A manifest, or the answer to a manifest request, cannot be read: not JSON, a field
    /// missing or of the wrong type, a broken multipart body.
    case badManifest(String)
    /// The client will not take what it was given: an asset of another content type or not a
    /// regular file, a published update that changed, an interrupted download that differs.
    case refused(String)
    /// The source could not be reached or did not answer as it should: an HTTP error or
    /// timeout, an asset cut short, an update missing from a source directory.
    case transport(String)
    /// An asset's SHA-256 is not the one its manifest gives (both base64url).
    case integrity(key: String, expected: String, actual: String)
    /// A manifest or directive the trusted certificates do not vouch for: its `expo-signature`
    /// is missing, malformed, by an unknown key id, by a certificate out of its dates, or does
    /// not verify over the part's bytes.
    case signature(String)
    /// A file-system step failed, or the app directory holds something this client did not
    /// write (a link out of `updates/`, an unreadable pending install).
    case filesystem(String)
    /// The caller asked for something that cannot be done: a bad runtime version, platform,
    /// token, update id or bundle, a path that is not an app directory, no pending install.
    case usage(String)
    /// Another client holds the app directory's lock.
    case busy(String)
    /// The caller asked the step to stop (a publish's `isCancelled`); what it had done is undone.
    case cancelled

    public var description: String {
        switch self {
        case .cancelled: "cancelled"
        case .badManifest(let reason): "bad manifest: \(reason)"
        case .refused(let reason), .transport(let reason), .signature(let reason), .filesystem(let reason), .usage(let reason), .busy(let reason): reason
        case .integrity(let key, let expected, let actual): "asset \(key): its SHA-256 is \(actual), the manifest says \(expected)"
        }
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
