import EventLog
import Foundation

/// An update as the Expo Updates v1 protocol describes it: a manifest and the assets it names.
/// Unknown fields are ignored, as the protocol asks.
public struct UpdateManifest: Sendable, Hashable {
    /// The update's id; the client installs an update under this name, so it must pass
    /// `AppDirectory.isSafeUpdateID`.
    public var id: String
    /// When the update was published, as the manifest gives it (RFC 3339 from this
    /// package's publisher); not interpreted.
    public var createdAt: String
    /// The native runtime the update is built for; the client refuses any other.
    public var runtimeVersion: String
    /// The entry point: the page the web view loads (`index.html` for a web bundle).
    public var launchAsset: Asset
    /// The update's other files.
    public var assets: [Asset]
    /// The manifest's `metadata` entries whose values are strings; others are dropped.
    public var metadata: [String: String]

    /// The launch asset and the others, in order.
    public var allAssets: [Asset] { [launchAsset] + assets }

    /// Whether this update was created before `other`, by their `createdAt` (ISO 8601); `false`
    /// when either does not read as a time, since neither is then known to be older.
    public func isOlder(than other: UpdateManifest) -> Bool {
        guard let mine = Timestamp(rfc3339: createdAt), let theirs = Timestamp(rfc3339: other.createdAt) else { return false }
        return mine < theirs
    }

    /// One file of an update. `key` is the file's path inside the bundle (this package's
    /// publisher writes it so), which the client checks before writing anything.
    public struct Asset: Sendable, Hashable {
        /// The file's path inside the bundle, such as `js/app.js`.
        public var key: String
        /// base64url SHA-256 of the bytes, without padding.
        public var hash: String?
        /// The media type the answer to the asset's request must carry, such as `text/html`.
        public var contentType: String
        /// The file's extension with its dot, such as `.js`; `nil` when it has none.
        public var fileExtension: String?
        /// Where the asset is fetched from: absolute, or relative to the manifest's URL.
        public var url: String

        /// An asset as a manifest describes it; nothing is checked here (the client checks
        /// keys and hashes before it writes anything).
        public init(key: String, hash: String?, contentType: String, fileExtension: String? = nil, url: String) {
            self.key = key
            self.hash = hash
            self.contentType = contentType
            self.fileExtension = fileExtension
            self.url = url
        }
    }

    /// Reads a manifest body. Every field the protocol names has its type checked (unknown
    /// fields are ignored): `id`, `createdAt` and `runtimeVersion` strings, `launchAsset` an
    /// asset, `assets` an array of assets (missing: none), `metadata` an object of strings and
    /// `extra` an object (missing: empty); an asset's `key`, `contentType` and `url` strings,
    /// its `hash` and `fileExtension` strings when present.
    /// - Throws: `DeployError.badManifest` naming the first field that is missing or of the wrong type.
    public init(json bytes: [UInt8]) throws(DeployError) {
        let value: StateValue
        do { value = try StateValue(jsonUTF8: bytes) } catch { throw .badManifest("not JSON: \(error)") }
        guard let object = value.objectValue else { throw .badManifest("a JSON \(value.kindName), not an object") }
        func string(_ key: String, in object: StateObject, _ what: String) throws(DeployError) -> String {
            guard let text = try optionalString(key, in: object, what) else { throw .badManifest("\(what) has no string \"\(key)\"") }
            return text
        }
        func optionalString(_ key: String, in object: StateObject, _ what: String) throws(DeployError) -> String? {
            guard let field = object[key] else { return nil }
            guard let text = field.stringValue else { throw Self.wrongType(what, key, field, "a string") }
            return text
        }
        func asset(_ value: StateValue, _ what: String) throws(DeployError) -> Asset {
            guard let object = value.objectValue else { throw .badManifest("\(what) is not an object") }
            return Asset(key: try string("key", in: object, what), hash: try optionalString("hash", in: object, what),
                         contentType: try string("contentType", in: object, what),
                         fileExtension: try optionalString("fileExtension", in: object, what), url: try string("url", in: object, what))
        }
        id = try string("id", in: object, "the manifest")
        createdAt = try string("createdAt", in: object, "the manifest")
        runtimeVersion = try string("runtimeVersion", in: object, "the manifest")
        guard let launch = object["launchAsset"] else { throw .badManifest("the manifest has no \"launchAsset\"") }
        launchAsset = try asset(launch, "launchAsset")
        var assets: [Asset] = []
        if let field = object["assets"] {
            guard let items = field.arrayValue else { throw Self.wrongType("the manifest", "assets", field, "an array") }
            for (index, item) in items.enumerated() { assets.append(try asset(item, "assets[\(index)]")) }
        }
        self.assets = assets
        var metadata: [String: String] = [:]
        if let field = object["metadata"] {
            guard let entries = field.objectValue else { throw Self.wrongType("the manifest", "metadata", field, "an object") }
            for key in entries.keys { metadata[key] = try string(key, in: entries, "metadata") }
        }
        self.metadata = metadata
        if let extra = object["extra"], extra.objectValue == nil { throw Self.wrongType("the manifest", "extra", extra, "an object") }
    }

