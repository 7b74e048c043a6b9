import Effects
import EventLog
import Foundation
import Deploys
import Objects
import UpdatePrompts

/// A realistic, reproducible session of the demo app: a person tapping around, deep links,
/// a test and a capture script, all through the same engine. The same seed always records
/// the same events (times come from the manual clock the caller hands in).
///
/// It exercises every outcome: guards skipping unknown ids, no-op clears, scrolls that wait
/// for their list and are released by a swipe back, interrupted by a newer plan, or time out.
/// Between plans, the bots publish, read and delete blog posts through the object store, and
/// the app checks the App Store for updates (`promptMoments`) and takes web bundle deploys
/// (`DemoDeploys`).
public struct DemoSession: Sendable {
    /// How many plans the session runs; the object, update and deploy activity comes
    /// between them.
    public var plans: Int
    /// The seed of the session's random choices.
    public var seed: UInt64

    /// A session of `plans` plans chosen by `seed`.
    public init(plans: Int = 80, seed: UInt64 = 1) {
        self.plans = plans
        self.seed = seed
    }

    /// Counts of what was recorded.
    public struct Summary: Sendable, Hashable {
        /// Plans run.
        public var plans = 0
        /// Events of the plans and the steps applied between them (swipes back, resumes).
        public var events = 0
        /// Of those events, the ones applied.
        public var applied = 0
        /// Of those events, the ones skipped.
        public var skipped = 0
        /// Of those events, the ones cancelled by a newer plan.
        public var cancelled = 0
        /// Object store saves and deletes.
        public var objectEvents = 0
        /// Events of the update checks and answers.
        public var updateEvents = 0
        /// Events of the deploy client.
        public var deployEvents = 0
        /// The seq of the session's first event.
        public var firstSeq: UInt64 = 0
        /// The seq of the session's last event.
        public var lastSeq: UInt64 = 0
    }

    /// Records the session into `engine` (with blog posts into `objects`, when given, update
    /// checks when `updatePrompts`, and deploys through `deploys`), moving `clock` between
    /// actions as a person would.
    /// - Throws: The errors of the calls it makes: `EffectEngine.run`, `apply` and `resume`;
    ///   `ObjectStore`'s saves and deletes (`ObjectStoreError`); `UpdatePrompter.check` and
    ///   `answer`; and for deploys, `DeployError` (`.busy` when another client holds the app
    ///   directory) and `CocoaError` when the demo's bundles cannot be written. The events
    ///   recorded before stay.
    public func record(into engine: EffectEngine<MessengerModel>, objects: ObjectStore? = nil, updatePrompts: Bool = false,
                       deploys: DemoDeploys? = nil, clock: ManualClock) throws -> Summary {
        var rng = SplitMix64(seed: seed)
        var summary = Summary()
        var waits = 0
        summary.firstSeq = try engine.store.lastSeq() + 1
        func count(_ records: [EventRecord]) {
            for record in records {
                summary.events += 1
                switch record.event.outcome {
                case .applied: summary.applied += 1
                case .skipped: summary.skipped += 1
                case .cancelled: summary.cancelled += 1
                }
            }
        }
        for index in 0..<plans {
            clock.advance(microseconds: Int64.random(in: 400_000...3_000_000, using: &rng))
            if let objects, index % 8 == 4 {
                summary.objectEvents += try blogActivity(objects, index: index / 8, rng: &rng)
            }
            if let deploys, index % 8 == 2 {
                summary.deployEvents += try deploys.run(index / 8, store: engine.store, clock: clock)
            }
            if updatePrompts, index % 8 == 0 {
                summary.updateEvents += try updateCheck(Self.promptMoments[index / 8 % Self.promptMoments.count], store: engine.store)
            }
            // Every tenth plan is a UI test re-running the avatar deep link.
            let (url, origin) = index % 10 == 9
                ? (MessengerRouter.url(for: .avatar(SampleData.bots[index / 10 % SampleData.bots.count].avatar, expanded: true)), Origin.test)
                : nextAction(&rng)
            let run = try engine.run(try MessengerRouter.plan(for: url), origin: origin)
            summary.plans += 1
            count(run.records)
            guard case .waiting = run.status else { continue }
            // A scroll is waiting for its list: in turn, the person swipes back, waits it
            // out, or (by doing nothing here) lets the next plan interrupt it.
            waits += 1
            switch waits % 3 {
            case 0:
                clock.advance(microseconds: 300_000)
                count(try engine.apply(.pop, origin: .system))
            case 1:
                clock.advance(microseconds: engine.model.scrollWaitBound)
                count(try engine.resume()?.records ?? [])
            default:
                break
            }
        }
        summary.lastSeq = try engine.store.lastSeq()
        return summary
    }

