import EventLog
import Foundation

/// Maps `StoredObject` values to and from state values with `StateValueEncoder` and
/// `StateValueDecoder`: sorted keys, RFC 3339 dates (fractional seconds) and per-key custom
/// date formats.
enum ObjectCoding {
    static func encode<T: StoredObject>(_ object: T) throws -> StateObject {
        let value: StateValue
        do { value = try StateValueEncoder(dateFormats: T.dateFormats).encode(object) } catch {
            throw ObjectStoreError.invalidObject("\(T.self) cannot be stored: \(error)")
        }
        guard case .object(var fields) = value else {
            throw ObjectStoreError.invalidObject("\(T.self) does not encode to an object")
        }
        fields[schemaVersionKey] = T.schemaVersion == 1 ? nil : .int(Int64(T.schemaVersion))
        return fields
    }

    static func decode<T: StoredObject>(_ type: T.Type, from fields: StateObject) throws -> T {
        do {
            return try StateValueDecoder(dateFormats: T.dateFormats).decode(T.self, from: .object(try migrated(T.self, fields)))
        } catch let error as ObjectStoreError {
            throw error
        } catch {
            throw ObjectStoreError.invalidObject("the stored \(T.collection) does not decode as \(T.self): \(error)")
        }
    }

    /// The field that holds an object's schema version when it is not 1.
    static let schemaVersionKey = "schemaVersion"

    /// The schema version `fields` were stored at: 1 when they do not say.
    static func schemaVersion(of fields: StateObject) -> Int {
        fields[schemaVersionKey]?.intValue.map(Int.init) ?? 1
    }

    /// `fields`, stored at some schema version, brought to `T.schemaVersion` by its
    /// migrations, managed fields untouched.
    /// - Throws: `ObjectStoreError.invalidObject` for a version newer than `T`'s (a newer
    ///   release stored it) or below 1, and when a migration throws.
    static func migrated<T: StoredObject>(_ type: T.Type, _ fields: StateObject) throws -> StateObject {
        let stored = schemaVersion(of: fields)
        guard stored != T.schemaVersion else { return fields }
        let name = "\(T.collection) \"\(fields["id"]?.stringValue ?? "")\""
        guard (1..<T.schemaVersion).contains(stored) else {
            throw ObjectStoreError.invalidObject("the stored \(name) is at schema version \(stored), "
                + (stored < 1 ? "which is not one" : "newer than \(T.self)'s \(T.schemaVersion) (a newer release stored it)"))
        }
        var migrated = fields
        for version in stored..<T.schemaVersion {
            do { try T.migrate(&migrated, from: version) } catch {
                throw ObjectStoreError.invalidObject("the stored \(name) does not migrate from schema version \(version): \(error)")
            }
        }
        for key in ObjectStore.managedFields { migrated[key] = fields[key] }
        migrated[schemaVersionKey] = .int(Int64(T.schemaVersion))
        return migrated
    }

    static func format(_ date: Date, key: String?, formats: [String: String]) -> String {
        if let key, let format = formats[key] { return withFormatter(format) { $0.string(from: date) } }
        return rfc3339(date)
    }

    static func parse(_ text: String, key: String?, formats: [String: String]) -> Date? {
        if let key, let format = formats[key] {
            // Strict: a date that does not print back as the same text (February 30th, hour
            // 25) is refused, never moved to a neighbouring valid one.
            return withFormatter(format) { formatter in
                guard let parsed = formatter.date(from: text), formatter.string(from: parsed) == text else { return nil }
                return parsed
            }
        }
        return Timestamp(rfc3339: text).map(date)
    }

    /// RFC 3339 in UTC with microseconds, as `Timestamp` prints it.
    static func rfc3339(_ date: Date) -> String { timestamp(date).description }

    static func timestamp(_ date: Date) -> Timestamp {
        Timestamp(microsecondsSince1970: Int64((date.timeIntervalSince1970 * 1_000_000).rounded()))
    }

    static func date(_ timestamp: Timestamp) -> Date {
        Date(timeIntervalSince1970: Double(timestamp.microsecondsSince1970) / 1_000_000)
    }

    /// One formatter per format string, made once: making one costs far more than using it.
    /// Used under the lock, so that no formatter is ever used by two threads at once.
    private static let formatters = Locked<[String: DateFormatter]>([:])

    private static func withFormatter<R: Sendable>(_ format: String, _ body: (DateFormatter) -> R) -> R {
        formatters.withLock { formatters in
            if let formatter = formatters[format] { return body(formatter) }
            let formatter = makeFormatter(format)
            formatters[format] = formatter
            return body(formatter)
        }
    }

    private static func makeFormatter(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = format
        formatter.isLenient = false
        return formatter
    }
}
