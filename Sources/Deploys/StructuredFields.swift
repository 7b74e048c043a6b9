import EventLog

/// Expo's Structured Field Values (expo-sfv-0, a subset of RFC 8941), as much as the headers
/// of a manifest response need: the dictionaries of `expo-server-defined-headers` and
/// `expo-manifest-filters`.
enum StructuredFields {
    /// The members of a dictionary whose values are strings, tokens (read as strings),
    /// integers, decimals and booleans, in order; members of other kinds (byte sequences,
    /// inner lists) are left out, as Expo's client leaves them out, and parameters are
    /// ignored. A bare key is `true`. `nil` for text that is not a dictionary.
    static func dictionary(_ text: String) -> [(key: String, value: StateValue)]? {
        var reader = Reader(Array(text.utf8))
        var members: [(key: String, value: StateValue)] = []
        reader.skipSpaces()
        if reader.atEnd { return [] }
        while true {
            guard let key = reader.key() else { return nil }
            var value: StateValue? = true
            if reader.take(UInt8(ascii: "=")) {
                guard let item = reader.item() else { return nil }
                value = item
            }
            guard reader.skipParameters() else { return nil }
            if let value {
                members.removeAll { $0.key == key }
                members.append((key, value))
            }
            reader.skipSpaces()
            if reader.atEnd { return members }
            guard reader.take(UInt8(ascii: ",")) else { return nil }
            reader.skipSpaces()
            if reader.atEnd { return nil }
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var at = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { at >= bytes.count }
        var next: UInt8? { atEnd ? nil : bytes[at] }

        mutating func take(_ byte: UInt8) -> Bool {
            guard next == byte else { return false }
            at += 1
            return true
        }

        mutating func skipSpaces() {
            while let byte = next, byte == 0x20 || byte == 0x09 { at += 1 }
        }

        /// `lcalpha / "*"`, then `lcalpha / DIGIT / "_" / "-" / "." / "*"`.
        mutating func key() -> String? {
            guard let first = next, isLowercase(first) || first == UInt8(ascii: "*") else { return nil }
            let start = at
            while let byte = next, isLowercase(byte) || isDigit(byte) || "_-.*".utf8.contains(byte) { at += 1 }
            return String(decoding: bytes[start..<at], as: UTF8.self)
        }

        /// An item's bare value: `nil` for a malformed one, `.null` for a kind that is read
        /// and left out (a byte sequence, an inner list).
        mutating func item() -> StateValue?? {
            guard let first = next else { return nil }
            switch first {
            case UInt8(ascii: "\""): return string().map { .some(.string($0)) }
            case UInt8(ascii: "?"):
                at += 1
                if take(UInt8(ascii: "1")) { return .some(true) }
                if take(UInt8(ascii: "0")) { return .some(false) }
                return nil
            case UInt8(ascii: ":"):
                at += 1
                while let byte = next, byte != UInt8(ascii: ":") { at += 1 }
                return take(UInt8(ascii: ":")) ? .some(nil) : nil
            case UInt8(ascii: "("):
                var depth = 0
                while let byte = next {
                    at += 1
                    if byte == UInt8(ascii: "(") { depth += 1 }
                    if byte == UInt8(ascii: ")") { depth -= 1; if depth == 0 { return .some(nil) } }
                    if byte == UInt8(ascii: "\""), string(openedAlready: true) == nil { return nil }
                }
                return nil
            case _ where first == UInt8(ascii: "-") || isDigit(first): return number().map { .some($0) }
            case _ where isAlpha(first) || first == UInt8(ascii: "*"):
                let start = at
                while let byte = next, byte > 0x20, byte < 0x7F, !"\"(),;<=>?@[\\]{}".utf8.contains(byte) { at += 1 }
                return .some(.string(String(decoding: bytes[start..<at], as: UTF8.self)))
            default: return nil
            }
        }

        /// A quoted string with `\"` and `\\` escapes, printable ASCII only.
        mutating func string(openedAlready: Bool = false) -> String? {
            if !openedAlready { at += 1 }
            var out: [UInt8] = []
            while let byte = next {
                at += 1
                switch byte {
                case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let escaped = next, escaped == UInt8(ascii: "\"") || escaped == UInt8(ascii: "\\") else { return nil }
                    at += 1
                    out.append(escaped)
                case 0x20..<0x7F: out.append(byte)
                default: return nil
                }
            }
            return nil
        }

        /// An integer (at most 15 digits) or a decimal (at most 12 digits, then at most 3).
        mutating func number() -> StateValue? {
            let start = at
            _ = take(UInt8(ascii: "-"))
            while let byte = next, isDigit(byte) || byte == UInt8(ascii: ".") { at += 1 }
            let text = String(decoding: bytes[start..<at], as: UTF8.self)
            let digits = text.drop { $0 == "-" }
            if let dot = digits.firstIndex(of: ".") {
                let whole = digits[..<dot], fraction = digits[digits.index(after: dot)...]
                guard (1...12).contains(whole.count), (1...3).contains(fraction.count), !fraction.contains("."), let value = Double(text) else { return nil }
                return .double(value)
            }
            guard (1...15).contains(digits.count), let value = Int64(text) else { return nil }
            return .int(value)
        }

        /// `;key[=item]` parameters, read and ignored.
        mutating func skipParameters() -> Bool {
            while take(UInt8(ascii: ";")) {
                skipSpaces()
                guard key() != nil else { return false }
                if take(UInt8(ascii: "=")), item() == nil { return false }
            }
            return true
        }

        func isLowercase(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte) }
        func isAlpha(_ byte: UInt8) -> Bool { isLowercase(byte) || (0x41...0x5A).contains(byte) }
        func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
    }
}
