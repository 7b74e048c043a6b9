import EventLog

/// The events that happened set against the events a test expected, as a −/+ diff: an event
/// per line (`−` expected and did not happen, `+` happened and was not expected), and under an
/// event that happened differently, a line per property (`messenger.listFilter: − "unread" + null`).
struct TraceComparison {
    enum Line {
        case agrees(EventRecord)
        case differs(EventRecord, [String])
        case unexpected(EventRecord)
        case missing(ExpectedEvent)
    }

    private(set) var lines: [Line] = []

    var failed: Bool {
        lines.contains { if case .agrees = $0 { false } else { true } }
    }

    /// Every event must be expected and every expectation met, in order. Events are paired by
    /// name along their longest common subsequence, then compared in full.
    init(exhaustive expected: [ExpectedEvent], actual: [EventRecord]) {
        // lengths[i][j]: the longest pairing of expected[i...] with actual[j...].
        var lengths = [[Int]](repeating: [Int](repeating: 0, count: actual.count + 1), count: expected.count + 1)
        for i in expected.indices.reversed() {
            for j in actual.indices.reversed() {
                lengths[i][j] = expected[i].names(actual[j].event)
                    ? lengths[i + 1][j + 1] + 1 : max(lengths[i + 1][j], lengths[i][j + 1])
            }
        }
        var i = 0, j = 0
        while i < expected.count || j < actual.count {
            if i < expected.count, j < actual.count, expected[i].names(actual[j].event), lengths[i][j] == lengths[i + 1][j + 1] + 1 {
                compare(expected[i], actual[j], exhaustive: true)
                i += 1
                j += 1
            } else if j < actual.count, i == expected.count || lengths[i][j + 1] >= lengths[i + 1][j] {
                lines.append(.unexpected(actual[j]))
                j += 1
            } else {
                lines.append(.missing(expected[i]))
                i += 1
            }
        }
    }

    /// The expected events must happen in this order, each as described; other events and
    /// other writes pass unremarked.
    init(nonExhaustive expected: [ExpectedEvent], actual: [EventRecord]) {
        var next = 0
        for expectation in expected {
            guard let found = actual[next...].firstIndex(where: { expectation.names($0.event) }) else {
                lines.append(.missing(expectation))
                continue
            }
            compare(expectation, actual[found], exhaustive: false)
            next = found + 1
        }
    }

    private mutating func compare(_ expected: ExpectedEvent, _ record: EventRecord, exhaustive: Bool) {
        let event = record.event
        var details: [String] = []
        if !expected.outcome.matches(event.outcome) {
            details.append("outcome: − \(expected.outcome) + \(event.outcome)")
        }
        if let origin = expected.origin, origin != event.origin {
            details.append("origin: − \(origin) + \(event.origin)")
        }
        if let payload = expected.payload, payload != event.payload {
            details.append("payload: − \(payload) + \(event.payload)")
        }
        // The value each path is left with, by path, in the order first written.
        let wanted = Self.lastValues(expected.writes.map { ($0.path, $0.new) })
        let made = Self.lastValues(event.writes.map { ($0.path, $0.new) })
        let paths = exhaustive ? made.order + wanted.order.filter { made.values[$0] == nil } : wanted.order
        for path in paths {
            let want = wanted.values[path], have = made.values[path]
            if want != have {
                details.append("\(path.isRoot ? "(root)" : path.description): − \(Self.text(want)) + \(Self.text(have))")
            }
        }
        lines.append(details.isEmpty ? .agrees(record) : .differs(record, details))
    }

    /// `nil`: not written; `.some(nil)`: removed.
    private static func lastValues(_ writes: [(StatePath, StateValue?)]) -> (order: [StatePath], values: [StatePath: StateValue?]) {
        var order: [StatePath] = []
        var values: [StatePath: StateValue?] = [:]
        for (path, value) in writes {
            if values.updateValue(value, forKey: path) == nil { order.append(path) }
        }
        return (order, values)
    }

    private static func text(_ value: StateValue??) -> String {
        switch value {
        case .none: "(not written)"
        case .some(.none): "(removed)"
        case .some(.some(let value)): value.description
        }
    }

    /// The diff, a line per event and a line per differing property under it.
    var rendered: String {
        var out: [String] = []
        for line in lines {
            switch line {
            case .agrees(let record):
                out.append("    #\(record.seq) \(Self.heading(record.event))")
            case .differs(let record, let details):
                out.append("  ≠ #\(record.seq) \(Self.heading(record.event))")
                out += details.map { "        " + $0 }
            case .unexpected(let record):
                out.append("  + #\(record.seq) \(record.event)")
            case .missing(let expected):
                out.append("  − \(expected)")
            }
        }
        return out.joined(separator: "\n")
    }

    private static func heading(_ event: Event) -> String { "\(event.stream)/\(event.type) \(event.outcome)" }

    /// The first event that did not agree, for the `eventlog show` hint.
    var firstDifferingSeq: UInt64? {
        for line in lines {
            switch line {
            case .differs(let record, _), .unexpected(let record): return record.seq
            default: continue
            }
        }
        return nil
    }
}
