import EventLog
import Foundation

/// Maps `StoredObject` values to and from state values through Foundation's JSON coders,
/// with RFC 3339 dates (fractional seconds) and per-key custom date formats.
enum ObjectCoding {
    static func encode<T: StoredObject>(_ object: T) throws -> StateObject {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys // the same object always encodes to the same events
        let formats = T.dateFormats
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(format(date, key: encoder.codingPath.last?.stringValue, formats: formats))
        }
        let data: Data
        do { data = try encoder.encode(object) } catch { throw ObjectStoreError.invalidObject("\(error)") }
        guard case .object(let fields) = try StateValue(json: String(decoding: data, as: UTF8.self)) else {
            throw ObjectStoreError.invalidObject("\(T.self) does not encode to a JSON object")
        }
        return fields
    }

    static func decode<T: StoredObject>(_ type: T.Type, from fields: StateObject) throws -> T {
        let decoder = JSONDecoder()
        let formats = T.dateFormats
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            let key = decoder.codingPath.last?.stringValue
            guard let date = parse(text, key: key, formats: formats) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "\"\(text)\" is not a date in the format of \(key ?? "this key")")
            }
            return date
        }
        do {
            return try decoder.decode(T.self, from: Data(StateValue.object(fields).json().utf8))
        } catch {
            throw ObjectStoreError.invalidObject("the stored \(T.collection) does not decode as \(T.self): \(error)")
        }
    }

    static func format(_ date: Date, key: String?, formats: [String: String]) -> String {
        if let key, let format = formats[key] { return formatter(format).string(from: date) }
        return rfc3339(date)
    }

    static func parse(_ text: String, key: String?, formats: [String: String]) -> Date? {
        if let key, let format = formats[key] {
            // Strict: a date that does not print back as the same text (February 30th, hour
            // 25) is refused, never moved to a neighbouring valid one.
            let formatter = formatter(format)
            guard let parsed = formatter.date(from: text), formatter.string(from: parsed) == text else { return nil }
            return parsed
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

    private static func formatter(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = format
        formatter.isLenient = false
        return formatter
    }
}
