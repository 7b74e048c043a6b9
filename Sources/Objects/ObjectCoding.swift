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
        guard case .object(let fields) = value else {
            throw ObjectStoreError.invalidObject("\(T.self) does not encode to an object")
        }
        return fields
    }

    static func decode<T: StoredObject>(_ type: T.Type, from fields: StateObject) throws -> T {
        do {
            return try StateValueDecoder(dateFormats: T.dateFormats).decode(T.self, from: .object(fields))
        } catch {
            throw ObjectStoreError.invalidObject("the stored \(T.collection) does not decode as \(T.self): \(error)")
        }
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
