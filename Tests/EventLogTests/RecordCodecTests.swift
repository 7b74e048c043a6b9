import Testing
@testable import EventLog
import EventLogTesting

@Suite struct RecordCodecTests {
    static let events: [Event] = [
        Event(stream: "messenger", type: "selectBotTab", origin: "url",
              cause: Cause(id: "plan-7", step: 3, source: "botmessages://bots?filter=bots"),
              outcome: .applied, payload: ["filter": "bots", "n": 3, "d": 0.25, "list": [true, .null]],
              writes: [Write("messenger.selectedTab", old: "all", new: "bots"),
                       Write("messenger.listFilter", old: nil, new: "bots"),
                       Write("navigation.path[0]", old: "thread", new: nil),
                       Write("objects.Post[\"a.b\"]", old: ["title": "é"], new: .null)]),
        Event(stream: "messenger", type: "expandAvatar", origin: "tap", outcome: .skipped(reason: "unknown avatar \"zed\"")),
        Event(stream: "messenger", type: "clearListFilter", origin: "capture", cause: Cause(id: "p"), outcome: .cancelled),
        Event(stream: "deploys", type: "check", origin: .system),
        Event(stream: "t", type: "x", origin: "test", payload: .string(String(repeating: "long ", count: 10_000))),
        Event(stream: "messenger", type: "selectBotTab", origin: "tap", outcome: .skipped(reason: "no-op"), payload: ["tab": "bots"], version: 2),
        Event(stream: "messenger", type: "selectBotTab", origin: "tap", payload: ["tab": "bots"],
              writes: [Write("messenger.selectedTab", old: nil, new: "bots")], version: Int(UInt32.max)),
    ]

    @Test(arguments: events)
    func binaryRoundTripKeepsEveryField(_ event: Event) throws {
        var writer = BinaryWriter()
        let time = Timestamp(microsecondsSince1970: 1_764_468_340_123_456)
        let encoded = RecordCodec.encode(event, seq: 42, time: time, into: &writer)
        var decodedDelta = 0
        let record = try writer.bytes.withUnsafeBytes { try RecordCodec.decode($0, seq: 42, stateDelta: &decodedDelta) }
        #expect(record == EventRecord(seq: 42, time: time, event: event, checksum: encoded.checksum))
        var writesDelta = 0
        let writes = try writer.bytes.withUnsafeBytes { try RecordCodec.decodeWrites($0, seq: 42, stateDelta: &writesDelta) }
        #expect(writes == event.writes)
        // Applying while reading (old values skipped, not built) gives the same state.
        var expected: StateValue = ["navigation": ["path": ["thread"]]]
        var streamed = expected
        try expected.apply(event.writes)
        var appliedDelta = 0
        try writer.bytes.withUnsafeBytes { try RecordCodec.applyWrites($0, seq: 42, to: &streamed, stateDelta: &appliedDelta) }
        #expect(streamed == expected)
        // The writer and every reader must agree, or `verify` would misplace keyframes.
        #expect(decodedDelta == encoded.stateDelta)
        #expect(writesDelta == encoded.stateDelta)
        #expect(appliedDelta == encoded.stateDelta)
    }

    @Test func skippingAValueStepsOverExactlyWhatDecodingReads() throws {
        let values: [StateValue?] = [nil, .null, true, false, -5, .int(1 << 40), 0.5, "", "é 😀", [], [1, [2, ["x": [3]]]],
                                     ["a": ["b": [.null, 1.5, "c"]], "": [:]]]
        var writer = BinaryWriter()
        for value in values { writer.optionalValue(value) }
        try writer.withUnsafeBytes { (bytes) throws in
            var decoder = BinaryReader(bytes)
            var skipper = BinaryReader(bytes)
            for value in values {
                #expect(try decoder.optionalValue() == value)
                #expect(try skipper.skipOptionalValue() == (value != nil))
                #expect(skipper.offset == decoder.offset)
            }
            #expect(skipper.isAtEnd)
        }
        [ValueTag.array.rawValue, 2, ValueTag.null.rawValue].withUnsafeBytes { bytes in
            var truncated = BinaryReader(bytes)
            #expect(throws: RecordDecodingError.self) { try truncated.skipOptionalValue() }
        }
    }

    @Test(arguments: events)
    func jsonRoundTripKeepsEveryField(_ event: Event) throws {
        let record = EventRecord(seq: 9, time: Timestamp(microsecondsSince1970: 1_000_001), event: event, checksum: 0xDEAD_BEEF)
        let imported = try ImportedEvent(json: try StateValue(json: record.jsonValue.json()))
        #expect(imported.event == event)
        #expect(imported.seq == 9)
        #expect(imported.time == record.time)
    }

    @Test func stateDeltaCountsValueBytesAndAddedOrRemovedKeys() {
        var writer = BinaryWriter()
        let encoded = RecordCodec.encode(Self.events[0], seq: 1, time: Timestamp(microsecondsSince1970: 0), into: &writer)
        // "all" → "bots": +1 · absent → "bots" under the new key listFilter: +6 + 11 ·
        // "thread" → absent at an index: −8 · {"title": "é"} (12 bytes) → null (1): −11.
        #expect(encoded.stateDelta == 1 + 17 - 8 - 11)
    }

