import EventLog
import Foundation
import HTTPFetch

/// The newest release of an app in the store, as the iTunes Search API's lookup describes it.
public struct StoreRelease: Sendable, Hashable {
    /// The release's version (`version` in the lookup).
    public var version: AppVersion
    /// What the release changed, as the store shows it.
    public var releaseNotes: String?
    /// The app's store page.
    public var trackViewURL: String?
    /// The oldest OS version the release runs on.
    public var minimumOSVersion: AppVersion?
    /// `currentVersionReleaseDate`, as the store spells it (RFC 3339, such as
    /// `2026-11-30T08:00:00Z`).
    public var releaseDate: String?

    /// A release of the given fields, as a test or demo makes one up.
    public init(version: AppVersion, releaseNotes: String? = nil, trackViewURL: String? = nil,
                minimumOSVersion: AppVersion? = nil, releaseDate: String? = nil) {
        self.version = version
        self.releaseNotes = releaseNotes
        self.trackViewURL = trackViewURL
        self.minimumOSVersion = minimumOSVersion
        self.releaseDate = releaseDate
    }

    /// Reads a lookup response: `{"resultCount":1,"results":[{"version":"3.4.1",…}]}`. The first
    /// result is the app; unknown fields are ignored.
    /// - Throws: `StoreLookupError` saying what is wrong: not JSON or not an object,
    ///   `resultCount` 0 or no results, no or a bad `version`, a bad `minimumOsVersion`, a
    ///   `currentVersionReleaseDate` that is not an RFC 3339 time, or a field read as text that
    ///   is not a string.
    public init(lookupResponse bytes: [UInt8]) throws(StoreLookupError) {
        let response: StateValue
        do { response = try StateValue(jsonUTF8: bytes) } catch { throw StoreLookupError("the response is not JSON: \(error)") }
        guard let object = response.objectValue else { throw StoreLookupError("the response is a JSON \(response.kindName), not an object") }
        if let count = object["resultCount"], count.numberValue == 0 { throw StoreLookupError("the store knows no such app (resultCount 0)") }
        guard let result = object["results"]?.arrayValue?.first?.objectValue else {
            throw StoreLookupError("the response has no results")
        }
        func text(_ key: String) throws(StoreLookupError) -> String? {
            guard let value = result[key], value != .null else { return nil }
            guard let string = value.stringValue else { throw StoreLookupError("\"\(key)\" is a \(value.kindName), not a string") }
            return string
        }
        guard let versionText = try text("version") else { throw StoreLookupError("the result has no \"version\"") }
        guard let version = AppVersion(versionText) else { throw StoreLookupError("\"version\" is not a version: \"\(versionText)\"") }
        var minimumOS: AppVersion?
        if let minimumText = try text("minimumOsVersion") {
            guard let parsed = AppVersion(minimumText) else { throw StoreLookupError("\"minimumOsVersion\" is not a version: \"\(minimumText)\"") }
            minimumOS = parsed
        }
        let releaseDate = try text("currentVersionReleaseDate")
        if let releaseDate, Timestamp(rfc3339: releaseDate) == nil {
            throw StoreLookupError("\"currentVersionReleaseDate\" is not an RFC 3339 time: \"\(releaseDate)\"")
        }
        self.init(version: version, releaseNotes: try text("releaseNotes"), trackViewURL: try text("trackViewUrl"),
                  minimumOSVersion: minimumOS, releaseDate: releaseDate)
    }
}

/// Why a lookup failed, in one line: it is recorded, and nothing else happens.
public struct StoreLookupError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, for people; recorded as the `lookupFailed` reason.
    public var reason: String
    /// An error saying `reason`.
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Where the store's answer comes from: the lookup URL (the real one is
/// `https://itunes.apple.com/lookup?id=APPID`, or `…/cn/lookup?id=APPID` for one country's
/// store) or a file holding a response.
public enum StoreLookupSource: Sendable, Hashable, CustomStringConvertible {
    case url(URL)
    case file(String)

    /// An `http://` or `https://` URL, else a file path.
    public init(_ text: String) {
        if let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" {
            self = .url(url)
        } else {
            self = .file(text)
        }
    }

    /// The lookup URL of the App Store for an app id, optionally in one country's store.
    public static func appStore(appID: String, country: String? = nil) -> StoreLookupSource? {
        var components = URLComponents(string: "https://itunes.apple.com")!
        components.path = (country.map { "/\($0)" } ?? "") + "/lookup"
        components.queryItems = [URLQueryItem(name: "id", value: appID)]
        return components.url.map(StoreLookupSource.url)
    }

    /// The source as it is recorded and shown: a URL's credentials are replaced by
    /// `REDACTED` (its userinfo, and query values named like secrets).
    public var description: String {
        switch self {
        case .url(let url): HTTPFetch.redacted(url)
        case .file(let path): path
        }
    }
}

/// Fetches and reads the store's answer; every failure is a `StoreLookupError`.
public struct StoreLookup: Sendable {
    /// The largest response read; a lookup is a few kilobytes.
    public static let maxResponseBytes = 1 << 20

    /// Where the answer is read from.
    public var source: StoreLookupSource
    /// How long the server may stay silent, in seconds.
    public var timeout: Double
    /// How long the whole lookup may take, connecting and redirects included, in seconds.
    public var deadline: Double

    /// A lookup of `source`: the server may stay silent at most `timeout` seconds, and the
    /// lookup take at most `deadline` seconds in all (by default `timeout`: a lookup is a few
    /// kilobytes, so a server trickling them is cut off as a silent one is).
    public init(_ source: StoreLookupSource, timeout: Double = 10, deadline: Double? = nil) {
        self.source = source
        self.timeout = timeout
        self.deadline = deadline ?? timeout
    }

    /// Fetches the answer (a GET, or the file's bytes) and reads it as a `StoreRelease`.
    /// - Returns: The release, or a `StoreLookupError` for a transport failure, an HTTP status
    ///   other than 200, an answer larger than `maxResponseBytes`, a file that is not a regular
    ///   file, or an answer `StoreRelease(lookupResponse:)` refuses. Never throws: a failed
    ///   lookup is a result to record.
    public func fetch() -> Result<StoreRelease, StoreLookupError> {
        Result { () throws(StoreLookupError) in try StoreRelease(lookupResponse: try responseBytes()) }
    }

    private func responseBytes() throws(StoreLookupError) -> [UInt8] {
        switch source {
        case .url(let url):
            let fetch = HTTPFetch(idleTimeout: timeout, totalTimeout: deadline)
            do {
                let (response, body) = try fetch.data(url, headers: ["Accept": "application/json"], maxBytes: Self.maxResponseBytes)
                guard response.status == 200 else { throw StoreLookupError("HTTP \(response.status) from \(url.host ?? url.absoluteString)") }
                return [UInt8](body)
            } catch {
                throw StoreLookupError("\(error)")
            }
        case .file(let path):
            return try Self.readFile(path)
        }
    }

    /// Reads a regular file of at most `maxResponseBytes`.
    private static func readFile(_ path: String) throws(StoreLookupError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) // a FIFO must not block the open
        guard fd >= 0 else { throw StoreLookupError("cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw StoreLookupError("\(path) is not a regular file") }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreLookupError("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { return bytes }
            guard bytes.count + count <= maxResponseBytes else { throw StoreLookupError("\(path) is larger than \(maxResponseBytes) bytes") }
            bytes.append(contentsOf: chunk[..<count])
        }
    }
}
