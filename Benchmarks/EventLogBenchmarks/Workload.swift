import EventLog
import Foundation
import Objects

/// The events every subject stores: messenger-like steps, each with a cause, a small payload
/// and one or two writes whose old values follow from the events before. Deterministic.
struct Workload {
    static let types = ["dismissAttachmentExpansion", "clearInThreadSearch", "clearListFilter", "popToRoot", "dismissSheet",
                        "scrollToAvatarRow", "expandAvatar", "selectBotTab", "setInThreadSearch", "expandAttachment"]
    static let sources = ["botmessages://avatar/aria-7/expanded", "botmessages://bots?filter=unread",
                          "botmessages://conversation/dex-builds/search?q=failed"]
    static let properties = 16
    static let paths = (0..<properties).map { StatePath([.key("messenger"), .key("p\($0)")]) }
    static let startTime: Int64 = 1_764_468_000_000_000

    private var values = [Int](repeating: -1, count: properties)
    private(set) var produced: UInt64 = 0

    /// The next event (the `produced`-th from 1).
    mutating func next() -> Event {
        produced += 1
        let n = Int(produced)
        var writes: [Write] = []
        var written: [Int] = []
        for k in [n % Self.properties, (n * 7 + 3) % Self.properties].prefix(n % 3 == 0 ? 2 : 1) where !written.contains(k) {
            written.append(k)
            let old: StateValue? = values[k] < 0 ? nil : .string("value-\(values[k])")
            values[k] = n
            writes.append(Write(Self.paths[k], old: old, new: .string("value-\(n)")))
        }
        return Event(
            stream: "messenger", type: Self.types[n % Self.types.count], origin: ["tap", "url", "test", "capture"][n % 4],
            cause: Cause(id: "plan-\(n / 8 * 8)", step: n % 8, source: Self.sources[n / 8 % Self.sources.count]),
            outcome: .applied, payload: ["id": .string("aria-\(n % 10)")], writes: writes)
    }

    /// The next `count` events.
    mutating func next(_ count: Int) -> [Event] { (0..<count).map { _ in next() } }

    static func time(_ seq: UInt64) -> Timestamp { Timestamp(microsecondsSince1970: startTime + Int64(seq) * 1_000) }

    /// Writes the first `count` events to a new file at `path` as `eventlog export` prints
    /// them: one JSON record per line, each as the store holds it (seq from 1, `time(seq)`, its
    /// checksum). Writes 10,000 lines at a time, so memory stays small whatever `count`.
    static func export(_ count: Int, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard descriptor >= 0 else { throw BenchmarkError(description: "cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var workload = Workload()
        var lines = ""
        for seq in 1...UInt64(count) {
            let bytes = EventRecord.storedBytes(of: workload.next(), seq: seq, time: time(seq))
            lines += try bytes.withUnsafeBytes { try EventRecord(storedBytes: $0, seq: seq) }.jsonValue.json() + "\n"
            guard seq % 10_000 == 0 || seq == UInt64(count) else { continue }
            let written = lines.withUTF8 { write(descriptor, $0.baseAddress, $0.count) == $0.count }
            guard written else { throw BenchmarkError(description: "cannot write \(path): \(String(cString: strerror(errno)))") }
            lines.removeAll(keepingCapacity: true)
        }
    }
}

/// A line the JSON-lines peer decodes and folds into its state: the writes it carries.
protocol JSONLine: Decodable {
    var writes: [TraceLine.Change] { get }
}

/// The JSON-lines peer's record: what a quick hand-written trace would encode with
/// Foundation's `JSONEncoder`.
struct TraceLine: Codable, JSONLine {
    struct Change: Codable {
        var path: String
        var old: String?
        var new: String?
    }

    var seq: UInt64
    var time: Int64
    var stream: String
    var type: String
    var origin: String
    var cause: String
    var step: Int
    var source: String
    var outcome: String
    var payload: [String: String]
    var writes: [Change]

    init(_ event: Event, seq: UInt64) {
        self.seq = seq
        time = Workload.time(seq).microsecondsSince1970
        stream = event.stream
        type = event.type
        origin = event.origin.rawValue
        cause = event.cause?.id ?? ""
        step = event.cause?.step ?? 0
        source = event.cause?.source ?? ""
        outcome = event.outcome.name
        payload = event.payload.objectValue.map { Dictionary(uniqueKeysWithValues: zip($0.keys, $0.values.map { $0.stringValue ?? "" })) } ?? [:]
        writes = event.writes.map { Change(path: $0.path.description, old: $0.old?.stringValue, new: $0.new?.stringValue) }
    }
}

/// The JSON-lines peer's reading of a record as `eventlog export` writes it, for the workload's
/// events (their payloads and written values are all strings).
struct ExportedLine: JSONLine {
    struct Cause: Decodable {
        var id: String
        var step: Int
        var source: String
    }

    var seq: UInt64
    var time: String
    var checksum: String
    var stream: String
    var type: String
    var origin: String
    var cause: Cause?
    var outcome: String
    var payload: [String: String]
    var writes: [TraceLine.Change]
}

/// The object the typed objects scenarios store: a blog post as an app would declare it.
/// Deterministic.
struct BlogPost: StoredObject {
    var id: String?
    var title: String
    var body: String
    var tags: [String]
    var author: String
    /// `nil` while a draft.
    var publishedAt: Date?
    var views: Int

    static let paragraphs = [
        "The bots kept a log of every tap this week, and the log kept them honest: when a thread showed the wrong avatar, "
            + "we bisected to the event that set it, replayed the session up to that point and watched the bug happen again, "
            + "step by step, without guessing.",
        "Most of the time went into search. A filter that clears itself when you pop to the root sounds simple, but three "
            + "screens read the same property and each one assumed it would still be there. Writing the old value next to the "
            + "new one in every event made the disagreement obvious at a glance.",
        "Attachments were the other story. Expanding one used to rebuild the whole conversation, which was fine with ten "
            + "messages and painful with ten thousand. Now only the expanded row changes, and the snapshot taken after it is "
            + "exactly as large as what actually moved.",
        "We also shipped a small web bundle to every install over the air. Each step of the download is an event, so when a "
            + "phone on a train lost its connection halfway through, its log said which assets had arrived, which had not, and "
            + "what the next launch would do about it.",
        "Next week: update prompts. The version check decides whether to nag, and the decision is recorded with its reason, "
            + "so a user who declined three times is never asked a fourth, and a tester can replay exactly the sequence that "
            + "led to a forced update.",
        "Thanks to everyone who sent recordings. A recorded session replays as a regression test in one line, and six of "
            + "this week's fixes came with one attached, which is the fastest way we know to make sure a bug stays fixed.",
    ]
    static let authors = ["aria-7", "dex-builds", "nova", "quill", "rook"]
    static let tagWords = ["release", "search", "attachments", "deploys", "prompts", "testing", "performance", "design"]

    /// The `i`-th post: a body of eight paragraphs (about 2,000 characters, some 350 words),
    /// two or three tags, and no `publishedAt` for every third (a draft).
    static func sample(_ i: Int) -> BlogPost {
        BlogPost(
            title: "What the bots learned in week \(i % 52), part \(i / 52 + 1)",
            body: (0..<8).map { paragraphs[(i + $0) % paragraphs.count] }.joined(separator: "\n\n"),
            tags: (0..<(2 + i % 2)).map { tagWords[(i + 3 * $0) % tagWords.count] },
            author: authors[i % authors.count],
            publishedAt: i % 3 == 0 ? nil : Date(timeIntervalSince1970: 1_767_000_000 + Double(i) * 3_600.5),
            views: i % 1_000)
    }
}
