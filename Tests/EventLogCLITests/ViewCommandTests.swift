import EventLog
import EventLogCLI
import EventLogTesting
import Foundation
import Testing

/// `eventlog view` as a browser shows it: the built binary writes the page, Debian's
/// chromium loads it headless and dumps the DOM its script built.
@Suite(.serialized) struct ViewCommandTests {
    let dir = TemporaryDirectory()

    /// The demo's seven messenger properties, each a lane.
    static let messengerProperties = ["inThreadSearch", "listFilter", "avatarScrollTarget", "conversationScrollTarget",
                                      "expandedAvatar", "expandedAttachment", "selectedTab"]
    static let faultyWhere = #"messenger.selectedTab == "bots" && messenger.listFilter == null"#

    /// A demo session recorded into `name`, by the faulty code when `faulty`.
    func demo(_ name: String, faulty: Bool = false) throws -> String {
        let db = dir.file(name)
        let recorded = try runEventlog(["demo", "--force", "--db", db] + (faulty ? ["--regression", "compound-tab-filter"] : []))
        #expect(recorded.code == 0, "\(recorded.err)")
        return db
    }

    /// The page `view` writes for `arguments`, loaded with `fragment` (`#search=…`), as its DOM.
    func viewedDOM(_ arguments: [String], fragment: String = "") throws -> String {
        let page = dir.file("page-\(UUID().uuidString).html")
        let written = try runEventlog(["view", "--output", page] + arguments)
        #expect(written.code == 0, "\(written.err)")
        return try HeadlessChromium.dom(ofFile: page, fragment: fragment, profile: dir.file("chromium-profile"))
    }

    /// The seqs of the elements that carry `attribute` (such as `data-bisect="first-bad"`), in order.
    func seqs(of dom: String, carrying attribute: String? = nil) -> [UInt64] {
        HeadlessChromium.startTags(in: dom).filter { tag in
            tag.contains(#"class="row"#) && (attribute.map { tag.contains($0) } ?? true)
        }.compactMap { tag in
            tag.firstMatch(of: /data-seq="(\d+)"/).flatMap { UInt64($0.1) }
        }
    }

    func firstBad(_ arguments: [String]) throws -> UInt64? {
        let bisect = try runEventlog(["bisect", "--json"] + arguments)
        return try StateValue(json: bisect.out)["firstBad"]?.intValue.map(UInt64.init)
    }

    @Test func theDemoSessionHasARowPerEventAndALaneForEachMessengerProperty() throws {
        let db = try demo("demo.lmdb")
        let last = try #require(try StateValue(json: try runEventlog(["info", "--json", "--db", db]).out)["lastSeq"]?.intValue)
        let dom = try viewedDOM(["--db", db])
        #expect(seqs(of: dom) == Array(1...UInt64(last)))
        let lanes = Set(dom.matches(of: /data-path="([^"]*)"/).map { String($0.1) })
        for property in Self.messengerProperties {
            #expect(lanes.contains("messenger." + property), "no lane for messenger.\(property) among \(lanes.sorted())")
        }
        let narrowed = try viewedDOM(["--db", db, "--from", "20", "--to", "30"])
        #expect(seqs(of: narrowed) == Array(20...30))
        #expect(narrowed.contains("Events 20-30 (11) of the log's 1-\(last)"))
    }

    @Test func theBisectAnswerAndTheFirstDifferenceAreMarkedAtTheirEvents() throws {
        let good = try demo("good.lmdb")
        let faulty = try demo("faulty.lmdb", faulty: true)
        let bisected = try #require(try firstBad(["--db", faulty, "--where", Self.faultyWhere]))
        let differs = try #require(try firstBad(["--db", faulty, "--against", good]))
        let dom = try viewedDOM(["--db", faulty, "--where", Self.faultyWhere, "--against", good])
        #expect(seqs(of: dom, carrying: #"data-bisect="first-bad""#) == [bisected])
        #expect(seqs(of: dom, carrying: #"data-diverges="true""#) == [differs])
        // The page opens on the answer: the state panel shows the state after it.
        #expect(dom.contains(#"data-selected="\#(bisected)""#))
        #expect(dom.contains("state after \(bisected)"))
        // Each lane is the two logs aligned: the other's track below this one's, and in the
        // filter's lane its first tick that differs is at the first difference.
        let lanes = dom.matches(of: /<div class="lane paired" data-path="([^"]*)">/).map { String($0.1) }
        #expect(lanes.count == dom.matches(of: /data-log="against"/).count && lanes.contains("messenger.listFilter"), "\(lanes)")
        let filterLane = try #require(dom.firstMatch(of: /data-path="messenger\.listFilter">(.*?)(?:<div class="lane paired"|<\/section>)/)?.1)
        let otherTrack = try #require(filterLane.firstMatch(of: /data-log="against">(.*)/)?.1)
        let differing = otherTrack.matches(of: /class="tick other differs" title="the other log, (\d+):[^"]*" data-index="(\d+)"/)
        let firstDiffering = try #require(differing.first, "\(otherTrack)")
        #expect(UInt64(firstDiffering.1) == differs && UInt64(firstDiffering.2) == differs - 1, "\(otherTrack)")

        // A window that ends before the answer marks nothing, and says so.
        let before = try viewedDOM(["--db", faulty, "--where", Self.faultyWhere, "--to", String(bisected - 1)])
        #expect(seqs(of: before, carrying: "data-bisect").isEmpty)
        #expect(before.contains("holds after no event in range"))
    }

