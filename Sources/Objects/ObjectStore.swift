import EventLog
import Foundation

/// Typed collections of objects whose every save and delete is an event of the log.
///
/// The state tree holds each object at `objects.<Collection>.<id>`; its fields, plus `id`,
/// `version`, `createdAt` and `updatedAt` (RFC 3339), which the store manages. A save's write
/// set holds only the fields that changed. The current objects are also an inline read model,
/// a named database of the same environment updated in the same write transaction as the
/// event, so `fetch` is one B-tree lookup whatever the length of the log, and the read model
/// can never disagree with the log it was written with (`problem(against:)` checks it). Each
/// entry carries a CRC-32C, so a damaged one is reported, never read as an object.
public final class ObjectStore: ReadModel, @unchecked Sendable {
    /// For messages.
    public var name: String { "the objects' read model" }
    /// Its entries are the current objects.
    public var entries: String { "objects" }

    /// The event store whose log holds the object events and whose environment holds the
    /// read model.
    public let store: EventStore
    /// The read model; `nil` on a read-only store without one, whose reads then come from the
    /// log's newest state.
    private let readModel: Database?

    /// The read model's database, and the one of the format before checksums, which a
    /// writable store replaces on opening.
    static let readModelName = "objectsReadModel"
    static let legacyReadModelName = "objects"

    /// The stream of object events.
    public static let stream = "objects"
    /// The fields the store manages in every object.
    public static let managedFields = ["id", "version", "createdAt", "updatedAt"]

    /// Attaches to `store`, creating the read model from the log's state unless the store is
    /// read-only or has one already.
    /// - Throws: `LMDBError` when the read model cannot be opened or created; when it is
    ///   created, the errors of `rebuild()`.
    public init(store: EventStore) throws {
        self.store = store
        if let existing = try store.openDatabase(named: Self.readModelName, create: false) {
            readModel = existing
        } else if store.isReadOnly {
            readModel = nil
        } else {
            let created = try store.openDatabase(named: Self.readModelName, create: true)!
            readModel = created
            try rebuild()
        }
    }

    /// Rebuilds the read model from the log's newest state in one transaction (and removes a
    /// read model of an older format) and returns how many objects it holds.
    /// - Throws: `EventStoreError.readOnly` on a read-only store; `LMDBError` when the
    ///   transaction fails. The old read model stays as it was then.
    @discardableResult
    public func rebuild() throws -> Int {
        let readModel = try writableReadModel()
        return try store.transact { batch in
            try batch.removeDatabase(named: Self.legacyReadModelName)
            try batch.empty(readModel)
            var count = 0
            for (collection, objects) in batch.state["objects"]?.objectValue ?? StateObject() {
                for (id, object) in objects.objectValue ?? StateObject() {
                    try Self.put(object, collection, id, into: readModel, &batch)
                    count += 1
                }
            }
            return count
        }
    }

    /// Brings the read model in line with `batch.state` after an event that did not come
    /// through this store (an imported one) applied `writes`: the objects they touch are
    /// stored again or removed, a whole collection when a write replaced it.
    /// - Parameters:
    ///   - writes: The writes of the event just appended to `batch`; writes outside `objects`
    ///     are skipped.
    ///   - batch: The transaction that appended the event, so that the read model commits
    ///     (or not) with it.
    /// - Throws: `EventStoreError.readOnly` on a read-only store; `LMDBError` when the read
    ///   model cannot be written.
    public func keepInLine(after writes: [Write], in batch: inout AppendBatch) throws {
        guard writes.contains(where: { $0.path.components.first == .key("objects") }) else { return }
        let readModel = try writableReadModel()
        for write in writes {
            guard case .key("objects")? = write.path.components.first else { continue }
            let components = write.path.components
            guard components.count >= 3, case .key(let collection) = components[1], case .key(let id) = components[2] else {
                // A write to `objects` or to a whole collection: bring every object in line.
                try batch.empty(readModel)
                for (collection, objects) in batch.state["objects"]?.objectValue ?? StateObject() {
                    for (id, object) in objects.objectValue ?? StateObject() { try Self.put(object, collection, id, into: readModel, &batch) }
                }
                continue
            }
            if let object = batch.state[Self.path(collection, id)] {
                try Self.put(object, collection, id, into: readModel, &batch)
            } else {
                try Self.withKey(collection, id) { _ = try batch.delete(readModel, key: $0) }
            }
        }
    }

