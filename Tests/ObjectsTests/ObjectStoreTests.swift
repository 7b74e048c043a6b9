import EventLog
import EventLogTesting
import Foundation
@testable import Objects
import Testing

/// The source's blog post: title, body, views, a draft flag, and a publish date stored under
/// its own JSON key in its own format.
struct BlogPost: StoredObject, Equatable {
    var id: String?
    var title: String
    var body: String
    var views: Int
    var draft: Bool
    var publishedDate: Date?
    var createdAt: Date?
    var updatedAt: Date?

    enum CodingKeys: String, CodingKey {
        case id, title, body, views, draft, createdAt, updatedAt
        case publishedDate = "jsonPubDate"
    }

    static let dateFormats = ["jsonPubDate": "yyyy-MM-dd HH:mm"]
}

final class ObjectsHarness {
    let temporary: TemporaryEventStore
    var clock: ManualClock { temporary.clock }
    var store: EventStore { temporary.store }
    let objects: ObjectStore

    init() throws {
        temporary = try TemporaryEventStore(stepMicroseconds: 1_500)
        objects = try ObjectStore(store: temporary.store)
    }

    static func post(_ title: String = "Blog Post Title!") -> BlogPost {
        BlogPost(title: title, body: "Body of the blog post.", views: 0, draft: true,
                 publishedDate: Date(timeIntervalSince1970: 1_764_000_000))
    }
}

@Suite struct ObjectStoreTests {
    /// A state the store accepted stays deletable: a save that would grow an object past what
    /// its delete (which records the whole object) can hold is refused, each save fitting on
    /// its own; a collection too large for one deleteAll event is deleted object by object.
    @Test func everyObjectTheStoreAcceptsCanBeDeleted() throws {
        let harness = try ObjectsHarness()
        let nine = StateValue.string(String(repeating: "a", count: 9 << 20))
        try harness.objects.save(["id": "big", "first": nine], in: "Blob")
        let error = try #require(throws: EventStoreError.self) { try harness.objects.save(["id": "big", "first": nine, "second": nine], in: "Blob") }
        guard case .limitExceeded(let reason) = error else { Issue.record("\(error)"); return }
        #expect(reason.hasPrefix("Blob \"big\" would be too large to delete (the event takes "), "\(reason)")
        #expect(try harness.objects.fetch("Blob", id: "big")?["version"] == 1)
        try harness.objects.delete("Blob", id: "big")
        #expect(try harness.objects.fetch("Blob", id: "big") == nil)

        let six = StateValue.string(String(repeating: "b", count: 6 << 20))
        for id in ["x", "y", "z"] { try harness.objects.save(["id": .string(id), "data": six], in: "Blob") }
        let before = try harness.store.lastSeq()
        #expect(try harness.objects.deleteAll("Blob") == 3)
        var types: [String] = []
        try harness.store.forEachRecord(from: before + 1) { types.append($0.event.type); return true }
        #expect(types == ["delete", "delete", "delete"])
        #expect(try harness.objects.fetchAll("Blob").objects.isEmpty)
        let difference = try harness.objects.problem(against: nil)
        #expect(difference == nil, "\(difference ?? "")")
        #expect(try harness.store.verify().isOK)
    }

    /// A read-only store of a log without a read model reads objects from the log's state, and
    /// verifying finds nothing to disagree with, rather than every object missing.
    @Test func aReadOnlyStoreWithoutAReadModelHasNothingToVerify() throws {
        let directory = TemporaryDirectory()
        let writer = try EventStore(path: directory.path)
        let post: StateValue = ["id": "a", "title": "From the log", "version": 1]
        try writer.append(Event(stream: ObjectStore.stream, type: "save", writes: [Write(StatePath([.key("objects"), .key("BlogPost"), .key("a")]), old: nil, new: post)]))
        var options = EventStore.Options()
        options.readOnly = true
        let reader = try ObjectStore(store: try EventStore(path: directory.path, options: options))
        #expect(try reader.fetch("BlogPost", id: "a")?["title"] == "From the log")
        #expect(try reader.problem(against: nil) == nil)
    }

