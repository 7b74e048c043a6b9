@testable import Deploys
import EventLog
import Testing

/// Both response shapes Expo Updates v1 allows, as any conformant server may send them.
struct ManifestAnswerTests {
    static let manifest = #"{"id":"u1","createdAt":"2026-11-30T00:00:00Z","runtimeVersion":"1.0","unknownField":{"a":[1]},"#
        + #""launchAsset":{"key":"index.html","hash":"h","contentType":"text/html","url":"https://cdn.example/a"},"#
        + #""assets":[{"key":"app.js","hash":"j","contentType":"application/javascript","fileExtension":".js","url":"/b"}],"#
        + #""metadata":{"branch":"main"},"extra":{}}"#

    static func multipart(_ parts: [(disposition: String, body: String)], boundary: String = "b-123") -> [UInt8] {
        var text = ""
        for part in parts {
            text += "--\(boundary)\r\ncontent-disposition: \(part.disposition)\r\ncontent-type: application/json\r\n\r\n\(part.body)\r\n"
        }
        return Array((text + "--\(boundary)--\r\n").utf8)
    }

    @Test func aJSONManifest() throws {
        let answer = try ManifestAnswer(status: 200, contentType: "application/expo+json; charset=utf-8", body: Array(Self.manifest.utf8))
        guard case .update(let manifest, let headers) = answer else { Issue.record("\(answer)"); return }
        #expect(manifest.id == "u1")
        #expect(manifest.allAssets.map(\.key) == ["index.html", "app.js"])
        #expect(manifest.assets[0].fileExtension == ".js")
        #expect(manifest.metadata == ["branch": "main"])
        #expect(headers.isEmpty)
    }

    @Test func multipartPartsInAnyOrderWithAnyDisposition() throws {
        let body = Self.multipart([("inline; name=\"extensions\"", #"{"assetRequestHeaders":{"app.js":{"x-token":"t"}}}"#),
                                   ("form-data; name=\"unknown\"", "{}"),
                                   ("inline; name=manifest", Self.manifest)])
        let answer = try ManifestAnswer(status: 200, contentType: "multipart/mixed; boundary=\"b-123\"", body: body)
        guard case .update(let manifest, let headers) = answer else { Issue.record("\(answer)"); return }
        #expect(manifest.id == "u1")
        #expect(headers == ["app.js": ["x-token": "t"]])
    }

    @Test func directivesAndNothing() throws {
        let rollBack = Self.multipart([("form-data; name=\"directive\"", #"{"type":"rollBackToEmbedded","parameters":{"commitTime":"2026-11-30T00:00:00Z"}}"#)])
        #expect(try ManifestAnswer(status: 200, contentType: "multipart/mixed; boundary=b-123", body: rollBack) == .rollBackToEmbedded(commitTime: "2026-11-30T00:00:00Z"))
        let none = Self.multipart([("form-data; name=\"directive\"", #"{"type":"noUpdateAvailable"}"#)])
        #expect(try ManifestAnswer(status: 200, contentType: "multipart/mixed; boundary=b-123", body: none) == .noUpdateAvailable)
        // An unknown or typeless directive is never taken for "no update": it is an error naming it.
        for (body, reason) in [(#"{"type":"somethingNew"}"#, #"bad manifest: unknown directive "somethingNew"; this client follows noUpdateAvailable and rollBackToEmbedded"#),
                               ("{}", #"bad manifest: the directive has no "type""#),
                               (#"{"type":7}"#, #"bad manifest: the directive's "type" is a JSON integer, not a string"#),
                               ("[]", "bad manifest: the directive is a JSON array, not an object")] {
            let directive = Self.multipart([("form-data; name=\"directive\"", body)])
            #expect(throws: DeployError.badManifest(String(reason.dropFirst("bad manifest: ".count)))) {
                try ManifestAnswer(status: 200, contentType: "multipart/mixed; boundary=b-123", body: directive)
            }
        }
        #expect(try ManifestAnswer(status: 200, contentType: "multipart/mixed; boundary=b-123", body: []) == .noUpdateAvailable)
        #expect(try ManifestAnswer(status: 204, contentType: nil, body: []) == .noUpdateAvailable)
    }

    @Test func malformedAnswersAreErrors() {
        for (contentType, body, reason) in [
            ("multipart/mixed", "x", "without a boundary"),
            ("multipart/mixed; boundary=b-123", "--b-123\r\ncontent-disposition: form-data; name=manifest\r\n\r\n{}", "cut short"),
            ("multipart/mixed; boundary=b-123", "garbage", "no boundary line"),
            ("text/html", "<html>", "not JSON or multipart/mixed"),
            ("application/json", String(repeating: "[", count: 100_000), "not JSON"),
        ] {
            #expect { try ManifestAnswer(status: 200, contentType: contentType, body: Array(body.utf8)) } throws: { error in
                "\(error)".contains(reason)
            }
        }
    }

    /// Every field of a manifest has its type checked: a wrong one is refused with a one-line
    /// reason naming the field (an "assets" object was taken for no assets).
    @Test("a field of the wrong type is refused, named", arguments: [
        ("assets", #"{"a":{"key":"x.js"}}"#, #"the manifest's "assets" is a JSON object, not an array"#),
        ("assets", #""x""#, #"the manifest's "assets" is a JSON string, not an array"#),
        ("id", "5", #"the manifest's "id" is a JSON integer, not a string"#),
        ("createdAt", "null", #"the manifest's "createdAt" is a JSON null, not a string"#),
        ("runtimeVersion", "[1]", #"the manifest's "runtimeVersion" is a JSON array, not a string"#),
        ("launchAsset.hash", "1", #"launchAsset's "hash" is a JSON integer, not a string"#),
        ("assets[0].fileExtension", "true", #"assets[0]'s "fileExtension" is a JSON bool, not a string"#),
        ("assets[0].url", "{}", #"assets[0]'s "url" is a JSON object, not a string"#),
        ("assets[0]", "3", "assets[0] is not an object"),
        ("metadata", "[]", #"the manifest's "metadata" is a JSON array, not an object"#),
        ("metadata.branch", "1", #"metadata's "branch" is a JSON integer, not a string"#),
        ("extra", #""x""#, #"the manifest's "extra" is a JSON string, not an object"#),
    ])
    func wrongTypes(_ path: String, _ value: String, _ reason: String) throws {
        var manifest = try StateValue(json: Self.manifest)
        try manifest.set(try StateValue(json: value), at: StatePath(parsing: path))
        #expect(throws: DeployError.badManifest(reason)) { try UpdateManifest(json: Array(manifest.json().utf8)) }
        let headers = Self.multipart([("form-data; name=\"extensions\"", #"{"assetRequestHeaders":{"app.js":{"x-token":1}}}"#),
                                      ("form-data; name=\"manifest\"", Self.manifest)])
        #expect(throws: DeployError.badManifest(#"assetRequestHeaders.app.js's "x-token" is a JSON integer, not a string"#)) {
            try ManifestAnswer(status: 200, contentType: "multipart/mixed; boundary=b-123", body: headers)
        }
    }
}