    // MARK: Objects as state values

    /// Creates (without an `id`, or with an unknown one) or updates an object of `collection`
    /// and returns it as stored. With `expectedVersion`, the object must be at that version
    /// (0: must not exist yet), or the save is a conflict and appends nothing.
    /// - Parameters:
    ///   - fields: The object's fields. A string `id` names the object; without one the store
    ///     generates an id that sorts in creation order. The managed fields `version`,
    ///     `createdAt` and `updatedAt` are ignored.
    ///   - collection: Letters, digits and `_`, not starting with a digit, at most 100 of them.
    ///   - expectedVersion: The version the object must be at; `nil` saves whatever it is at.
    ///   - origin: Where the event comes from.
    ///   - cause: The plan or command the event belongs to, if any.
    /// - Returns: The object as stored, with its `id`, `version`, `createdAt` and `updatedAt`.
    /// - Throws: `ObjectStoreError.conflict` when the object is not at `expectedVersion`;
    ///   `.invalidObject` for a bad collection name, an `id` that is not a string, or an id
    ///   that is empty, longer than 255 bytes or holds control characters;
    ///   `EventStoreError.readOnly` on a read-only store; `EventStoreError.limitExceeded` when
    ///   the event breaks `StateLimits`, or when the object would grow too large for its
    ///   delete (which records the whole object) to be recorded. Nothing is appended then.
    @discardableResult
    public func save(_ fields: StateObject, in collection: String, expectedVersion: Int64? = nil,
                     origin: Origin = .system, cause: Cause? = nil) throws -> StateObject {
        try store.transact { batch in
            try save(fields, in: collection, expectedVersion: expectedVersion, origin: origin, cause: cause, batch: &batch)
        }
    }

    /// Saves inside a transaction of the caller's, so that many saves (and other events)
    /// commit together.
    /// - Throws: The errors of `save(_:in:expectedVersion:origin:cause:)`; a conflict or an
    ///   invalid object is found before anything is appended to `batch`.
    @discardableResult
    public func save(_ fields: StateObject, in collection: String, expectedVersion: Int64? = nil,
                     origin: Origin = .system, cause: Cause? = nil, batch: inout AppendBatch) throws -> StateObject {
        try Self.validate(collection: collection)
        let readModel = try writableReadModel()
        var id = fields["id"]?.stringValue
        if let given = fields["id"], given != .null, id == nil {
            throw ObjectStoreError.invalidObject("\"id\" must be a string, not \(given.kindName)")
        }
        if id == nil { id = Self.unusedID(batch.lastSeq + 1, in: collection, state: batch.state) }
        let objectID = id!
        try Self.validate(id: objectID)
        let path = Self.path(collection, objectID)
        let existing = batch.state[path]?.objectValue
        let version = existing?["version"]?.intValue ?? 0
        if let expectedVersion, expectedVersion != version {
            throw ObjectStoreError.conflict(collection: collection, id: objectID, expected: expectedVersion,
                                            actual: existing == nil ? nil : version)
        }
        let now = store.clock.now().description
        var stored = StateObject()
        stored.reserveCapacity(fields.count + Self.managedFields.count)
        stored["id"] = .string(objectID)
        for (key, value) in fields where !Self.managedFields.contains(key) { stored[key] = value }
        stored["version"] = .int(version + 1)
        stored["createdAt"] = existing?["createdAt"] ?? .string(now)
        stored["updatedAt"] = .string(now)
        let writes: [Write]
        if let existing {
            writes = StateValue.object(existing).diff(to: .object(stored), at: path)
        } else {
            writes = [Write(path, old: nil, new: .object(stored))]
        }
        let encoding = try Self.withKey(collection, objectID) { StateValue.object(stored).checkedEncoding(key: $0) }
        // A state the store accepts stays deletable: a delete records the whole object, so an
        // object whose delete would break the record limit is refused (only one near the limit
        // is measured exactly; the delete's other fields take under 2 KiB).
        if encoding.count > StateLimits.maxRecordBytes - (64 << 10),
           let error = Self.deleteEvent(collection, objectID, existing: .object(stored), origin: .system, cause: nil).limitExceeded(at: store.clock.now()) {
            throw EventStoreError.limitExceeded("\(collection) \"\(objectID)\" would be too large to delete (\(error)); its delete records the whole object")
        }
        try batch.append(Event(stream: Self.stream, type: existing == nil ? "create" : "update", origin: origin, cause: cause,
                               payload: ["collection": .string(collection), "id": .string(objectID), "version": .int(version + 1)],
                               writes: writes))
        try Self.withKey(collection, objectID) { key in try encoding.withUnsafeBytes { try batch.put(readModel, key: key, value: $0) } }
        return stored
    }

