import DemoMessenger
import Effects
import EventLog
import EventLogTesting
import Foundation
import Testing

@Suite struct MessengerRouterTests {
    /// Found by the fuzzer: U+06DD is a prepending mark, so "\u{06DD}?" is one Character and
    /// a split on "?" missed it while a search found it, and the router read past its array.
    @Test func aMarkBeforeTheQueryIsNotACrash() throws {
        #expect(throws: RouteError.self) { try MessengerRouter.route(from: "botmessages://2b\u{06DD}?filter=unread") }
        #expect(throws: RouteError.self) { try MessengerRouter.route(from: "botmessages://bots?filter=unread\u{06DD}&x\u{06DD}=1") }
        #expect(try MessengerRouter.route(from: "botmessages://bots?filter=unread") == MessengerRouter.route(from: MessengerRouter.url(for: .bots(filter: "unread"))))
    }

    @Test func theAvatarURLIsExactlySevenStepsInOrder() throws {
        let plan = try MessengerRouter.plan(for: "botmessages://avatar/aria-7/expanded")
        #expect(plan.steps.map(\.description) == [
            "dismissAttachmentExpansion", "clearInThreadSearch", "clearListFilter", "popToRoot", "dismissSheet",
            "scrollToAvatarRow(aria-7)", "expandAvatar(aria-7)",
        ])
        #expect(plan.source == "botmessages://avatar/aria-7/expanded")
    }

    @Test func everyRouteRoundTripsThroughItsURL() throws {
        var routes = MessengerRouter.table.map(\.example)
        routes += [.conversationSearch("family", query: "a & b = c+d/é?"), .avatar("odd id", expanded: false), .bots(filter: "x y")]
        for route in routes {
            let url = MessengerRouter.url(for: route)
            #expect(try MessengerRouter.route(from: url) == route, "\(url)")
        }
    }

    @Test func queriesAndTrailingSlashesParse() throws {
        #expect(try MessengerRouter.route(from: "botmessages://conversation/dex-builds/search?q=build+failed") == .conversationSearch("dex-builds", query: "build failed"))
        #expect(try MessengerRouter.route(from: "botmessages://conversation/dex-builds/search?q=a%26b") == .conversationSearch("dex-builds", query: "a&b"))
        #expect(try MessengerRouter.route(from: "botmessages://home/") == .home)
        #expect(try MessengerRouter.route(from: "botmessages://bots?filter=muted") == .bots(filter: "muted"))
        #expect(try MessengerRouter.route(from: "botmessages://bots?filter=bots#top") == .bots(filter: "bots"))
        #expect(try MessengerRouter.route(from: "BotMessages://home#x") == .home)
        #expect(try MessengerRouter.route(from: "botmessages://conversation/dex-builds/search?q=a%23b#c") == .conversationSearch("dex-builds", query: "a#b"))
    }

    @Test(arguments: [
        ("http://avatar/aria-7/expanded", "expected a botmessages:// URL, found 'http://'"),
        ("avatar/aria-7", "expected a botmessages:// URL, found no scheme"),
        ("botmessages://", "missing destination after botmessages://"),
        ("botmessages://avatar/aria-7/exploded", "unknown state 'exploded' (expected expanded or collapsed)"),
        ("botmessages://avatar//expanded", "empty segment 2"),
        ("botmessages://avatar/aria-7/expanded/now", "no route matches 'avatar/aria-7/expanded/now' (see 'eventlog routes')"),
        ("botmessages://profile/aria", "unknown destination 'profile' (see 'eventlog routes')"),
        ("botmessages://bots", "missing query parameter 'filter'"),
        ("botmessages://bots?filter=bots&sort=new", "unexpected query parameter 'sort'"),
        ("botmessages://home?x=1", "unexpected query parameter 'x'"),
        ("botmessages://conversation/a%zz", "invalid percent-encoding in segment 2 'a%zz'"),
        ("botmessages://conversation/x/search?q=a&q=b", "query parameter 'q' given twice"),
    ])
    func nearMissesAreClearErrors(_ url: String, _ reason: String) {
        do {
            _ = try MessengerRouter.route(from: url)
            Issue.record("\(url) parsed")
        } catch {
            #expect(error.url == url && error.reason == reason, "\(error)")
        }
    }

    @Test func parsingIsPureAndUnknownIdsStillRoute() throws {
        // Ids are checked by the effects' guards when they run, not by the router.
        #expect(try MessengerRouter.route(from: "botmessages://avatar/nobody/expanded") == .avatar("nobody", expanded: true))
    }
}

final class MessengerHarness {
    /// The log and its assertions; non-exhaustive, since most tests here look at a few events.
    let trace: TraceTester
    var clock: ManualClock { trace.clock }
    var store: EventStore { trace.store }
    var directory: String { trace.path }
    let engine: EffectEngine<MessengerModel>