    @Test func createThenUpdateKeepsCreatedAtAndCountsVersions() throws {
        let harness = try ObjectsHarness()
        let created = try harness.objects.save(ObjectsHarness.post())
        #expect(created.id == "00000001")
        #expect(created.object.id == created.id)
        #expect(created.version == 1)
        #expect(created.createdAt == created.updatedAt)
        var post = created.object
        post.views += 1
        let updated = try harness.objects.save(post)
        #expect(updated.id == created.id)
        #expect(updated.version == 2)
        #expect(updated.createdAt == created.createdAt)
        #expect(updated.updatedAt > created.updatedAt)
        #expect(updated.object.createdAt == created.createdAt)
        #expect(try harness.objects.fetch(BlogPost.self, id: created.id)?.object.views == 1)
    }

    @Test func anUpdateRecordsOnlyTheFieldsThatChanged() throws {
        let harness = try ObjectsHarness()
        var post = try harness.objects.save(ObjectsHarness.post()).object
        post.views = 7
        try harness.objects.save(post)
        let record = try #require(try harness.store.record(2))
        #expect(record.event.stream == "objects")
        #expect(record.event.type == "update")
        #expect(Set(record.event.writes.map(\.path.description)) == [
            "objects.BlogPost.00000001.views", "objects.BlogPost.00000001.version", "objects.BlogPost.00000001.updatedAt",
        ])
        #expect(record.event.writes.first { $0.path.description.hasSuffix("views") } == Write("objects.BlogPost.00000001.views", old: 0, new: 7))
        let create = try #require(try harness.store.record(1))
        #expect(create.event.writes.count == 1)
        #expect(create.event.writes[0].old == nil)
    }

    @Test func datesAreRFC3339WithFractionalSecondsAndRoundTrip() throws {
        let harness = try ObjectsHarness()
        let saved = try harness.objects.save(ObjectsHarness.post())
        let stored = try #require(try harness.objects.fetch("BlogPost", id: saved.id))
        #expect(stored["createdAt"] == "2025-11-30T02:05:40.123456Z")
        #expect(Timestamp(rfc3339: stored["createdAt"]!.stringValue!) == Timestamp(microsecondsSince1970: 1_764_468_340_123_456))
        #expect(saved.createdAt == Date(timeIntervalSince1970: 1_764_468_340.123456))
        let fetched = try #require(try harness.objects.fetch(BlogPost.self, id: saved.id))
        #expect(fetched.createdAt == saved.createdAt)
    }

    @Test func aPropertyMapsToItsOwnKeyAndDateFormat() throws {
        let harness = try ObjectsHarness()
        let saved = try harness.objects.save(ObjectsHarness.post())
        let stored = try #require(try harness.objects.fetch("BlogPost", id: saved.id))
        #expect(stored["jsonPubDate"] == "2025-11-24 16:00")
        #expect(stored["publishedDate"] == nil)
        #expect(try harness.store.currentState["objects.BlogPost.00000001.jsonPubDate"] == "2025-11-24 16:00")
        let fetched = try #require(try harness.objects.fetch(BlogPost.self, id: saved.id))
        #expect(fetched.object.publishedDate == Date(timeIntervalSince1970: 1_764_000_000))
    }

    @Test func deleteAndDeleteAll() throws {
        let harness = try ObjectsHarness()
        let ids = try (0..<5).map { try harness.objects.save(ObjectsHarness.post("post \($0)")).id }
        try harness.objects.delete(BlogPost.self, id: ids[2])
        #expect(try harness.objects.fetch(BlogPost.self, id: ids[2]) == nil)
        #expect(try harness.objects.fetchAll(BlogPost.self).objects.count == 4)
        let before = try harness.store.lastSeq()
        #expect(throws: ObjectStoreError.notFound(collection: "BlogPost", id: ids[2])) { try harness.objects.delete(BlogPost.self, id: ids[2]) }
        #expect(try harness.store.lastSeq() == before)
        #expect(try harness.objects.deleteAll(BlogPost.self) == 4)
        #expect(try harness.objects.fetchAll(BlogPost.self).objects.isEmpty)
        #expect(try harness.store.currentState["objects.BlogPost"] == nil)
        #expect(try harness.objects.deleteAll(BlogPost.self) == 0)
        #expect(try harness.store.lastSeq() == before + 1)
        #expect(try harness.objects.problem(against: nil) == nil)
    }

    @Test func deletesInOneTransactionCommitTogetherOrNotAtAll() throws {
        let harness = try ObjectsHarness()
        // Enough objects that the collection is indexed and deletes leave holes behind.
        let ids = try harness.store.transact { batch in
            try (0..<100).map { try harness.objects.save(["title": .string("post \($0)")], in: "BlogPost", batch: &batch)["id"]!.stringValue! }
        }
        let before = try harness.store.lastSeq()
        #expect(throws: ObjectStoreError.notFound(collection: "BlogPost", id: "missing")) {
            try harness.store.transact { batch in
                for id in ids.prefix(10) { try harness.objects.delete("BlogPost", id: id, batch: &batch) }
                try harness.objects.delete("BlogPost", id: "missing", batch: &batch)
            }
        }
        #expect(try harness.store.lastSeq() == before)
        #expect(try harness.objects.fetch("BlogPost", id: ids[0]) != nil)
        try harness.store.transact { batch in
            for id in ids where id.hasSuffix("3") || id.hasSuffix("7") { try harness.objects.delete("BlogPost", id: id, batch: &batch) }
        }
        let left = try harness.objects.fetchAll("BlogPost", limit: 1_000).objects.compactMap { $0["id"]?.stringValue }
        #expect(left == ids.filter { !$0.hasSuffix("3") && !$0.hasSuffix("7") })
        #expect(try harness.store.currentState["objects.BlogPost"]?.objectValue?.keys == left)
        #expect(try harness.objects.problem(against: nil) == nil)
    }

    /// Compacting away the events that made, changed and deleted objects: a deleted object
    /// leaves nothing behind, in the state or the read model; a live one keeps its fields,
    /// version, createdAt and updatedAt; the read model agrees with the base, rebuilds from
    /// it, and saves and deletes go on from there.
    @Test func objectsLiveThroughACompaction() throws {
        let harness = try ObjectsHarness()
        let ids = try (0..<20).map { try harness.objects.save(["title": .string("post \($0)")], in: "BlogPost")["id"]!.stringValue! }
        for id in ids.prefix(10) { try harness.objects.save(["id": .string(id), "title": .string("edited")], in: "BlogPost") }
        for id in ids.suffix(5) { try harness.objects.delete("BlogPost", id: id) }
        let live = try harness.objects.fetchAll("BlogPost", limit: 100).objects
        #expect(live.count == 15)
        // Everything but the newest event (the last delete) goes into the base.
        let last = try harness.store.lastSeq()
        try harness.store.compact(before: last)
        #expect(try harness.store.base()?.seq == last - 1)
        #expect(try harness.objects.fetchAll("BlogPost", limit: 100).objects == live)
        for id in ids.suffix(5) { #expect(try harness.objects.fetch("BlogPost", id: id) == nil) }
        #expect(try harness.store.currentState["objects.BlogPost"]?.objectValue?.keys.sorted() == live.compactMap { $0["id"]?.stringValue }.sorted())
        #expect(try harness.objects.problem(against: nil) == nil)
        #expect(try harness.objects.rebuild() == 15)
        #expect(try harness.objects.problem(against: nil) == nil)
        #expect(try harness.store.verify().problem == nil)
        let edited = try #require(try harness.objects.fetch("BlogPost", id: ids[0]))
        let again = try harness.objects.save(["id": .string(ids[0]), "title": .string("after")], in: "BlogPost", expectedVersion: 2)
        #expect(again["version"] == 3 && again["createdAt"] == edited["createdAt"] && again["updatedAt"] != edited["updatedAt"])
        try harness.objects.delete("BlogPost", id: ids[1])
        #expect(try harness.objects.fetchAll("BlogPost", limit: 100).objects.count == 14)
        #expect(try harness.objects.problem(against: nil) == nil)
    }

    @Test func aStaleSaveIsAConflictAndAppendsNothing() throws {
        let harness = try ObjectsHarness()
        let first = try harness.objects.save(ObjectsHarness.post())
        var mine = first.object
        var theirs = first.object
        theirs.title = "Theirs"
        try harness.objects.save(theirs, expectedVersion: 1)
        mine.title = "Mine"
        let before = try harness.store.lastSeq()
        #expect(throws: ObjectStoreError.conflict(collection: "BlogPost", id: first.id, expected: 1, actual: 2)) {
            try harness.objects.save(mine, expectedVersion: 1)
        }
        #expect(throws: ObjectStoreError.conflict(collection: "BlogPost", id: "new", expected: 3, actual: nil)) {
            var fresh = ObjectsHarness.post()
            fresh.id = "new"
            try harness.objects.save(fresh, expectedVersion: 3)
        }
        #expect(try harness.store.lastSeq() == before)
        #expect(try harness.objects.fetch(BlogPost.self, id: first.id)?.object.title == "Theirs")
        var fresh = ObjectsHarness.post()
        fresh.id = "new"
        #expect(try harness.objects.save(fresh, expectedVersion: 0).version == 1)
    }

    @Test func fetchAllPagesInIdOrder() throws {
        let harness = try ObjectsHarness()
        let ids = try (0..<25).map { try harness.objects.save(ObjectsHarness.post("post \($0)")).id }
        var seen: [String] = []
        var after: String?
        repeat {
            let page = try harness.objects.fetchAll(BlogPost.self, after: after, limit: 10)
            seen += page.objects.map(\.id)
            after = page.next
        } while after != nil
        #expect(seen == ids)
        #expect(ids == ids.sorted())
        #expect(try harness.objects.fetchAll("Other").objects.isEmpty)
    }

    @Test func theReadModelRebuiltFromTheLogMatchesTheInlineOne() throws {
        let harness = try ObjectsHarness()
        for i in 0..<30 {
            var post = try harness.objects.save(ObjectsHarness.post("post \(i)")).object
            post.views = i
            if i % 3 == 0 { try harness.objects.save(post) }
            if i % 7 == 0 { try harness.objects.delete(BlogPost.self, id: post.id!) }
        }
        // Rebuild from the log alone: fold every write set from the empty state.
        var rebuilt = StateValue.emptyObject
        try harness.store.forEachRecord { record in
            try! rebuilt.apply(record.event.writes)
            return true
        }
        #expect(try harness.objects.problem(against: rebuilt) == nil)
        // A read model that drifted from the log is caught.
        let db = try #require(try harness.store.openDatabase(named: ObjectStore.readModelName, create: false))
        try harness.store.transact { batch in
            try ObjectStore.withKey("BlogPost", "00000002") { key in
                try StateValue.object(["id": "00000002"]).checkedEncoding(key: key).withUnsafeBytes { try batch.put(db, key: key, value: $0) }
            }
        }
        #expect(try harness.objects.problem(against: rebuilt)?.hasPrefix("objects.BlogPost.00000002") == true)
    }

    @Test func badInputIsRefused() throws {
        let harness = try ObjectsHarness()
        #expect(throws: ObjectStoreError.self) { try harness.objects.save(StateObject(), in: "9lives") }
        #expect(throws: ObjectStoreError.self) { try harness.objects.save(["id": 5], in: "Post") }
        #expect(throws: ObjectStoreError.self) { try harness.objects.save(["id": "a\u{0}b"], in: "Post") }
        #expect(try harness.store.lastSeq() == 0)
    }

    @Test func collectionNamesAndIDsAreCheckedAcrossUnicode() {
        for name in ["Post", "_drafts", "blog_2", "Été", "記事"] {
            #expect(throws: Never.self, "\(name)") { try ObjectStore.validate(collection: name) }
        }
        for name in ["", "9lives", "Blog Post", "a-b", "a.b", "x\u{7F}", "naïve!", String(repeating: "a", count: 101)] {
            #expect(throws: ObjectStoreError.self, "\(name)") { try ObjectStore.validate(collection: name) }
        }
        for id in ["0000000m", "é", "a b", "x/y"] {
            #expect(throws: Never.self, "\(id)") { try ObjectStore.validate(id: id) }
        }
        for id in ["", "a\tb", "a\u{7F}", "a\u{85}b", "a\u{9F}", String(repeating: "a", count: 256)] {
            #expect(throws: ObjectStoreError.self, "\(id)") { try ObjectStore.validate(id: id) }
        }
    }
}