    /// `what`'s `key` is `field`, which is not `expected`.
    static func wrongType(_ what: String, _ key: String, _ field: StateValue, _ expected: String) -> DeployError {
        .badManifest("\(what)'s \"\(key)\" is a JSON \(field.kindName), not \(expected)")
    }

    /// A manifest of the given fields, as a publisher makes one; nothing is checked here.
    public init(id: String, createdAt: String, runtimeVersion: String, launchAsset: Asset, assets: [Asset], metadata: [String: String] = [:]) {
        self.id = id
        self.createdAt = createdAt
        self.runtimeVersion = runtimeVersion
        self.launchAsset = launchAsset
        self.assets = assets
        self.metadata = metadata
    }

    /// The manifest as JSON, as the publisher writes it.
    public var json: StateValue {
        func asset(_ asset: Asset) -> StateValue {
            var object: StateObject = ["key": .string(asset.key), "contentType": .string(asset.contentType), "url": .string(asset.url)]
            if let hash = asset.hash { object["hash"] = .string(hash) }
            if let fileExtension = asset.fileExtension { object["fileExtension"] = .string(fileExtension) }
            return .object(object)
        }
        var metadataObject = StateObject()
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) { metadataObject[key] = .string(value) }
        return ["id": .string(id), "createdAt": .string(createdAt), "runtimeVersion": .string(runtimeVersion),
                "launchAsset": asset(launchAsset), "assets": .array(assets.map(asset)), "metadata": .object(metadataObject),
                "extra": .emptyObject]
    }
}

/// What a server said to a manifest request.
public enum ManifestAnswer: Sendable, Hashable {
    /// A newer update to offer, with the extra headers each asset's request must carry.
    case update(UpdateManifest, assetHeaders: [String: [String: String]])
    /// The `noUpdateAvailable` directive, a 204, or an empty multipart body.
    case noUpdateAvailable
    /// The `rollBackToEmbedded` directive: go back to the bundle the app shipped with. Its
    /// `parameters.commitTime` (ISO 8601), when it has one, says when the rollback was made.
    case rollBackToEmbedded(commitTime: String?)
}

/// What a manifest response's headers ask the client to keep until a later response replaces
/// it (Expo Updates v1, "Common response headers"); each `nil` when the response does not carry it.
public struct KeptHeaders: Sendable, Hashable {
    /// `expo-server-defined-headers`: headers to send with every later manifest request.
    public var serverDefinedHeaders: [String: String]?
    /// `expo-manifest-filters`: the metadata an update must not contradict, by lowercased key.
    public var manifestFilters: [String: String]?

    /// Neither.
    public static let none = KeptHeaders()

    /// The two headers of a response, read as Expo's structured-field dictionaries (a value
    /// of a kind they leave out, such as a byte sequence, is left out; a header that is not a
    /// dictionary at all is kept as nothing, so the stored one stays).
    init(serverDefinedHeaders: String? = nil, manifestFilters: String? = nil) {
        self.serverDefinedHeaders = serverDefinedHeaders.flatMap(Self.texts)
        self.manifestFilters = manifestFilters.flatMap(Self.texts)
    }