    /// The object of `collection` with `id`, or `nil`: one lookup in the read model.
    /// - Throws: `ObjectStoreError.invalidObject` when the read model's entry fails its
    ///   checksum or is not an object (`rebuild()` repairs it); `LMDBError` when the
    ///   read fails.
    public func fetch(_ collection: String, id: String) throws -> StateObject? {
        guard let readModel else { return try store.currentState[Self.path(collection, id)]?.objectValue }
        return try store.read { txn in
            try Self.withKey(collection, id) { key in
                guard let bytes = try txn.get(readModel, key: key) else { return nil }
                return try Self.decodeStored(bytes, key: key, collection: collection, id: id)
            }
        }
    }

    /// Up to `limit` objects of `collection` in id order, starting after id `after`.
    /// - Parameters:
    ///   - after: The id the page starts after (it need not exist); `nil` for the first page.
    ///   - limit: The most objects returned; 0 or less returns none.
    /// - Returns: The objects, and the id to pass as `after` for the next page (`nil` on the
    ///   last page). Ids compare by their UTF-8 bytes.
    /// - Throws: `ObjectStoreError.invalidObject` when an entry of the read model is damaged;
    ///   `LMDBError` when the read fails.
    public func fetchAll(_ collection: String, after: String? = nil, limit: Int = 100) throws -> (objects: [StateObject], next: String?) {
        guard limit > 0 else { return ([], nil) }
        guard let readModel else {
            let objects = try store.currentState[StatePath([.key("objects"), .key(collection)])]?.objectValue ?? StateObject()
            let ids = objects.keys.filter { after == nil || Self.keyOrder($0, after!) }.sorted(by: Self.keyOrder)
            let page = ids.prefix(limit).compactMap { objects[$0]?.objectValue }
            return (page, ids.count > limit ? ids[limit - 1] : nil)
        }
        return try store.read { txn in
            try txn.withCursor(readModel) { cursor in
                var objects: [StateObject] = []
                var entry = try Self.withKey(collection, after ?? "") { try cursor.seek(atOrAfter: $0) }
                if let after, let first = entry, Self.id(of: first.key, in: collection) == after { entry = try cursor.next() }
                while let current = entry, let id = Self.id(of: current.key, in: collection) {
                    if objects.count == limit { return (objects, objects.last?["id"]?.stringValue) }
                    objects.append(try Self.decodeStored(current.value, key: current.key, collection: collection, id: id))
                    entry = try cursor.next()
                }
                return (objects, nil)
            }
        }
    }

    /// Deletes one object; `notFound` (and nothing appended) when there is none. The event
    /// records the whole object; `save` refuses to grow one past what such an event can hold,
    /// so a delete without a `cause` always fits.
    /// - Throws: `ObjectStoreError.notFound` when the collection has no object with `id`;
    ///   `EventStoreError.readOnly` on a read-only store; `EventStoreError.limitExceeded` when
    ///   the cause makes the event too large. Nothing is appended then.
    public func delete(_ collection: String, id: String, origin: Origin = .system, cause: Cause? = nil) throws {
        try store.transact { batch in try delete(collection, id: id, origin: origin, cause: cause, batch: &batch) }
    }

    /// Deletes inside a transaction of the caller's, so that many deletes (and other events)
    /// commit together.
    /// - Throws: The errors of `delete(_:id:origin:cause:)`.
    public func delete(_ collection: String, id: String, origin: Origin = .system, cause: Cause? = nil,
                       batch: inout AppendBatch) throws {
        let readModel = try writableReadModel()
        let path = Self.path(collection, id)
        guard let existing = batch.state[path] else { throw ObjectStoreError.notFound(collection: collection, id: id) }
        try batch.append(Self.deleteEvent(collection, id, existing: existing, origin: origin, cause: cause))
        try Self.withKey(collection, id) { _ = try batch.delete(readModel, key: $0) }
    }

    /// The event that deletes `existing`, the object of `collection` with `id`: it records
    /// the whole object, so that replay and history can bring it back.
    private static func deleteEvent(_ collection: String, _ id: String, existing: StateValue, origin: Origin, cause: Cause?) -> Event {
        Event(stream: stream, type: "delete", origin: origin, cause: cause, payload: ["collection": .string(collection), "id": .string(id)],
              writes: [Write(path(collection, id), old: existing, new: nil)])
    }

