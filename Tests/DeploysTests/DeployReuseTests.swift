@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import Testing

/// Assets reused between updates (issue 30, point 3): what a complete update on disk holds is
/// linked into the next one, checked again, and only the rest is fetched.
struct DeployReuseTests {
    /// The bundle of the reuse tests: `index.html` and 20 scripts, the one at `changed` made different.
    private func bundle(changing changed: Int? = nil) -> [String: String] {
        var files = ["index.html": "<h1>reuse</h1>"]
        for index in 0..<20 { files["js/part-\(index).js"] = "part(\(index))" + (index == changed ? " // changed" : "") }
        return files
    }

    private func inode(_ path: String) throws -> Int? {
        try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int
    }

    /// The counts of the newest `downloaded` event.
    private func downloadedCounts(_ harness: DeployHarness) throws -> [String: Int64?] {
        var payload: StateValue?
        try harness.store.forEachRecord(from: 1) { record in
            if record.event.type == "downloaded" { payload = record.event.payload }
            return true
        }
        let counts = try #require(payload)
        let keys = ["reusedAssets", "reusedBytes", "downloadedAssets", "downloadedBytes"]
        return Dictionary(uniqueKeysWithValues: keys.map { (key: String) in (key, counts.objectValue?[key]?.intValue) })
    }

    @Test func anUpdateChangingOneOfTwentyOneAssetsFetchesOnlyThatOne() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(bundle(), id: "u1")
        try client.deliver()
        try client.confirmLaunch()
        #expect(try harness.assetRequests().count == 21)
        let u2 = try harness.publish(bundle(changing: 7), id: "u2")
        let changed = try #require(u2.assets.first { $0.key == "js/part-7.js" })

