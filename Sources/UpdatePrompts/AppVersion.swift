import Foundation

/// An app's version as the App Store and `CFBundleShortVersionString` spell it, ordered as
/// the seed orders versions, with a rule of its own for what the seed does not cover.
///
/// The rule:
/// - A version is an optional `v`, then a numeric part of digits and dots, starting with a
///   digit; anything else is not a version (`init` returns `nil`). Surrounding spaces are ignored.
/// - Numeric parts compare component by component, left to right, as integers of any length:
///   `1.10 > 1.9`, `2 > 1.99.99`. A missing component counts as 0 (`1.0 == 1.0.0`), and so does
///   an empty one (`1..2 == 1.0.2`, `1. == 1`).
/// - Whatever follows the numeric part is a pre-release label (`1.2b`, `1.2-beta.1`,
///   `1.2 (45)`): a labelled version is older than the same numeric version without a label
///   (`1.2b < 1.2`, where the seed's `integerValue` would call them equal). Two labels
///   compare in natural order: runs of digits as numbers, other runs by their characters
///   (`beta.2 < beta.10`, `alpha < beta`).
/// - A `+` after the numeric part starts build metadata, which takes no part in comparing
///   (semver.org item 10): `1.2+45 == 1.2+46 == 1.2`, `1.2-beta+7 == 1.2-beta`.
public struct AppVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The text it was read from, trimmed.
    public let text: String
    /// The numeric components, each without leading zeros (`"0"` for zero).
    public let components: [String]
    /// What follows the numeric part up to a `+`, without a leading `-`, `_` or space; empty
    /// for a release.
    public let label: String
    /// What follows the first `+` after the numeric part (`45` in `1.2+45`); empty when there
    /// is none. Never compared.
    public let buildMetadata: String

    /// Reads a version by the rule above; `nil` when `text` (trimmed, without a leading `v`)
    /// does not start with a digit.
    public init?(_ text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var rest = Substring(trimmed)
        if rest.first == "v" || rest.first == "V" { rest = rest.dropFirst() }
        let numeric = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        guard let first = numeric.first, first.isNumber else { return nil }
        self.text = trimmed
        components = numeric.split(separator: ".", omittingEmptySubsequences: false).map(Self.normalized)
        let suffix = rest.dropFirst(numeric.count)
        let plus = suffix.firstIndex(of: "+") ?? suffix.endIndex
        label = String(suffix[..<plus].drop { "-_ ".contains($0) })
        buildMetadata = plus < suffix.endIndex ? String(suffix[suffix.index(after: plus)...]) : ""
    }

    public var description: String { text }

    /// Equal when they compare equal: `1.0` and `1.0.0` are the same version, and so are
    /// `1.2+45` and `1.2`.
    public static func == (a: AppVersion, b: AppVersion) -> Bool { compare(a, b) == 0 }

    /// Hashes the numeric components without trailing zeros, so that equal versions hash
    /// alike; the label and the build metadata are left out.
    public func hash(into hasher: inout Hasher) {
        var significant = components
        while significant.last == "0" { significant.removeLast() }
        hasher.combine(significant) // labels equal in natural order may differ in spelling
    }

    /// Whether `a` is older than `b`, by the rule above.
    public static func < (a: AppVersion, b: AppVersion) -> Bool { compare(a, b) < 0 }

    /// -1, 0 or 1 as `a` is older than, the same as, or newer than `b`.
    static func compare(_ a: AppVersion, _ b: AppVersion) -> Int {
        for index in 0..<max(a.components.count, b.components.count) {
            let x = index < a.components.count ? a.components[index] : "0"
            let y = index < b.components.count ? b.components[index] : "0"
            let order = compareNumbers(x, y)
            if order != 0 { return order }
        }
        switch (a.label.isEmpty, b.label.isEmpty) {
        case (true, true): return 0
        case (true, false): return 1
        case (false, true): return -1
        case (false, false): return compareNatural(a.label, b.label)
        }
    }

    /// Digits without leading zeros; empty counts as zero.
    private static func normalized(_ digits: Substring) -> String {
        let significant = digits.drop { $0 == "0" }
        return significant.isEmpty ? "0" : String(significant)
    }

    /// Compares two normalized runs of digits as numbers of any length.
    private static func compareNumbers(_ x: String, _ y: String) -> Int {
        if x.count != y.count { return x.count < y.count ? -1 : 1 }
        return x == y ? 0 : (x < y ? -1 : 1)
    }

    /// Natural order: runs of ASCII digits compare as numbers, other runs by Unicode scalars.
    private static func compareNatural(_ a: String, _ b: String) -> Int {
        let runsA = runs(a), runsB = runs(b)
        for (x, y) in zip(runsA, runsB) {
            let order: Int
            switch (x.isNumber, y.isNumber) {
            case (true, true): order = compareNumbers(normalized(x.text[...]), normalized(y.text[...]))
            case (false, false): order = x.text == y.text ? 0 : (x.text.unicodeScalars.lexicographicallyPrecedes(y.text.unicodeScalars) ? -1 : 1)
            case (true, false): order = -1 // a number sorts before text, as in semantic versioning
            case (false, true): order = 1
            }
            if order != 0 { return order }
        }
        return runsA.count == runsB.count ? 0 : (runsA.count < runsB.count ? -1 : 1)
    }

    private static func runs(_ text: String) -> [(text: String, isNumber: Bool)] {
        var result: [(text: String, isNumber: Bool)] = []
        for character in text {
            let isDigit = character.isASCII && character.isNumber
            if let last = result.last, last.isNumber == isDigit {
                result[result.count - 1].text.append(character)
            } else {
                result.append((String(character), isDigit))
            }
        }
        return result
    }
}
