import EventLog
import Foundation

/// A `Codable` value kept in an `ObjectStore` collection.
///
/// Properties map to JSON keys through the ordinary `CodingKeys`. Dates are RFC 3339 with
/// fractional seconds unless `dateFormats` gives a property's JSON key its own format.
/// `createdAt` and `updatedAt`, when declared, are filled in by the store.
///
/// When a release changes the stored fields (a key renamed, a field added without a default,
/// a type changed), bump `schemaVersion` and say how in `migrate(_:from:)`: objects stored by
/// an older release are migrated when they are fetched or listed, and by
/// ``ObjectStore/migrateAll(_:origin:)`` eagerly; a save always stores today's version (in
/// the field `schemaVersion`, left out at version 1, so older logs are unchanged).
public protocol StoredObject: Codable {
    /// The collection's name, such as `BlogPost`; by default the type's name.
    static var collection: String { get }
    /// Date formats by JSON key (`"jsonPubDate": "yyyy-MM-dd HH:mm"`), in
    /// `DateFormatter` syntax, read and written in UTC.
    static var dateFormats: [String: String] { get }
    /// The version of the stored fields' shape, from 1 (the default).
    static var schemaVersion: Int { get }
    /// Brings the stored fields of an object at `version` to `version + 1`: rename a key, add a
    /// field with a default, change a value's type. Called once per version, in order, up to
    /// `schemaVersion`. A pure function of the fields; throw to refuse an object it cannot
    /// migrate. The managed fields (`id`, `version`, the dates) are kept whatever it does.
    static func migrate(_ fields: inout StateObject, from version: Int) throws
    /// The object's id: `nil` until it is first saved, when the store generates one.
    var id: String? { get set }
}

/// The default collection names, by type.
private let typeNames = Locked<[ObjectIdentifier: String]>([:])

extension StoredObject {
    /// The type's name, such as `BlogPost` (worked out once per type: `String(describing:)`
    /// walks the type's metadata, which every typed save and fetch would pay).
    public static var collection: String {
        typeNames.withLock { names in
            if let name = names[ObjectIdentifier(Self.self)] { return name }
            let name = String(describing: Self.self)
            names[ObjectIdentifier(Self.self)] = name
            return name
        }
    }
    /// No formats of its own: every date is RFC 3339 with fractional seconds.
    public static var dateFormats: [String: String] { [:] }
    /// Version 1: fields that never changed shape.
    public static var schemaVersion: Int { 1 }
    /// Nothing to migrate (version 1 is the only one).
    public static func migrate(_ fields: inout StateObject, from version: Int) throws {}
}

/// An object as stored, with what the store keeps about it.
public struct Saved<Object> {
    /// The object, with its `id` set.
    public var object: Object
    /// The object's id, the same as `object.id`.
    public var id: String
    /// 1 when created, one more with every save: what `expectedVersion` compares with.
    public var version: Int64
    /// When the object was first saved, by the store's clock (to the microsecond).
    public var createdAt: Date
    /// When the object was last saved, by the store's clock; `createdAt` until it is saved again.
    public var updatedAt: Date
}

/// One page of a collection, in id order (generated ids sort in creation order).
public struct Page<Object> {
    /// The page's objects in id order: at most the `limit` asked for.
    public var objects: [Saved<Object>]
    /// The id to pass as `after` for the next page; `nil` on the last page.
    public var next: String?
}

/// Why the object store refused an operation. Nothing was appended.
public enum ObjectStoreError: Error, Hashable, CustomStringConvertible {
    /// There is no object with that id in that collection.
    case notFound(collection: String, id: String)
    /// The save named a version the object no longer has (or an object that does not exist).
    case conflict(collection: String, id: String, expected: Int64, actual: Int64?)
    /// The object cannot be stored as it is.
    case invalidObject(String)

    public var description: String {
        switch self {
        case .notFound(let collection, let id): "no \(collection) with id \"\(id)\""
        case .conflict(let collection, let id, let expected, let actual):
            "conflict: \(collection) \"\(id)\" is at version \(actual.map(String.init) ?? "none (it does not exist)"), not the expected \(expected)"
        case .invalidObject(let reason): "invalid object: \(reason)"
        }
    }
}
