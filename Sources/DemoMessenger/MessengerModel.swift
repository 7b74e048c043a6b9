import Effects
import EventLog

/// The demo's ten effects. Each writes one or more of the seven properties under `messenger`.
public enum MessengerEffect: NamedEffect {
    case setInThreadSearch(String)
    case clearInThreadSearch
    case clearListFilter
    case scrollToAvatarRow(String)
    case scrollToConversationRow(String)
    case expandAvatar(String)
    case collapseAvatar
    case expandAttachment(String)
    case dismissAttachmentExpansion
    /// The compound effect: the bot tab and its list filter in one pass, so the UI never
    /// shows the tab unfiltered. Its write set holds both properties.
    case selectBotTab(filter: String)

    public var name: String {
        switch self {
        case .setInThreadSearch: "setInThreadSearch"
        case .clearInThreadSearch: "clearInThreadSearch"
        case .clearListFilter: "clearListFilter"
        case .scrollToAvatarRow: "scrollToAvatarRow"
        case .scrollToConversationRow: "scrollToConversationRow"
        case .expandAvatar: "expandAvatar"
        case .collapseAvatar: "collapseAvatar"
        case .expandAttachment: "expandAttachment"
        case .dismissAttachmentExpansion: "dismissAttachmentExpansion"
        case .selectBotTab: "selectBotTab"
        }
    }

    public init?(name: String, arguments: StateValue) {
        let text = arguments["text"]?.stringValue
        let id = arguments["id"]?.stringValue
        let filter = arguments["filter"]?.stringValue
        switch name {
        case "setInThreadSearch": guard let text else { return nil }; self = .setInThreadSearch(text)
        case "clearInThreadSearch": self = .clearInThreadSearch
        case "clearListFilter": self = .clearListFilter
        case "scrollToAvatarRow": guard let id else { return nil }; self = .scrollToAvatarRow(id)
        case "scrollToConversationRow": guard let id else { return nil }; self = .scrollToConversationRow(id)
        case "expandAvatar": guard let id else { return nil }; self = .expandAvatar(id)
        case "collapseAvatar": self = .collapseAvatar
        case "expandAttachment": guard let id else { return nil }; self = .expandAttachment(id)
        case "dismissAttachmentExpansion": self = .dismissAttachmentExpansion
        case "selectBotTab": guard let filter else { return nil }; self = .selectBotTab(filter: filter)
        default: return nil
        }
    }

    public var arguments: StateValue {
        switch self {
        case .setInThreadSearch(let text): ["text": .string(text)]
        case .scrollToAvatarRow(let id), .scrollToConversationRow(let id), .expandAvatar(let id), .expandAttachment(let id):
            ["id": .string(id)]
        case .selectBotTab(let filter): ["filter": .string(filter)]
        case .clearInThreadSearch, .clearListFilter, .collapseAvatar, .dismissAttachmentExpansion: .null
        }
    }
}

/// A deliberately faulty variant of the demo, to show `replay` and `bisect` finding it.
public enum Regression: String, Sendable, CaseIterable {
    /// `selectBotTab` writes the tab but forgets the filter.
    case compoundTabFilter = "compound-tab-filter"

    public var summary: String {
        switch self {
        case .compoundTabFilter: "selectBotTab writes selectedTab but not listFilter"
        }
    }
}

/// The botmessages app: seven observable properties, ten effects, their guards and waits.
public struct MessengerModel: EffectModel {
    /// The faulty variant in use, if any.
    public var regression: Regression?
    /// How long a scroll waits for its list, in microseconds.
    public var scrollWaitBound: Int64 = 2_000_000

    public init(regression: Regression? = nil) { self.regression = regression }

    public var stream: String { "messenger" }

    /// The filter the bot tab falls back to when its filter is cleared.
    public static let botTabBaseFilter = "bots"

    /// The seven properties; `selectedTab` starts on `chats`, the rest are empty.
    public static let properties = ["inThreadSearch", "listFilter", "avatarScrollTarget", "conversationScrollTarget",
                                    "expandedAvatar", "expandedAttachment", "selectedTab"]

