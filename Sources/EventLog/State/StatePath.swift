/// The location of a value in a state tree, written `messenger.selectedTab`,
/// `navigation.path[0]` or `objects.Post["id.with.dots"]`.
///
/// A bare key is any run of characters other than `.`, `[`, `]`, `"`, the operators of
/// predicates (`( ) ! = < > & |`), control characters and white space; any other key is
/// written in brackets as a JSON string. The empty path is the root.
public struct StatePath: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// One step into the tree: an object key or an array index.
    public enum Component: Sendable, Hashable {
        case key(String)
        case index(Int)
    }

    /// The steps from the root, outermost first; none for the root.
    public var components: [Component]

    /// The path of `components`; none gives the root.
    public init(_ components: [Component] = []) { self.components = components }

    /// The root of the tree.
    public static let root = StatePath()

    /// Parses the text form; throws with the column of the first character that does not fit.
    ///
    /// - Throws: ``ExpressionSyntaxError`` when `text` is not a path: a missing key or `.`, an
    ///   unterminated bracket or quoted key, an index that is not a decimal `Int`.
    public init(parsing text: String) throws(ExpressionSyntaxError) {
        if let keys = Self.dottedKeys(text) {
            self.init(keys)
            return
        }
        var parser = PathParser(text: Array(text.unicodeScalars))
        self.init(try parser.parse())
    }

    /// `messenger.listFilter`: the keys of a path of ASCII bare keys joined by dots, read
    /// without the parser (most paths, and every literal such as `payload["filter"]`, are
    /// such); `nil` for any other text, which the parser reads the same way or refuses.
    private static func dottedKeys(_ text: String) -> [Component]? {
        var keys: [Component] = []
        var start = text.utf8.startIndex
        for index in text.utf8.indices {
            let byte = text.utf8[index]
            guard byte < 0x80, byte != UInt8(ascii: ".") else {
                guard byte == UInt8(ascii: "."), index > start else { return nil }
                keys.append(.key(String(text[start..<index])))
                start = text.utf8.index(after: index)
                continue
            }
            if isDelimiter(Unicode.Scalar(byte)) { return nil }
        }
        guard start < text.utf8.endIndex else { return nil }
        keys.append(.key(String(text[start...])))
        return keys
    }

    /// A path literal; it must be valid (a malformed literal is a programmer error).
    public init(stringLiteral value: String) {
        do { try self.init(parsing: value) } catch { preconditionFailure("invalid path literal \"\(value)\": \(error)") }
    }

    /// Whether this is the root: no components.
    public var isRoot: Bool { components.isEmpty }

    /// This path extended by one key.
    public func appending(_ key: String) -> StatePath { appending(.key(key)) }
    /// This path extended by one array index.
    public func appending(index: Int) -> StatePath { appending(.index(index)) }

    /// One allocation, where `components + [component]` makes two.
    private func appending(_ component: Component) -> StatePath {
        var extended: [Component] = []
        extended.reserveCapacity(components.count + 1)
        extended.append(contentsOf: components)
        extended.append(component)
        return StatePath(extended)
    }

    /// The text form, which `init(parsing:)` reads back.
    public var description: String {
        var text = ""
        for component in components {
            switch component {
            case .key(let key) where Self.isBare(key):
                if !text.isEmpty { text += "." }
                text += key
            case .key(let key):
                text += "[" + StateValue.string(key).json() + "]"
            case .index(let index):
                text += "[\(index)]"
            }
        }
        return text
    }

    static func isBare(_ key: String) -> Bool {
        !key.isEmpty && !key.unicodeScalars.contains { isDelimiter($0) }
    }

    static func isDelimiter(_ c: Unicode.Scalar) -> Bool {
        if c.isASCII {
            // The common case, without a Unicode property lookup.
            // Besides the path's own punctuation, the predicate language's operators, so that a
            // path printed bare reads back inside an expression too.
            switch c {
            case ".", "[", "]", "\"", " ", "(", ")", "!", "=", "<", ">", "&", "|": return true
            default: return c.value < 0x20 || c.value == 0x7F
            }
        }
        return c.properties.isWhitespace
    }
}

/// A path or a predicate that could not be parsed, with the 1-based column where it went wrong.
public struct ExpressionSyntaxError: Error, Hashable, CustomStringConvertible {
    /// The 1-based column, counted in Unicode scalars, where parsing failed.
    public let column: Int
    /// What was expected or wrong there.
    public let reason: String
    public var description: String { "column \(column): \(reason)" }
}

private struct PathParser {
    let text: [Unicode.Scalar]
    var at = 0

    mutating func parse() throws(ExpressionSyntaxError) -> [StatePath.Component] {
        var components: [StatePath.Component] = []
        while at < text.count {
            if text[at] == "[" {
                components.append(try bracket())
            } else {
                if !components.isEmpty {
                    guard text[at] == "." else { throw fail("expected '.' or '['") }
                    at += 1
                }
                components.append(.key(try bareKey()))
            }
        }
        return components
    }

    mutating func bareKey() throws(ExpressionSyntaxError) -> String {
        let start = at
        while at < text.count, !StatePath.isDelimiter(text[at]) { at += 1 }
        guard at > start else { throw fail("expected a key") }
        var key = ""
        key.unicodeScalars.append(contentsOf: text[start..<at])
        return key
    }

    mutating func bracket() throws(ExpressionSyntaxError) -> StatePath.Component {
        at += 1 // "["
        let component: StatePath.Component
        if at < text.count, text[at] == "\"" {
            // A quoted key is a JSON string, as `description` writes it.
            do {
                let (key, end) = try QuotedString.read(text, at: at)
                at = end
                component = .key(key)
            } catch {
                at = error.at
                throw fail(error.isUnterminated ? "unterminated quoted key" : "quoted key: \(error.reason)")
            }
        } else {
            let start = at
            while at < text.count, ("0"..."9").contains(text[at]) { at += 1 }
            guard at > start else { throw fail("expected an index or a quoted key") }
            var digits = ""
            digits.unicodeScalars.append(contentsOf: text[start..<at])
            guard let index = Int(digits) else { throw fail("index out of range") }
            component = .index(index)
        }
        guard at < text.count, text[at] == "]" else { throw fail("expected ']'") }
        at += 1
        return component
    }

    func fail(_ reason: String) -> ExpressionSyntaxError { ExpressionSyntaxError(column: at + 1, reason: reason) }
}
