import Foundation
import Objects

/// The demo's objects: the bots' blog posts (the source's example), with a publish date
/// stored under its own JSON key, `jsonPubDate`, in its own format.
public struct BlogPost: StoredObject, Hashable {
    public var id: String?
    public var title: String
    public var body: String
    public var views: Int
    public var draft: Bool
    public var publishedDate: Date?
    public var createdAt: Date?
    public var updatedAt: Date?

    enum CodingKeys: String, CodingKey {
        case id, title, body, views, draft, createdAt, updatedAt
        case publishedDate = "jsonPubDate"
    }

    public static let dateFormats = ["jsonPubDate": "yyyy-MM-dd HH:mm"]

    public init(title: String, body: String, views: Int = 0, draft: Bool = true, publishedDate: Date? = nil) {
        self.title = title
        self.body = body
        self.views = views
        self.draft = draft
        self.publishedDate = publishedDate
    }
}
