import DemoMessenger
import Deploys
import Effects
import EventLog
import UpdatePrompts

/// The fuzz targets, by name. Each takes one input of any bytes, must never crash on it, and
/// traps (`precondition`) when a property it checks fails, so that libFuzzer reports the input.
let targets: [String: @Sendable ([UInt8]) -> Void] = [
    "record": fuzzRecord,
    "json": fuzzJSON,
    "path": fuzzPath,
    "predicate": fuzzPredicate,
    "router": fuzzRouter,
    "capture": fuzzCapture,
    "import": fuzzImport,
    "manifest": fuzzManifest,
    "version": fuzzVersion,
]

/// The stored-record decoder, and the value decoders beneath it. The input is a record's
/// stored bytes without their trailing CRC-32C: the target appends the right one (for seq 1),
/// so that mutations reach the decoder instead of all failing the checksum. The bytes alone
/// also go to `StateValue(encoded:)` and, with the checksum, to `StateValue(checkedEncoding:key:)`.
/// Checks that whatever decodes re-encodes to bytes that decode to the same encoding again.
func fuzzRecord(_ input: [UInt8]) {
    let seq: UInt64 = 1
    let key = withUnsafeBytes(of: seq.bigEndian) { Array($0) }
    let checksum = input.withUnsafeBytes { body in key.withUnsafeBytes { CRC32C.checksum(body, continuing: CRC32C.checksum($0)) } }
    let stored = input + withUnsafeBytes(of: checksum.littleEndian) { Array($0) }
    if let value = try? input.withUnsafeBytes({ bytes throws(RecordDecodingError) in try StateValue(encoded: bytes) }) {
        // Compared as bytes, not values: a NaN is not equal to itself.
        let again = value.encoded.withUnsafeBytes { try? StateValue(encoded: $0) }
        precondition(again?.encoded == value.encoded, "a decoded value does not re-encode to itself")
    }
    _ = stored.withUnsafeBytes { bytes in key.withUnsafeBytes { try? StateValue(checkedEncoding: bytes, key: $0) } }
    guard let record = try? stored.withUnsafeBytes({ bytes throws(RecordDecodingError) in try EventRecord(storedBytes: bytes, seq: seq) }) else { return }
    precondition(record.checksum == checksum, "the decoded checksum is not the stored one")
    let encoded = EventRecord.storedBytes(of: record.event, seq: seq, time: record.time)
    let again = encoded.withUnsafeBytes { try? EventRecord(storedBytes: $0, seq: seq) }
    precondition(again.map { EventRecord.storedBytes(of: $0.event, seq: seq, time: $0.time) } == encoded,
                 "a decoded record does not re-encode to itself")
}

/// The JSON parser. Checks that whatever parses prints, compact and pretty, as JSON that
/// parses back to the same value.
func fuzzJSON(_ input: [UInt8]) {
    guard let value = try? StateValue(jsonUTF8: input) else { return }
    precondition(try! StateValue(json: value.json()) == value, "compact JSON does not read back")
    precondition(try! StateValue(json: value.json(pretty: true)) == value, "pretty JSON does not read back")
}

/// The state path parser. Checks that a parsed path prints as text that parses back to it.
func fuzzPath(_ input: [UInt8]) {
    guard let path = try? StatePath(parsing: String(decoding: input, as: UTF8.self)) else { return }
    precondition((try? StatePath(parsing: path.description)) == path, "path \(path) does not read back")
}

/// A state with a little of everything for predicates to look at.
private let predicateState = try! StateValue(json: """
    {"messenger": {"selectedTab": "bots", "listFilter": null, "inThreadSearch": "failed build",
                   "expandedAvatar": "aria-7", "unread": 3, "ratio": 0.5, "muted": false},
     "navigation": {"path": ["list", "thread-aria-support"], "sheet": null},
     "objects": {"Post": {"id.with.dots": {"title": "Hello", "likes": 12, "tags": ["a", "b"]}}},
     "count": 10, "flag": true}
    """)

