import EventLog
import EventLogTesting
import Foundation
import Objects
import Testing

/// Objects stored by an older release read as today's type: migrated when fetched or listed,
/// and by `migrateAll` eagerly; a save stores today's schema version.
@Suite struct MigrationTests {
    /// Release 1's post: `body`, and `views` as text.
    struct PostV1: StoredObject, Hashable {
        static let collection = "BlogPost"
        var id: String?
        var title: String
        var body: String
        var views: String
    }

    /// Release 2's post: `body` renamed `text`, `views` a number, and `tags`, which older
    /// posts lack, defaulting to none.
    struct PostV2: StoredObject, Hashable {
        static let collection = "BlogPost"
        static let schemaVersion = 2
        var id: String?
        var title: String
        var text: String
        var views: Int
        var tags: [String]

        static func migrate(_ fields: inout StateObject, from version: Int) throws {
            fields["text"] = fields["body"]
            fields["body"] = nil
            guard let views = fields["views"]?.stringValue.flatMap({ Int64($0) }) else {
                throw ObjectStoreError.invalidObject("views \(fields["views"]?.json() ?? "(none)") is not a whole number")
            }
            fields["views"] = .int(views)
            fields["tags"] = []
        }
    }

    /// A log of two release-1 posts, one edited once.
    static func releaseOneLog() throws -> (TemporaryEventStore, ObjectStore, [Saved<PostV1>]) {
        let log = try TemporaryEventStore(stepMicroseconds: 1_000)
        let objects = try ObjectStore(store: log.store)
        var first = try objects.save(PostV1(title: "Hello", body: "First post", views: "3"))
        first = try objects.save(PostV1(id: first.id, title: "Hello", body: "First post, edited", views: "4"))
        let second = try objects.save(PostV1(title: "Again", body: "Second post", views: "10"))
        return (log, objects, [first, second])
    }

    @Test func releaseOneObjectsFetchAndListAsReleaseTwo() throws {
        let (log, objects, saved) = try Self.releaseOneLog()
        let before = try log.store.lastSeq()
        let fetched = try #require(try objects.fetch(PostV2.self, id: saved[0].id))
        #expect(fetched.object == PostV2(id: saved[0].id, title: "Hello", text: "First post, edited", views: 4, tags: []))
        #expect(fetched.version == 2 && fetched.createdAt == saved[0].createdAt && fetched.updatedAt == saved[0].updatedAt)
        #expect(try objects.fetchAll(PostV2.self).objects.map(\.object.views) == [4, 10])
        // Reading migrates nothing stored: the log and the read model are as they were.
        #expect(try log.store.lastSeq() == before)
        #expect(try objects.fetch("BlogPost", id: saved[0].id)?["body"] == "First post, edited")
    }

    @Test func aSaveStoresTodaysVersionAndMigrateAllTheRest() throws {
        let (log, objects, saved) = try Self.releaseOneLog()
        var edited = try #require(try objects.fetch(PostV2.self, id: saved[1].id)).object
        edited.tags = ["news"]
        try objects.save(edited)
        let stored = try #require(try objects.fetch("BlogPost", id: saved[1].id))
        #expect(stored["schemaVersion"] == 2 && stored["text"] == "Second post" && stored["body"] == nil && stored["views"] == 10)
        // Only the post still at version 1 is migrated, as one update event.
        let createdAt = try objects.fetch("BlogPost", id: saved[0].id)?["createdAt"]
        let events = try log.store.lastSeq()
        #expect(try objects.migrateAll(PostV2.self) == 1)
        #expect(try log.store.lastSeq() == events + 1)
        #expect(try objects.migrateAll(PostV2.self) == 0)
        let first = try #require(try objects.fetch("BlogPost", id: saved[0].id))
        #expect(first["schemaVersion"] == 2 && first["text"] == "First post, edited" && first["version"] == 3
                && first["createdAt"] == createdAt)
        // The log and the read model still agree, and the read model rebuilds from the log.
        #expect(try objects.problem() == nil)
        #expect(try objects.rebuild() == 2 && objects.problem() == nil)
        let replayed = try log.store.replay(through: Projections(), verify: true)
        #expect(replayed.state == (try log.store.currentState))
    }

    @Test func aNewerOrUnmigratableObjectIsAClearErrorAndNothingIsSaved() throws {
        let (log, objects, saved) = try Self.releaseOneLog()
        try objects.save(["id": .string(saved[0].id), "title": "Later", "text": "x", "views": 1, "tags": [], "schemaVersion": 3], in: "BlogPost")
        #expect(throws: ObjectStoreError.invalidObject("the stored BlogPost \"\(saved[0].id)\" is at schema version 3, newer than PostV2's 2 (a newer release stored it)")) {
            try objects.fetch(PostV2.self, id: saved[0].id)
        }
        try objects.save(["id": .string(saved[1].id), "title": "Odd", "body": "y", "views": "many"], in: "BlogPost")
        let events = try log.store.lastSeq()
        #expect(throws: ObjectStoreError.self) { try objects.migrateAll(PostV2.self) }
        #expect(try log.store.lastSeq() == events)
    }
}