    @Test func aReplayDivergenceIsMarkedWithRecordedAndRecomputedWrites() throws {
        let faulty = try demo("faulty.lmdb", faulty: true)
        let diverges = try #require(try firstBad(["--db", faulty, "--replay"]))
        let dom = try viewedDOM(["--db", faulty, "--replay"])
        #expect(seqs(of: dom, carrying: #"data-diverges="true""#) == [diverges])
        #expect(dom.contains("today's code first disagrees at event \(diverges)"))
        // Today's code writes the filter the faulty recording lacks.
        #expect(dom.contains(#"<div class="write">messenger.listFilter: null → "unread"</div>"#))
    }

    @Test func searchFromTheURLFragmentFindsWhereAValueFirstAppears() throws {
        let db = try demo("demo.lmdb")
        // The first event that wrote "unread" to the list filter, as the log says.
        let history = try runEventlog(["history", "messenger.listFilter", "--json", "--db", db]).out
        let firstUnread = try #require(try history.split(separator: "\n").map { try StateValue(json: String($0)) }.first { record in
            record["writes"]?.arrayValue?.contains { $0["new"] == "unread" } ?? false
        }?["seq"]?.intValue)
        let dom = try viewedDOM(["--db", db], fragment: "#search=unread")
        let hits = dom.matches(of: /<li data-result-seq="(\d+)">([^<]*)<\/li>/).map { (seq: Int64($0.1)!, text: String($0.2)) }
        #expect(hits.contains { $0.seq == firstUnread && $0.text.hasSuffix(#"messenger.listFilter = "unread""#) }, "\(hits)")
        #expect(hits.allSatisfy { $0.text.localizedCaseInsensitiveContains("unread") })
        #expect(hits.map(\.seq) == hits.map(\.seq).sorted())
        let nothing = try viewedDOM(["--db", db], fragment: "#search=no-such-value-anywhere")
        #expect(nothing.contains(#"no path or value in range holds "no-such-value-anywhere""#))
    }

    @Test func hostileStringsStayTextAndNoInjectedScriptRuns() throws {
        let db = dir.file("hostile.lmdb")
        // Each injection would retitle the page if it ran; paths, values, names and the URL of a cause hold them.
        let lines = [
            #"{"stream":"s<script>document.title='PWNED'</script>","type":"t\"'<img src=x onerror=\"document.title='PWNED'\">","#
                + #""origin":"url<b>\u202e","cause":{"id":"plan-<i>1</i>","step":0,"#
                + #""source":"botmessages://x/<script>document.title='PWNED'</script>\u202egnp.exe"},"#
                + #""payload":{"q":"</script><script>document.title='PWNED'</script>"},"#
                + #""writes":[{"path":"h[\"<script>document.title='PWNED'</script>\u202e\\u0007\"]","#
                + #""new":"</script><!--<script>document.title='PWNED'</script>\u2028\u0007\u202e&amp;"}]}"#,
            #"{"stream":"s","type":"t","origin":"test","writes":[{"path":"h[\"__proto__\"]","new":{"polluted":"<svg onload=document.title='PWNED'>"}}]}"#,
        ]
        #expect(try runEventlog(["import", "-", "--db", db], stdin: lines.joined(separator: "\n") + "\n").code == 0)
        let page = dir.file("hostile.html")
        #expect(try runEventlog(["view", "--db", db, "--output", page]).code == 0)
        // In the page's source the data cannot end its script element.
        let source = try String(contentsOfFile: page, encoding: .utf8)
        #expect(source.components(separatedBy: "</script>").count == 3)
        #expect(source.contains(#"\u003C/script\u003E"#))

        let dom = try HeadlessChromium.dom(ofFile: page, fragment: "#search=PWNED", profile: dir.file("chromium-profile"))
        #expect(dom.contains("<title>eventlog view: \(db) 1-2</title>"))
        #expect(HeadlessChromium.startTags(in: dom).filter { $0.hasPrefix("<script") || $0.hasPrefix("<img") || $0.hasPrefix("<svg") }.count == 2)
        // Shown as text, with control characters and bidi marks written as escapes.
        #expect(dom.contains(#"<span class="label">s&lt;script&gt;document.title='PWNED'&lt;/script&gt;/t"'&lt;img src=x onerror="document.title='PWNED'"&gt;"#))
        #expect(dom.contains(#"botmessages://x/&lt;script&gt;document.title='PWNED'&lt;/script&gt;\u{202E}gnp.exe"#))
        #expect(dom.contains(#"&lt;/script&gt;&lt;!--&lt;script&gt;document.title='PWNED'&lt;/script&gt;\u{2028}\u0007\u{202E}&amp;amp;"#))
        #expect(dom.contains("h.__proto__.polluted"))
        // No raw control character or bidi mark outside the data and the machine-read data-path.
        let body = String(dom[dom.range(of: "<body")!.lowerBound..<dom.range(of: #"<script type="application/json""#)!.lowerBound])
            .replacing(/data-path="[^"]*"/, with: "")
        #expect(!body.unicodeScalars.contains { Render.isControl($0) && $0 != "\n" }, "\(body.debugDescription)")
        // The hostile path is a lane under its own name.
        #expect(dom.contains(#"data-path="h[&quot;&lt;script&gt;document.title='PWNED'&lt;/script&gt;"# + "\u{202E}" + #"\u0007&quot;]""#))
    }

    @Test func badRangesAnUnwritableOutputAndAMissingLogAreOneLineErrorsLeavingNoFile() throws {
        let db = try demo("demo.lmdb")
        let page = dir.file("page.html")
        let blocker = dir.file("a-file")
        #expect(FileManager.default.createFile(atPath: blocker, contents: Data("x".utf8)))
        let cases: [(arguments: [String], code: Int32, message: String)] = [
            (["--from", "30", "--to", "20", "--output", page], 2, "Error: --from 30 is after --to 20"),
            (["--from", "100000", "--output", page], 2, "Error: nothing to view in 100000-"),
            (["--where", "messenger.selectedTab ==", "--output", page], 2, "Error: --where column"),
            (["--against", dir.file("missing.lmdb"), "--output", page], 3, "Error: cannot open \(dir.file("missing.lmdb"))"),
            (["--output", blocker + "/page.html"], 3, "Error: cannot write \(blocker)/page.html: Not a directory"),
        ]
        for (arguments, code, message) in cases {
            let outcome = try runEventlog(["view", "--db", db] + arguments)
            #expect(outcome.code == code, "\(arguments): \(outcome.err)")
            #expect(outcome.err.hasPrefix(message) && outcome.err.split(separator: "\n").count == 1, "\(arguments): \(outcome.err)")
            #expect(outcome.out.isEmpty)
        }
        #expect(!FileManager.default.fileExists(atPath: page))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["a-file", "demo.lmdb"])
    }

    /// `view --serve` started on `db`, and the address it prints.
    func server(_ arguments: [String]) throws -> (process: Process, address: String?, err: Pipe) {
        let process = try spawnEventlog(["view", "--serve"] + arguments)
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        return (process, String(decoding: line, as: UTF8.self).firstMatch(of: /http:\/\/127\.0\.0\.1:\d+\//).map { String($0.0) }, err)
    }

    @Test func aServedPageShowsAnEventAnotherProcessAppendsAfterItStarted() throws {
        let db = dir.file("live.lmdb")
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "count", count: 3)).code == 0)
        let served = try server(["--db", db])
        // Not `terminate()`: a child spawned from a Dispatch thread inherits its blocked signals.
        defer {
            kill(served.process.processIdentifier, SIGKILL)
            served.process.waitUntilExit()
        }
        let address = try #require(served.address)
        // Appended after the server read the log: only the event stream can bring it to the page.
        let event = #"{"stream":"t","type":"live","origin":"test","writes":[{"path":"live.marker","new":"appended"}]}"#
        #expect(try runEventlog(["import", "-", "--db", db], stdin: event + "\n").code == 0)
        let dom = try HeadlessChromium.dom(of: address, profile: dir.file("chromium-profile"), budget: 1_500)
        #expect(seqs(of: dom) == [1, 2, 3, 4])
        #expect(dom.contains(#"data-path="live.marker""#))
        #expect(dom.contains(#"data-selected="4""#), "the newest event stays selected")

        // A port in use, and options that do not go together, are one-line errors.
        let port = String(address.split(separator: ":").last!.dropLast())
        let taken = try runEventlog(["view", "--serve", "--port", port, "--db", db])
        #expect(taken.code == 3 && taken.err.hasPrefix("Error: cannot listen on 127.0.0.1:\(port): Address already in use"), "\(taken.err)")
        for (arguments, message) in [(["--serve", "--to", "2"], "Error: --serve follows the log and writes no file"),
                                     (["--port", "8080"], "Error: --port goes with --serve"),
                                     (["--serve", "--bind", "localhost"], "Error: --bind takes an IPv4 address")] {
            let refused = try runEventlog(["view", "--db", db] + arguments)
            #expect(refused.code == 2 && refused.err.hasPrefix(message), "\(arguments): \(refused.err)")
        }
    }

    @Test func aServerAnswersOnlyForItsOwnName() throws {
        let db = dir.file("live.lmdb")
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "count", count: 1)).code == 0)
        let served = try server(["--db", db])
        // Not `terminate()`: a child spawned from a Dispatch thread inherits its blocked signals.
        defer {
            kill(served.process.processIdentifier, SIGKILL)
            served.process.waitUntilExit()
        }
        let address = try #require(served.address)
        // A page elsewhere reaching this server through a name of its own is refused.
        func status(_ path: String, host: String?) throws -> String {
            let fetch = Process()
            fetch.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            fetch.arguments = ["-c", """
                import http.client, sys
                url = sys.argv[1].split("/")[2]
                connection = http.client.HTTPConnection(url, timeout=10)
                connection.putrequest("GET", sys.argv[2], skip_host=len(sys.argv) > 3)
                if len(sys.argv) > 3: connection.putheader("Host", sys.argv[3])
                connection.endheaders()
                print(connection.getresponse().status)
                """, address, path] + (host.map { [$0] } ?? [])
            let out = Pipe()
            fetch.standardOutput = out
            try fetch.run()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            fetch.waitUntilExit()
            return text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try status("/", host: nil) == "200")
        #expect(try status("/", host: "attacker.example") == "421")
        #expect(try status("/nothing-here", host: nil) == "404")
    }

    @Test func aLongerRangeShowsTwentyThousandEventsAndSaysWhich() throws {
        let db = dir.file("long.lmdb")
        #expect(try runEventlog(["import", "-", "--db", db], stdin: counterEvents(key: "count", count: 20_005)).code == 0)
        func data(_ arguments: [String]) throws -> StateValue { try StateValue(json: try runEventlog(["view", "--json", "--db", db] + arguments).out) }
        let newest = try data([])
        #expect(newest["shown"] == [6, 20_005] && newest["asked"] == [1, 20_005])
        #expect(newest["events"]?.arrayValue?.count == 20_000)
        #expect(newest["initial"] == ["count": 4])
        #expect(try data(["--from", "3"])["shown"] == [3, 20_002])
        #expect(try data(["--from", "3", "--to", "9"])["shown"] == [3, 9])
    }
}

