import Testing
import UpdatePrompts

struct AppVersionTests {
    static func version(_ text: String) -> AppVersion {
        guard let version = AppVersion(text) else { preconditionFailure("\(text) should be a version") }
        return version
    }

    @Test("the seed's rule: integer components left to right, a missing one is 0",
          arguments: [("1.10", "1.9"), ("2", "1.99.99"), ("3.4.1", "3.4"), ("1.0.1", "1"), ("10.0", "9.9.9"),
                      ("1.2", "1.2b"), ("1.2-beta.10", "1.2-beta.9"), ("1.2-beta", "1.2-alpha"), ("1.2.1b", "1.2"),
                      ("1.2-beta.1", "1.2-beta"), ("99999999999999999999999", "99999999999999999999998")])
    func newer(_ newer: String, _ older: String) {
        #expect(Self.version(newer) > Self.version(older))
        #expect(Self.version(older) < Self.version(newer))
        #expect(Self.version(newer) != Self.version(older))
    }

    @Test("equal versions", arguments: [("1.0", "1.0.0"), ("1", "1.0.0.0"), ("01.2", "1.02"), ("1..2", "1.0.2"),
                                        ("1.", "1"), ("v2.1", "2.1"), (" 3.4.1 ", "3.4.1"), ("1.2-beta.01", "1.2-beta.1"),
                                        ("1.2+45", "1.2"), ("1.2+45", "1.2+46"), ("1.2-beta+exp.sha.5114f85", "1.2-beta"),
                                        ("1.0.0+20130313144700", "1.0")])
    func equal(_ a: String, _ b: String) {
        #expect(Self.version(a) == Self.version(b))
        #expect(Self.version(a).hashValue == Self.version(b).hashValue)
        #expect(!(Self.version(a) < Self.version(b)) && !(Self.version(b) < Self.version(a)))
    }

    @Test("not versions: no leading digit", arguments: ["", " ", "beta", ".1", "v", "-1", "x1.2", "١٢"])
    func notAVersion(_ text: String) {
        #expect(AppVersion(text) == nil)
    }

    @Test("build metadata takes no part in ordering (semver.org item 10)",
          arguments: [("1.3+1", "1.2+99"), ("1.2", "1.2-beta+build.9"), ("1.2-beta.2+1", "1.2-beta.1+2")])
    func metadataIsIgnored(_ newer: String, _ older: String) {
        #expect(Self.version(newer) > Self.version(older))
    }

    @Test func labelsAndBuildMetadataAreKeptApart() {
        #expect(Self.version("1.2-beta.1+exp.sha.5114f85").label == "beta.1")
        #expect(Self.version("1.2-beta.1+exp.sha.5114f85").buildMetadata == "exp.sha.5114f85")
        #expect(Self.version("1.2+45").label.isEmpty)
        #expect(Self.version("1.2+45").buildMetadata == "45")
        #expect(Self.version("1.2+45").text == "1.2+45")
        #expect(Self.version("1.2 (45)").buildMetadata.isEmpty)
    }

    @Test func labelsAreKept() {
        #expect(Self.version("1.2-beta.1").label == "beta.1")
        #expect(Self.version("1.2b").label == "b")
        #expect(Self.version("1.2").label.isEmpty)
        #expect(Self.version("0012.0").components == ["12", "0"])
    }
}