    @Test func decodingThroughANameCacheGivesTheSameRecords() throws {
        let names = NameCache()
        for round in 0..<3 {
            for (index, event) in Self.events.enumerated() {
                let seq = UInt64(round * 100 + index + 1)
                let bytes = EventRecord.storedBytes(of: event, seq: seq, time: Timestamp(microsecondsSince1970: 5))
                var delta = (plain: 0, cached: 0)
                let plain = try bytes.withUnsafeBytes { try RecordCodec.decode($0, seq: seq, stateDelta: &delta.plain) }
                let cached = try bytes.withUnsafeBytes { try RecordCodec.decode($0, seq: seq, stateDelta: &delta.cached, names: names) }
                #expect(cached == plain)
                #expect(cached.event.writes.map(\.path) == event.writes.map(\.path))
                #expect(delta.cached == delta.plain)
            }
        }
    }

    /// Far more names than slots, many sharing a slot and a length: a hit is only ever the
    /// same bytes, and every name comes back exactly.
    @Test func nameCacheNeverConfusesNames() {
        let names = NameCache()
        var rng = SplitMix64(seed: 9)
        let texts = (0..<2_000).map { i in "name-\(i % 700)-" + String(repeating: "é", count: Int.random(in: 0...20, using: &rng)) }
        for text in texts + texts.shuffled(using: &rng) {
            let decoded = Array(text.utf8).withUnsafeBytes { names.string($0) }
            #expect(decoded == text)
        }
        #expect(Array("".utf8).withUnsafeBytes { names.string($0) } == "")
    }

    @Test func checksumCoversTheSequenceNumber() throws {
        var writer = BinaryWriter()
        RecordCodec.encode(Self.events[0], seq: 1, time: Timestamp(microsecondsSince1970: 0), into: &writer)
        #expect(throws: RecordDecodingError.self) { try writer.bytes.withUnsafeBytes { try RecordCodec.decode($0, seq: 2) } }
    }

    @Test func everyFlippedByteIsDetected() throws {
        var writer = BinaryWriter()
        RecordCodec.encode(Self.events[0], seq: 5, time: Timestamp(microsecondsSince1970: 77), into: &writer)
        for i in writer.bytes.indices {
            var corrupt = writer.bytes
            corrupt[i] ^= 0x10
            #expect(throws: RecordDecodingError.self) { try corrupt.withUnsafeBytes { try RecordCodec.decode($0, seq: 5) } }
        }
    }

