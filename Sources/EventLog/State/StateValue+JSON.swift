/// JSON for people and tools. Objects keep their key order; integers and doubles stay
/// distinct (a double is always written with a `.` or an exponent). Non-finite doubles,
/// which JSON cannot hold, are written as `null` (the log refuses them; see `StateLimits`).
/// The parser refuses what would not come back the same: text that is not UTF-8, integers
/// beyond 64 bits, numbers beyond a double's range or too small for one, repeated keys.
extension StateValue {
    /// The value as JSON text: compact on one line, or `pretty` with two-space indents.
    public func json(pretty: Bool = false) -> String {
        var out = ""
        write(into: &out, pretty: pretty, indent: 0)
        return out
    }

    private func write(into out: inout String, pretty: Bool, indent: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += Self.jsonNumber(d)
        case .string(let s): Self.writeString(s, into: &out)
        case .array(let elements):
            if elements.isEmpty { out += "[]"; return }
            out += "["
            for (i, element) in elements.enumerated() {
                if i > 0 { out += "," }
                if pretty { Self.newline(&out, indent + 1) }
                element.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { Self.newline(&out, indent) }
            out += "]"
        case .object(let object):
            if object.isEmpty { out += "{}"; return }
            out += "{"
            for (i, (key, value)) in object.enumerated() {
                if i > 0 { out += "," }
                if pretty { Self.newline(&out, indent + 1) }
                Self.writeString(key, into: &out)
                out += pretty ? ": " : ":"
                value.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { Self.newline(&out, indent) }
            out += "}"
        }
    }

    private static func newline(_ out: inout String, _ indent: Int) {
        out += "\n"
        out += String(repeating: "  ", count: indent)
    }

    static func jsonNumber(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        let text = "\(d)"
        return text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) ? text : text + ".0"
    }

    static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            // Every control character, DEL and the C1 range too: raw, they drive terminals.
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value):
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// Parses one JSON document. Throws with the line and column of the first error.
    ///
    /// - Throws: ``JSONSyntaxError`` as ``init(jsonUTF8:)`` does.
    public init(json text: String) throws(JSONSyntaxError) {
        try self.init(jsonUTF8: Array(text.utf8))
    }

    /// Parses one JSON document from its UTF-8 bytes; bytes that are not UTF-8 are an error,
    /// never replaced. Throws with the line and column of the first error.
    ///
    /// - Throws: ``JSONSyntaxError`` when `bytes` are not one JSON document (text after the
    ///   value included), or hold what would not come back the same: bytes that are not UTF-8,
    ///   integers beyond 64 bits, numbers beyond a double's range or too small for one, a
    ///   repeated key, nesting deeper than twice ``StateLimits/maxDepth``.
    public init(jsonUTF8 bytes: [UInt8]) throws(JSONSyntaxError) {
        var parser = JSONParser(bytes: bytes)
        self = try parser.document()
    }
}

/// A JSON string literal inside another text (a quoted path key, a predicate's string).
enum QuotedString {
    /// Where in the text a literal went wrong (an index into it), and why; an unterminated
    /// literal goes wrong at the end of the text.
    struct Failure: Error {
        var at: Int
        var reason: String
        var isUnterminated = false
    }

    /// Reads the literal that starts at `text[start]` (a `"`) with JSON's escapes; returns its
    /// value and the index just after its closing quote.
    static func read(_ text: [Unicode.Scalar], at start: Int) throws(Failure) -> (value: String, end: Int) {
        var end = start + 1
        while end < text.count, text[end] != "\"" { end += text[end] == "\\" ? 2 : 1 }
        guard end < text.count else { throw Failure(at: text.count, reason: "unterminated string", isUnterminated: true) }
        end += 1
        var literal = ""
        literal.unicodeScalars.append(contentsOf: text[start..<end])
        let parsed: StateValue
        do { parsed = try StateValue(json: literal) } catch { throw Failure(at: start + error.column - 1, reason: error.reason) }
        guard case .string(let value) = parsed else { throw Failure(at: start, reason: "expected a string") }
        return (value, end)
    }
}

/// JSON that could not be parsed, with the 1-based line and column of the problem.
public struct JSONSyntaxError: Error, Hashable, CustomStringConvertible {
    /// The 1-based line of the problem.
    public let line: Int
    /// The 1-based column of the problem, counted in UTF-8 bytes.
    public let column: Int
    /// What was expected or wrong there.
    public let reason: String
    public var description: String { "line \(line), column \(column): \(reason)" }
}

private struct JSONParser {
    let bytes: [UInt8]
    var at = 0
    var depth = 0
    static let maxDepth = StateLimits.maxReadDepth

    mutating func document() throws(JSONSyntaxError) -> StateValue {
        let value = try self.value()
        skipSpace()
        guard at == bytes.count else { throw fail("unexpected text after the value") }
        return value
    }

