import Effects
import Foundation

/// A `botmessages://` destination, holding only what the URL says.
///
/// The ids are as the URL gives them (avatar ids such as `aria-7`, conversation ids,
/// attachment ids); the plan's guards check them.
public enum MessengerRoute: Sendable, Hashable {
    case home
    case back
    case settings
    case avatar(String, expanded: Bool)
    case revealAvatar(String)
    case conversation(String)
    case conversationSearch(String, query: String)
    case conversationAttachment(String, attachment: String)
    case attachment(String, expanded: Bool)
    case bots(filter: String)
}

/// A URL the router does not accept, and why.
public struct RouteError: Error, Hashable, CustomStringConvertible {
    /// The URL as given.
    public let url: String
    /// What is wrong with it, for people.
    public let reason: String
    public var description: String { "\(url): \(reason)" }
}

/// The demo's URL map, both ways: URL → route → plan, and route → URL. Pure: parsing never
/// reads the state, so an unknown id parses and is skipped by the effect's guard instead.
/// Foundation would read `botmessages://avatar/…` with host `avatar`; here the host is
/// simply the first path segment.
public enum MessengerRouter {
    /// The URL scheme every route uses: `botmessages://`.
    public static let scheme = "botmessages"

    /// The routes, for `eventlog routes`: pattern, what it does, an example.
    public static let table: [(pattern: String, summary: String, example: MessengerRoute)] = [
        ("avatar/<id>/expanded", "go to the list, scroll to the avatar's row and expand it", .avatar("aria-7", expanded: true)),
        ("avatar/<id>/collapsed", "go to the list, scroll to the avatar's row and collapse it", .avatar("aria-7", expanded: false)),
        ("avatar/<id>", "scroll to the avatar's row and expand it where you are (waits for the list)", .revealAvatar("bolt-2")),
        ("conversation/<id>", "open the conversation from its row in the list", .conversation("aria-support")),
        ("conversation/<id>/search?q=<text>", "open the conversation and search in it", .conversationSearch("dex-builds", query: "failed")),
        ("conversation/<id>/attachment/<attachment>", "open the conversation and expand an image", .conversationAttachment("cleo-recipes", attachment: "img-517")),
        ("attachment/<id>/expanded", "expand an image of the open conversation", .attachment("img-401", expanded: true)),
        ("attachment/<id>/collapsed", "dismiss the expanded image", .attachment("img-401", expanded: false)),
        ("bots?filter=<filter>", "select the bot tab with its list filter (one compound effect)", .bots(filter: "bots")),
        ("home", "clear everything transient and go back to the list", .home),
        ("back", "pop one screen", .back),
        ("settings", "present the settings sheet", .settings),
    ]

    /// Parses a URL into a route, or says where it went wrong.
    /// - Throws: `RouteError` for another scheme, an empty segment, bad percent-encoding, an
    ///   unknown destination or state word, a path no route matches, or a missing, empty,
    ///   repeated or unexpected query parameter.
    public static func route(from url: String) throws(RouteError) -> MessengerRoute {
        func fail(_ reason: String) -> RouteError { RouteError(url: url, reason: reason) }
        let prefix = scheme + "://"
        // The scheme's case does not count, and a fragment names a place inside what the URL
        // names, never which route (RFC 3986, 3.1 and 3.5).
        guard url.prefix(prefix.count).lowercased() == prefix else {
            let found = url.firstRange(of: "://").map { "'\(url[..<$0.lowerBound])://'" } ?? "no scheme"
            throw fail("expected a \(prefix) URL, found \(found)")
        }
        let beforeFragment = split(url.dropFirst(prefix.count), at: "#", maxSplits: 1)[0]
        let parts = split(beforeFragment, at: "?", maxSplits: 1)
        let pathPart = parts[0]
        let queryPart = parts.count > 1 ? String(parts[1]) : nil
        var segments: [String] = []
        for (index, raw) in split(pathPart, at: "/").enumerated() {
            guard let decoded = raw.removingPercentEncoding else { throw fail("invalid percent-encoding in segment \(index + 1) '\(raw)'") }
            segments.append(decoded)
        }
        if segments.last == "" && segments.count > 1 { segments.removeLast() } // one trailing slash is fine
        if let empty = segments.firstIndex(of: "") { throw fail(empty == 0 ? "missing destination after \(prefix)" : "empty segment \(empty + 1)") }
        let query = try parseQuery(queryPart, fail)
        func noQuery() throws(RouteError) {
            if let key = query.keys.sorted().first { throw fail("unexpected query parameter '\(key)'") }
        }
        func queryValue(_ key: String) throws(RouteError) -> String {
            guard let value = query[key], !value.isEmpty else { throw fail("missing query parameter '\(key)'") }
            if let other = query.keys.sorted().first(where: { $0 != key }) { throw fail("unexpected query parameter '\(other)'") }
            return value
        }
        func state(_ word: String) throws(RouteError) -> Bool {
            switch word {
            case "expanded": return true
            case "collapsed": return false
            default: throw fail("unknown state '\(word)' (expected expanded or collapsed)")
            }
        }
        switch segments {
        case ["home"]: try noQuery(); return .home
        case ["back"]: try noQuery(); return .back
        case ["settings"]: try noQuery(); return .settings
        case ["bots"]: return .bots(filter: try queryValue("filter"))
        case let s where s.count == 2 && s[0] == "avatar": try noQuery(); return .revealAvatar(s[1])
        case let s where s.count == 3 && s[0] == "avatar": try noQuery(); return .avatar(s[1], expanded: try state(s[2]))
        case let s where s.count == 3 && s[0] == "attachment": try noQuery(); return .attachment(s[1], expanded: try state(s[2]))
        case let s where s.count == 2 && s[0] == "conversation": try noQuery(); return .conversation(s[1])
        case let s where s.count == 3 && s[0] == "conversation" && s[2] == "search":
            return .conversationSearch(s[1], query: try queryValue("q"))
        case let s where s.count == 4 && s[0] == "conversation" && s[2] == "attachment":
            try noQuery()
            return .conversationAttachment(s[1], attachment: s[3])
        default:
            let known = ["avatar", "attachment", "conversation", "bots", "home", "back", "settings"]
            if !known.contains(segments[0]) {
                throw fail("unknown destination '\(segments[0])' (see 'eventlog routes')")
            }
            throw fail("no route matches '\(segments.joined(separator: "/"))' (see 'eventlog routes')")
        }
    }

