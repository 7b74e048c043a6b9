// An example to copy: testing an app built on EventLog with EventLogTesting.
//
// Drive the app on a `TraceTester`'s log (by URL, plan, effect or any API call), then say what
// happened. `expect` is exhaustive: every event since the last assertion, in order, with its
// outcome and writes; a failure prints a −/+ diff by event and by property, keeps the log, and
// names the `eventlog` commands that open it. The same calls work in an XCTestCase.

import DemoMessenger
import Effects
import EventLog
import EventLogTesting
import Objects
import Testing
import UpdatePrompts

@Suite struct ExampleTests {
    /// By URL, then by effect: every event, exhaustively. The engine's bookkeeping (plan
    /// starts, `plan.id`) is left out once, for every assertion.
    @Test func theBotTabOpensWithItsFilterAndClearingReturnsToTheBase() throws {
        let tester = try TraceTester(ignoring: EffectEngine<MessengerModel>.bookkeeping)
        let engine = try EffectEngine(store: tester.store, model: MessengerModel())
        try tester.skipUnchecked()  // the initial state is setup, not behaviour

        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url)
        tester.expect([
            .skipped("navigation/popToRoot", reason: "no-op: navigation.path is already []"),
            .skipped("navigation/dismissSheet"),
            .applied("messenger/selectBotTab", ["messenger.selectedTab": "bots", "messenger.listFilter": "unread"]),
        ])

        try engine.apply(.effect(.clearListFilter), origin: .tap)
        tester.expect([.applied("messenger/clearListFilter", ["messenger.listFilter": "bots"], origin: "tap")])
    }

    /// Only some events matter: non-exhaustive, then the end state.
    @Test func anAvatarLinkEndsWithTheAvatarExpanded() throws {
        let tester = try TraceTester(exhaustive: false)
        let engine = try EffectEngine(store: tester.store, model: MessengerModel())
        try engine.run(MessengerRouter.plan(for: "botmessages://avatar/aria-7/expanded"), origin: .url)
        tester.expect([.applied("expandAvatar", ["messenger.expandedAvatar": "aria-7"])])
        tester.expectState(["messenger.expandedAvatar": "aria-7", "navigation.sheet": .null])
    }

    /// Any API that appends events: objects. The clock is the tester's: it stands still
    /// (`stepMicroseconds: 0`) until the test moves it, so times are exact.
    @Test func savingAPostTwiceCreatesItThenBumpsItsVersion() throws {
        let tester = try TraceTester(stepMicroseconds: 0)
        let objects = try ObjectStore(store: tester.store)
        let saved = try objects.save(BlogPost(title: "Hello", body: "First post", draft: false))
        tester.clock.advance(microseconds: 60_000_000)
        try objects.save(saved.object, expectedVersion: saved.version)
        tester.expect([
            .applied("objects/create", ["objects.BlogPost.00000001": [
                "id": "00000001", "body": "First post", "draft": false, "title": "Hello", "views": 0, "version": 1,
                "createdAt": "2025-11-30T02:05:40.123456Z", "updatedAt": "2025-11-30T02:05:40.123456Z",
            ]], payload: ["collection": "BlogPost", "id": "00000001", "version": 1]),
            .applied("objects/update", ["objects.BlogPost.00000001.version": 2,
                                        "objects.BlogPost.00000001.updatedAt": "2025-11-30T02:06:40.123456Z"]),
        ])
    }

    /// Update prompts, from a store answer the test gives: the check, the decision, the answer.
    @Test func aDeclinedPromptIsCountedForTheInstalledVersion() throws {
        let tester = try TraceTester()
        let prompter = UpdatePrompter(store: tester.store, installedVersion: AppVersion("3.4")!, policy: PromptPolicy(maxDeclines: 2))
        _ = try prompter.check(.success(StoreRelease(version: AppVersion("3.5")!, releaseDate: "2025-11-01T00:00:00Z")), source: "test")
        try prompter.answer(.later)
        tester.expect([
            .applied("updates/storeVersionFound", ["updates.installedVersion": "3.4", "updates.storeVersion": "3.5",
                                                   "updates.lastCheck": "2025-11-30T02:05:40.123456Z"]),
            .applied("updates/promptDecided", ["updates.lastPromptAt": "2025-11-30T02:05:40.123456Z", "updates.lastDecision": "promptShown"]),
            .applied("updates/declined", ["updates.declineCount": 1, "updates.declineCountVersion": "3.4", "updates.lastDecision": "declined"],
                     origin: "prompt"),
        ])
    }
}
