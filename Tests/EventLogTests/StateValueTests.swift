import Testing
@testable import EventLog

@Suite struct StatePathTests {
    @Test(arguments: ["messenger.selectedTab", "navigation.path[0]", "objects.Post[\"a.b\"].title", "a.7", "a[\"x y\"]", "x[\"with \\\"quote\\\"\"]", ""])
    func textRoundTrips(_ text: String) throws {
        let path = try StatePath(parsing: text)
        #expect(path.description == text)
        #expect(try StatePath(parsing: path.description) == path)
    }

    @Test func parsesComponents() throws {
        #expect(try StatePath(parsing: "a.b[2][\"c.d\"]").components == [.key("a"), .key("b"), .index(2), .key("c.d")])
    }

    /// Dotted ASCII keys take a path of their own, past the parser: it must read them as the parser does.
    @Test func dottedKeysReadAsTheParserReadsThem() throws {
        #expect(try StatePath(parsing: "a.7b.c_d-e").components == [.key("a"), .key("7b"), .key("c_d-e")])
        #expect(try StatePath(parsing: "café.x").components == [.key("café"), .key("x")])
        #expect(try StatePath(parsing: "a.b[0]").components == [.key("a"), .key("b"), .index(0)])
        for malformed in ["a..b", "a.", ".", "a\u{7}b", "a\tb"] {
            #expect(throws: ExpressionSyntaxError.self, "\(malformed)") { try StatePath(parsing: malformed) }
        }
    }

    @Test(arguments: [("a..b", 3), ("a.", 3), ("a[x]", 3), ("a[1", 4), (".a", 1), ("a b", 2), ("a[\"x", 5)])
    func rejectsMalformedPathsWithColumn(_ text: String, _ column: Int) {
        #expect(throws: ExpressionSyntaxError.self) { try StatePath(parsing: text) }
        do { _ = try StatePath(parsing: text) } catch { #expect(error.column == column, "\(text): \(error)") }
    }
}

@Suite struct StateValueTests {
    @Test func setCreatesIntermediateObjectsAndRemoves() throws {
        var state = StateValue.emptyObject
        try state.set("bots", at: "messenger.selectedTab")
        try state.set(["a"], at: "navigation.path")
        #expect(state["messenger.selectedTab"] == "bots")
        try state.set("b", at: "navigation.path[1]")
        #expect(state["navigation.path"] == ["a", "b"])
        try state.set(nil, at: "messenger.selectedTab")
        #expect(state["messenger.selectedTab"] == nil)
        #expect(state["messenger"] == .emptyObject)
    }

    @Test func setReturnsThePreviousValue() throws {
        var state: StateValue = ["a": ["b": 1], "list": [1, 2]]
        #expect(try state.set(2, at: "a.b") == 1)
        #expect(try state.set(nil, at: "a.b") == 2)
        #expect(try state.set(5, at: "a.c") == nil)
        #expect(try state.set(9, at: "list[1]") == 2)
        #expect(try state.set(3, at: "list[2]") == nil)
        #expect(state == ["a": ["c": 5], "list": [1, 9, 3]])
    }

    @Test func aFailedSetChangesNothing() {
        var state: StateValue = ["a": 1]
        #expect(throws: StateError.self) { try state.set(2, at: "new.list[0]") }
        #expect(state == ["a": 1])
    }

    @Test func setThroughAScalarIsAnError() throws {
        var state: StateValue = ["a": 1]
        #expect(throws: StateError.self) { try state.set(2, at: "a.b") }
        #expect(throws: StateError.self) { try state.set(2, at: "a[0]") }
    }

    @Test func objectEqualityIgnoresKeyOrder() {
        let a: StateValue = ["x": 1, "y": 2]
        let b: StateValue = ["y": 2, "x": 1]
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a != ["x": 1, "y": 3])
    }

    @Test func largeObjectsStayConsistentAcrossInsertAndRemove() throws {
        var object = StateObject()
        for i in 0..<1_000 { object["id\(i)"] = .int(Int64(i)) }
        for i in stride(from: 0, to: 1_000, by: 3) { object["id\(i)"] = nil }
        #expect(object.count == 666)
        #expect(object["id1"] == 1)
        #expect(object["id3"] == nil)
        #expect(object["id998"] == 998)
        #expect(object.keys.first == "id1")
    }

