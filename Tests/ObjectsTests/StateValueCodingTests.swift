import EventLog
import Foundation
@testable import Objects
import Testing

/// The JSON path `ObjectCoding` took before `StateValueEncoder`/`StateValueDecoder`:
/// `JSONEncoder` with sorted keys → JSON text → `StateValue(json:)`, and `JSONDecoder` from
/// `json()` the other way. Kept here as the reference the direct coders must match.
enum JSONPathCoding {
    static func encode<T: StoredObject>(_ object: T) throws -> StateObject {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let formats = T.dateFormats
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ObjectCoding.format(date, key: encoder.codingPath.last?.stringValue, formats: formats))
        }
        let data = try encoder.encode(object)
        guard case .object(let fields) = try StateValue(json: String(decoding: data, as: UTF8.self)) else {
            throw ObjectStoreError.invalidObject("not an object")
        }
        return fields
    }

    static func decode<T: StoredObject>(_ type: T.Type, from fields: StateObject) throws -> T {
        let decoder = JSONDecoder()
        let formats = T.dateFormats
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = ObjectCoding.parse(text, key: decoder.codingPath.last?.stringValue, formats: formats) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a date")
            }
            return date
        }
        return try decoder.decode(T.self, from: Data(StateValue.object(fields).json().utf8))
    }
}

struct Numbers: StoredObject, Equatable {
    var id: String?
    var int = Int.min, int8 = Int8.min, int16 = Int16.max, int32 = Int32.min, int64 = Int64.max
    var uint = UInt(7), uint8 = UInt8.max, uint16 = UInt16.max, uint32 = UInt32.max, uint64 = UInt64(Int64.max)
    var doubles: [Double] = [1.0, 0.1, 1e20, -0.0, 1e15, 999_999_999_999_999, 1e16, 9_007_199_254_740_994, .leastNonzeroMagnitude,
                             123.456, -2.5, 1e-7, .greatestFiniteMagnitude, -1e300, 2.5e15, 0]
    var floats: [Float] = [0.1, 3.0, 1e10, .leastNonzeroMagnitude, 16_777_216, .greatestFiniteMagnitude, -7.25, 1.1]
    var float: Float = 0.3
    var decimals: [Decimal] = [Decimal(string: "3.14")!, 5, Decimal(string: "-0.000001")!, Decimal(1) / Decimal(3)]
    var flag = true
}

struct Address: Codable, Equatable {
    var street: String
    var since: Date
    var lines: [String]?
}

enum Shape: Codable, Equatable {
    case circle(radius: Double)
    case rect(Double, Double)
    case none
}

struct Everything: StoredObject, Equatable {
    var id: String?
    var title = "Grüße \"quoted\" \\ tab\t newline\n \u{1} \u{7F} 🦆 e\u{301}"
    var missing: Int? = nil
    var present: Int? = 4
    var nested: Address? = Address(street: "Main", since: Date(timeIntervalSince1970: 1_700_000_000.5), lines: nil)
    var addresses = [Address(street: "A", since: Date(timeIntervalSince1970: 0), lines: ["x", "y"])]
    var byName: [String: Int] = ["b": 1, "B": 2, "a10": 3, "a2": 4, "_x": 5, "Z": 6, "é": 7, "e": 8, "ä": 11, "１": 13]
    var byNumber: [Int: String] = [1: "a", 10: "b", 2: "c", -3: "d"]
    var grid: [[Int]] = [[1, 2], [], [3]]
    var shapes: [Shape] = [.circle(radius: 2), .rect(1, 2.5), .none]
    var url = URL(string: "https://example.com/a path?q=1&r=é")!
    var data = Data([0, 1, 2, 250, 255])
    var dates: [Date] = [Date(timeIntervalSince1970: 1_764_000_000.123456), Date(timeIntervalSince1970: -1)]
    var datesByKey: [String: Date] = ["stamp": Date(timeIntervalSince1970: 1_764_000_000)]
    var stamp = Date(timeIntervalSince1970: 1_764_000_060)
    var empty = Empty()
    var optionals: [Int?] = [1, nil, 3]
    var tuple = Pair()

