import Effects
import EventLog

/// The demo's ten effects. Each writes one or more of the seven properties under `messenger`.
public enum MessengerEffect: NamedEffect {
    /// Searches the open conversation for the text; skipped with none open or empty text.
    case setInThreadSearch(String)
    case clearInThreadSearch
    /// Clears the list filter; on the bot tab it returns to the tab's base filter instead.
    case clearListFilter
    /// Scrolls the list to an avatar's row (an avatar id such as `aria-7`, not a bot id),
    /// once the list is on screen.
    case scrollToAvatarRow(String)
    /// Scrolls the list to a conversation's row (its id), once the list is on screen.
    case scrollToConversationRow(String)
    /// Expands an avatar (an avatar id such as `aria-7`).
    case expandAvatar(String)
    case collapseAvatar
    /// Expands an image attachment (its id, such as `img-401`) of the open conversation.
    case expandAttachment(String)
    case dismissAttachmentExpansion
    /// The compound effect: the bot tab and its list filter in one pass, so the UI never
    /// shows the tab unfiltered. Its write set holds both properties. Version 2: its
    /// arguments are `{"tab": "bots", "filter": {"name": F}}` (release 1 recorded
    /// `{"filter": F}`; ``MessengerModel/upcast(into:)`` reads those).
    case selectBotTab(filter: String)

    /// The case's name, such as `selectBotTab`.
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

    /// The effect `name` and `arguments` describe, as `arguments` writes them; `nil` for an
    /// unknown name or a missing argument.
    public init?(name: String, arguments: StateValue) {
        let text = arguments["text"]?.stringValue
        let id = arguments["id"]?.stringValue
        let filter = arguments["filter.name"]?.stringValue
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
        case "selectBotTab": guard arguments["tab"] == "bots", let filter else { return nil }; self = .selectBotTab(filter: filter)
        default: return nil
        }
    }

    /// `{"text": …}`, `{"id": …}` or `{"tab": "bots", "filter": {"name": …}}` for the effects
    /// that take one; `.null` for the others.
    public var arguments: StateValue {
        switch self {
        case .setInThreadSearch(let text): ["text": .string(text)]
        case .scrollToAvatarRow(let id), .scrollToConversationRow(let id), .expandAvatar(let id), .expandAttachment(let id):
            ["id": .string(id)]
        case .selectBotTab(let filter): ["tab": "bots", "filter": ["name": .string(filter)]]
        case .clearInThreadSearch, .clearListFilter, .collapseAvatar, .dismissAttachmentExpansion: .null
        }
    }

    /// `selectBotTab` is at version 2: its arguments changed shape in release 2.
    public static let versions = ["selectBotTab": 2]
}

/// A deliberately faulty variant of the demo, to show `replay` and `bisect` finding it.
public enum Regression: String, Sendable, CaseIterable {
    /// `selectBotTab` writes the tab but forgets the filter.
    case compoundTabFilter = "compound-tab-filter"
    /// The upcaster of release 1's `selectBotTab` drops the filter.
    case wrongUpcaster = "wrong-upcaster"

    /// What the fault does, in one line, for the command line's help.
    public var summary: String {
        switch self {
        case .compoundTabFilter: "selectBotTab writes selectedTab but not listFilter"
        case .wrongUpcaster: "the selectBotTab v1 → v2 upcaster drops the filter"
        }
    }
}

/// The botmessages app: seven observable properties, ten effects, their guards and waits.
public struct MessengerModel: EffectModel {
    /// The faulty variant in use, if any.
    public var regression: Regression?
    /// How long a scroll waits for its list, in microseconds.
    public var scrollWaitBound: Int64 = 2_000_000

    /// The app, correct unless `regression` names a fault.
    public init(regression: Regression? = nil) { self.regression = regression }

    /// `messenger`: the stream of the app's effect events and the key of its properties.
    public var stream: String { "messenger" }

    /// The filter the bot tab falls back to when its filter is cleared.
    public static let botTabBaseFilter = "bots"

    /// The seven properties; `selectedTab` starts on `chats`, the rest are empty.
    public static let properties = ["inThreadSearch", "listFilter", "avatarScrollTarget", "conversationScrollTarget",
                                    "expandedAvatar", "expandedAttachment", "selectedTab"]

    /// Every one of `properties` `null`, but `selectedTab`, which is `chats`.
    public var initialState: StateObject {
        var object = StateObject()
        for property in Self.properties { object[property] = .null }
        object["selectedTab"] = "chats"
        return object
    }

    static func property(_ name: String) -> StatePath { StatePath([.key("messenger"), .key(name)]) }

    /// The guards and writes of the ten effects: unknown avatar, conversation, attachment
    /// and filter ids are skipped with the reason; scrolls wait for the list to be on screen,
    /// at most `scrollWaitBound`.
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

    /// Registers the upcasters that read release 1's events as today's: `selectBotTab` v1
    /// `{"filter": F}` becomes v2 `{"tab": "bots", "filter": {"name": F}}` (under the
    /// wrong-upcaster regression, `{"tab": "bots"}`: the filter is lost).
    public func upcast(into code: inout Projections) {
        let dropsTheFilter = regression == .wrongUpcaster
        code.upcast(stream, "selectBotTab", from: 1) { old in
            var new = old
            new.payload = dropsTheFilter ? ["tab": "bots"] : ["tab": "bots", "filter": ["name": old.payload["filter"] ?? .null]]
            return [new]
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