    @Test func objectsMatchAnOrderedModelThroughRandomInsertsUpdatesAndRemovals() throws {
        var rng = SplitMix64(seed: 11)
        var object = StateObject()
        var model: [(key: String, value: StateValue)] = []
        for step in 0..<20_000 {
            // Drift the key range so that objects cross the index threshold in both directions.
            let range = step % 4_000 < 2_000 ? 120 : 24
            let key = "k\(Int.random(in: 0..<range, using: &rng))"
            let modelPosition = model.firstIndex { $0.key == key }
            if Bool.random(using: &rng), modelPosition != nil || Bool.random(using: &rng) {
                object[key] = nil
                if let modelPosition { model.remove(at: modelPosition) }
            } else {
                let value = StateValue.int(Int64(step))
                object[key] = value
                if let modelPosition { model[modelPosition].value = value } else { model.append((key, value)) }
            }
            if step % 97 == 0 {
                #expect(object.keys == model.map(\.key), "keys after step \(step)")
                #expect(object.values == model.map(\.value), "values after step \(step)")
                #expect(object.count == model.count)
                for (key, value) in model { #expect(object[key] == value) }
                var rebuilt = StateObject()
                for (key, value) in model.reversed() { rebuilt[key] = value }
                #expect(object == rebuilt && object.hashValue == rebuilt.hashValue)
                let decoded = try StateValue.object(object).encoded.withUnsafeBytes { try StateValue(encoded: $0) }
                #expect(decoded.objectValue?.keys == model.map(\.key) && decoded == .object(object))
            }
        }
    }

    @Test func diffAppliedToTheOldStateGivesTheNewOne() throws {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<200 {
            var a = RandomSession(seed: rng.next())
            var b = RandomSession(seed: rng.next())
            for _ in 0..<30 { _ = a.next(); _ = b.next() }
            var patched = a.state
            try patched.apply(a.state.diff(to: b.state))
            #expect(patched == b.state)
            #expect(a.state.diff(to: a.state).isEmpty)
        }
    }

    @Test func diffNamesTheChangedProperty() {
        let before: StateValue = ["messenger": ["selectedTab": "all", "listFilter": .null]]
        let after: StateValue = ["messenger": ["selectedTab": "bots", "listFilter": .null]]
        #expect(before.diff(to: after) == [Write("messenger.selectedTab", old: "all", new: "bots")])
        // Two values inside a larger state: the writes' paths start where they sit.
        let object: StateValue = ["title": "a", "tags": ["x"]]
        #expect(object.diff(to: ["title": "b", "tags": ["x", "y"], "views": 1], at: "objects.Post[\"p 1\"]") == [
            Write("objects.Post[\"p 1\"].title", old: "a", new: "b"),
            Write("objects.Post[\"p 1\"].tags", old: ["x"], new: ["x", "y"]),
            Write("objects.Post[\"p 1\"].views", old: nil, new: 1),
        ])
        #expect(StatePath("a.b").appending("c").appending(index: 2) == StatePath([.key("a"), .key("b"), .key("c"), .index(2)]))
    }

    /// Objects whose keys are in the same order are compared and diffed side by side; in
    /// another order, key by key: both ways give the same answers.
    @Test func keyOrderChangesNeitherEqualityNorDiff() {
        let object: StateValue = ["id": "p1", "title": "a", "meta": ["n": 1, "m": [1, 2]], "views": 1]
        let sameOrder: StateValue = ["id": "p1", "title": "b", "meta": ["n": 1, "m": [1, 3]], "views": 1]
        let otherOrder: StateValue = ["views": 1, "meta": ["m": [1, 3], "n": 1], "title": "b", "id": "p1"]
        #expect(sameOrder == otherOrder)
        #expect(object != sameOrder && object != otherOrder)
        #expect(object == ["views": 1, "meta": ["m": [1, 2], "n": 1], "title": "a", "id": "p1"])
        let expected = [Write("title", old: "a", new: "b"), Write("meta.m[1]", old: 2, new: 3)]
        #expect(object.diff(to: sameOrder) == expected)
        #expect(object.diff(to: otherOrder) == expected)
        // Same keys, one renamed: not the same order, so key by key.
        #expect(object.diff(to: ["id": "p1", "name": "a", "meta": ["n": 1, "m": [1, 2]], "views": 1])
            == [Write("title", old: "a", new: nil), Write("name", old: nil, new: "a")])
    }
}

@Suite struct JSONTests {
    @Test func roundTripsEveryKind() throws {
        let value: StateValue = ["n": .null, "t": true, "f": false, "i": -42, "d": 1.5, "e": 1e-7, "whole": 2.0,
                                 "s": "quote \" backslash \\ newline \n tab \t bell \u{7} é 😀", "a": [1, "x", []], "o": [:]]
        #expect(try StateValue(json: value.json()) == value)
        #expect(try StateValue(json: value.json(pretty: true)) == value)
        #expect(try StateValue(json: "2.0") == .double(2))
        #expect(try StateValue(json: "2") == .int(2))
    }