    public var initialState: StateObject {
        var object = StateObject()
        for property in Self.properties { object[property] = .null }
        object["selectedTab"] = "chats"
        return object
    }

    static func property(_ name: String) -> StatePath { StatePath([.key("messenger"), .key(name)]) }

    public func resolve(_ effect: MessengerEffect, in state: StateValue) -> Resolution {
        let openConversation = Self.openConversation(in: state)
        switch effect {
        case .setInThreadSearch(let text):
            guard openConversation != nil else { return .skip("no conversation is open to search in") }
            guard !text.isEmpty else { return .skip("empty search text (clearInThreadSearch clears)") }
            return .assign([Assignment(Self.property("inThreadSearch"), .string(text))])
        case .clearInThreadSearch:
            return .assign([Assignment(Self.property("inThreadSearch"), .null)])
        case .clearListFilter:
            // The bot tab is the list filtered to bots: clearing its filter returns to that
            // base filter, so the tab is never shown unfiltered (the compound effect's promise).
            let base: StateValue = state[Self.property("selectedTab")] == "bots" ? .string(Self.botTabBaseFilter) : .null
            return .assign([Assignment(Self.property("listFilter"), base)])
        case .scrollToAvatarRow(let id):
            guard SampleData.avatars.contains(id) else { return .skip("unknown avatar \"\(id)\"") }
            return .assign([Assignment(Self.property("avatarScrollTarget"), .string(id))], wait: listOnScreen)
        case .scrollToConversationRow(let id):
            guard SampleData.conversationIDs.contains(id) else { return .skip("unknown conversation \"\(id)\"") }
            return .assign([Assignment(Self.property("conversationScrollTarget"), .string(id))], wait: listOnScreen)
        case .expandAvatar(let id):
            guard SampleData.avatars.contains(id) else { return .skip("unknown avatar \"\(id)\"") }
            return .assign([Assignment(Self.property("expandedAvatar"), .string(id))])
        case .collapseAvatar:
            return .assign([Assignment(Self.property("expandedAvatar"), .null)])
        case .expandAttachment(let id):
            guard let conversation = SampleData.attachmentConversation[id] else { return .skip("unknown attachment \"\(id)\"") }
            guard openConversation == conversation else {
                return .skip("attachment \"\(id)\" is in \(conversation), which is not open")
            }
            return .assign([Assignment(Self.property("expandedAttachment"), .string(id))])
        case .dismissAttachmentExpansion:
            return .assign([Assignment(Self.property("expandedAttachment"), .null)])
        case .selectBotTab(let filter):
            guard SampleData.botFilters.contains(filter) else {
                return .skip("unknown filter \"\(filter)\" (expected \(SampleData.botFilters.joined(separator: ", ")))")
            }
            if regression == .compoundTabFilter {
                return .assign([Assignment(Self.property("selectedTab"), "bots")])
            }
            return .assign([Assignment(Self.property("selectedTab"), "bots"), Assignment(Self.property("listFilter"), .string(filter))])
        }
    }

    /// Only known conversations have a thread screen to push.
    public func guardNavigation(_ step: Step<MessengerEffect>, in state: StateValue) -> String? {
        guard case .push(let screen) = step, screen.hasPrefix("thread/") else { return nil }
        let conversation = String(screen.dropFirst("thread/".count))
        return SampleData.conversationIDs.contains(conversation) ? nil : "unknown conversation \"\(conversation)\""
    }

    /// The conversation and avatar lists are on screen when nothing is pushed or presented.
    var listOnScreen: WaitCondition {
        WaitCondition("the list is on screen", boundMicroseconds: scrollWaitBound) { state in
            state["navigation.path"] == [] && state["navigation.sheet"] == .null
        }
    }

    /// The conversation whose thread is on top of the stack, if any.
    static func openConversation(in state: StateValue) -> String? {
        guard let top = state["navigation.path"]?.arrayValue?.last?.stringValue, top.hasPrefix("thread/") else { return nil }
        return String(top.dropFirst("thread/".count))
    }
}