/// The predicate parser and evaluator. Checks that a predicate that parses can be negated
/// as `!(…)` (when that stays within the nesting bound) and then evaluates the other way.
func fuzzPredicate(_ input: [UInt8]) {
    let text = String(decoding: input, as: UTF8.self)
    guard let predicate = try? StatePredicate(parsing: text) else { return }
    let holds = predicate.evaluate(predicateState)
    if let negated = try? StatePredicate(parsing: "!(\(text))") {
        precondition(negated.evaluate(predicateState) == !holds, "!(…) does not negate the predicate")
    }
}

/// The `botmessages://` router. Checks that a URL that routes also plans, and that the
/// route's own URL routes back to the same route.
func fuzzRouter(_ input: [UInt8]) {
    let url = String(decoding: input, as: UTF8.self)
    guard let route = try? MessengerRouter.route(from: url) else { return }
    precondition((try? MessengerRouter.plan(for: url)) != nil, "\(url) routes but does not plan")
    let canonical = MessengerRouter.url(for: route)
    precondition((try? MessengerRouter.route(from: canonical)) == route, "\(canonical) does not route back to \(route)")
}

/// The capture-script parser, and the router for each URL a parsed script opens, as a run would.
func fuzzCapture(_ input: [UInt8]) {
    guard let script = try? CaptureScript(parsing: String(decoding: input, as: UTF8.self)) else { return }
    for line in script.lines {
        if case .open(let url) = line.instruction { _ = try? MessengerRouter.plan(for: url) }
    }
}

/// One line of a JSON-lines import. Checks that an event that imports survives both of the
/// log's forms: its stored bytes decode to the same event, and its export imports back the same.
func fuzzImport(_ input: [UInt8]) {
    guard let json = try? StateValue(jsonUTF8: input), let imported = try? ImportedEvent(json: json) else { return }
    let seq = imported.seq ?? 1
    let time = imported.time ?? Timestamp(microsecondsSince1970: 0)
    let stored = EventRecord.storedBytes(of: imported.event, seq: seq, time: time)
    guard let record = stored.withUnsafeBytes({ try? EventRecord(storedBytes: $0, seq: seq) }),
          record.event == imported.event, record.time == time else {
        preconditionFailure("an imported event does not read back from its stored bytes")
    }
    let reimported = (try? StateValue(json: record.jsonValue.json())).flatMap { try? ImportedEvent(json: $0) }
    precondition(reimported?.event == imported.event && reimported?.seq == seq && reimported?.time == time,
                 "an imported event's export does not import back")
}

/// A manifest answer, as a deploy server sends it: the first byte picks the content type (JSON,
/// or multipart/mixed with the boundary `b`), the rest is the body. Checks that a manifest that
/// reads writes out as JSON that reads back to the same manifest.
func fuzzManifest(_ input: [UInt8]) {
    guard let first = input.first else { return }
    let contentType = first & 1 == 0 ? "application/json" : "multipart/mixed; boundary=b"
    guard case .update(let manifest, _)? = try? ManifestAnswer(status: 200, contentType: contentType, body: Array(input.dropFirst())) else { return }
    let again = try? UpdateManifest(json: Array(manifest.json.json().utf8))
    precondition(again == manifest, "a manifest does not read back from its own JSON")
}

/// App versions: two texts split at the first newline. Checks that the order is total and
/// consistent: each equals itself, exactly one of <, ==, > holds, and equal versions hash alike.
func fuzzVersion(_ input: [UInt8]) {
    let text = String(decoding: input, as: UTF8.self)
    let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
    guard let a = AppVersion(parts[0]) else { return }
    precondition(a == a && !(a < a), "a version is not equal to itself")
    guard parts.count == 2, let b = AppVersion(parts[1]) else { return }
    precondition([a < b, a == b, b < a].filter { $0 }.count == 1, "\(a) and \(b) are not ordered one way")
    if a == b { precondition(a.hashValue == b.hashValue, "\(a) == \(b) but their hashes differ") }
}