    /// Deletes every object of `collection` in one event and returns how many there were
    /// (0, and nothing appended, when there were none). A collection too large for one event
    /// (its objects together past `StateLimits.maxRecordBytes`) is deleted by one `delete`
    /// event per object instead, in the same transaction.
    /// - Throws: `ObjectStoreError.invalidObject` for a collection name that is not letters,
    ///   digits and `_`; `EventStoreError.readOnly` on a read-only store.
    @discardableResult
    public func deleteAll(_ collection: String, origin: Origin = .system, cause: Cause? = nil) throws -> Int {
        try Self.validate(collection: collection)
        let readModel = try writableReadModel()
        return try store.transact { batch in
            let path = StatePath([.key("objects"), .key(collection)])
            guard let existing = batch.state[path]?.objectValue, !existing.isEmpty else { return 0 }
            do {
                try batch.append(Event(stream: Self.stream, type: "deleteAll", origin: origin, cause: cause,
                                       payload: ["collection": .string(collection), "count": .int(Int64(existing.count))],
                                       writes: [Write(path, old: .object(existing), new: nil)]))
            } catch EventStoreError.limitExceeded {
                // Each object's delete fits (`save` sees to it); the batch is as it was.
                for id in existing.keys.sorted(by: Self.keyOrder) { try delete(collection, id: id, origin: origin, cause: cause, batch: &batch) }
                return existing.count
            }
            for id in existing.keys {
                try Self.withKey(collection, id) { _ = try batch.delete(readModel, key: $0) }
            }
            return existing.count
        }
    }

    /// Compares the read model with the objects of `state` (by default the log's newest
    /// state; pass a replayed state to check a rebuild) and returns the first difference.
    /// - Returns: The first difference, or the first damaged entry, in words; `nil` when the
    ///   read model holds exactly the objects of the state, or when there is no read model (a
    ///   read-only store of a log without one, whose reads come from the log's state).
    /// - Throws: `ObjectStoreError.invalidObject` for a read-model key without the zero byte
    ///   that ends its collection name; the errors of `EventStore.currentState` when the log's
    ///   state cannot be read; `LMDBError` when a read fails.
    public func problem(against state: StateValue? = nil) throws -> String? {
        guard let readModel else { return nil }
        // A collection whose objects were deleted one by one stays in the state, empty: the
        // read model has nothing for it, and that is no difference.
        var expected = StateObject()
        for (collection, objects) in try (state ?? store.currentState)["objects"]?.objectValue ?? StateObject() where objects != .emptyObject {
            expected[collection] = objects
        }
        var found = StateObject()
        var damaged: String?
        try store.read { txn in
            try txn.withCursor(readModel) { cursor in
                // Keys sort by collection, so each collection is read in one run.
                var collection: String?
                var objects = StateObject()
                var entry = try cursor.first()
                while let current = entry {
                    let parts = current.key.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
                    guard parts.count == 2 else { throw ObjectStoreError.invalidObject("malformed read-model key") }
                    let name = String(decoding: parts[0], as: UTF8.self)
                    if name != collection {
                        if let collection { found[collection] = .object(objects) }
                        collection = name
                        objects = StateObject()
                    }
                    let id = String(decoding: parts[1], as: UTF8.self)
                    do {
                        objects[id] = .object(try Self.decodeStored(current.value, key: current.key, collection: name, id: id))
                    } catch {
                        damaged = "the read model's \(name) \"\(id)\" is damaged: \(error); rebuild the read model"
                        return
                    }
                    entry = try cursor.next()
                }
                if let collection { found[collection] = .object(objects) }
            }
        }
        if let damaged { return damaged }
        guard let difference = StateValue.object(expected).diff(to: .object(found)).first else { return nil }
        let place = "objects." + difference.path.description
        switch (difference.old, difference.new) {
        case (_, nil): return "\(place) is in the log but missing from the read model"
        case (nil, _): return "\(place) is in the read model but not in the log"
        default: return "\(place) differs: the log has \(difference.old!.json()), the read model \(difference.new!.json())"
        }
    }

    // MARK: Typed objects

