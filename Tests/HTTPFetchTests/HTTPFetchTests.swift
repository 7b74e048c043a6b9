import Foundation
import HTTPFetch
import LoopbackServer
import Testing

/// The transport against real servers on loopback that misbehave: whatever a server does,
/// a fetch ends in a result or a one-line error, never in the end of the process.
struct HTTPFetchTests {
    final class Fixtures {
        let directory: String
        let server: LoopbackServer

        init(host: String = "127.0.0.1") throws {
            directory = NSTemporaryDirectory() + "httpfetch-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Data(#"{"ok":true}"#.utf8).write(to: URL(fileURLWithPath: directory + "/ok.json"))
            server = try LoopbackServer.fixtures(in: directory, host: host)
        }

        func url(_ path: String) -> URL { server.url.appendingPathComponent(path) }

        /// What the server saw of the request that `/record/NAME` answered.
        func recorded(_ name: String) throws -> String { try String(contentsOfFile: directory + "/" + name + ".headers", encoding: .utf8) }

        deinit { try? FileManager.default.removeItem(atPath: directory) }
    }

    @Test("a connection cut or garbled anywhere is a transport error with a reason",
          arguments: [("cut/status", "closed the connection before its headers ended"),
                      ("cut/headers", "closed the connection before its headers ended"),
                      ("cut/body", "was lost"),
                      ("not-http", "did not answer in HTTP")])
    func aCutOrGarbledAnswerIsAnError(path: String, reason: String) throws {
        let fixtures = try Fixtures()
        var heads = 0
        do {
            _ = try HTTPFetch(idleTimeout: 5).get(fixtures.url(path), head: { _ in heads += 1 }, body: { _ in })
            Issue.record("\(path) was fetched")
        } catch .transport(let message) {
            #expect(message.contains(reason), "\(message)")
            #expect(!message.contains("\n"))
        } catch {
            Issue.record("\(path): \(error)")
        }
        // Headers that never ended are never handed over as a response.
        #expect(heads == (path == "cut/body" ? 1 : 0))
    }

    @Test func anIPv6LiteralIsFetched() throws {
        let fixtures = try Fixtures(host: "::1")
        #expect(fixtures.server.url.absoluteString.hasPrefix("http://[::1]:"))
        let (response, body) = try HTTPFetch().data(fixtures.url("ok.json"), maxBytes: 1_000)
        #expect(response.status == 200)
        #expect(String(decoding: body, as: UTF8.self) == #"{"ok":true}"#)
    }

    @Test func aTricklingServerIsCutOffByTheDeadline() throws {
        let fixtures = try Fixtures()
        // Never silent for a second, so only the deadline can end it.
        do {
            _ = try HTTPFetch(idleTimeout: 30, totalTimeout: 2).data(fixtures.url("trickle"), maxBytes: 1 << 20)
            Issue.record("a trickle ended")
        } catch .deadlineExceeded(let seconds) {
            #expect(seconds == 2)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func aSilentServerTimesOut() throws {
        let fixtures = try Fixtures()
        do {
            _ = try HTTPFetch(idleTimeout: 0.5, totalTimeout: 60).data(fixtures.url("hang"), maxBytes: 1 << 20)
            Issue.record("a silent server answered")
        } catch .timedOut(let seconds) {
            #expect(seconds == 0.5)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func redirectsAreFollowedAndCredentialsStayWithTheirOrigin() throws {
        let fixtures = try Fixtures()
        let other = try Fixtures()
        let headers = ["Authorization": "Bearer secret-token", "X-Kept": "yes"]
        // Same origin: the header goes along.
        let same = URL(string: fixtures.server.url.absoluteString + "/redirect?to=/record/same")!
        let (status, _) = try HTTPFetch().data(same, headers: headers, maxBytes: 1_000)
        #expect(status.status == 404) // what /record answers once it wrote the headers
        #expect(try fixtures.recorded("same").contains("authorization: Bearer secret-token"))
        // Another origin (another port): it is dropped, and the rest goes along.
        let cross = URL(string: fixtures.server.url.absoluteString + "/redirect?to=" + other.server.url.absoluteString + "/record/cross")!
        _ = try HTTPFetch().data(cross, headers: headers, maxBytes: 1_000)
        let seen = try other.recorded("cross")
        #expect(!seen.contains("secret-token"), "\(seen)")
        #expect(seen.contains("x-kept: yes"))
    }

    @Test func aRedirectLoopEnds() throws {
        let fixtures = try Fixtures()
        #expect { try HTTPFetch().data(fixtures.url("loop"), maxBytes: 1_000) } throws: { error in
            "\(error)".contains("redirected more than \(HTTPFetch.maxRedirects) times")
        }
    }

    @Test func aCompressedBodyIsDecodedAndStoppableAtAnySize() throws {
        let fixtures = try Fixtures()
        // 64 MiB once decoded, about 64 KiB on the wire: the caller's limit holds on what it is handed.
        #expect { try HTTPFetch().data(fixtures.url("gzip-bomb"), maxBytes: 1 << 20) } throws: { error in
            guard case HTTPFetchError.tooLarge(1 << 20) = error else { return false }
            return true
        }
        var decoded = 0
        _ = try HTTPFetch().get(fixtures.url("gzip-bomb")) { decoded += $0.count }
        #expect(decoded == 64 << 20)
    }

    @Test func aHeaderThatWouldBeTwoLinesIsRefusedBeforeAnyRequest() throws {
        let fixtures = try Fixtures()
        for (name, value) in [("X-Evil", "a\r\nHost: elsewhere"), ("Bad Name", "x"), ("X-Nul", "a\u{0}b")] {
            #expect(throws: HTTPFetchError.self) { try HTTPFetch().data(fixtures.url("record/evil"), headers: [name: value], maxBytes: 1_000) }
        }
        #expect(!FileManager.default.fileExists(atPath: fixtures.directory + "/evil.headers"))
    }

    @Test("credentials in a URL are redacted, everything else kept",
          arguments: [("http://user:pw@example.com/m", "http://REDACTED@example.com/m"),
                      ("http://user@example.com:8080/m", "http://REDACTED@example.com:8080/m"),
                      ("https://cdn.example/a.js?X-Amz-Signature=abc&X-Amz-Credential=k&v=2", "https://cdn.example/a.js?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED&v=2"),
                      ("https://itunes.apple.com/lookup?id=888237539&access_token=t", "https://itunes.apple.com/lookup?id=888237539&access_token=REDACTED"),
                      ("http://[::1]:8080/manifest?platform=ios", "http://[::1]:8080/manifest?platform=ios")])
    func credentialsAreRedacted(url: String, shown: String) throws {
        #expect(HTTPFetch.redacted(try #require(URL(string: url))) == shown)
    }

    @Test func aProblemWithAURLNeverShowsItsPassword() throws {
        let problem = HTTPFetch.problem(with: try #require(URL(string: "ftp://user:hunter2@example.com/x")))
        #expect(problem == "not an http or https URL: ftp://REDACTED@example.com/x")
    }
}
