import DemoMessenger
import Effects
import EventLog
import EventLogTesting
import Foundation
import Testing

/// The demo app on a tester that leaves the engine's bookkeeping out.
func messengerTester(_ regression: Regression? = nil, exhaustive: Bool = true, name: String = #function,
                     fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column)
    throws -> (TraceTester, EffectEngine<MessengerModel>) {
    let tester = try TraceTester(ignoring: EffectEngine<MessengerModel>.bookkeeping, exhaustive: exhaustive, name: name,
                                 fileID: fileID, filePath: filePath, line: line, column: column)
    let engine = try EffectEngine(store: tester.store, model: MessengerModel(regression: regression))
    try tester.skipUnchecked()
    return (tester, engine)
}

/// The failures `body` records (it must record at least one), with the line each is reported at.
func failures(of body: () throws -> Void) throws -> [(message: String, line: Int?)] {
    let found = Locked<[(message: String, line: Int?)]>([])
    try withKnownIssue {
        try body()
    } matching: { issue in
        let message = issue.comments.map(\.rawValue).joined(separator: "\n")
        found.withLock { $0.append((message, issue.sourceLocation?.line)) }
        return true
    }
    return found.withLock { $0 }
}

/// Removes the logs a failure kept, named in its message, once the test has looked at it.
func removeKeptLogs(named message: String) {
    for word in message.split(whereSeparator: \.isWhitespace) where word.hasPrefix("/") && word.hasSuffix("/log.lmdb") {
        try? FileManager.default.removeItem(atPath: (String(word) as NSString).deletingLastPathComponent)
    }
}

/// The trace of `botmessages://bots?filter=unread` on the demo's first screen.
let botsTabTrace: [ExpectedEvent] = [
    .skipped("navigation/popToRoot", reason: "no-op: navigation.path is already []"),
    .skipped("navigation/dismissSheet"),
    .applied("messenger/selectBotTab", ["messenger.selectedTab": "bots", "messenger.listFilter": "unread"], payload: ["tab": "bots", "filter": ["name": "unread"]], origin: .url),
]