        #expect(try client.download() == "u2")
        // The server saw one more asset request: the changed script's.
        let changedKey = String(changed.url.dropFirst("/assets/".count))
        #expect(Array(try harness.assetRequests().dropFirst(21)) == [changedKey])
        let updates = harness.appDirectory + "/updates/"
        for (key, content) in bundle(changing: 7) {
            #expect(try String(contentsOfFile: updates + "u2/" + key, encoding: .utf8) == content, "\(key)")
            let shared = try inode(updates + "u1/" + key) == inode(updates + "u2/" + key)
            #expect(shared == (key != "js/part-7.js"), "\(key): a held asset is linked, the changed one is new")
        }
        #expect(try String(contentsOfFile: updates + "u1/js/part-7.js", encoding: .utf8) == "part(7)")
        let reusedBytes = bundle().filter { $0.key != "js/part-7.js" }.reduce(0) { $0 + $1.value.utf8.count }
        #expect(try downloadedCounts(harness) == ["reusedAssets": 20, "reusedBytes": Int64(reusedBytes), "downloadedAssets": 1,
                                                   "downloadedBytes": Int64("part(7) // changed".utf8.count)])
        #expect(try client.install() == "u2")
        #expect(harness.workingFile("js/part-7.js") == "part(7) // changed")
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// A held file whose bytes no longer hash as its manifest says is never part of a new
    /// update: it is fetched again, and the old file is left as it was.
    @Test func aDamagedHeldAssetIsFetchedAgainAndLeftAsItWas() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one", "js/app.js": "go()"], id: "u1")
        #expect(try client.download() == "u1")
        let held = harness.appDirectory + "/updates/u1/js/app.js"
        let damaged = try FileHandle(forUpdating: URL(fileURLWithPath: held))
        try damaged.write(contentsOf: Data("G".utf8)) // "go()" becomes "Go()", in place
        try damaged.close()
        let heldInode = try inode(held)
        let u2 = try harness.publish(["index.html": "two", "js/app.js": "go()"], id: "u2")

        #expect(try client.download() == "u2")
        let script = try #require(u2.assets.first { $0.key == "js/app.js" })
        #expect(try harness.assetRequests().suffix(2).sorted() == [u2.launchAsset.url, script.url].map { String($0.dropFirst("/assets/".count)) }.sorted())
        #expect(try String(contentsOfFile: harness.appDirectory + "/updates/u2/js/app.js", encoding: .utf8) == "go()")
        #expect(try inode(harness.appDirectory + "/updates/u2/js/app.js") != heldInode)
        #expect(try String(contentsOfFile: held, encoding: .utf8) == "Go()", "the damaged old file was changed")
        #expect(try inode(held) == heldInode)
        #expect(try downloadedCounts(harness)["reusedAssets"] == 0)
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// Where the file system refuses the link (another device, no permission), the held bytes
    /// are copied and hashed as they are written; a damaged one is then fetched instead.
    @Test func aRefusedLinkCopiesTheHeldBytesOrFetchesDamagedOnes() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        client.hardLink = { _, _ in errno = EXDEV; return -1 }
        try harness.publish(["index.html": "one", "js/app.js": "go()", "js/lib.js": "lib()"], id: "u1")
        #expect(try client.download() == "u1")
        let lib = harness.appDirectory + "/updates/u1/js/lib.js"
        let damaged = try FileHandle(forUpdating: URL(fileURLWithPath: lib))
        try damaged.write(contentsOf: Data("L".utf8))
        try damaged.close()
        let u2 = try harness.publish(["index.html": "two", "js/app.js": "go()", "js/lib.js": "lib()"], id: "u2")
        let before = try harness.assetRequests().count

        #expect(try client.download() == "u2")
        let fetched = try harness.assetRequests().dropFirst(before).sorted()
        let expected = u2.allAssets.filter { $0.key != "js/app.js" }.map { String($0.url.dropFirst("/assets/".count)) }.sorted()
        #expect(fetched == expected, "only js/app.js is copied; index.html is new and the held js/lib.js is damaged")
        let updates = harness.appDirectory + "/updates/"
        #expect(try String(contentsOfFile: updates + "u2/js/app.js", encoding: .utf8) == "go()")
        #expect(try inode(updates + "u2/js/app.js") != inode(updates + "u1/js/app.js"), "a copy, not a link")
        #expect(try String(contentsOfFile: updates + "u2/js/lib.js", encoding: .utf8) == "lib()")
        #expect(try String(contentsOfFile: lib, encoding: .utf8) == "Lib()")
        #expect(try downloadedCounts(harness) == ["reusedAssets": 1, "reusedBytes": 4, "downloadedAssets": 2, "downloadedBytes": 8])
        #expect(try FileManager.default.contentsOfDirectory(atPath: updates).sorted() == ["u1", "u1.json", "u2", "u2.json"])
    }

    /// The same bytes under another content type are another asset: fetched, its type checked.
    @Test func theSameBytesUnderAnotherTypeAreFetched() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one", "data.txt": "same"], id: "u1")
        #expect(try client.download() == "u1")
        let u2 = try harness.publish(["index.html": "one", "data.css": "same"], id: "u2")
        #expect(try client.download() == "u2")
        let css = try #require(u2.assets.first { $0.key == "data.css" })
        #expect(Array(try harness.assetRequests().dropFirst(2)) == [String(css.url.dropFirst("/assets/".count))])
        #expect(try downloadedCounts(harness)["reusedAssets"] == 1)
    }

    /// `downloaded` payloads from before reuse (no counts) replay as they did; a count that
    /// is not one is refused.
    @Test func theRulesTakeDownloadedPayloadsWithAndWithoutCounts() throws {
        func writes(_ payload: StateValue) -> Result<[Write], RuleError> {
            DeployRules.writes(for: Event(stream: DeployRules.stream, type: "downloaded", origin: .deploy, payload: payload),
                               in: .emptyObject, at: Timestamp(microsecondsSince1970: 0))
        }
        let old = writes(["updateId": "u1"])
        let counted = writes(["updateId": "u1", "reusedAssets": 20, "reusedBytes": 100, "downloadedAssets": 1, "downloadedBytes": 5])
        #expect((try? old.get()) != nil)
        #expect((try? old.get()) == (try? counted.get()), "the counts change no state")
        #expect((try? writes(["updateId": "u1", "reusedBytes": -1]).get()) == nil)
        #expect((try? writes(["updateId": "u1", "downloadedAssets": "many"]).get()) == nil)
    }
}