    struct Empty: Codable, Equatable {}

    /// Encodes itself through an unkeyed container and a super encoder.
    struct Pair: Codable, Equatable {
        var first = "one", second = 2
        init() {}
        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            first = try container.decode(String.self)
            second = try container.superDecoder().singleValueContainer().decode(Int.self)
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode(first)
            var inner = container.superEncoder().singleValueContainer()
            try inner.encode(second)
        }
    }

    static let dateFormats = ["stamp": "yyyy-MM-dd HH:mm", "since": "yyyy-MM-dd"]
}

class Base: Codable {
    var base = 1
    var explicitNull = 0
    init() {}
    enum CodingKeys: String, CodingKey { case base, explicitNull }
    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        base = try container.decode(Int.self, forKey: .base)
        explicitNull = try container.decodeNil(forKey: .explicitNull) ? 0 : 1
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(base, forKey: .base)
        try container.encodeNil(forKey: .explicitNull)
    }
}

final class Derived: Base, StoredObject, Equatable, @unchecked Sendable {
    var id: String?
    var extra = "x"
    override init() { super.init() }
    enum Keys: String, CodingKey { case id, extra }
    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        id = try container.decodeIfPresent(String.self, forKey: .id)
        extra = try container.decode(String.self, forKey: .extra)
        try super.init(from: container.superDecoder())
    }
    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encodeIfPresent(id, forKey: .id)
        try container.encode(extra, forKey: .extra)
        try super.encode(to: container.superEncoder())
    }
    static func == (a: Derived, b: Derived) -> Bool { a.id == b.id && a.extra == b.extra && a.base == b.base && a.explicitNull == b.explicitNull }
}

struct Narrow: StoredObject, Equatable {
    var id: String?
    var small: Int8?
    var ratio: Float?
    var count: Int?
    var when: Date?
    var blob: Data?
    var link: URL?
    var flag: Bool?
    var amount: Decimal?
    static let dateFormats = ["when": "yyyy-MM-dd"]
}

