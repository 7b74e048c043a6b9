import DemoMessenger
import Effects
import EventLog
import EventLogCLI
import EventLogTesting
import Foundation
import Testing

/// The session of the compound tab+filter regression: the bot tab opened with a filter, used,
/// left and opened again with another filter.
func botsTabSession(_ store: EventStore, _ clock: ManualClock) throws {
    let engine = try EffectEngine(store: store, model: MessengerModel())
    for url in ["botmessages://bots?filter=unread", "botmessages://avatar/bolt-2/expanded",
                "botmessages://home", "botmessages://bots?filter=muted"] {
        clock.advance(microseconds: 2_000_000)
        try engine.run(MessengerRouter.plan(for: url), origin: .url)
    }
}

@Suite struct RecordedSessionTests {
    @Test func theRecordedSessionPassesOnTodaysCode() throws {
        #expect(verifyRecordedSession("Fixtures/bots-tab.jsonl", through: try EventLogApp.demo.projections(nil), session: botsTabSession))
    }

    @Test func theRecordedSessionCatchesTheCompoundTabFilterRegression() throws {
        guard !RecordedSession.isRecording else { return }
        let faulty = try EventLogApp.demo.projections(Regression.compoundTabFilter.rawValue)
        let line = #line + 2
        let found = try failures {
            verifyRecordedSession("Fixtures/bots-tab.jsonl", through: faulty, session: botsTabSession)
        }
        #expect(found.count == 1)
        #expect(found.first?.line == line)
        let message = try #require(found.first?.message)
        #expect(message.contains("diverges from today's code at #5 messenger/selectBotTab:"), "\(message)")
        #expect(message.contains("    recorded: applied: messenger.selectedTab: \"chats\" → \"bots\"; messenger.listFilter: null → \"unread\""))
        #expect(message.contains("    today:    applied: messenger.selectedTab: \"chats\" → \"bots\""))
        #expect(message.contains("    cause:    plan-2 step 3 (botmessages://bots?filter=unread)"))
        #expect(message.contains("        messenger.listFilter: − \"unread\" + null"))
        #expect(message.contains("eventlog show 5 --db "))
        removeKeptLogs(named: message)
    }

    @Test func aMissingFixtureFailsWithTheWayToRecordIt() throws {
        guard !RecordedSession.isRecording else { return }
        let found = try failures {
            verifyRecordedSession("Fixtures/none.jsonl", through: Projections()) { _, _ in Issue.record("the session ran without EVENTLOG_RECORD") }
        }
        #expect(found.first?.message.contains("No recorded session at ") == true)
        #expect(found.first?.message.contains("Record it with EVENTLOG_RECORD=1") == true)
        #expect(!FileManager.default.fileExists(atPath: URL(fileURLWithPath: #filePath).deletingLastPathComponent().path + "/Fixtures/none.jsonl"))
    }

    @Test func eventsNoCodeKnowsFailTheVerification() throws {
        guard !RecordedSession.isRecording else { return }
        let directory = TemporaryDirectory()
        let fixture = directory.file("unknown.jsonl")
        try Data(#"{"origin":"system","outcome":"applied","payload":null,"seq":1,"stream":"other","time":"2025-11-30T02:05:40.123456Z","type":"x","writes":[{"new":1,"path":"x"}]}"#.utf8 + [10])
            .write(to: URL(fileURLWithPath: fixture))
        let message = try #require(try failures {
            verifyRecordedSession(fixture, through: try EventLogApp.demo.projections(nil)) { _, _ in }
        }.first?.message)
        #expect(message.contains("has events no code knows, which nothing checked: streams other"), "\(message)")
        removeKeptLogs(named: message)
    }
}