    private static func parseQuery(_ text: String?, _ fail: (String) -> RouteError) throws(RouteError) -> [String: String] {
        guard let text, !text.isEmpty else { return [:] }
        var query: [String: String] = [:]
        for pair in split(text[...], at: "&") where !pair.isEmpty {
            let parts = split(pair, at: "=", maxSplits: 1)
            let decode = { (raw: Substring) in String(raw).replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let key = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : "") else {
                throw fail("invalid percent-encoding in query '\(pair)'")
            }
            guard query[key] == nil else { throw fail("query parameter '\(key)' given twice") }
            query[key] = value
        }
        return query
    }

    /// `text` split at each `separator` (at most `maxSplits` times), empty pieces kept. URL
    /// syntax is made of scalars, not of Swift's characters: a combining or prepending mark
    /// next to a "?" would make it part of another character, and hide it from `split`.
    private static func split(_ text: Substring, at separator: Unicode.Scalar, maxSplits: Int = .max) -> [Substring] {
        var pieces: [Substring] = []
        var start = text.startIndex
        for index in text.unicodeScalars.indices where text.unicodeScalars[index] == separator && pieces.count < maxSplits {
            pieces.append(Substring(text.unicodeScalars[start..<index]))
            start = text.unicodeScalars.index(after: index)
        }
        pieces.append(Substring(text.unicodeScalars[start...]))
        return pieces
    }

    /// The URL of a route; `route(from: url(for: r)) == r` for every route whose ids, filter
    /// and query are not empty (`route(from:)` refuses an empty segment or value).
    public static func url(for route: MessengerRoute) -> String {
        func segment(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#"))) ?? text
        }
        func queryValue(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+#"))) ?? text
        }
        let path: String
        switch route {
        case .home: path = "home"
        case .back: path = "back"
        case .settings: path = "settings"
        case .avatar(let id, let expanded): path = "avatar/\(segment(id))/\(expanded ? "expanded" : "collapsed")"
        case .revealAvatar(let id): path = "avatar/\(segment(id))"
        case .conversation(let id): path = "conversation/\(segment(id))"
        case .conversationSearch(let id, let query): path = "conversation/\(segment(id))/search?q=\(queryValue(query))"
        case .conversationAttachment(let id, let attachment): path = "conversation/\(segment(id))/attachment/\(segment(attachment))"
        case .attachment(let id, let expanded): path = "attachment/\(segment(id))/\(expanded ? "expanded" : "collapsed")"
        case .bots(let filter): path = "bots?filter=\(queryValue(filter))"
        }
        return "\(scheme)://\(path)"
    }

    /// The steps a route runs, in order.
    public static func steps(for route: MessengerRoute) -> [Step<MessengerEffect>] {
        let resetList: [Step<MessengerEffect>] = [.effect(.dismissAttachmentExpansion), .effect(.clearInThreadSearch)]
        switch route {
        case .home:
            return resetList + [.effect(.collapseAvatar), .popToRoot, .dismissSheet]
        case .back:
            return [.pop]
        case .settings:
            return [.present("settings")]
        case .avatar(let id, true):
            return resetList + [.effect(.clearListFilter), .popToRoot, .dismissSheet, .effect(.scrollToAvatarRow(id)), .effect(.expandAvatar(id))]
        case .avatar(let id, false):
            return [.popToRoot, .dismissSheet, .effect(.scrollToAvatarRow(id)), .effect(.collapseAvatar)]
        case .revealAvatar(let id):
            return [.effect(.scrollToAvatarRow(id)), .effect(.expandAvatar(id))]
        case .conversation(let id):
            return resetList + [.popToRoot, .dismissSheet, .effect(.scrollToConversationRow(id)), .push(SampleData.threadScreen(id))]
        case .conversationSearch(let id, let query):
            return steps(for: .conversation(id)) + [.effect(.setInThreadSearch(query))]
        case .conversationAttachment(let id, let attachment):
            return steps(for: .conversation(id)) + [.effect(.expandAttachment(attachment))]
        case .attachment(let id, true):
            return [.dismissSheet, .effect(.expandAttachment(id))]
        case .attachment(_, false):
            return [.effect(.dismissAttachmentExpansion)]
        case .bots(let filter):
            return [.popToRoot, .dismissSheet, .effect(.selectBotTab(filter: filter))]
        }
    }

    /// The plan for a URL; its source is the URL.
    /// - Throws: `RouteError` when `route(from:)` refuses the URL.
    public static func plan(for url: String) throws(RouteError) -> Plan<MessengerEffect> {
        Plan(source: url, steps: steps(for: try route(from: url)))
    }
}