    @Test func keepsKeyOrder() throws {
        let value = try StateValue(json: #"{"z":1,"a":2,"m":3}"#)
        #expect(value.objectValue?.keys == ["z", "a", "m"])
        #expect(value.json() == #"{"z":1,"a":2,"m":3}"#)
    }

    @Test func decodesEscapesAndSurrogates() throws {
        #expect(try StateValue(json: #""\u00e9\ud83d\ude00\/""#) == "é😀/")
    }

    @Test func refusesARepeatedKeyIncludingAnotherSpellingOfTheSameText() {
        #expect(throws: JSONSyntaxError.self) { try StateValue(json: #"{"a":1,"b":2,"a":3}"#) }
        do {
            _ = try StateValue(json: "{\"\u{e9}\":1,\n \"e\u{301}\":2}")
            Issue.record("two spellings of é parsed as two keys")
        } catch {
            #expect(error.line == 2 && error.column == 2)
            #expect(error.description.contains("duplicate key"))
        }
    }

    @Test(arguments: [("{\"a\":}", 1, 6), ("[1,2", 1, 5), ("{\"a\" 1}", 1, 6), ("\n  tru", 2, 3), ("1 2", 1, 3), ("\"\\x\"", 1, 2), ("01", 1, 2)])
    func reportsLineAndColumn(_ text: String, _ line: Int, _ column: Int) {
        do {
            _ = try StateValue(json: text)
            Issue.record("\(text) parsed")
        } catch {
            #expect(error.line == line && error.column == column, "\(text): \(error)")
        }
    }
}

@Suite struct TimestampTests {
    @Test func formatsAndParsesRFC3339() {
        let t = Timestamp(microsecondsSince1970: 1_764_468_340_123_456)
        #expect(t.description == "2025-11-30T02:05:40.123456Z")
        #expect(Timestamp(rfc3339: t.description) == t)
        #expect(Timestamp(rfc3339: "2025-11-30T03:05:40.123456+01:00") == t)
        #expect(Timestamp(rfc3339: "1969-12-31T23:59:59.5Z")?.microsecondsSince1970 == -500_000)
        #expect(Timestamp(microsecondsSince1970: -500_000).description == "1969-12-31T23:59:59.500000Z")
        #expect(Timestamp(rfc3339: "2025-13-01T00:00:00Z") == nil)
        #expect(Timestamp(rfc3339: "yesterday") == nil)
    }

    @Test(arguments: [
        ("yesterday", "expected YYYY-MM-DDTHH:MM:SS, an optional fraction, then Z or ±HH:MM"),
        ("2025-11-30T02:05:40", "expected YYYY-MM-DDTHH:MM:SS, an optional fraction, then Z or ±HH:MM"),
        ("2025-13-01T00:00:00Z", "there is no month 13"),
        ("2026-02-29T00:00:00Z", "month 2 of 2026 has days 1 to 28, not 29"),
        ("2026-01-01T24:00:00Z", "there is no hour 24"),
        ("2026-01-01T23:60:00Z", "there is no minute 60"),
        ("2016-12-31T23:59:60Z", "second 60 is a leap second, which the log's clock does not have"),
        ("2026-01-01T00:00:00.0000001Z", "the fraction is finer than a microsecond, which the log keeps"),
        ("2026-01-01T00:00:00+24:00", "the offset must be under 24 hours and its minutes under 60"),
        ("0000-01-01T00:00:00+00:01", "it falls outside the years 0000 to 9999 in UTC"),
    ])
    func aTimeThatDoesNotFitSaysWhy(_ text: String, _ reason: String) {
        #expect(throws: TimestampFormatError(reason: reason)) { try Timestamp(parsingRFC3339: text) }
        #expect(Timestamp(rfc3339: text) == nil)
    }

    @Test func formatsEveryFieldAtItsWidthAndReadsBack() throws {
        #expect(Timestamp(microsecondsSince1970: 0).description == "1970-01-01T00:00:00.000000Z")
        #expect(Timestamp(rfc3339: "2024-02-29T23:59:59.999999Z")?.description == "2024-02-29T23:59:59.999999Z")
        #expect(Timestamp(rfc3339: "0001-01-01T00:00:00.000001Z")?.description == "0001-01-01T00:00:00.000001Z")
        #expect(Timestamp(rfc3339: "9999-12-31T23:59:59.999999Z")?.description == "9999-12-31T23:59:59.999999Z")
        // Past what RFC 3339 can write: more year digits, or a sign.
        let late = try #require(Timestamp(rfc3339: "9999-12-31T23:59:59.999999Z"))
        #expect(Timestamp(microsecondsSince1970: late.microsecondsSince1970 + 1).description == "10000-01-01T00:00:00.000000Z")
        let early = try #require(Timestamp(rfc3339: "0000-01-01T00:00:00Z"))
        #expect(Timestamp(microsecondsSince1970: early.microsecondsSince1970 - 1).description == "-0001-12-31T23:59:59.999999Z")
        var random = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let t = Timestamp(microsecondsSince1970: Int64(random.next() % 253_402_300_800_000_000) - 62_135_596_800_000_000)
            #expect(Timestamp(rfc3339: t.description) == t, "\(t.microsecondsSince1970): \(t.description)")
        }
    }
}
