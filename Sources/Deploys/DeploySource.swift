import Foundation
import HTTPFetch

/// Who the app install is, as a manifest request says it.
public struct DeployTarget: Sendable, Hashable {
    /// Stork's "restrict deploys to native versions": only updates for this runtime are offered.
    public var runtimeVersion: String
    /// `ios` or `android`, the two platforms the protocol knows.
    public var platform: String
    /// Sent as `Authorization: Bearer TOKEN` when set.
    public var projectToken: String?
    /// The channel asked for (`expo-channel-name`); `nil` for the server's default channel.
    public var channel: String?
    /// The id of the update embedded in the app (the bundle it runs when none is installed),
    /// lowercased: sent as `expo-embedded-update-id`, and as `expo-current-update-id` while
    /// the embedded bundle runs, as Expo's client sends them (so a server that rolls back to
    /// the embedded update answers `noUpdateAvailable` once it runs). `nil`: none is sent.
    public var embeddedUpdateID: String?

    /// A target, checked so that each value can travel as an HTTP header and the runtime
    /// version can name a directory.
    /// - Throws: `DeployError.usage` for a runtime version that is not 1 to 255 printable
    ///   ASCII characters without spaces, `/` or `\` (or is `.` or `..`), a platform other
    ///   than `ios` or `android`, a project token that is empty or not printable ASCII
    ///   without spaces, a channel `Channel.problem(with:)` refuses, or an embedded update id
    ///   that is not a UUID.
    public init(runtimeVersion: String, platform: String = "ios", projectToken: String? = nil, channel: String? = nil,
                embeddedUpdateID: String? = nil) throws(DeployError) {
        // Printable ASCII: it travels as an HTTP header and names a directory.
        guard !runtimeVersion.isEmpty, runtimeVersion.utf8.count <= 255,
              runtimeVersion.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) && $0 != "/" && $0 != "\\" }),
              runtimeVersion != ".", runtimeVersion != ".." else {
            throw .usage("the runtime version must be 1 to 255 printable ASCII characters without spaces, / or \\, not \"\(runtimeVersion)\"")
        }
        guard platform == "ios" || platform == "android" else { throw .usage("the platform must be ios or android, not \"\(platform)\"") }
        if let projectToken, projectToken.isEmpty || !projectToken.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) {
            throw .usage("the project token must be printable ASCII without spaces")
        }
        if let channel, let problem = Channel.problem(with: channel) { throw .usage(problem) }
        if let embeddedUpdateID, UUID(uuidString: embeddedUpdateID) == nil {
            throw .usage("the embedded update id must be a UUID, not \"\(embeddedUpdateID)\"")
        }
        self.embeddedUpdateID = embeddedUpdateID?.lowercased()
        self.runtimeVersion = runtimeVersion
        self.platform = platform
        self.projectToken = projectToken
        self.channel = channel
    }
}

/// Where updates come from: a server speaking Expo Updates v1 (its manifest URL), or a
/// directory in the layout `DeployPublisher` writes (the same files, no server: for the demo
/// and offline use).
public enum DeploySource: Sendable, Hashable, CustomStringConvertible {
    case server(URL)
    case directory(String)

