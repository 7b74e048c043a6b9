import EventLog
import Foundation

/// One message on a log's subject `eventlog.<log id>`: a run of the log's records in order,
/// each as stored (checksum included).
///
/// Its message id, `<log id>:<first>-<last>`, names the run, so that a retry is a duplicate
/// the stream drops. Its body is the message's ordinal among the log's messages (8 bytes,
/// little-endian, counting from 1: a subject holding fewer messages than its newest one's
/// ordinal lost some), then each record after its length (4 bytes, little-endian).
///
/// The first shippers sent one record per message, with id `<log id>:<seq>` and the record
/// alone as its body: such a message reads as a run of one, the subject's message `seq`.
struct Shipment {
    /// The seqs of the records it carries.
    let seqs: ClosedRange<UInt64>
    /// Which message of the log's subject it is, counting from 1.
    let ordinal: UInt64
    private let body: [UInt8]
    /// Where each record is in `body`, in seq order.
    private let spans: [Range<Int>]

    /// Bytes of a run's body besides its records: the ordinal, then a length per record.
    static let ordinalBytes = 8
    static let lengthBytes = 4

    /// Why a message on a log's subject is not a run of its records.
    struct Foreign: Error {
        var reason: String
    }

    /// The message id of the run `seqs` of `logID`.
    static func id(_ logID: UUID, _ seqs: ClosedRange<UInt64>) -> String {
        "\(logID.uuidString.lowercased()):\(seqs.lowerBound)-\(seqs.upperBound)"
    }

    /// The message id a first shipper gave record `seq` of `logID`.
    static func id(_ logID: UUID, seq: UInt64) -> String { "\(logID.uuidString.lowercased()):\(seq)" }

    /// The body of the log's message `ordinal`, carrying `records` in order.
    static func body<Records: Collection>(ordinal: UInt64, records: Records) -> [UInt8] where Records.Element == [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(ordinalBytes + records.reduce(0) { $0 + lengthBytes + $1.count })
        withUnsafeBytes(of: ordinal.littleEndian) { body += $0 }
        for record in records {
            withUnsafeBytes(of: UInt32(record.count).littleEndian) { body += $0 }
            body += record
        }
        return body
    }

    /// `message` read as a run of `logID`'s records.
    /// - Throws: `Foreign` when its id names no run of `logID`'s records (seqs run from 1 to
    ///   below `UInt64.max`, so that the seq after a run's last always exists), or its body does
    ///   not hold them as a shipper frames them (record checksums are not checked here).
    init(_ message: JetStream.Message, of logID: UUID) throws(Foreign) {
        try self.init(id: message.id, body: message.data, of: logID)
    }

    /// The message of id `id` and body `body` read as a run of `logID`'s records.
    init(id: String?, body: [UInt8], of logID: UUID) throws(Foreign) {
        guard let id else { throw Foreign(reason: "no message id") }
        guard let colon = id.lastIndex(of: ":"), UUID(uuidString: String(id[..<colon])) == logID else {
            throw Foreign(reason: "message id \(id)")
        }
        let name = id[id.index(after: colon)...]
        // Seqs as a shipper writes them: decimal digits without a sign or a leading zero.
        func seq(_ text: Substring) -> UInt64? {
            guard text.first != "0", text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
            return UInt64(text)
        }
        guard let dash = name.firstIndex(of: "-") else {
            guard let seq = seq(name), seq < .max else { throw Foreign(reason: "message id \(id)") }
            self.init(seqs: seq...seq, ordinal: seq, body: body, spans: [body.indices])
            return
        }
        guard let first = seq(name[..<dash]), let last = seq(name[name.index(after: dash)...]), first <= last, last < .max else {
            throw Foreign(reason: "message id \(id)")
        }
        guard body.count >= Self.ordinalBytes else { throw Foreign(reason: "a body too short for a run of records") }
        let ordinal = body.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        // Message k of a subject carries records from k on at the least.
        guard ordinal > 0, ordinal <= first else { throw Foreign(reason: "a run of records \(first)-\(last) that says it is message \(ordinal)") }
        var spans: [Range<Int>] = []
        var offset = Self.ordinalBytes
        while offset < body.count {
            guard body.count - offset >= Self.lengthBytes else { throw Foreign(reason: "a damaged run of records") }
            let length = body.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self))) }
            offset += Self.lengthBytes
            guard length <= body.count - offset else { throw Foreign(reason: "a damaged run of records") }
            spans.append(offset..<(offset + length))
            offset += length
        }
        guard UInt64(spans.count) == last - first + 1 else {
            throw Foreign(reason: "a run named \(first)-\(last) that carries \(spans.count) records")
        }
        self.init(seqs: first...last, ordinal: ordinal, body: body, spans: spans)
    }

    private init(seqs: ClosedRange<UInt64>, ordinal: UInt64, body: [UInt8], spans: [Range<Int>]) {
        self.seqs = seqs
        self.ordinal = ordinal
        self.body = body
        self.spans = spans
    }

    /// The stored bytes of record `seq`, which must be one of `seqs`.
    func record(_ seq: UInt64) -> ArraySlice<UInt8> {
        precondition(seqs.contains(seq), "record \(seq) is not in the run \(seqs)")
        return body[spans[Int(seq - seqs.lowerBound)]]
    }

    /// Each record with its seq, in order.
    var records: some Sequence<(seq: UInt64, bytes: ArraySlice<UInt8>)> {
        zip(seqs, spans).lazy.map { ($0, body[$1]) }
    }

    /// Why one of the records from `seq` on does not decode (its checksum, say); `nil` when
    /// they all do.
    func damage(from seq: UInt64) -> String? {
        for (recordSeq, bytes) in records where recordSeq >= seq {
            do { _ = try bytes.withUnsafeBytes { try EventStore.decode($0, seq: recordSeq) } } catch { return "\(error)" }
        }
        return nil
    }
}

extension EventStore {
    /// Record `seq` as stored, checksum included, or `nil` past the log's end.
    func storedRecord(_ seq: UInt64) throws -> [UInt8]? {
        var found: [UInt8]?
        try forEachStoredRecord(after: seq - 1, through: seq) { _, bytes in found = Array(bytes); return false }
        return found
    }

    /// Whether the log's record `seq` is `bytes`, byte for byte.
    func holds(_ seq: UInt64, _ bytes: ArraySlice<UInt8>) throws -> Bool {
        try storedRecord(seq).map { $0[...] == bytes } ?? false
    }

    /// The first seq of `run` whose record the log does not hold as the run carries it
    /// (another record, or none: the log ends before it); `nil` when it holds them all.
    func firstDifference(from run: Shipment) throws -> UInt64? {
        var expected = run.seqs.lowerBound
        var differs = false
        try forEachStoredRecord(after: expected - 1, through: run.seqs.upperBound) { seq, bytes in
            guard seq == expected, bytes.elementsEqual(run.record(seq)) else { differs = true; return false }
            expected += 1
            return true
        }
        return differs || expected <= run.seqs.upperBound ? expected : nil
    }
}