    init(regression: Regression? = nil, keyframeRatio: UInt32 = 8, name: String = #function) throws {
        trace = try TraceTester(ignoring: EffectEngine<MessengerModel>.bookkeeping, exhaustive: false,
                                start: Timestamp(microsecondsSince1970: 1_764_468_000_000_000),
                                keyframePolicy: KeyframePolicy(ratio: keyframeRatio), name: name)
        engine = try EffectEngine(store: trace.store, model: MessengerModel(regression: regression))
        try trace.skipUnchecked()
    }

    func open(_ url: String, origin: Origin = .url) throws -> EffectEngine<MessengerModel>.PlanRun {
        try engine.run(try MessengerRouter.plan(for: url), origin: origin)
    }
}

@Suite struct MessengerModelTests {
    @Test func theInitialStateHasSevenPropertiesAndTheNavigation() throws {
        let harness = try MessengerHarness()
        let state = try harness.store.currentState
        #expect(state["messenger"]?.objectValue?.keys == MessengerModel.properties)
        #expect(state["messenger.selectedTab"] == "chats")
        #expect(state["navigation"] == ["path": [], "sheet": .null])
    }

    @Test func theAvatarURLRecordsItsSevenStepsAndExpandsTheAvatar() throws {
        let harness = try MessengerHarness()
        _ = try harness.open("botmessages://conversation/aria-support/attachment/img-401")
        try harness.trace.skipUnchecked()
        let run = try harness.open("botmessages://avatar/aria-7/expanded")
        harness.trace.expect([
            .applied("messenger/dismissAttachmentExpansion", ["messenger.expandedAttachment": .null]),
            .skipped("messenger/clearInThreadSearch", reason: "no-op: messenger.inThreadSearch is already null"),
            .skipped("messenger/clearListFilter", reason: "no-op: messenger.listFilter is already null"),
            .applied("navigation/popToRoot", ["navigation.path": []]),
            .skipped("navigation/dismissSheet", reason: "no-op: navigation.sheet is already null"),
            .applied("messenger/scrollToAvatarRow", ["messenger.avatarScrollTarget": "aria-7"], payload: ["id": "aria-7"]),
            .applied("messenger/expandAvatar", ["messenger.expandedAvatar": "aria-7"], payload: ["id": "aria-7"]),
        ], exhaustive: true)
        #expect(run.records.dropFirst().map { $0.event.cause?.step } == Array(1...7))
        let state = try harness.store.currentState
        #expect(state["messenger.expandedAvatar"] == "aria-7")
        #expect(state["messenger.avatarScrollTarget"] == "aria-7")
        #expect(state["messenger.expandedAttachment"] == .null)
        #expect(state["navigation.path"] == [])
    }

