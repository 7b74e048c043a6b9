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

    public init(runtimeVersion: String, platform: String = "ios", projectToken: String? = nil) throws(DeployError) {
        guard !runtimeVersion.isEmpty, runtimeVersion.utf8.count <= 255,
              !runtimeVersion.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "/" || $0 == "\\" }),
              runtimeVersion != ".", runtimeVersion != ".." else {
            throw .usage("the runtime version must be 1 to 255 printable characters without / or \\, not \"\(runtimeVersion)\"")
        }
        guard platform == "ios" || platform == "android" else { throw .usage("the platform must be ios or android, not \"\(platform)\"") }
        self.runtimeVersion = runtimeVersion
        self.platform = platform
        self.projectToken = projectToken
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

    public var description: String {
        switch self {
        case .server(let url): url.absoluteString
        case .directory(let path): path
        }
    }

    /// The largest manifest answer read.
    static let maxManifestBytes = 4 << 20

    /// Asks for the newest update for `target`, saying which update the app runs now.
    func latest(for target: DeployTarget, current: String?, fetch: HTTPFetch) throws(DeployError) -> ManifestAnswer {
        switch self {
        case .server(let url):
            var headers = ["expo-protocol-version": "1", "expo-platform": target.platform, "expo-runtime-version": target.runtimeVersion,
                           "accept": "multipart/mixed, application/expo+json, application/json"]
            if let current { headers["expo-current-update-id"] = current }
            if let token = target.projectToken { headers["authorization"] = "Bearer \(token)" }
            let response: HTTPFetch.Response
            let body: Data
            do { (response, body) = try fetch.data(url, headers: headers, maxBytes: Self.maxManifestBytes) } catch { throw .transport("\(error)") }
            guard response.status == 200 || response.status == 204 else {
                throw .transport("HTTP \(response.status) from \(url.host ?? url.absoluteString) for the manifest")
            }
            return try ManifestAnswer(status: response.status, contentType: response.contentType, body: [UInt8](body))
        case .directory(let root):
            let runtime = root + "/updates/" + target.runtimeVersion
            guard let current = try? String(contentsOfFile: runtime + "/current", encoding: .utf8) else {
                throw .transport("\(root) has no update for runtime version \(target.runtimeVersion)")
            }
            let id = current.trimmingCharacters(in: .whitespacesAndNewlines)
            if id == "rollBackToEmbedded" { return .rollBackToEmbedded }
            guard AppDirectory.isSafeUpdateID(id) else { throw .badManifest("\(runtime)/current names no update: \"\(id)\"") }
            guard let data = FileManager.default.contents(atPath: runtime + "/" + id + ".json") else {
                throw .transport("\(runtime)/\(id).json is missing")
            }
            return .update(try UpdateManifest(json: [UInt8](data)), assetHeaders: [:])
        }
    }

    /// Streams `asset` into `body` chunk by chunk, after checking the answer's content type.
    func download(_ asset: UpdateManifest.Asset, headers: [String: String], target: DeployTarget, fetch: HTTPFetch,
                  expectedLength: (Int?) -> Void, body: (Data) throws -> Void) throws(DeployError) {
        switch self {
        case .server(let manifestURL):
            guard let url = URL(string: asset.url, relativeTo: manifestURL)?.absoluteURL,
                  let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw .badManifest("asset \(asset.key) has no http(s) URL: \(asset.url)")
            }
            var request = headers
            request["accept"] = "\(asset.contentType), */*"
            if let token = target.projectToken { request["authorization"] = "Bearer \(token)" }
            do {
                _ = try fetch.get(url, headers: request, head: { response in
                    guard response.status == 200 else { throw DeployError.transport("HTTP \(response.status) for asset \(asset.key)") }
                    try Self.checkContentType(response.contentType, of: asset)
                    expectedLength(response.headers["content-length"].flatMap { Int($0) })
                }, body: body)
            } catch {
                if case .stopped(let inner) = error, let deployError = inner as? DeployError { throw deployError }
                throw .transport("asset \(asset.key): \(error)")
            }
        case .directory(let root):
            // The publisher's asset URLs are /assets/KEY; nothing else is read from the directory.
            let name = asset.url.hasPrefix("/assets/") ? String(asset.url.dropFirst("/assets/".count)) : ""
            guard name.count == 43, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
                throw .badManifest("asset \(asset.key) has a URL this directory does not serve: \(asset.url)")
            }
            let file = root + "/assets/" + name
            let type = (try? String(contentsOfFile: file + ".type", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            try Self.checkContentType(type, of: asset)
            guard let handle = FileHandle(forReadingAtPath: file) else { throw .transport("\(file) is missing") }
            defer { try? handle.close() }
            expectedLength((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? nil)
            do {
                while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { try body(chunk) }
            } catch let error as DeployError {
                throw error
            } catch {
                throw .transport("cannot read \(file): \(error)")
            }
        }
    }

    /// The answer's media type must be the asset's.
    static func checkContentType(_ contentType: String?, of asset: UpdateManifest.Asset) throws(DeployError) {
        let got = MediaType(contentType ?? "").type
        guard got == MediaType(asset.contentType).type else {
            throw .refused("asset \(asset.key) came as \(got.isEmpty ? "no content type" : got), the manifest says \(asset.contentType)")
        }
    }
}