    /// An `http://` or `https://` URL (the manifest endpoint), else a directory.
    public init(_ text: String) {
        if let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" {
            self = .server(url)
        } else {
            self = .directory(text)
        }
    }

    /// The source as it is recorded and shown: a URL's credentials are replaced by
    /// `REDACTED` (its userinfo, and query values named like secrets).
    public var description: String {
        switch self {
        case .server(let url): HTTPFetch.redacted(url)
        case .directory(let path): path
        }
    }

    /// The largest manifest answer read.
    static let maxManifestBytes = 4 << 20

    /// Asks for the newest update for `target`, saying which update the app runs now, which
    /// install asks (`installID`, as `eas-client-id`: what places it in a rollout) and
    /// sending the headers an earlier response defined (the protocol's own take precedence);
    /// returns the answer and what its headers ask the client to keep. With `certificates`,
    /// it sends `expo-expect-signature` and throws `DeployError.signature` for a manifest or
    /// directive they do not vouch for (a directory's are never signed).
    func latest(for target: DeployTarget, current: String?, installID: String? = nil, serverDefinedHeaders: [String: String] = [:],
                certificates: TrustedCertificates = TrustedCertificates(), fetch: HTTPFetch) throws(DeployError) -> (ManifestAnswer, KeptHeaders) {
        switch self {
        case .server(let url):
            var headers = ["expo-protocol-version": "1", "expo-platform": target.platform, "expo-runtime-version": target.runtimeVersion,
                           "accept": "multipart/mixed, application/expo+json, application/json"]
            if let current = current ?? target.embeddedUpdateID { headers["expo-current-update-id"] = current }
            if let embedded = target.embeddedUpdateID { headers["expo-embedded-update-id"] = embedded }
            if let token = target.projectToken { headers["authorization"] = "Bearer \(token)" }
            if let channel = target.channel { headers["expo-channel-name"] = channel }
            if let installID { headers["eas-client-id"] = installID }
            if let expectation = certificates.expectSignatureHeader { headers["expo-expect-signature"] = expectation }
            headers.merge(serverDefinedHeaders.map { ($0.key.lowercased(), $0.value) }) { protocolsOwn, _ in protocolsOwn }
            let response: HTTPFetch.Response
            let body: Data
            do { (response, body) = try fetch.data(url, headers: headers, maxBytes: Self.maxManifestBytes) } catch { throw .transport("\(error)") }
            guard response.status == 200 || response.status == 204 else {
                throw .transport("HTTP \(response.status) from \(url.host ?? url.absoluteString) for the manifest")
            }
            return (try ManifestAnswer(status: response.status, contentType: response.contentType, body: [UInt8](body),
                                       signature: response.headers["expo-signature"], certificates: certificates),
                    KeptHeaders(serverDefinedHeaders: response.headers["expo-server-defined-headers"],
                                manifestFilters: response.headers["expo-manifest-filters"]))
        case .directory(let root):
            let runtime = root + "/updates/" + target.runtimeVersion
            let channel = try Channel(target.channel, runtimeVersion: target.runtimeVersion, serverDirectory: root)
            guard let id = try channel.served(to: installID) else {
                throw .transport("\(root) has no update for runtime version \(target.runtimeVersion)"
                                 + (target.channel.map { " on channel \($0)" } ?? ""))
            }
            if !certificates.isEmpty, let problem = certificates.problem(with: nil, over: [], of: id == "rollBackToEmbedded" ? "directive" : "manifest") {
                throw .signature(problem + " (a directory source is never signed)")
            }
            if id == "rollBackToEmbedded" { return (.rollBackToEmbedded(commitTime: nil), .none) }
            guard AppDirectory.isSafeUpdateID(id) else { throw .badManifest("\(channel.currentPath) names no update: \"\(id)\"") }
            guard let data = try Files.readSmall(runtime + "/" + id + ".json", limit: Self.maxManifestBytes) else {
                throw .transport("\(runtime)/\(id).json is missing")
            }
            return (.update(try UpdateManifest(json: [UInt8](data)), assetHeaders: [:]), .none)
        }
    }

    /// Streams `asset` into `body` chunk by chunk, after checking the answer's content type.
    /// - Throws: ``DeployError`` when the source fails or refuses the asset; what `body`
    ///   throws (the client's own failures, such as recording progress), as it is.
    func download(_ asset: UpdateManifest.Asset, headers: [String: String], target: DeployTarget, fetch: HTTPFetch,
                  expectedLength: (Int?) -> Void, body: (Data) throws -> Void) throws {
        switch self {
        case .server(let manifestURL):
            guard let url = URL(string: asset.url, relativeTo: manifestURL)?.absoluteURL,
                  let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw DeployError.badManifest("asset \(asset.key) has no http(s) URL: \(HTTPFetch.redacted(asset.url))")
            }
            var request = headers
            request["accept"] = "\(asset.contentType), */*"
            // The token goes to the update server only, never to another host an asset URL names.
            if let token = target.projectToken, HTTPFetch.origin(of: url) == HTTPFetch.origin(of: manifestURL) {
                request["authorization"] = "Bearer \(token)"
            }
            do {
                _ = try fetch.get(url, headers: request, head: { response in
                    guard response.status == 200 else { throw DeployError.transport("HTTP \(response.status) for asset \(asset.key)") }
                    try Self.checkContentType(response.contentType, of: asset)
                    // A compressed answer's length is not the length of the bytes handed over.
                    let encoded = response.headers["content-encoding"].map { $0.lowercased() != "identity" } ?? false
                    expectedLength(encoded ? nil : response.headers["content-length"].flatMap { Int($0) })
                }, body: body)
            } catch {
                if case .stopped(let inner) = error { throw inner }
                if case .cancelled = error { throw DeployError.cancelled }
                throw DeployError.transport("asset \(asset.key): \(error)")
            }
        case .directory(let root):
            // The publisher's asset URLs are /assets/KEY; nothing else is read from the directory.
            let name = asset.url.hasPrefix("/assets/") ? String(asset.url.dropFirst("/assets/".count)) : ""
            guard Self.isAssetName(name) else {
                throw DeployError.badManifest("asset \(asset.key) has a URL this directory does not serve: \(HTTPFetch.redacted(asset.url))")
            }
            let file = root + "/assets/" + name
            let type = try Files.readSmall(file + ".type", limit: 4_096).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
            try Self.checkContentType(type, of: asset)
            // A regular file only: not a link (to /dev/zero, say), not a FIFO that never ends.
            let fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else {
                if errno == ELOOP { throw DeployError.refused("\(file) is a symbolic link, not a regular file") }
                throw DeployError.transport("cannot read \(file): \(String(cString: strerror(errno)))")
            }
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                close(fd)
                throw DeployError.refused("\(file) is not a regular file")
            }
            let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            expectedLength(Int(info.st_size))
            while true {
                let chunk: Data?
                do { chunk = try handle.read(upToCount: 1 << 20) } catch { throw DeployError.transport("cannot read \(file): \(error)") }
                guard let chunk, !chunk.isEmpty else { break }
                try body(chunk)
            }
        }
    }

    /// Whether `name` is one the publisher stores assets under: a base64url SHA-256 (43
    /// characters), optionally with `.` and a lowercase extension of up to 8 letters and
    /// digits, but never `type` (`KEY.type` holds an asset's content type). Nothing else (a
    /// `/`, `..`, a NUL) reaches the file system.
    static func isAssetName(_ name: String) -> Bool {
        let parts = name.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts[0].count == 43, parts[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return false }
        guard parts.count == 2 else { return true }
        return parts[1] != "type" && (1...8).contains(parts[1].count) && parts[1].allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber) }
    }

    /// The answer's media type must mean the asset's (`image/jpeg` for `image/jpg`,
    /// `text/javascript` for `application/javascript`); the hash is checked besides.
    static func checkContentType(_ contentType: String?, of asset: UpdateManifest.Asset) throws(DeployError) {
        let got = MediaType(contentType ?? "").type
        guard MediaType(contentType ?? "").meaning == MediaType(asset.contentType).meaning else {
            throw .refused("asset \(asset.key) came as \(got.isEmpty ? "no content type" : got), the manifest says \(asset.contentType)")
        }
    }
}
