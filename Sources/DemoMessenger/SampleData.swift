/// The demo's fixed sample data: the ids every guard checks against.
public enum SampleData {
    /// A bot of the demo.
    public struct Bot: Sendable, Hashable {
        /// The bot's id, such as `aria`.
        public let id: String
        /// The bot's display name.
        public let name: String
        /// The id of the bot's avatar, such as `aria-7`, which the avatar effects take.
        public let avatar: String
    }

    /// A conversation of the demo.
    public struct Conversation: Sendable, Hashable {
        /// The conversation's id, such as `aria-support`.
        public let id: String
        /// The title its row shows.
        public let title: String
        /// The ids of its image attachments, such as `img-401`.
        public let attachments: [String]
    }

    /// The four bots.
    public static let bots: [Bot] = [
        Bot(id: "aria", name: "Aria", avatar: "aria-7"),
        Bot(id: "bolt", name: "Bolt", avatar: "bolt-2"),
        Bot(id: "cleo", name: "Cleo", avatar: "cleo-4"),
        Bot(id: "dex", name: "Dex", avatar: "dex-1"),
    ]

    /// The six conversations.
    public static let conversations: [Conversation] = [
        Conversation(id: "aria-support", title: "Aria · Support", attachments: ["img-401", "img-402"]),
        Conversation(id: "bolt-weather", title: "Bolt · Weather", attachments: []),
        Conversation(id: "cleo-recipes", title: "Cleo · Recipes", attachments: ["img-517"]),
        Conversation(id: "dex-builds", title: "Dex · Builds", attachments: ["img-618", "img-619"]),
        Conversation(id: "team-standup", title: "Team standup", attachments: []),
        Conversation(id: "family", title: "Family", attachments: ["img-720"]),
    ]

    /// The list filters the bot tab can show.
    public static let botFilters = ["bots", "active", "muted", "unread"]

    /// Every bot's avatar id: what the avatar effects accept.
    public static let avatars = Set(bots.map(\.avatar))
    /// Every conversation's id: what the conversation effects and thread screens accept.
    public static let conversationIDs = Set(conversations.map(\.id))

    /// The conversation each attachment belongs to.
    public static let attachmentConversation: [String: String] = Dictionary(
        uniqueKeysWithValues: conversations.flatMap { conversation in conversation.attachments.map { ($0, conversation.id) } })

    /// The navigation screen of an open conversation.
    public static func threadScreen(_ conversation: String) -> String { "thread/\(conversation)" }
}
