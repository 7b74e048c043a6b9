@testable import Effects
import EventLog
import EventLogTesting
import Foundation
import Testing

/// A tiny app for testing the engine alone: a counter-like `label` and a `list` that must be
/// on screen before `scroll` writes.
struct TestModel: EffectModel {
    enum Effect: NamedEffect {
        case setLabel(String)
        case clearLabel
        case scroll(String)

        var name: String {
            switch self {
            case .setLabel: "setLabel"
            case .clearLabel: "clearLabel"
            case .scroll: "scroll"
            }
        }

        var arguments: StateValue {
            switch self {
            case .setLabel(let text), .scroll(let text): ["value": .string(text)]
            case .clearLabel: .null
            }
        }

        init?(name: String, arguments: StateValue) {
            let value = arguments["value"]?.stringValue
            switch (name, value) {
            case ("setLabel", let value?): self = .setLabel(value)
            case ("clearLabel", _): self = .clearLabel
            case ("scroll", let value?): self = .scroll(value)
            default: return nil
            }
        }
    }

    var stream: String { "app" }
    var initialState: StateObject {
        var object = StateObject()
        object["label"] = .null
        object["scrolledTo"] = .null
        return object
    }

    func resolve(_ effect: Effect, in state: StateValue) -> Resolution {
        switch effect {
        case .setLabel(let text):
            guard text != "forbidden" else { return .skip("the label \"forbidden\" is not allowed") }
            return .assign([Assignment("app.label", .string(text))])
        case .clearLabel:
            return .assign([Assignment("app.label", .null)])
        case .scroll(let row):
            return .assign([Assignment("app.scrolledTo", .string(row))],
                           wait: WaitCondition("the list is on screen", boundMicroseconds: 1_000_000) { $0["navigation.path"] == [] })
        }
    }
}

final class Harness {
    let temporary: TemporaryEventStore
    var clock: ManualClock { temporary.clock }
    var store: EventStore { temporary.store }
    let engine: EffectEngine<TestModel>

    init() throws {
        temporary = try TemporaryEventStore(start: Timestamp(microsecondsSince1970: 1_000_000_000), stepMicroseconds: 0,
                                            keyframePolicy: KeyframePolicy(ratio: 2, minimumEvents: 2))
        engine = try EffectEngine(store: temporary.store, model: TestModel())
    }

    func outcomes(_ records: [EventRecord]) -> [String] {
        records.map { "\($0.event.type):\($0.event.outcome.name)" }
    }
}