    /// Saves a `StoredObject`; see `save(_:in:expectedVersion:origin:cause:)`.
    /// - Returns: The object as stored, its `id` set.
    /// - Throws: The errors of `save(_:in:expectedVersion:origin:cause:)`, and
    ///   `ObjectStoreError.invalidObject` when the object does not encode to a JSON object (a
    ///   non-finite number, an integer beyond 64 bits, a bare value) or the stored fields do
    ///   not decode back as `T`.
    @discardableResult
    public func save<T: StoredObject>(_ object: T, expectedVersion: Int64? = nil, origin: Origin = .system, cause: Cause? = nil) throws -> Saved<T> {
        let stored = try save(try ObjectCoding.encode(object), in: T.collection, expectedVersion: expectedVersion, origin: origin, cause: cause)
        return try Self.saved(T.self, stored)
    }

    /// Saves a `StoredObject` inside a transaction of the caller's, so that many saves (and
    /// other events) commit together; see `save(_:expectedVersion:origin:cause:)`.
    /// - Throws: Its errors; a conflict or an invalid object is found before anything is
    ///   appended to `batch`.
    @discardableResult
    public func save<T: StoredObject>(_ object: T, expectedVersion: Int64? = nil, origin: Origin = .system, cause: Cause? = nil,
                                      batch: inout AppendBatch) throws -> Saved<T> {
        let stored = try save(try ObjectCoding.encode(object), in: T.collection, expectedVersion: expectedVersion, origin: origin, cause: cause,
                              batch: &batch)
        return try Self.saved(T.self, stored)
    }

    /// The object with `id`, or `nil`.
    /// - Throws: The errors of `fetch(_:id:)`, and `ObjectStoreError.invalidObject` when the
    ///   stored fields do not decode as `T` or lack the managed `id`, `version` or dates.
    public func fetch<T: StoredObject>(_ type: T.Type, id: String) throws -> Saved<T>? {
        try fetch(T.collection, id: id).map { try Self.saved(T.self, $0) }
    }

    /// One page of the collection in id order; see `fetchAll(_:after:limit:)`.
    /// - Throws: The errors of `fetchAll(_:after:limit:)`, and `ObjectStoreError.invalidObject`
    ///   when an object does not decode as `T`.
    public func fetchAll<T: StoredObject>(_ type: T.Type, after: String? = nil, limit: Int = 100) throws -> Page<T> {
        let page = try fetchAll(T.collection, after: after, limit: limit)
        return Page(objects: try page.objects.map { try Self.saved(T.self, $0) }, next: page.next)
    }

    /// Saves every object of `T`'s collection stored at an older schema version as
    /// `T.migrate` brings it to today's, in one transaction (one `update` event each), and
    /// returns how many it migrated; objects already at today's version are left alone.
    /// - Throws: `ObjectStoreError.invalidObject` when an object does not migrate or decode
    ///   (nothing is saved then); the errors of `save(_:in:expectedVersion:origin:cause:)`.
    @discardableResult
    public func migrateAll<T: StoredObject>(_ type: T.Type, origin: Origin = .system) throws -> Int {
        try store.transact { batch in
            let objects = batch.state[StatePath([.key("objects"), .key(T.collection)])]?.objectValue ?? StateObject()
            var migrated = 0
            for (_, stored) in objects {
                guard let fields = stored.objectValue, ObjectCoding.schemaVersion(of: fields) != T.schemaVersion else { continue }
                var today = try ObjectCoding.encode(try ObjectCoding.decode(T.self, from: fields))
                today["id"] = fields["id"]
                try save(today, in: T.collection, origin: origin, batch: &batch)
                migrated += 1
            }
            return migrated
        }
    }

    /// Deletes the object with `id`.
    /// - Throws: `ObjectStoreError.notFound` when there is none; `EventStoreError.readOnly` on
    ///   a read-only store.
    public func delete<T: StoredObject>(_ type: T.Type, id: String, origin: Origin = .system, cause: Cause? = nil) throws {
        try delete(T.collection, id: id, origin: origin, cause: cause)
    }

    /// Deletes every object of the type's collection in one event and returns how many there
    /// were.
    /// - Throws: The errors of `deleteAll(_:origin:cause:)`.
    @discardableResult
    public func deleteAll<T: StoredObject>(_ type: T.Type, origin: Origin = .system, cause: Cause? = nil) throws -> Int {
        try deleteAll(T.collection, origin: origin, cause: cause)
    }

    // MARK: Details

