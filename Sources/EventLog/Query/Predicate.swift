/// A predicate over a state snapshot, written in a small expression language:
///
///     messenger.selectedTab == "bots" && messenger.listFilter != "bots"
///     exists(objects.Post["p-1"]) || !(count >= 10)
///     messenger.inThreadSearch contains "fail"
///
/// Operators by increasing precedence: `||`; `&&`; `!`; comparisons `==`, `!=`, `<`, `<=`,
/// `>`, `>=`, `contains`. Operands: paths (`a.b[0]["c.d"]`), string, number, `true`, `false`
/// and `null` literals, `exists(path)`, and parentheses.
///
/// Evaluation is total: a missing path reads as `null`; values of different kinds are never
/// equal; `<` and friends compare numbers with numbers and strings with strings, and are
/// false otherwise; `contains` finds a substring, an array element or an object key; an
/// operand used alone is true only when it is the boolean `true`.
public struct StatePredicate: Sendable, CustomStringConvertible {
    indirect enum Node: Sendable {
        case literal(StateValue)
        case path(StatePath)
        case exists(StatePath)
        case not(Node)
        case and(Node, Node)
        case or(Node, Node)
        case compare(Node, Comparison, Node)
    }

    enum Comparison: String, Sendable {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case contains
    }

    let root: Node
    /// The text the predicate was parsed from, as given.
    public let description: String

    /// Parses `text`; errors name the 1-based column where parsing failed.
    ///
    /// - Throws: ``ExpressionSyntaxError`` when `text` is not an expression of the language,
    ///   or nests parentheses and `!` more than 100 levels deep, or joins more than 1,000
    ///   `&&` and `||`.
    public init(parsing text: String) throws(ExpressionSyntaxError) {
        var parser = PredicateParser(text: Array(text.unicodeScalars))
        root = try parser.parse()
        description = text
    }

    /// Whether `state` satisfies the predicate.
    public func evaluate(_ state: StateValue) -> Bool { Self.truth(root, state) }

    /// The paths the predicate reads, in the order they appear, each once.
    public var paths: [StatePath] {
        var found: [StatePath] = []
        func collect(_ node: Node) {
            switch node {
            case .literal: break
            case .path(let path), .exists(let path): if !found.contains(path) { found.append(path) }
            case .not(let inner): collect(inner)
            case .and(let a, let b), .or(let a, let b), .compare(let a, _, let b):
                collect(a)
                collect(b)
            }
        }
        collect(root)
        return found
    }

    private static func truth(_ node: Node, _ state: StateValue) -> Bool {
        switch node {
        case .not(let inner): return !truth(inner, state)
        case .and(let a, let b): return truth(a, state) && truth(b, state)
        case .or(let a, let b): return truth(a, state) || truth(b, state)
        case .exists(let path): return state[path] != nil
        case .compare(let a, let op, let b): return compare(value(a, state), op, value(b, state))
        case .literal, .path: return value(node, state) == .bool(true)
        }
    }

    private static func value(_ node: Node, _ state: StateValue) -> StateValue {
        switch node {
        case .literal(let value): return value
        case .path(let path): return state[path] ?? .null
        default: return .bool(truth(node, state))
        }
    }

    private static func compare(_ a: StateValue, _ op: Comparison, _ b: StateValue) -> Bool {
        switch op {
        case .equal: return equal(a, b)
        case .notEqual: return !equal(a, b)
        case .contains:
            switch (a, b) {
            case (.string(let s), .string(let t)): return s.contains(t)
            case (.array(let elements), _): return elements.contains { equal($0, b) }
            case (.object(let object), .string(let key)): return object[key] != nil
            default: return false
            }
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            let order: Int
            if let x = a.numberValue, let y = b.numberValue {
                order = x < y ? -1 : x > y ? 1 : 0
            } else if case .string(let x) = a, case .string(let y) = b {
                order = x < y ? -1 : x > y ? 1 : 0
            } else {
                return false
            }
            switch op {
            case .less: return order < 0
            case .lessOrEqual: return order <= 0
            case .greater: return order > 0
            default: return order >= 0
            }
        }
    }

    /// Numbers compare by value whether stored as integers or doubles.
    private static func equal(_ a: StateValue, _ b: StateValue) -> Bool {
        if let x = a.numberValue, let y = b.numberValue { return x == y }
        return a == b
    }
}

private struct PredicateParser {
    let text: [Unicode.Scalar]
    var at = 0
    /// Parentheses and `!` open around the current position, and `&&`/`||` read so far: both
    /// bounded, so that neither parsing nor evaluating (each recursive) can exhaust the stack.
    var nesting = 0
    var connectives = 0
    static let maxNesting = 100
    static let maxConnectives = 1_000

    mutating func parse() throws(ExpressionSyntaxError) -> StatePredicate.Node {
        skipSpace()
        guard at < text.count else { throw fail("empty expression") }
        let node = try or()
        skipSpace()
        guard at == text.count else { throw fail("unexpected '\(String(text[at]))'") }
        return node
    }

    mutating func or() throws(ExpressionSyntaxError) -> StatePredicate.Node {
        var node = try and()
        while consume("||") {
            try countConnective("||")
            node = .or(node, try and())
        }
        return node
    }

    mutating func and() throws(ExpressionSyntaxError) -> StatePredicate.Node {
        var node = try unary()
        while consume("&&") {
            try countConnective("&&")
            node = .and(node, try unary())
        }
        return node
    }

    mutating func countConnective(_ op: String) throws(ExpressionSyntaxError) {
        connectives += 1
        guard connectives <= Self.maxConnectives else {
            at -= op.count
            throw fail("more than \(Self.maxConnectives) '&&' and '||'")
        }
    }