@Suite struct EffectEngineTests {
    @Test func theFirstEngineRecordsTheInitialStateOnce() throws {
        let harness = try Harness()
        #expect(try harness.store.lastSeq() == 1)
        #expect(try harness.store.currentState == [
            "app": ["label": .null, "scrolledTo": .null], "navigation": ["path": [], "sheet": .null], "plan": ["id": .null, "source": .null],
        ])
        _ = try EffectEngine(store: harness.store, model: TestModel())
        #expect(try harness.store.lastSeq() == 1)
    }

    @Test func stepsRunInOrderAsOneEventEachWithTheirCause() throws {
        let harness = try Harness()
        let run = try harness.engine.run(Plan(source: "test://a", steps: [.effect(.setLabel("x")), .push("detail"), .present("sheet")]), origin: .test)
        #expect(run.status == .finished)
        #expect(harness.outcomes(run.records) == ["planStarted:applied", "setLabel:applied", "push:applied", "present:applied"])
        #expect(run.records.map { $0.event.cause } == (0...3).map { Cause(id: run.id, step: $0, source: "test://a") })
        #expect(run.records.allSatisfy { $0.event.origin == .test })
        #expect(run.records[1].event.writes == [Write("app.label", old: .null, new: "x")])
        #expect(run.records[2].event.writes == [Write("navigation.path", old: [], new: ["detail"])])
        #expect(try harness.store.currentState["plan.id"] == .string(run.id))
    }

    @Test func aFailedGuardIsSkippedWithItsReasonAndTheRunGoesOn() throws {
        let harness = try Harness()
        let run = try harness.engine.run(Plan(source: "s", steps: [.effect(.setLabel("forbidden")), .effect(.setLabel("ok"))]), origin: .url)
        #expect(run.records[1].event.outcome == .skipped(reason: "the label \"forbidden\" is not allowed"))
        #expect(run.records[1].event.writes.isEmpty)
        #expect(run.records[2].event.outcome == .applied)
    }

    @Test func aWriteThatChangesNothingIsSkippedAsANoOpByTheEngine() throws {
        let harness = try Harness()
        // TestModel has no no-op check of its own: clearLabel always asks to write null.
        let run = try harness.engine.run(Plan(source: "s", steps: [.effect(.clearLabel), .pop, .dismissSheet, .effect(.setLabel("a")), .effect(.setLabel("a"))]), origin: .tap)
        #expect(harness.outcomes(run.records) == ["planStarted:applied", "clearLabel:skipped", "pop:skipped", "dismissSheet:skipped", "setLabel:applied", "setLabel:skipped"])
        #expect(run.records[1].event.outcome == .skipped(reason: "no-op: app.label is already null"))
        #expect(run.records[5].event.outcome == .skipped(reason: "no-op: app.label is already \"a\""))
    }

    @Test func aWaitingStepHoldsThePlanUntilItsConditionHolds() throws {
        let harness = try Harness()
        try harness.engine.run(Plan(source: "open", steps: [.push("detail")]), origin: .tap)
        let waiting = try harness.engine.run(Plan(source: "scroll", steps: [.effect(.scroll("row-3")), .effect(.setLabel("done"))]), origin: .tap)
        #expect(harness.outcomes(waiting.records) == ["planStarted:applied"])
        guard case .waiting(let condition, let deadline) = waiting.status else { Issue.record("not waiting"); return }
        #expect(condition == "the list is on screen")
        #expect(deadline == Timestamp(microsecondsSince1970: harness.clock.now.microsecondsSince1970 + 1_000_000))
        #expect(try harness.engine.resume()?.records.isEmpty == true)
        // The system pops the screen (a swipe): the scroll can run, and the plan finishes.
        let released = try harness.engine.apply(.pop, origin: .system)
        #expect(harness.outcomes(released) == ["pop:applied", "scroll:applied", "setLabel:applied"])
        #expect(released[0].event.cause == nil)
        #expect(released[1].event.cause?.id == waiting.id)
        #expect(try harness.engine.resume() == nil)
    }

    @Test func aStepAppliedOutsideAPlanDoesNotWait() throws {
        let harness = try Harness()
        try harness.engine.run(Plan(source: "open", steps: [.push("detail")]), origin: .tap)
        let records = try harness.engine.apply(.effect(.scroll("row-9")), origin: .system)
        #expect(records.map(\.event.outcome) == [.skipped(reason: "would wait until the list is on screen; steps outside a plan do not wait")])
        #expect(try harness.engine.resume() == nil)
    }

    @Test func aWaitPastItsBoundIsSkippedAndThePlanGoesOn() throws {
        let harness = try Harness()
        try harness.engine.run(Plan(source: "open", steps: [.push("detail")]), origin: .tap)
        let waiting = try harness.engine.run(Plan(source: "scroll", steps: [.effect(.scroll("row-3")), .effect(.setLabel("after"))]), origin: .tap)
        #expect(waiting.records.count == 1)
        harness.clock.advance(microseconds: 999_999)
        #expect(try harness.engine.resume()?.records.isEmpty == true)
        harness.clock.advance(microseconds: 1)
        let resumed = try #require(try harness.engine.resume())
        #expect(resumed.status == .finished)
        #expect(resumed.records[0].event.outcome == .skipped(reason: "timed out after 1.0 s waiting until the list is on screen"))
        #expect(resumed.records[1].event.outcome == .applied)
    }

    @Test func aNewerPlanCancelsTheRestOfAWaitingOne() throws {
        let harness = try Harness()
        try harness.engine.run(Plan(source: "open", steps: [.push("detail")]), origin: .tap)
        let old = try harness.engine.run(Plan(source: "old", steps: [.effect(.scroll("row-1")), .effect(.setLabel("old"))]), origin: .url)
        let new = try harness.engine.run(Plan(source: "new", steps: [.effect(.setLabel("new"))]), origin: .url)
        #expect(harness.outcomes(new.records) == ["scroll:cancelled", "setLabel:cancelled", "planStarted:applied", "setLabel:applied"])
        #expect(new.records[0].event.cause == Cause(id: old.id, step: 1, source: "old"))
        #expect(new.records[1].event.cause == Cause(id: old.id, step: 2, source: "old"))
        #expect(try harness.store.currentState["app.label"] == "new")
    }

    @Test func aPlanStartedByAnotherEngineOnTheSameLogSupersedesThisOne() throws {
        let harness = try Harness()
        let other = try EffectEngine(store: harness.store, model: TestModel())
        try harness.engine.run(Plan(source: "open", steps: [.push("detail")]), origin: .tap)
        _ = try harness.engine.run(Plan(source: "mine", steps: [.effect(.scroll("r")), .effect(.setLabel("mine"))]), origin: .tap)
        try other.run(Plan(source: "theirs", steps: [.effect(.setLabel("theirs"))]), origin: .url)
        let resumed = try #require(try harness.engine.resume())
        #expect(resumed.status == .superseded)
        #expect(harness.outcomes(resumed.records) == ["scroll:cancelled", "setLabel:cancelled"])
        #expect(try harness.store.currentState["app.label"] == "theirs")
        #expect(try harness.store.verify().isOK)
    }

    @Test func everyOriginReachesTheSameApply() throws {
        var traces: [[Event]] = []
        for origin in [Origin.tap, .url, .test, .capture] {
            let harness = try Harness()
            let run = try harness.engine.run(Plan(source: "same", steps: [.effect(.setLabel("x")), .effect(.clearLabel), .effect(.clearLabel)]), origin: origin)
            #expect(run.records.allSatisfy { $0.event.origin == origin })
            traces.append(run.records.map { var event = $0.event; event.origin = .system; return event })
        }
        #expect(traces.allSatisfy { $0 == traces[0] })
    }
}