    @Test func varintsRoundTripAtEveryLengthWhereverTheyStand() throws {
        var values: [UInt64] = [0, 1, .max, .max - 1]
        for bits in stride(from: 7, through: 63, by: 7) { values += [1 << bits - 1, 1 << bits, 1 << bits + 1] }
        let signed: [Int64] = [0, -1, 1, .min, .max, -1_764_468_000_000_000, 1_764_468_000_000_000]
        // Followed by nothing (read byte by byte) and by padding (read as one word).
        for padding in [0, 16] {
            var writer = BinaryWriter()
            for value in values { writer.varint(value) }
            for value in signed { writer.signed(value) }
            for _ in 0..<padding { writer.byte(0) }
            try writer.bytes.withUnsafeBytes { (bytes) throws in
                var reader = BinaryReader(bytes)
                for value in values { #expect(try reader.varint() == value) }
                for value in signed { #expect(try reader.signed() == value) }
                #expect(reader.remaining == padding)
            }
        }
        // Too long, and cut short: errors, never wrong values.
        for bad: [UInt8] in [Array(repeating: 0xFF, count: 10) + [0x01], Array(repeating: 0x80, count: 9) + [0x02],
                             [0x80, 0x80], Array(repeating: 0xFF, count: 12)] {
            bad.withUnsafeBytes { bytes in
                var reader = BinaryReader(bytes)
                #expect(throws: RecordDecodingError.self) { try reader.varint() }
            }
        }
    }

    @Test func truncatedRecordsAreErrorsNotCrashes() throws {
        var writer = BinaryWriter()
        RecordCodec.encode(Self.events[0], seq: 5, time: Timestamp(microsecondsSince1970: 77), into: &writer)
        for length in 0..<writer.bytes.count {
            let prefix = Array(writer.bytes[..<length])
            #expect(throws: RecordDecodingError.self) { try prefix.withUnsafeBytes { try RecordCodec.decode($0, seq: 5) } }
        }
    }

    @Test func crc32cMatchesTheKnownCheckValue() {
        let bytes = Array("123456789".utf8)
        #expect(bytes.withUnsafeBytes { CRC32C.checksum($0) } == 0xE306_9283)
        let split = bytes.withUnsafeBytes { raw in
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[4...]), continuing: CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[..<4])))
        }
        #expect(split == 0xE306_9283)
        #expect(bytes.withUnsafeBytes { CRC32C.softwareChecksum($0) } == 0xE306_9283)
    }

    /// The hardware path (where this CPU has one) and the tables agree on every length and
    /// alignment, including the tails shorter than a word.
    @Test func crc32cHardwareAndSoftwareAgree() {
        var rng = SplitMix64(seed: 3)
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &rng) }
        bytes.withUnsafeBytes { raw in
            for start in 0..<9 {
                for end in stride(from: start, through: raw.count, by: 7) {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<end])
                    #expect(CRC32C.checksum(slice, continuing: 0x1234_5678) == CRC32C.softwareChecksum(slice, continuing: 0x1234_5678))
                }
            }
        }
    }

    @Test(arguments: [
        (#"{"type":"x"}"#, "event needs a non-empty string \"stream\""),
        (#"{"stream":"s","type":"x","origin":""}"#, "origin \"\" must be 1 to 64 bytes without control characters"),
        (#"{"stream":"s","type":"x","colour":1}"#, "unknown key \"colour\" in event"),
        (#"{"stream":"s","type":"x","writes":[{"path":"a..b"}]}"#, "write path \"a..b\": column 3: expected a key"),
        (#"{"stream":"s","type":"x","time":"noon"}"#, "\"time\" noon: expected YYYY-MM-DDTHH:MM:SS, an optional fraction, then Z or ±HH:MM"),
        (#"[1]"#, "event must be a JSON object, not array"),
        (#"{"stream":"s","type":"x","cause":{"id":"p","step":"3"}}"#, "cause step must be an integer, 0 or more, written without a fraction or exponent"),
        (#"{"stream":"s","type":"x","cause":{"id":"p","step":3.5}}"#, "cause step must be an integer, 0 or more, written without a fraction or exponent"),
        (#"{"stream":"s","type":"x","cause":{"id":"p","step":1e3}}"#, "cause step must be an integer, 0 or more, written without a fraction or exponent"),
        (#"{"stream":"s","type":"x","time":"2016-12-31T23:59:60Z"}"#, "\"time\" 2016-12-31T23:59:60Z: second 60 is a leap second, which the log's clock does not have"),
        (#"{"stream":"s","type":"x","cause":{"id":"p","step":-1}}"#, "cause step must be an integer, 0 or more, written without a fraction or exponent"),
    ])
    func importRejectsBadRecordsWithAReason(_ json: String, _ message: String) throws {
        do {
            _ = try ImportedEvent(json: try StateValue(json: json))
            Issue.record("accepted \(json)")
        } catch {
            #expect("\(error)" == message)
        }
    }
}

/// An event's version: stored only when it is not 1, so version-1 records keep format 2's bytes.
@Suite struct EventVersionTests {
    @Test func versionOneIsStoredAsBeforeAndAnyOtherAfterTheOutcome() throws {
        let time = Timestamp(microsecondsSince1970: 1_764_468_340_123_456)
        let plain = Event(stream: "s", type: "t", payload: ["a": 1])
        var versioned = plain
        versioned.version = 3
        let one = EventRecord.storedBytes(of: plain, seq: 1, time: time)
        let three = EventRecord.storedBytes(of: versioned, seq: 1, time: time)
        // The outcome byte gains its flag, and the version follows it: one byte more.
        #expect(three.count == one.count + 1)
        let record = try three.withUnsafeBytes { try EventRecord(storedBytes: $0, seq: 1) }
        #expect(record.event.version == 3 && record.event.payload == ["a": 1])
    }

    @Test func aFlaggedVersionOfOneIsDamage() throws {
        let time = Timestamp(microsecondsSince1970: 0)
        var writer = BinaryWriter()
        var event = Event(stream: "s", type: "t")
        event.version = 2
        RecordCodec.encode(event, seq: 1, time: time, into: &writer)
        // Rewrite the version 2 as 1 (never written: version 1 is stored without the flag) and re-seal.
        var bytes = Array(writer.bytes.dropLast(4))
        let at = try #require(bytes.lastIndex(of: 2))
        bytes[at] = 1
        var sealed = BinaryWriter()
        bytes.withUnsafeBytes { sealed.raw($0) }
        RecordCodec.withKey(1) { _ = sealed.appendChecksum(from: 0, prefix: $0) }
        #expect(throws: RecordDecodingError.self) { try sealed.bytes.withUnsafeBytes { try EventRecord(storedBytes: $0, seq: 1) } }
    }

    @Test(arguments: [0, -1, Int(UInt32.max) + 1])
    func aVersionOutsideItsRangeIsRefusedOnAppend(_ version: Int) throws {
        let log = try TemporaryEventStore()
        var event = Event(stream: "s", type: "t")
        event.version = version
        #expect(throws: EventStoreError.limitExceeded("the event's version is \(version); a version is 1 to 4294967295")) {
            try log.store.append(event)
        }
        #expect(try log.store.lastSeq() == 0)
    }
}