    mutating func enter() throws(ExpressionSyntaxError) {
        nesting += 1
        guard nesting <= Self.maxNesting else { throw fail("nested deeper than \(Self.maxNesting) levels") }
    }

    mutating func unary() throws(ExpressionSyntaxError) -> StatePredicate.Node {
        skipSpace()
        if peek("!") && !peek("!=") {
            try enter()
            defer { nesting -= 1 }
            at += 1
            return .not(try unary())
        }
        return try comparison()
    }

    mutating func comparison() throws(ExpressionSyntaxError) -> StatePredicate.Node {
        let left = try operand()
        skipSpace()
        for op in ["==", "!=", "<=", ">=", "<", ">"] where peek(op) {
            at += op.unicodeScalars.count
            let right = try operand(after: op)
            return .compare(left, StatePredicate.Comparison(rawValue: op)!, right)
        }
        if peekWord("contains") {
            at += "contains".count
            return .compare(left, .contains, try operand(after: "contains"))
        }
        return left
    }

    mutating func operand(after op: String? = nil) throws(ExpressionSyntaxError) -> StatePredicate.Node {
        skipSpace()
        guard at < text.count else {
            throw fail(op.map { "expected a value after '\($0)'" } ?? "expected a value")
        }
        let c = text[at]
        if c == "(" {
            try enter()
            defer { nesting -= 1 }
            at += 1
            let inner = try or()
            skipSpace()
            guard consume(")") else { throw fail("expected ')'") }
            return inner
        }
        if c == "\"" { return .literal(.string(try string())) }
        if c == "-" || ("0"..."9").contains(c) { return .literal(try number()) }
        if isPathStart(c) {
            let start = at
            let word = bareWord()
            switch word {
            case "true": return .literal(.bool(true))
            case "false": return .literal(.bool(false))
            case "null": return .literal(.null)
            case "exists":
                skipSpace()
                guard consume("(") else { throw fail("expected '(' after exists") }
                skipSpace()
                let path = try self.path()
                skipSpace()
                guard consume(")") else { throw fail("expected ')' after the path") }
                return .exists(path)
            default:
                at = start
                return .path(try path())
            }
        }
        throw fail(op.map { "expected a value after '\($0)', found '\(String(c))'" } ?? "expected a value, found '\(String(c))'")
    }

    /// A path in the `StatePath` syntax, ending at white space, an operator or a parenthesis.
    mutating func path() throws(ExpressionSyntaxError) -> StatePath {
        let start = at
        var depth = 0
        var inString = false
        while at < text.count {
            let c = text[at]
            if inString {
                if c == "\\" { at += 1 } else if c == "\"" { inString = false }
            } else if c == "[" {
                depth += 1
            } else if c == "]" {
                depth -= 1
            } else if c == "\"" && depth > 0 {
                inString = true
            } else if depth == 0 && (c.properties.isWhitespace || "()!=<>&|\"".unicodeScalars.contains(c)) {
                break
            }
            at += 1
        }
        var source = ""
        source.unicodeScalars.append(contentsOf: text[start..<min(at, text.count)])
        do {
            return try StatePath(parsing: source)
        } catch {
            throw ExpressionSyntaxError(column: start + error.column, reason: "in path: \(error.reason)")
        }
    }

    /// A string literal: a JSON string, with JSON's escapes (`\n`, `\u001b`, …).
    mutating func string() throws(ExpressionSyntaxError) -> String {
        do {
            let (value, end) = try QuotedString.read(text, at: at)
            at = end
            return value
        } catch {
            // An unterminated string is pointed at where it starts.
            if !error.isUnterminated { at = error.at }
            throw fail(error.isUnterminated ? error.reason : "in string: \(error.reason)")
        }
    }

    mutating func number() throws(ExpressionSyntaxError) -> StateValue {
        let start = at
        if text[at] == "-" { at += 1 }
        while at < text.count, ("0"..."9").contains(text[at]) || text[at] == "." || text[at] == "e" || text[at] == "E"
            || ((text[at] == "+" || text[at] == "-") && (text[at - 1] == "e" || text[at - 1] == "E")) { at += 1 }
        var literal = ""
        literal.unicodeScalars.append(contentsOf: text[start..<at])
        if let int = Int64(literal) { return .int(int) }
        if let double = Double(literal), double.isFinite { return .double(double) }
        at = start
        throw fail("invalid number '\(literal)'")
    }

    func isPathStart(_ c: Unicode.Scalar) -> Bool { c.properties.isAlphabetic || c == "_" || c == "[" }

    mutating func bareWord() -> String {
        var word = ""
        while at < text.count, text[at].properties.isAlphabetic || text[at] == "_" {
            word.unicodeScalars.append(text[at])
            at += 1
        }
        return word
    }

    func peek(_ token: String) -> Bool {
        let scalars = Array(token.unicodeScalars)
        guard at + scalars.count <= text.count else { return false }
        return Array(text[at..<at + scalars.count]) == scalars
    }

    func peekWord(_ word: String) -> Bool {
        guard peek(word) else { return false }
        let end = at + word.unicodeScalars.count
        return end == text.count || !(text[end].properties.isAlphabetic || text[end] == "_" || text[end] == ".")
    }

    mutating func consume(_ token: String) -> Bool {
        skipSpace()
        guard peek(token) else { return false }
        at += token.unicodeScalars.count
        return true
    }

    mutating func skipSpace() {
        while at < text.count, text[at].properties.isWhitespace { at += 1 }
    }

    func fail(_ reason: String) -> ExpressionSyntaxError { ExpressionSyntaxError(column: at + 1, reason: reason) }
}
