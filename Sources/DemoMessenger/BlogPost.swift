import Foundation
import Objects

/// The demo's objects: the bots' blog posts (the source's example), with a publish date
/// stored under its own JSON key, `jsonPubDate`, in its own format.
public struct BlogPost: StoredObject, Hashable {
    /// The post's id: `nil` until it is first saved.
    public var id: String?
    /// The post's title.
    public var title: String
    /// The post's text.
    public var body: String
    /// How many times the post was read.
    public var views: Int
    /// Whether the post is still a draft; the demo session clears it when a reader reads it.
    public var draft: Bool
    /// When the post was published, stored as `jsonPubDate` to the minute, in UTC.
    public var publishedDate: Date?
    /// Filled in by the store: when the post was first saved.
    public var createdAt: Date?
    /// Filled in by the store: when the post was last saved.
    public var updatedAt: Date?

    enum CodingKeys: String, CodingKey {
        case id, title, body, views, draft, createdAt, updatedAt
        case publishedDate = "jsonPubDate"
    }

    /// `jsonPubDate` as `yyyy-MM-dd HH:mm`; the other dates are RFC 3339.
    public static let dateFormats = ["jsonPubDate": "yyyy-MM-dd HH:mm"]

    /// A new, unsaved post.
    public init(title: String, body: String, views: Int = 0, draft: Bool = true, publishedDate: Date? = nil) {
        self.title = title
        self.body = body
        self.views = views
        self.draft = draft
        self.publishedDate = publishedDate
    }
}