    /// A bot publishes a post, a reader bumps a post's views, or an old draft is deleted.
    private func blogActivity(_ objects: ObjectStore, index: Int, rng: inout SplitMix64) throws -> Int {
        let bot = SampleData.bots[index % SampleData.bots.count]
        let posts = try objects.fetchAll(BlogPost.self, limit: 1_000).objects
        switch (index % 4, posts.randomElement(using: &rng)) {
        case (1, var post?), (2, var post?):
            post.object.views += Int.random(in: 1...40, using: &rng)
            post.object.draft = false
            try objects.save(post.object, expectedVersion: post.version)
        case (3, let post?) where post.object.draft:
            try objects.delete(BlogPost.self, id: post.id)
        default:
            let published = Date(timeIntervalSince1970: 1_764_000_000 + Double(index) * 3_600)
            try objects.save(BlogPost(title: "\(bot.name) release notes #\(index + 1)",
                                      body: "What \(bot.name) learned this week.", publishedDate: published))
        }
        return 1
    }

    /// One foreground update check of the demo: the versions, the policy, and the person's answer.
    struct PromptMoment: Sendable {
        var installed: String
        /// The store's version; `nil`: the lookup fails.
        var store: String?
        var forced = false
        var answer: PromptAnswer?
    }

    /// Optional prompts declined up to the cap (with the store down once in between), an
    /// update resetting the count, then a forced prompt that comes back after "Update".
    static let promptMoments: [PromptMoment] = [
        PromptMoment(installed: "3.3.0", store: "3.4.1", answer: .later),
        PromptMoment(installed: "3.3.0", store: "3.4.1", answer: .later),
        PromptMoment(installed: "3.3.0", store: "3.4.1", answer: .later),
        PromptMoment(installed: "3.3.0", store: nil),
        PromptMoment(installed: "3.3.0", store: "3.4.1", answer: .later),
        PromptMoment(installed: "3.3.0", store: "3.4.1", answer: .later),
        PromptMoment(installed: "3.3.0", store: "3.4.1"),
        PromptMoment(installed: "3.4.1", store: "3.4.1"),
        PromptMoment(installed: "3.4.1", store: "3.5", forced: true, answer: .update),
        PromptMoment(installed: "3.5.0", store: "3.5"),
    ]

    /// Records one check (and the answer), returning how many events it appended.
    private func updateCheck(_ moment: PromptMoment, store: EventStore) throws -> Int {
        let prompter = UpdatePrompter(store: store, installedVersion: AppVersion(moment.installed)!, policy: PromptPolicy(rules: moment.forced ? .forced : .optional))
        let lookup: Result<StoreRelease, StoreLookupError> = moment.store.map {
            .success(StoreRelease(version: AppVersion($0)!, releaseNotes: "Faster sync, fewer surprises.", minimumOSVersion: AppVersion("15.0"),
                                  releaseDate: "2026-01-01T08:00:00Z")) // days before the demo: old enough to prompt
        } ?? .failure(StoreLookupError("HTTP 503 from itunes.apple.com"))
        let check = try prompter.check(lookup, source: StoreLookupSource.appStore(appID: "888237539")!.description)
        guard let answer = moment.answer, check.decision == .promptShown || check.decision == .forcedPromptShown else { return check.records.count }
        try prompter.answer(answer)
        return check.records.count + 1
    }

    private func nextAction(_ rng: inout SplitMix64) -> (String, Origin) {
        func pick<T>(_ items: [T]) -> T { items.randomElement(using: &rng)! }
        let conversation = pick(SampleData.conversations.map(\.id))
        let avatar = Int.random(in: 0..<6, using: &rng) == 0 ? "zed-9" : pick(SampleData.bots.map(\.avatar))
        let attachment = pick(Array(SampleData.attachmentConversation.keys).sorted())
        let route: MessengerRoute
        var origin = Origin.tap
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<22: route = .conversation(conversation)
        case 22..<30: route = .conversationSearch(conversation, query: pick(["invoice", "failed", "pasta", "tomorrow", "ok"])); origin = .url
        case 30..<40: route = .avatar(avatar, expanded: true); origin = pick([.url, .tap])
        case 40..<52: route = .bots(filter: Int.random(in: 0..<5, using: &rng) == 0 ? "archived" : pick(SampleData.botFilters))
        case 52..<60: route = .attachment(attachment, expanded: true)
        case 60..<64: route = .conversationAttachment(SampleData.attachmentConversation[attachment]!, attachment: attachment); origin = .capture
        case 64..<70: route = .attachment(attachment, expanded: false)
        case 70..<77: route = .home
        case 77..<82: route = .back
        case 82..<86: route = .settings
        case 86..<94: route = .revealAvatar(avatar)
        default: route = .avatar(avatar, expanded: false); origin = .url
        }
        return (MessengerRouter.url(for: route), origin)
    }
}