@Suite struct StateValueCodingTests {
    /// Both paths give the same fields, in the same key order, and read them back alike.
    private func expectSamePath<T: StoredObject & Equatable>(_ object: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let old = try JSONPathCoding.encode(object)
        let new = try ObjectCoding.encode(object)
        #expect(StateValue.object(new).json() == StateValue.object(old).json(), sourceLocation: sourceLocation)
        #expect(try ObjectCoding.decode(T.self, from: new) == JSONPathCoding.decode(T.self, from: old), sourceLocation: sourceLocation)
        #expect(try ObjectCoding.decode(T.self, from: new) == object || T.self == Numbers.self || T.self == Everything.self,
                sourceLocation: sourceLocation)
    }

    @Test func theDirectCodersMatchTheJSONPath() throws {
        try expectSamePath(BlogPost(id: "p1", title: "T", body: "B", views: 3, draft: false,
                                    publishedDate: Date(timeIntervalSince1970: 1_764_000_000),
                                    createdAt: Date(timeIntervalSince1970: 1_764_468_340.123456), updatedAt: nil))
        try expectSamePath(Numbers())
        try expectSamePath(Everything())
        try expectSamePath(Derived())
        try expectSamePath(Narrow())
        try expectSamePath(Narrow(id: "n", small: -8, ratio: 2.5, count: 1, when: Date(timeIntervalSince1970: 86_400),
                                  blob: Data(), link: URL(string: "a:b"), flag: false, amount: 12))
    }

    @Test func numbersEncodeAsTheJSONPathReadThem() throws {
        let fields = try ObjectCoding.encode(Numbers())
        #expect(fields["doubles"] == [1, 0.1, 1e20, 0, 1_000_000_000_000_000, 999_999_999_999_999, 1e16, .double(9_007_199_254_740_994),
                                      .double(.leastNonzeroMagnitude), 123.456, -2.5, 1e-7, .double(.greatestFiniteMagnitude), -1e300,
                                      2_500_000_000_000_000, 0])
        #expect(fields["floats"] == [0.1, 3, 1e10, 1e-45, 16_777_216, 3.4028235e38, -7.25, 1.1])
        #expect(fields.keys == fields.keys.sorted())
    }

    /// Values the JSON path read leniently are read the same; what it refused is refused.
    @Test func decodingAcceptsAndRefusesWhatTheJSONPathDid() throws {
        let accepted: [StateObject] = [
            ["small": 127, "ratio": 1, "count": .double(3)],
            ["count": .double(-0.0), "ratio": 1e-30, "amount": 0.5],
            ["count": .null, "when": .null, "blob": "AQID", "link": "a b", "flag": true],
            ["id": "x", "when": "2025-01-31", "amount": .int(Int64.max)],
        ]
        for fields in accepted {
            #expect(try ObjectCoding.decode(Narrow.self, from: fields) == JSONPathCoding.decode(Narrow.self, from: fields), "\(fields)")
        }
        let refused: [StateObject] = [
            ["small": 128], ["small": .double(1.5)], ["count": 1.5], ["count": 1e19], ["count": "1"], ["flag": 1],
            ["ratio": 1e300], ["ratio": 1e-50], ["ratio": "1"], ["when": "2025-02-30"], ["when": "2025-1-31"],
            ["when": 5], ["blob": "A!"], ["link": ""], ["amount": "1"],
        ]
        for fields in refused {
            #expect(throws: (any Error).self, "\(fields)") { try JSONPathCoding.decode(Narrow.self, from: fields) }
            #expect(throws: ObjectStoreError.self, "\(fields)") { try ObjectCoding.decode(Narrow.self, from: fields) }
        }
    }

    @Test func errorsNameTheKeyAndTheProblem() throws {
        #expect(throws: ObjectStoreError.invalidObject("the stored BlogPost does not decode as BlogPost: missing key \"views\"")) {
            try ObjectCoding.decode(BlogPost.self, from: ["title": "T", "body": "B", "draft": false])
        }
        #expect(throws: ObjectStoreError.invalidObject("the stored BlogPost does not decode as BlogPost: views: expected an integer, found a string")) {
            try ObjectCoding.decode(BlogPost.self, from: ["title": "T", "body": "B", "views": "many", "draft": false])
        }
        #expect(throws: ObjectStoreError.invalidObject("the stored Everything does not decode as Everything: addresses[0].street: expected a string, found null")) {
            var fields = try ObjectCoding.encode(Everything())
            fields["addresses"] = [["street": .null, "since": "1970-01-01"]]
            return try ObjectCoding.decode(Everything.self, from: fields)
        }
        // An array of strings decodes without a container per element, and names the one that is not.
        #expect(throws: ObjectStoreError.invalidObject("the stored Everything does not decode as Everything: addresses[0].lines[1]: expected a string, found an integer")) {
            var fields = try ObjectCoding.encode(Everything())
            fields["addresses"] = [["street": "A", "since": "1970-01-01", "lines": ["x", 2]]]
            return try ObjectCoding.decode(Everything.self, from: fields)
        }
        #expect(throws: ObjectStoreError.invalidObject("the stored Everything does not decode as Everything: addresses[0].lines: expected an array, found a string")) {
            var fields = try ObjectCoding.encode(Everything())
            fields["addresses"] = [["street": "A", "since": "1970-01-01", "lines": "x"]]
            return try ObjectCoding.decode(Everything.self, from: fields)
        }
        #expect(throws: ObjectStoreError.invalidObject("Numbers cannot be stored: uint64: integer 18446744073709551615 is beyond 64 bits")) {
            var numbers = Numbers()
            numbers.uint64 = .max
            return try ObjectCoding.encode(numbers)
        }
        #expect(throws: ObjectStoreError.invalidObject("Numbers cannot be stored: doubles[1]: nan (Double) cannot be stored")) {
            var numbers = Numbers()
            numbers.doubles = [1, .nan]
            return try ObjectCoding.encode(numbers)
        }
    }

    @Test func encodingIsTheSameEveryTime() throws {
        let first = StateValue.object(try ObjectCoding.encode(Everything())).json()
        for _ in 0..<5 { #expect(StateValue.object(try ObjectCoding.encode(Everything())).json() == first) }
    }
}
