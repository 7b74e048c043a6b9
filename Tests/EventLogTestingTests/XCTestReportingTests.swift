import DemoMessenger
import Effects
import EventLog
import EventLogTesting
import Foundation
import XCTest

/// The same assertions under XCTest: a failure reaches XCTest at the line of the assertion.
final class XCTestReportingTests: XCTestCase {
    private var recorded: [(description: String, line: Int)] = []

    override func recordFailure(withDescription description: String, inFile filePath: String, atLine lineNumber: Int, expected: Bool) {
        recorded.append((description, lineNumber))
    }

    func testAFailedTraceAssertionIsAnXCTestFailureAtItsLine() throws {
        let tester = try TraceTester(ignoring: EffectEngine<MessengerModel>.bookkeeping)
        let engine = try EffectEngine(store: tester.store, model: MessengerModel(regression: .compoundTabFilter))
        try tester.skipUnchecked()
        try engine.run(MessengerRouter.plan(for: "botmessages://bots?filter=unread"), origin: .url)
        let line = #line + 1
        let passed = tester.expect([.skipped("popToRoot"), .skipped("dismissSheet"), .applied("selectBotTab", ["messenger.selectedTab": "bots", "messenger.listFilter": "unread"])])
        XCTAssertFalse(passed)
        XCTAssertEqual(recorded.count, 1)
        XCTAssertEqual(recorded.first?.line, line)
        XCTAssertTrue(recorded.first?.description.contains("messenger.listFilter: − \"unread\" + (not written)") == true, recorded.first?.description ?? "")
        removeKeptLogs(named: recorded.first?.description ?? "")
    }

    func testAPassingAssertionRecordsNothing() throws {
        let tester = try TraceTester(ignoring: EffectEngine<MessengerModel>.bookkeeping)
        let engine = try EffectEngine(store: tester.store, model: MessengerModel())
        try tester.skipUnchecked()
        try engine.apply(.effect(.selectBotTab(filter: "muted")), origin: .test)
        XCTAssertTrue(tester.expect([.applied("selectBotTab", ["messenger.selectedTab": "bots", "messenger.listFilter": "muted"])]))
        XCTAssertTrue(recorded.isEmpty)
    }
}