    /// A dictionary's members as text: strings as they are, numbers in decimal, booleans
    /// as `true` or `false`.
    private static func texts(_ header: String) -> [String: String]? {
        guard let members = StructuredFields.dictionary(header) else { return nil }
        var texts: [String: String] = [:]
        for (key, value) in members { texts[key] = value.stringValue ?? value.json() }
        return texts
    }

    /// The first metadata field of `manifest` that `filters` refuse: a filtered field must be
    /// missing or equal to the filter (keys compared without case, as Expo's client compares
    /// them); `nil` when the update passes.
    static func contradiction(in manifest: UpdateManifest, filters: [String: String]) -> (key: String, value: String)? {
        for (key, value) in manifest.metadata {
            if let wanted = filters[key.lowercased()], wanted != value { return (key, value) }
        }
        return nil
    }
}

extension ManifestAnswer {
    /// Reads a manifest response of either shape the protocol allows: a JSON manifest, or
    /// `multipart/mixed` with `manifest`, `extensions` and `directive` parts (found by their
    /// `name`, in any order; unknown parts are ignored). A directive of a type other than
    /// `noUpdateAvailable` and `rollBackToEmbedded`, or without a string `type`, is an error
    /// (`DeployError.badManifest` naming it), never taken for "no update".
    ///
    /// With `certificates` not empty, the manifest and the directive are read only once their
    /// `expo-signature` (the part's header; the response's, `signature`, for a JSON answer)
    /// signs their exact bytes, else `DeployError.signature` says why.
    package init(status: Int, contentType: String?, body: [UInt8], signature: String? = nil,
                 certificates: TrustedCertificates = TrustedCertificates()) throws(DeployError) {
        func verified(_ what: String, _ bytes: [UInt8], _ signature: String?) throws(DeployError) -> [UInt8] {
            guard !certificates.isEmpty else { return bytes }
            if let problem = certificates.problem(with: signature, over: bytes, of: what) { throw .signature(problem) }
            return bytes
        }
        if status == 204 { self = .noUpdateAvailable; return }
        let mediaType = contentType.map(MediaType.init) ?? MediaType("application/json")
        switch mediaType.type {
        case "application/json", "application/expo+json":
            self = .update(try UpdateManifest(json: try verified("manifest", body, signature)), assetHeaders: [:])
        case "multipart/mixed":
            guard let boundary = mediaType.parameters["boundary"], !boundary.isEmpty else { throw .badManifest("multipart/mixed without a boundary") }
            let parts = try Multipart.parts(of: body, boundary: boundary)
            var manifest: UpdateManifest?
            var assetHeaders: [String: [String: String]] = [:]
            var directive: ManifestAnswer?
            for part in parts {
                switch part.name {
                case "manifest": manifest = try UpdateManifest(json: try verified("manifest", part.body, part.headers["expo-signature"]))
                case "extensions":
                    let value: StateValue
                    do { value = try StateValue(jsonUTF8: part.body) } catch { throw .badManifest("the extensions part is not JSON: \(error)") }
                    guard let extensions = value.objectValue else { throw .badManifest("the extensions part is a JSON \(value.kindName), not an object") }
                    if let field = extensions["assetRequestHeaders"] {
                        guard let byKey = field.objectValue else { throw UpdateManifest.wrongType("the extensions", "assetRequestHeaders", field, "an object") }
                        for (key, headers) in byKey {
                            guard let names = headers.objectValue else { throw UpdateManifest.wrongType("assetRequestHeaders", key, headers, "an object") }
                            var map: [String: String] = [:]
                            for (name, header) in names {
                                guard let text = header.stringValue else { throw UpdateManifest.wrongType("assetRequestHeaders.\(key)", name, header, "a string") }
                                map[name] = text
                            }
                            assetHeaders[key] = map
                        }
                    }
                case "directive":
                    let value: StateValue
                    let bytes = try verified("directive", part.body, part.headers["expo-signature"])
                    do { value = try StateValue(jsonUTF8: bytes) } catch { throw .badManifest("the directive part is not JSON: \(error)") }
                    guard let body = value.objectValue else { throw .badManifest("the directive is a JSON \(value.kindName), not an object") }
                    guard let field = body["type"] else { throw .badManifest("the directive has no \"type\"") }
                    guard let type = field.stringValue else { throw UpdateManifest.wrongType("the directive", "type", field, "a string") }
                    switch type {
                    case "noUpdateAvailable": directive = .noUpdateAvailable
                    case "rollBackToEmbedded": directive = .rollBackToEmbedded(commitTime: body["parameters"]?["commitTime"]?.stringValue)
                    // Never taken for "nothing new": the server asked for something this client cannot do.
                    default: throw .badManifest("unknown directive \"\(type)\"; this client follows noUpdateAvailable and rollBackToEmbedded")
                    }
                default: break
                }
            }
            if let manifest { self = .update(manifest, assetHeaders: assetHeaders) } else { self = directive ?? .noUpdateAvailable }
        default:
            throw .badManifest("the answer is \(mediaType.type), not JSON or multipart/mixed")
        }
    }
}