    @Test func theCompoundEffectWritesTheTabAndTheFilterInOneEvent() throws {
        let harness = try MessengerHarness()
        let run = try harness.open("botmessages://bots?filter=unread")
        let select = try #require(run.records.last)
        #expect(select.event.type == "selectBotTab")
        #expect(select.event.writes == [
            Write("messenger.selectedTab", old: "chats", new: "bots"),
            Write("messenger.listFilter", old: .null, new: "unread"),
        ])
        // Only what changes is written: the tab is already "bots" the second time.
        let again = try #require(try harness.open("botmessages://bots?filter=muted").records.last)
        #expect(again.event.writes == [Write("messenger.listFilter", old: "unread", new: "muted")])
    }

    @Test func theFaultyCompoundEffectForgetsTheFilter() throws {
        let harness = try MessengerHarness(regression: .compoundTabFilter)
        let select = try #require(try harness.open("botmessages://bots?filter=unread").records.last)
        #expect(select.event.writes == [Write("messenger.selectedTab", old: "chats", new: "bots")])
    }

    @Test func unknownIdsAndBrokenPreconditionsAreSkippedAndTheRunGoesOn() throws {
        let harness = try MessengerHarness()
        let run = try harness.open("botmessages://avatar/zed-9/expanded")
        #expect(run.records[6].event.outcome == .skipped(reason: "unknown avatar \"zed-9\""))
        #expect(run.records[7].event.outcome == .skipped(reason: "unknown avatar \"zed-9\""))
        #expect(run.status == .finished)
        let attachment = try harness.open("botmessages://attachment/img-517/expanded")
        #expect(attachment.records.last?.event.outcome == .skipped(reason: "attachment \"img-517\" is in cleo-recipes, which is not open"))
        let filter = try harness.open("botmessages://bots?filter=archived")
        #expect(filter.records.last?.event.outcome == .skipped(reason: "unknown filter \"archived\" (expected bots, active, muted, unread)"))
        let search = try harness.open("botmessages://conversation/nowhere/search?q=hi")
        #expect(search.records.suffix(3).map(\.event.outcome) == [
            .skipped(reason: "unknown conversation \"nowhere\""), .skipped(reason: "unknown conversation \"nowhere\""),
            .skipped(reason: "no conversation is open to search in"),
        ])
    }

    @Test func clearingTheFilterOnTheBotTabReturnsToItsBaseFilter() throws {
        let harness = try MessengerHarness()
        _ = try harness.open("botmessages://bots?filter=muted")
        let run = try harness.open("botmessages://avatar/bolt-2/expanded")
        #expect(run.records[3].event.writes == [Write("messenger.listFilter", old: "muted", new: "bots")])
        _ = try harness.open("botmessages://avatar/bolt-2/expanded")
        #expect(try harness.store.currentState["messenger.listFilter"] == "bots")
    }

    @Test func clearingAnEmptySearchIsANoOp() throws {
        let harness = try MessengerHarness()
        let run = try harness.open("botmessages://home")
        #expect(run.records[2].event.type == "clearInThreadSearch")
        #expect(run.records[2].event.outcome == .skipped(reason: "no-op: messenger.inThreadSearch is already null"))
        #expect(run.records[2].event.writes.isEmpty)
    }

    @Test func aNewerURLInterruptsAScrollWaitingForItsList() throws {
        let harness = try MessengerHarness()
        _ = try harness.open("botmessages://conversation/family", origin: .tap)
        let waiting = try harness.open("botmessages://avatar/cleo-4", origin: .tap)
        guard case .waiting(let condition, _) = waiting.status else { Issue.record("not waiting: \(waiting.status)"); return }
        #expect(condition == "the list is on screen")
        let newer = try harness.open("botmessages://bots?filter=bots")
        #expect(newer.records.prefix(2).map(\.event.outcome) == [.cancelled, .cancelled])
        #expect(newer.records.prefix(2).map(\.event.type) == ["scrollToAvatarRow", "expandAvatar"])
        #expect(newer.records.prefix(2).allSatisfy { $0.event.cause?.id == waiting.id })
        #expect(try harness.store.currentState["messenger.expandedAvatar"] == .null)
    }

    @Test func tapURLTestAndCaptureRecordTheSameEventsApartFromOrigin() throws {
        var traces: [[Event]] = []
        for origin in [Origin.tap, .url, .test, .capture] {
            let harness = try MessengerHarness()
            var events: [Event] = []
            for url in ["botmessages://conversation/dex-builds/search?q=failed", "botmessages://avatar/aria-7/expanded", "botmessages://bots?filter=bots"] {
                events += try harness.open(url, origin: origin).records.map { record in
                    #expect(record.event.origin == origin)
                    var event = record.event
                    event.origin = .system
                    return event
                }
            }
            traces.append(events)
        }
        #expect(traces[0].count == 20)
        #expect(traces.allSatisfy { $0 == traces[0] })
    }
}

@Suite struct DemoSessionTests {
    @Test func aSessionExercisesEveryOutcomeAndVerifies() throws {
        let harness = try MessengerHarness()
        let summary = try DemoSession(plans: 80, seed: 1).record(into: harness.engine, clock: harness.clock)
        #expect(summary.plans == 80)
        #expect(summary.events >= 300)
        #expect(summary.applied > 0 && summary.skipped > 0 && summary.cancelled > 0)
        #expect(try harness.store.verify().isOK)
        var reasons: Set<String> = []
        var origins: Set<Origin> = []
        try harness.store.forEachRecord { record in
            origins.insert(record.event.origin)
            if case .skipped(let reason) = record.event.outcome { reasons.insert(String(reason.prefix(7))) }
            return true
        }
        #expect(origins == Set(Origin.entryPoints + [.system]))
        #expect(reasons.isSuperset(of: ["no-op: ", "unknown", "timed o"]))
    }

    @Test func reopeningAndRecordingAgainGiveTheSameSnapshots() throws {
        let first = try MessengerHarness(keyframeRatio: 2)
        let second = try MessengerHarness(keyframeRatio: 16)
        for harness in [first, second] {
            _ = try DemoSession(plans: 60, seed: 42).record(into: harness.engine, clock: harness.clock)
        }
        var options = EventStore.Options()
        options.readOnly = true
        let reopened = try EventStore(path: first.directory, options: options)
        let last = try reopened.lastSeq()
        #expect(try second.store.lastSeq() == last)
        var folded = StateValue.emptyObject
        try reopened.forEachRecord { record in
            try! folded.apply(record.event.writes)
            #expect(try! reopened.snapshot(after: record.seq) == folded, "after \(record.seq)")
            #expect(try! second.store.snapshot(after: record.seq) == folded, "after \(record.seq)")
            return true
        }
    }
}