    private static func saved<T: StoredObject>(_ type: T.Type, _ stored: StateObject) throws -> Saved<T> {
        guard let id = stored["id"]?.stringValue, let version = stored["version"]?.intValue,
              let created = stored["createdAt"]?.stringValue.flatMap(Timestamp.init(rfc3339:)),
              let updated = stored["updatedAt"]?.stringValue.flatMap(Timestamp.init(rfc3339:))
        else { throw ObjectStoreError.invalidObject("a stored \(T.collection) lacks its id, version or dates") }
        var object = try ObjectCoding.decode(T.self, from: stored)
        object.id = id
        return Saved(object: object, id: id, version: version, createdAt: ObjectCoding.date(created), updatedAt: ObjectCoding.date(updated))
    }

    private func writableReadModel() throws -> Database {
        guard let readModel, !store.isReadOnly else { throw EventStoreError.readOnly }
        return readModel
    }

    static func path(_ collection: String, _ id: String) -> StatePath {
        StatePath([.key("objects"), .key(collection), .key(id)])
    }

    /// Ids the store makes: the seq of the creating event in base 36, eight digits wide, so
    /// that they sort in creation order; when a caller already chose that id for another
    /// object, `-2`, `-3`, … is added, so that a save without an id always creates.
    static func unusedID(_ seq: UInt64, in collection: String, state: StateValue) -> String {
        let digits = String(seq, radix: 36)
        let id = String(repeating: "0", count: max(0, 8 - digits.count)) + digits
        let objects = state[StatePath([.key("objects"), .key(collection)])]?.objectValue
        guard let objects, objects[id] != nil else { return id }
        return (2...).lazy.map { "\(id)-\($0)" }.first { objects[$0] == nil }!
    }

    /// Read-model keys: the collection's UTF-8, a zero byte, the id's UTF-8.
    static func withKey<R>(_ collection: String, _ id: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let key = Array(collection.utf8) + [0] + Array(id.utf8)
        return try key.withUnsafeBytes(body)
    }

    /// The id in a read-model key, when the key belongs to `collection`.
    static func id(of key: UnsafeRawBufferPointer, in collection: String) -> String? {
        let prefix = Array(collection.utf8) + [0]
        guard key.count >= prefix.count, key.prefix(prefix.count).elementsEqual(prefix) else { return nil }
        return String(decoding: key.dropFirst(prefix.count), as: UTF8.self)
    }

    /// Stores `object` as the read model's entry for `collection` and `id`.
    private static func put(_ object: StateValue, _ collection: String, _ id: String, into readModel: Database,
                            _ batch: inout AppendBatch) throws {
        try withKey(collection, id) { key in
            try object.checkedEncoding(key: key).withUnsafeBytes { try batch.put(readModel, key: key, value: $0) }
        }
    }

    /// Read-model order: ids compare by their UTF-8 bytes, as LMDB orders keys.
    private static func keyOrder(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    static func decodeStored(_ bytes: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, collection: String, id: String) throws -> StateObject {
        let value: StateValue
        do { value = try StateValue(checkedEncoding: bytes, key: key) } catch {
            throw ObjectStoreError.invalidObject("the read model's \(collection) \"\(id)\" is damaged (\(error)); rebuild the read model")
        }
        guard case .object(let fields) = value else {
            throw ObjectStoreError.invalidObject("the read model's \(collection) \"\(id)\" is not an object")
        }
        return fields
    }

    static func validate(collection: String) throws {
        let scalars = collection.unicodeScalars
        guard let first = scalars.first, isLetter(first) || first == "_",
              scalars.allSatisfy({ isLetter($0) || ("0"..."9").contains($0) || $0 == "_" }), scalars.count <= 100
        else { throw ObjectStoreError.invalidObject("collection name \"\(collection)\" must be letters, digits and _ (not starting with a digit)") }
    }

    static func validate(id: String) throws {
        guard !id.isEmpty, id.utf8.count <= 255, !id.unicodeScalars.contains(where: isControl) else {
            throw ObjectStoreError.invalidObject("id \"\(id)\" must be 1 to 255 bytes without control characters")
        }
    }

    // ASCII answered directly: Unicode's property tables cost hundreds of instructions a
    // character, which every save paid for its collection name and id.
    private static func isLetter(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.isASCII else { return scalar.properties.isAlphabetic }
        return ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar)
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.isASCII else { return scalar.properties.generalCategory == .control }
        return scalar.value < 0x20 || scalar.value == 0x7F
    }
}