@Suite struct CaptureScriptTests {
    @Test func parsesEveryInstruction() throws {
        let script = try CaptureScript(parsing: """
            # a capture session
            open botmessages://home   # go home
            wait 250ms
            wait 1.5s

            swipe-back
            capture home
            capture label app.label
            open botmessages://thread/t1#latest #a fragment, then a comment
            """)
        #expect(script.lines.map(\.number) == [2, 3, 4, 6, 7, 8, 9])
        #expect(script.lines.map(\.instruction) == [
            .open("botmessages://home"), .wait(microseconds: 250_000), .wait(microseconds: 1_500_000), .swipeBack,
            .capture(name: "home", path: nil), .capture(name: "label", path: "app.label"), .open("botmessages://thread/t1#latest"),
        ])
    }

    @Test(arguments: [
        ("open", "line 1: 'open' takes one URL"),
        ("wait 5", "line 1: 'wait' takes one duration of at most an hour, such as 250ms or 1.5s"),
        ("\n\njump x", "line 3: unknown instruction 'jump' (expected open, wait, swipe-back or capture)"),
        ("capture x a..b", "line 1: path a..b: column 3: expected a key"),
        ("wait 2h", "line 1: 'wait' takes one duration of at most an hour, such as 250ms or 1.5s"),
    ])
    func rejectsBadLinesWithTheirNumber(_ text: String, _ message: String) {
        do {
            _ = try CaptureScript(parsing: text)
            Issue.record("parsed \(text)")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func runsThroughTheEngineWithOriginCapture() throws {
        let harness = try Harness()
        let script = try CaptureScript(parsing: "open set\r\ncapture after-set app.label\nopen scroll\nwait 2s\ncapture end\ncapture gone app.nothing")
        let plans: [String: Plan<TestModel.Effect>] = [
            "set": Plan(source: "set", steps: [.effect(.setLabel("captured")), .push("detail")]),
            "scroll": Plan(source: "scroll", steps: [.effect(.scroll("r"))]),
        ]
        let captures = try harness.engine.runCapture(script, plan: { plans[$0]! }, sleep: { harness.clock.advance(microseconds: $0) })
        #expect(captures.map(\.name) == ["after-set", "end", "gone"])
        #expect(captures[0].value == "captured")
        #expect(captures[0].seq == 4)
        #expect(captures[1].value?["app.scrolledTo"] == .null)
        #expect(captures[2].value == nil)
        var origins: Set<Origin> = []
        try harness.store.forEachRecord(from: 2) { origins.insert($0.event.origin); return true }
        #expect(origins == [.capture])
        let last = try #require(try harness.store.record(captures[1].seq))
        #expect(last.event.outcome == .skipped(reason: "timed out after 1.0 s waiting until the list is on screen"))
    }
}