/// A `Content-Type` value: its lowercased type and its parameters.
struct MediaType {
    var type: String
    var parameters: [String: String] = [:]

    /// The type with the spellings that mean the same replaced by one: `image/jpg` is
    /// `image/jpeg`, and the JavaScript types RFC 9239 made obsolete are `text/javascript`.
    var meaning: String { Self.synonyms[type] ?? type }

    private static let synonyms = ["image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg",
                                   "application/javascript": "text/javascript", "application/x-javascript": "text/javascript",
                                   "application/ecmascript": "text/javascript", "text/ecmascript": "text/javascript"]

    init(_ text: String) {
        let pieces = text.split(separator: ";", omittingEmptySubsequences: false)
        type = pieces.first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        for piece in pieces.dropFirst() {
            let pair = piece.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            parameters[pair[0].trimmingCharacters(in: .whitespaces).lowercased()] = value
        }
    }
}

/// RFC 2046 `multipart/mixed`, as much as manifest responses need.
enum Multipart {
    struct Part {
        var headers: [String: String]
        var body: [UInt8]
        /// The `name` parameter of `content-disposition`, whatever its disposition type.
        var name: String? { headers["content-disposition"].map(MediaType.init)?.parameters["name"] }
    }

    static func parts(of body: [UInt8], boundary: String) throws(DeployError) -> [Part] {
        let delimiter = Array("--\(boundary)".utf8)
        var positions: [Int] = []
        var index = 0
        while let found = find(delimiter, in: body, from: index) {
            // A delimiter starts the body or follows a line break.
            if found == 0 || (found >= 1 && body[found - 1] == UInt8(ascii: "\n")) { positions.append(found) }
            index = found + delimiter.count
        }
        guard !positions.isEmpty else {
            if body.allSatisfy({ $0 == 0x20 || $0 == 0x0D || $0 == 0x0A || $0 == 0x09 }) { return [] }
            throw .badManifest("the multipart body has no boundary line")
        }
        var parts: [Part] = []
        for (number, start) in positions.enumerated() {
            var cursor = start + delimiter.count
            if body[cursor...].starts(with: Array("--".utf8)) { break } // the close delimiter
            guard number + 1 < positions.count else { throw .badManifest("the multipart body is cut short (no closing boundary)") }
            // Skip the rest of the boundary line.
            guard let lineEnd = find(Array("\n".utf8), in: body, from: cursor) else { throw .badManifest("a multipart boundary line never ends") }
            cursor = lineEnd + 1
            var end = positions[number + 1]
            // The line break before the next delimiter belongs to it.
            if end > cursor, body[end - 1] == UInt8(ascii: "\n") { end -= 1 }
            if end > cursor, body[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            var headers: [String: String] = [:]
            while cursor < end {
                guard let next = find(Array("\n".utf8), in: body, from: cursor), next <= end else { break }
                var line = body[cursor..<next]
                if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
                cursor = next + 1
                if line.isEmpty { break }
                let text = String(decoding: line, as: UTF8.self)
                if let colon = text.firstIndex(of: ":") {
                    headers[text[..<colon].trimmingCharacters(in: .whitespaces).lowercased()] = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
            }
            parts.append(Part(headers: headers, body: cursor < end ? Array(body[cursor..<end]) : []))
        }
        return parts
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        var index = start
        let first = needle[0]
        while index <= haystack.count - needle.count {
            if haystack[index] == first, haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }
}