    mutating func value() throws(JSONSyntaxError) -> StateValue {
        skipSpace()
        guard at < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[at] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw fail("unexpected character '\(Character(Unicode.Scalar(bytes[at])))'")
        }
    }

    mutating func object() throws(JSONSyntaxError) -> StateValue {
        try enter()
        defer { depth -= 1 }
        at += 1
        var object = StateObject()
        skipSpace()
        if peek(UInt8(ascii: "}")) { at += 1; return .object(object) }
        while true {
            skipSpace()
            guard peek(UInt8(ascii: "\"")) else { throw fail("expected a string key") }
            let keyStart = at
            let key = try string()
            skipSpace()
            guard peek(UInt8(ascii: ":")) else { throw fail("expected ':'") }
            at += 1
            // A repeated key is refused rather than letting the last one win silently. Keys
            // are Swift strings, so two spellings of the same Unicode text are one key.
            guard object.replaceValue(try value(), forKey: key) == nil else {
                at = keyStart
                throw fail("duplicate key \"\(key)\"")
            }
            skipSpace()
            if peek(UInt8(ascii: ",")) { at += 1; continue }
            if peek(UInt8(ascii: "}")) { at += 1; return .object(object) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func array() throws(JSONSyntaxError) -> StateValue {
        try enter()
        defer { depth -= 1 }
        at += 1
        var elements: [StateValue] = []
        skipSpace()
        if peek(UInt8(ascii: "]")) { at += 1; return .array(elements) }
        while true {
            elements.append(try value())
            skipSpace()
            if peek(UInt8(ascii: ",")) { at += 1; continue }
            if peek(UInt8(ascii: "]")) { at += 1; return .array(elements) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func string() throws(JSONSyntaxError) -> String {
        let start = at
        at += 1 // opening quote
        var utf8: [UInt8] = []
        while true {
            guard at < bytes.count else { throw fail("unterminated string") }
            let b = bytes[at]
            at += 1
            switch b {
            case UInt8(ascii: "\""):
                guard let string = String(validating: utf8, as: UTF8.self) else {
                    at = start
                    throw fail("string is not valid UTF-8")
                }
                return string
            case UInt8(ascii: "\\"):
                guard at < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[at]
                at += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(e)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard bytes.count - at >= 6, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate")
                        }
                        at += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let s = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    utf8.append(contentsOf: Array(String(Character(s)).utf8))
                default:
                    at -= 2
                    throw fail("invalid escape")
                }
            case 0..<0x20:
                at -= 1
                throw fail("control character in string")
            default:
                utf8.append(b)
            }
        }
    }

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard bytes.count - at >= 4 else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Self.hexDigit(bytes[at]) else { throw fail("invalid hex digit") }
            value = value << 4 | digit
            at += 1
        }
        return value
    }

    static func hexDigit(_ b: UInt8) -> UInt32? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(b - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(b - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(b - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    mutating func number() throws(JSONSyntaxError) -> StateValue {
        let start = at
        var isDouble = false
        if peek(UInt8(ascii: "-")) { at += 1 }
        let integerStart = at
        let integerDigits = digits()
        guard integerDigits > 0 else { throw fail("expected a digit") }
        if integerDigits > 1 && bytes[integerStart] == UInt8(ascii: "0") {
            at = integerStart + 1
            throw fail("leading zeros are not allowed")
        }
        if peek(UInt8(ascii: ".")) {
            isDouble = true
            at += 1
            guard digits() > 0 else { throw fail("expected a digit after '.'") }
        }
        if peek(UInt8(ascii: "e")) || peek(UInt8(ascii: "E")) {
            isDouble = true
            at += 1
            if peek(UInt8(ascii: "+")) || peek(UInt8(ascii: "-")) { at += 1 }
            guard digits() > 0 else { throw fail("expected a digit in the exponent") }
        }
        let text = String(decoding: bytes[start..<at], as: UTF8.self)
        if !isDouble {
            guard let int = Int64(text) else { at = start; throw fail("integer \(text) is beyond 64 bits") }
            return .int(int)
        }
        guard let double = Double(text) else { at = start; throw fail("invalid number") }
        guard double.isFinite else { at = start; throw fail("number \(text) is beyond the range of a double") }
        // A number too small for a double would silently become 0.
        let mantissa = text.prefix { $0 != "e" && $0 != "E" }
        guard double != 0 || !mantissa.contains(where: { ("1"..."9").contains($0) }) else {
            at = start
            throw fail("number \(text) is too small for a double")
        }
        return .double(double)
    }

    mutating func digits() -> Int {
        let start = at
        while at < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[at]) { at += 1 }
        return at - start
    }

    mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - at >= count,
              word.withUTF8Buffer({ Array($0) }) == Array(bytes[at..<at + count]) else {
            throw fail("invalid literal")
        }
        at += count
    }

    mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > Self.maxDepth { throw fail("nested deeper than \(Self.maxDepth) levels") }
    }

    func peek(_ b: UInt8) -> Bool { at < bytes.count && bytes[at] == b }

    mutating func skipSpace() {
        while at < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1 }
    }

    func fail(_ reason: String) -> JSONSyntaxError {
        var line = 1
        var lineStart = 0
        for i in 0..<min(at, bytes.count) where bytes[i] == 0x0A {
            line += 1
            lineStart = i + 1
        }
        return JSONSyntaxError(line: line, column: at - lineStart + 1, reason: reason)
    }
}