@Suite struct TraceTesterTests {
    @Test func theWholeTraceAsExpectedPasses() throws {
        let (tester, engine) = try messengerTester()
        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url)
        #expect(tester.expect(botsTabTrace))
        // Asserted events are behind: the next assertion starts after them.
        #expect(try tester.unchecked().isEmpty)
        #expect(tester.expect([]))
    }

    @Test func aChangedWriteFailsNamingThePropertyAndKeepsTheLog() throws {
        let (tester, engine) = try messengerTester(.compoundTabFilter)
        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url)
        let line = #line + 1
        let found = try failures { tester.expect(botsTabTrace) }
        #expect(found.count == 1)
        #expect(found.first?.line == line)
        let message = try #require(found.first?.message)
        #expect(message.contains("  ≠ #5 messenger/selectBotTab applied\n        messenger.listFilter: − \"unread\" + (not written)"), "\(message)")
        #expect(message.contains("    #3 navigation/popToRoot skipped"))
        #expect(message.contains("eventlog show 5 --db \(tester.path)"))
        #expect(FileManager.default.fileExists(atPath: tester.path + "/data.mdb"))
        removeKeptLogs(named: message)
    }

    @Test func anUnexpectedEventFailsWithItsLine() throws {
        let (tester, engine) = try messengerTester()
        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url)
        try engine.apply(.effect(.clearListFilter), origin: .tap)
        let message = try #require(try failures { tester.expect(botsTabTrace) }.first?.message)
        #expect(message.contains("  + #6 messenger/clearListFilter [tap] applied: messenger.listFilter: \"unread\" → \"bots\""), "\(message)")
        #expect(!message.contains("  ≠ #"))
        removeKeptLogs(named: message)
    }

    @Test func aMissingEventFails() throws {
        let (tester, engine) = try messengerTester()
        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url)
        let message = try #require(try failures {
            tester.expect(botsTabTrace + [.applied("messenger/expandAvatar", ["messenger.expandedAvatar": "aria-7"])])
        }.first?.message)
        #expect(message.contains("  − messenger/expandAvatar applied: messenger.expandedAvatar = \"aria-7\""), "\(message)")
        removeKeptLogs(named: message)
    }

    @Test func aWrongOutcomeOriginOrPayloadIsNamed() throws {
        let (tester, engine) = try messengerTester()
        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .tap)
        var expected = botsTabTrace
        expected[0] = .applied("navigation/popToRoot")
        expected[2].payload = ["tab": "bots", "filter": ["name": "muted"]]
        let message = try #require(try failures { tester.expect(expected) }.first?.message)
        #expect(message.contains("outcome: − applied + skipped (\"no-op: navigation.path is already []\")"), "\(message)")
        #expect(message.contains("origin: − url + tap"))
        #expect(message.contains("payload: − {\"tab\":\"bots\",\"filter\":{\"name\":\"muted\"}} + {\"tab\":\"bots\",\"filter\":{\"name\":\"unread\"}}"), "\(message)")
        removeKeptLogs(named: message)
    }

    @Test func theNonExhaustiveModePassesOnTheEventsAndWritesItNames() throws {
        let (tester, engine) = try messengerTester(exhaustive: false)
        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url)
        try engine.run(MessengerRouter.plan(for: "botmessages://avatar/aria-7/expanded"), origin: .url)
        #expect(tester.expect([
            .applied("selectBotTab", ["messenger.listFilter": "unread"]),
            .applied("messenger/expandAvatar", ["messenger.expandedAvatar": "aria-7"]),
        ]))
        #expect(tester.expectState(["messenger.expandedAvatar": "aria-7", "messenger.selectedTab": "bots", "messenger.nothing": nil]))
        // Out of order, or a write that differs, still fails.
        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=muted"), origin: .url)
        let message = try #require(try failures {
            tester.expect([.applied("selectBotTab", ["messenger.listFilter": "unread"])])
        }.first?.message)
        #expect(message.contains("messenger.listFilter: − \"unread\" + \"muted\""), "\(message)")
        let state = try #require(try failures { tester.expectState(["messenger.listFilter": "bots"]) }.first?.message)
        #expect(state.contains("messenger.listFilter: − \"bots\" + \"muted\""), "\(state)")
        removeKeptLogs(named: message)
    }

    @Test func bookkeepingIsLeftOutOnceAndCanBeKept() throws {
        let tester = try TraceTester(exhaustive: false)
        let engine = try EffectEngine(store: tester.store, model: MessengerModel())
        try engine.run(MessengerRouter.plan(for: "botmessages://home"), origin: .url)
        // Without the filter, the plan's start and its writes are part of the trace.
        #expect(tester.expect([.applied("system/initialState"),
                               .applied("plans/planStarted", ["plan.id": "plan-2", "plan.source": "botmessages://home"])]))
    }

    @Test func eventsNeverAssertedFailAtTheTestersLine() throws {
        let line = #line + 2
        let found = try failures {
            let (tester, engine) = try messengerTester()
            _ = try withExtendedLifetime(tester) { try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url) }
        }
        #expect(found.count == 1)
        #expect(found.first?.line == line)
        #expect(found.first?.message.contains("3 events were never asserted") == true, "\(found)")
        #expect(found.first?.message.contains("  + #5 messenger/selectBotTab [url] applied") == true)
        removeKeptLogs(named: found.first?.message ?? "")
    }

    @Test func valuesPrintAsWhatTheyMean() throws {
        #expect(String(describingForTest: StateValue.string("chats")) == "\"chats\"")
        #expect(String(describingForTest: Optional(StateValue.string("chats"))) == "\"chats\"")
        #expect(String(describingForTest: ["a": [1, .null]] as StateValue) == "{\"a\":[1,null]}")
        #expect(Write("messenger.listFilter", old: "unread", new: nil).description == "messenger.listFilter: \"unread\" → (absent)")
        let event = Event(stream: "messenger", type: "clearListFilter", origin: "tap", outcome: .skipped(reason: "no-op"))
        #expect(EventRecord(seq: 4, time: TemporaryEventStore.defaultStart, event: event, checksum: 0).description
                == "#4 messenger/clearListFilter [tap] skipped (\"no-op\")")
    }
}