/// Debian's chromium, headless, as the tests drive it.
enum HeadlessChromium {
    struct Missing: Error, CustomStringConvertible {
        var description: String { "chromium is not installed at /usr/bin/chromium: tools/install-deps.sh installs it (apt-get install chromium)" }
    }

    struct Failed: Error, CustomStringConvertible {
        var description: String
    }

    /// The DOM of the page at `path` (opened as `file://…` plus `fragment`) once its script
    /// has run, with `profile` as chromium's user data directory.
    static func dom(ofFile path: String, fragment: String = "", profile: String) throws -> String {
        try dom(of: URL(fileURLWithPath: path).absoluteString + fragment, profile: profile)
    }

    /// The DOM of the page at `address` after `budget` milliseconds of the page's (virtual) time.
    static func dom(of address: String, profile: String, budget: Int = 5_000) throws -> String {
        let chromium = "/usr/bin/chromium"
        guard FileManager.default.isExecutableFile(atPath: chromium) else { throw Missing() }
        let output = profile + "-dom-\(UUID().uuidString).html"
        guard FileManager.default.createFile(atPath: output, contents: nil) else { throw Failed(description: "cannot create \(output)") }
        defer { try? FileManager.default.removeItem(atPath: output) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromium)
        process.arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile)", "--dump-dom",
                             "--virtual-time-budget=\(budget)", address]
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = FileHandle.nullDevice
        try process.run()
        // A browser that hangs fails the test instead of stopping the suite.
        let deadline = Date().addingTimeInterval(120)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning {
            process.terminate()
            throw Failed(description: "chromium did not finish loading \(address) within 120 s")
        }
        guard process.terminationStatus == 0 else { throw Failed(description: "chromium exited \(process.terminationStatus) loading \(address)") }
        return try String(contentsOfFile: output, encoding: .utf8)
    }

    /// The start tags of `dom` (`<div class="row" data-seq="1" …>`), in order.
    static func startTags(in dom: String) -> [Substring] {
        dom.matches(of: /<[a-z][^>]*>/).map(\.0)
    }
}
