import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing
import UpdatePrompts

/// Lookups against a server the test starts on loopback, and from files.
struct StoreLookupTests {
    static let jianshu = #"{"resultCount":1,"results":[{"version":"3.4.1","releaseNotes":"修复了一些问题","trackViewUrl":"https://apps.apple.com/app/id888237539","minimumOsVersion":"12.0","currentVersionReleaseDate":"2017-11-10T02:33:12Z","unknownField":[1,2]}]}"#

    final class Fixtures {
        let directory = TemporaryDirectory("lookup-fixtures")
        let server: LoopbackServer

        init() throws {
            for (name, body) in [("lookup.json", StoreLookupTests.jianshu), ("empty.json", #"{"resultCount":0,"results":[]}"#),
                                 ("bad.json", #"{"resultCount":1,"results":[{"version":"#), ("noversion.json", #"{"resultCount":1,"results":[{}]}"#),
                                 ("array.json", "[1,2]"), ("numeric.json", #"{"resultCount":1,"results":[{"version":3.4}]}"#),
                                 ("baddate.json", #"{"resultCount":1,"results":[{"version":"3.4.1","currentVersionReleaseDate":"yesterday"}]}"#),
                                 ("nodate.json", #"{"resultCount":1,"results":[{"version":"3.4.1"}]}"#)] {
                try Data(body.utf8).write(to: URL(fileURLWithPath: directory.file(name)))
            }
            server = try LoopbackServer.fixtures(in: directory.path)
        }

        func url(_ path: String) -> StoreLookupSource { .url(server.url.appendingPathComponent(path)) }
    }

    @Test func aLookupOverHTTPIsReadAndDecided() throws {
        let fixtures = try Fixtures()
        let release = try StoreLookup(fixtures.url("lookup.json")).fetch().get()
        #expect(release.version == AppVersion("3.4.1"))
        #expect(release.releaseNotes == "修复了一些问题")
        #expect(release.minimumOSVersion == AppVersion("12"))
        #expect(release.trackViewURL == "https://apps.apple.com/app/id888237539")

        let harness = try PromptHarness()
        let check = try harness.prompter("3.4").check(StoreLookup(fixtures.url("lookup.json")))
        #expect(check.decision == .promptShown)
        #expect(check.records.first?.event.cause?.source == fixtures.server.url.appendingPathComponent("lookup.json").absoluteString)
        try harness.expectReplayAgrees()
    }

    @Test func aLookupWithoutAReleaseDateDecidesReleaseDateUnknown() throws {
        let fixtures = try Fixtures()
        let harness = try PromptHarness()
        let check = try harness.prompter("3.4").check(StoreLookup(fixtures.url("nodate.json")))
        #expect(check.failure == nil)
        #expect(check.decision == .releaseDateUnknown)
        #expect(try harness.updates("lastPromptAt") == nil)
        #expect(try harness.prompter("3.4", PromptPolicy(releaseAgeDays: 0)).check(StoreLookup(fixtures.url("nodate.json"))).decision == .promptShown)
        try harness.expectReplayAgrees()
    }

    @Test("every failure is recorded with its reason, and nothing else changes",
          arguments: [("status/404", "HTTP 404"), ("status/500", "HTTP 500"), ("hang", "timed out"),
                      ("empty.json", "resultCount 0"), ("bad.json", "not JSON"), ("noversion.json", "no \"version\""),
                      ("array.json", "not an object"), ("numeric.json", "not a string"), ("endless", "larger than"),
                      ("baddate.json", "\"currentVersionReleaseDate\" is not an RFC 3339 time: \"yesterday\"")])
    func failures(_ path: String, _ reason: String) throws {
        let fixtures = try Fixtures()
        let harness = try PromptHarness()
        let stateBefore = try harness.store.currentState
        // A generous timeout but where the silence is the point: the machine may be busy.
        let check = try harness.prompter("1.0").check(StoreLookup(fixtures.url(path), timeout: path == "hang" ? 1 : 10))
        #expect(check.decision == nil)
        #expect(check.failure?.reason.contains(reason) == true, "\(check.failure?.reason ?? "no failure")")
        #expect(check.records.map(\.event.type) == ["lookupFailed"])
        #expect(Set(check.records[0].event.writes.map(\.path)) == [UpdateRules.path("lastCheck"), UpdateRules.path("lastLookupError")])
        #expect(stateBefore[UpdateRules.path("lastDecision")] == nil)
        #expect(try harness.updates("lastDecision") == nil)
        #expect(try harness.updates("storeVersion") == nil)
        #expect(check.failure.map { !$0.reason.contains("\n") } == true)
    }

    @Test func aServerThatIsDownIsAFailedLookup() throws {
        let fixtures = try Fixtures()
        let url = fixtures.url("lookup.json")
        fixtures.server.kill()
        let result = StoreLookup(url, timeout: 2).fetch()
        guard case .failure(let error) = result else { Issue.record("a lookup from a killed server succeeded"); return }
        #expect(error.reason.contains("cannot connect"), "\(error.reason)")
    }

    @Test func filesAreReadWithinTheirLimit() throws {
        let fixtures = try Fixtures()
        #expect(try StoreLookup(.file(fixtures.directory.file("lookup.json"))).fetch().get().version == AppVersion("3.4.1"))
        for (path, reason) in [(fixtures.directory.path, "not a regular file"), ("/dev/zero", "not a regular file"),
                               (fixtures.directory.file("missing.json"), "No such file")] {
            guard case .failure(let error) = StoreLookup(.file(path)).fetch() else { Issue.record("\(path) was read"); continue }
            #expect(error.reason.contains(reason), "\(error.reason)")
        }
        let large = fixtures.directory.file("large.json")
        try Data(count: StoreLookup.maxResponseBytes + 1).write(to: URL(fileURLWithPath: large))
        guard case .failure(let error) = StoreLookup(.file(large)).fetch() else { Issue.record("a large file was read"); return }
        #expect(error.reason.contains("larger than"))
    }

    @Test func sourcesAreURLsOrFiles() {
        #expect(StoreLookupSource("https://itunes.apple.com/lookup?id=888237539") == .url(URL(string: "https://itunes.apple.com/lookup?id=888237539")!))
        #expect(StoreLookupSource("lookup.json") == .file("lookup.json"))
        #expect(StoreLookupSource("ftp://example.com/x") == .file("ftp://example.com/x"))
        #expect(StoreLookupSource.appStore(appID: "888237539", country: "cn")?.description == "https://itunes.apple.com/cn/lookup?id=888237539")
    }
}

/// What outside tests found: each stays fixed.
struct UpdatePromptsHardeningTests {
    @Test func aServerThatTricklesIsCutOffByTheTotalTimeout() throws {
        let fixtures = try StoreLookupTests.Fixtures()
        let started = Date()
        guard case .failure(let error) = StoreLookup(fixtures.url("trickle"), timeout: 1).fetch() else {
            Issue.record("a trickling lookup succeeded"); return
        }
        #expect(error.reason.contains("timed out"), "\(error.reason)")
        // Three times the idle timeout, with room for a busy machine; without the deadline it never ends.
        #expect(Date().timeIntervalSince(started) < 30)
    }

    @Test func aRecordedIntervalOfAnyLengthNeverTraps() throws {
        let harness = try PromptHarness()
        #expect(try harness.check("1.0", store: "1.1", PromptPolicy(promptIntervalDays: 1)) == .promptShown)
        try harness.prompter("1.0").answer(.later)
        #expect(try harness.check("1.0", store: "1.1", PromptPolicy(promptIntervalDays: Int.max)) == .tooSoon)
        try harness.expectReplayAgrees()
    }

    @Test func aFIFOIsNotWaitedOn() throws {
        let directory = TemporaryDirectory("fifo")
        let fifo = directory.file("lookup.fifo")
        #expect(mkfifo(fifo, 0o644) == 0)
        guard case .failure(let error) = StoreLookup(.file(fifo)).fetch() else { Issue.record("a FIFO was read"); return }
        #expect(error.reason.contains("not a regular file"))
    }
}
