import CNATS
import Foundation

/// Why a fleet operation stopped, in one line, with the exit code it deserves.
public struct FleetError: Error, Sendable, CustomStringConvertible {
    /// Whether trying again may help.
    public enum Kind: Sendable {
        /// The server cannot be reached or did not answer in time (exit 3); a retry may work.
        case unavailable
        /// What the stream or the log holds is not what it must be: a gap, another log's
        /// records, a checksum that fails (exit 1).
        case refused
    }

    /// Whether trying again may help, and so the exit code.
    public let kind: Kind
    public let description: String

    init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// Runs `body` again while it fails for want of a server (a node down, a leader being
/// elected), for up to `seconds`; then the last failure stands.
func retryingWhileUnavailable<R>(for seconds: Double, _ body: () throws -> R) throws -> R {
    let deadline = Date().addingTimeInterval(seconds)
    while true {
        do {
            return try body()
        } catch let error as FleetError where error.kind == .unavailable && Date() < deadline {
            usleep(200_000)
        }
    }
}

/// A connection to NATS with JetStream, through nats.c (Debian's `libnats-dev`). Calls block
/// the calling thread; one value is used by one thread at a time.
final class JetStream {
    private var connection: OpaquePointer?
    private(set) var context: OpaquePointer?
    /// The servers, as given (`nats://host:port`, comma-separated for a cluster).
    let servers: String
    /// How long a request may wait for its answer, in milliseconds.
    let timeout: Int64

    /// Connects to one of `servers` (comma-separated); while connected, moves to another on
    /// losing it.
    init(servers: String, timeout: Double) throws(FleetError) {
        self.servers = servers
        self.timeout = Int64(timeout * 1_000)
        var options: OpaquePointer?
        try Self.check(natsOptions_Create(&options), "cannot set up a connection to \(servers)")
        defer { natsOptions_Destroy(options) }
        let list = servers.split(separator: ",").map { strdup(String($0)) }
        defer { list.forEach { free($0) } }
        var pointers = list.map { UnsafePointer<CChar>($0) }
        try Self.check(natsOptions_SetServers(options, &pointers, Int32(pointers.count)), "invalid server list \(servers)")
        _ = natsOptions_SetTimeout(options, self.timeout)
        _ = natsOptions_SetAllowReconnect(options, true)
        _ = natsOptions_SetMaxReconnect(options, 60)
        _ = natsOptions_SetReconnectWait(options, 250)
        try Self.check(natsConnection_Connect(&connection, options), "cannot reach \(servers)")
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.Wait = self.timeout
        try Self.check(natsConnection_JetStream(&context, connection, &jsOptions), "no JetStream at \(servers)")
    }

    deinit {
        jsCtx_Destroy(context)
        natsConnection_Destroy(connection)
    }

    /// Creates the stream of subjects `eventlog.>` when it is missing: file storage, with
    /// `replicas` copies. An existing stream is used as it is, once its configuration is
    /// found to keep every message it acknowledges (`StreamLimits.refuseDropping`).
    /// - Returns: The stream's limits, for the size of a message it takes.
    func ensureStream(_ name: String, replicas: Int) throws(FleetError) -> StreamLimits {
        if let limits = try existingStream(name) { return limits }
        let status = addStream(name) { config in
            config.Storage = js_FileStorage
            config.Replicas = Int64(replicas)
        }
        if status.status != NATS_OK {
            // Another shipper may have created it in the meantime (the server then says the
            // name exists, or, while the other's creation settles, that the subjects overlap):
            // it is read as any existing one. Overlapping another stream's subjects stays an error.
            let error = Self.error(status.status, status.code, "cannot create stream \(name) at \(servers)")
            guard [JSStreamNameExistErr, JSStreamSubjectOverlapErr].contains(status.code), let limits = try existingStream(name) else { throw error }
            return limits
        }
        return StreamLimits()
    }

    /// The limits of stream `name`, or `nil` when there is none.
    private func existingStream(_ name: String) throws(FleetError) -> StreamLimits? {
        var code = jsErrCode(0)
        var info: UnsafeMutablePointer<jsStreamInfo>?
        let found = js_GetStreamInfo(&info, context, name, nil, &code)
        defer { jsStreamInfo_Destroy(info) }
        if found == NATS_OK, let config = info?.pointee.Config { return StreamLimits(config.pointee) }
        guard code == JSStreamNotFoundErr else { throw Self.error(found, code, "cannot read stream \(name) at \(servers)") }
        return nil
    }

    /// Adds stream `name` of subjects `eventlog.>`, with JetStream's defaults as `configure`
    /// changes them (tests make streams with limits this way).
    func addStream(_ name: String, _ configure: (inout jsStreamConfig) -> Void) -> (status: natsStatus, code: jsErrCode) {
        var code = jsErrCode(0)
        var config = jsStreamConfig()
        jsStreamConfig_Init(&config)
        configure(&config)
        let status: natsStatus = name.withCString { cName in
            Subjects.all.withCString { cSubject in
                var subjects: [UnsafePointer<CChar>?] = [cSubject]
                return subjects.withUnsafeMutableBufferPointer { list in
                    config.Name = cName
                    config.Subjects = list.baseAddress
                    config.SubjectsLen = 1
                    var created: UnsafeMutablePointer<jsStreamInfo>?
                    defer { jsStreamInfo_Destroy(created) }
                    return js_AddStream(&created, context, &config, nil, &code)
                }
            }
        }
        return (status, code)
    }

    /// What a stream's configuration lets it remove of the messages it acknowledged, and the
    /// largest message it takes.
    struct StreamLimits {
        /// Why the stream may remove acknowledged messages, one phrase a reason; empty when it
        /// keeps them all.
        var dropping: [String] = []
        /// The largest message the stream takes, in bytes; `nil` for no limit of its own.
        var maxMessageSize: Int?

        init() {}

        init(_ config: jsStreamConfig) {
            if config.Retention != js_LimitsPolicy {
                dropping.append("it removes messages once consumers have them (\(config.Retention == js_InterestPolicy ? "interest" : "work-queue") retention)")
            }
            if config.MaxMsgsPerSubject > 0 {
                dropping.append("it keeps \(config.MaxMsgsPerSubject) messages per subject (max_msgs_per_subject), so only a log's newest \(config.MaxMsgsPerSubject) records")
            }
            if config.MaxAge > 0 { dropping.append("it removes messages older than \(config.MaxAge / 1_000_000_000) s (max_age)") }
            if config.Discard == js_DiscardOld {
                if config.MaxMsgs > 0 { dropping.append("it keeps \(config.MaxMsgs) messages (max_msgs) and drops the oldest beyond (discard old)") }
                if config.MaxBytes > 0 { dropping.append("it keeps \(config.MaxBytes) bytes (max_bytes) and drops the oldest beyond (discard old)") }
            }
            if config.AllowRollup { dropping.append("it lets a message purge a subject (allow_rollup_hdrs)") }
            if config.Storage == js_MemoryStorage { dropping.append("it keeps messages in memory only, lost when its servers stop (memory storage)") }
            maxMessageSize = config.MaxMsgSize > 0 ? Int(config.MaxMsgSize) : nil
        }

        /// Refuses a stream that may remove records it acknowledged, saying why and what to do.
        func refuseDropping(_ stream: String) throws(FleetError) {
            guard !dropping.isEmpty else { return }
            throw FleetError(.refused, "stream \(stream) would lose records it acknowledged: \(dropping.joined(separator: "; ")); "
                + "ship to a stream without these limits (--stream NAME creates one) or lift them; nothing was shipped")
        }
    }

    /// The largest message the server takes (its `max_payload`), headers included, in bytes.
    var maxPayload: Int { Int(natsConnection_GetMaxPayload(connection)) }

    /// The message at stream sequence `sequence`, or `nil` when the stream holds none there.
    func message(stream: String, sequence: UInt64) throws(FleetError) -> Message? {
        var message: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_GetMsg(&message, context, stream, sequence, nil, &code)
        if status == NATS_NOT_FOUND || code == JSNoMessageFoundErr { return nil }
        guard status == NATS_OK, let message else { throw Self.error(status, code, "cannot read message \(sequence) of \(stream) at \(servers)") }
        defer { natsMsg_Destroy(message) }
        return Message(message)
    }

    /// Removes the message at stream sequence `sequence`: only tests do, to be a stream that
    /// lost a record.
    func deleteMessage(stream: String, sequence: UInt64) throws(FleetError) {
        var code = jsErrCode(0)
        let status = js_DeleteMsg(context, stream, sequence, nil, &code)
        guard status == NATS_OK else { throw Self.error(status, code, "cannot delete message \(sequence) of \(stream)") }
    }

    /// The newest message on `subject`, or `nil` when it has none.
    func lastMessage(stream: String, subject: String) throws(FleetError) -> Message? {
        var message: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_GetLastMsg(&message, context, stream, subject, nil, &code)
        if status == NATS_NOT_FOUND || code == JSNoMessageFoundErr { return nil }
        guard status == NATS_OK, let message else { throw Self.error(status, code, "cannot read the last message of \(subject) at \(servers)") }
        defer { natsMsg_Destroy(message) }
        return Message(message)
    }

    /// Publishes `data` on `subject` with message id `id`, expecting the subject's newest
    /// message to be stream sequence `after` (0: no message; `nil`: any), and the message to be stored by
    /// `stream` when one is named (a stream of other subjects is an error, not another
    /// stream's message). Returns the stream sequence it got, and whether the stream already
    /// held a message of that id (a retry of a publish whose answer was lost, or another
    /// publisher's message of the same id: the stream checks the id before the sequence, so
    /// the caller compares what it holds).
    /// Throws `WrongLastSequence` when the subject's newest message is another: the caller
    /// asks the stream where it stands.
    func publish(_ data: UnsafeRawBufferPointer, subject: String, id: String, after: UInt64?,
                 stream: String? = nil) throws -> (sequence: UInt64, duplicate: Bool) {
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = timeout
        if after == 0 { options.ExpectNoMessage = true } else if let after { options.ExpectLastSubjectSeq = after }
        var ack: UnsafeMutablePointer<jsPubAck>?
        var code = jsErrCode(0)
        let status = id.withCString { cID in
            (stream ?? "").withCString { cStream in
                options.MsgId = cID
                if stream != nil { options.ExpectStream = cStream }
                return js_Publish(&ack, context, subject, data.baseAddress, Int32(data.count), &options, &code)
            }
        }
        defer { jsPubAck_Destroy(ack) }
        guard status == NATS_OK, let ack else {
            if code == JSStreamWrongLastSequenceErr { throw WrongLastSequence() }
            throw Self.error(status, code, "cannot publish \(id) to \(servers)")
        }
        return (ack.pointee.Sequence, ack.pointee.Duplicate)
    }

    /// The subjects of `stream` under `filter`, with how many messages each holds.
    func subjects(stream: String, filter: String) throws(FleetError) -> [(subject: String, messages: UInt64)] {
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = timeout
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let status = filter.withCString { cFilter in
            options.Stream.Info.SubjectsFilter = cFilter
            return js_GetStreamInfo(&info, context, stream, &options, &code)
        }
        defer { jsStreamInfo_Destroy(info) }
        guard status == NATS_OK, let info else { throw Self.error(status, code, "cannot read stream \(stream) at \(servers)") }
        guard let list = info.pointee.State.Subjects else { return [] }
        return (0..<Int(list.pointee.Count)).map { index in
            let entry = list.pointee.List[index]
            return (String(cString: entry.Subject), entry.Msgs)
        }
    }

    /// The messages of `subject` from stream sequence `start` on, in order, through an ordered
    /// consumer (the server skips the stream's other subjects).
    func messages(stream: String, subject: String, from start: UInt64) throws(FleetError) -> Subscription {
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        var subscription: OpaquePointer?
        var code = jsErrCode(0)
        let status = stream.withCString { cStream in
            options.Stream = cStream
            options.Ordered = true
            options.Config.DeliverPolicy = js_DeliverByStartSequence
            options.Config.OptStartSeq = max(1, start)
            return js_SubscribeSync(&subscription, context, subject, nil, &options, &code)
        }
        guard status == NATS_OK, let subscription else { throw Self.error(status, code, "cannot read \(subject) at \(servers)") }
        return Subscription(subscription, servers: servers)
    }

    /// A message as the fleet uses it: its data, its stream sequence and its message id.
    struct Message {
        var data: [UInt8]
        var sequence: UInt64
        var id: String?

        init(_ message: OpaquePointer) {
            let length = Int(natsMsg_GetDataLength(message))
            data = length == 0 ? [] : Array(UnsafeRawBufferPointer(start: natsMsg_GetData(message), count: length))
            var value: UnsafePointer<CChar>?
            id = natsMsgHeader_Get(message, "Nats-Msg-Id", &value) == NATS_OK ? value.map { String(cString: $0) } : nil
            sequence = natsMsg_GetSequence(message)
            if sequence == 0 {
                // Delivered by a consumer: the stream sequence is in its metadata.
                var metadata: UnsafeMutablePointer<jsMsgMetaData>?
                if natsMsg_GetMetaData(&metadata, message) == NATS_OK, let metadata {
                    sequence = metadata.pointee.Sequence.Stream
                    jsMsgMetaData_Destroy(metadata)
                }
            }
        }
    }

    /// The subject's newest message is not the one a publish expected.
    struct WrongLastSequence: Error {}

    /// An ordered consumer's messages, one at a time.
    final class Subscription {
        private let handle: OpaquePointer
        private let servers: String

        init(_ handle: OpaquePointer, servers: String) {
            self.handle = handle
            self.servers = servers
        }

        deinit {
            natsSubscription_Unsubscribe(handle)
            natsSubscription_Destroy(handle)
        }

        /// The next message, or `nil` when none came within `timeout` seconds.
        func next(timeout: Double) throws(FleetError) -> Message? {
            var message: OpaquePointer?
            let status = natsSubscription_NextMsg(&message, handle, Int64(timeout * 1_000))
            if status == NATS_TIMEOUT { return nil }
            guard status == NATS_OK, let message else { throw JetStream.error(status, jsErrCode(0), "the stream stopped delivering from \(servers)") }
            defer { natsMsg_Destroy(message) }
            return Message(message)
        }
    }

    /// Subjects: one per log for its records, and one beside it for the copies refused as forks.
    enum Subjects {
        static let prefix = "eventlog."
        static let all = "eventlog.>"
        static let forksSuffix = ".forks"
        static func of(_ logID: UUID) -> String { prefix + logID.uuidString.lowercased() }
        static func forks(of logID: UUID) -> String { of(logID) + forksSuffix }
        /// The log whose records `subject` carries, or whose forks it tells of.
        static func log(of subject: String) -> (logID: UUID, forks: Bool)? {
            let forks = subject.hasSuffix(forksSuffix)
            let name = subject.dropFirst(prefix.count).dropLast(forks ? forksSuffix.count : 0)
            guard subject.hasPrefix(prefix), let logID = UUID(uuidString: String(name)),
                  (forks ? Subjects.forks(of: logID) : Subjects.of(logID)) == subject else { return nil }
            return (logID, forks)
        }
    }

    private static func check(_ status: natsStatus, _ what: String) throws(FleetError) {
        guard status == NATS_OK else { throw error(status, jsErrCode(0), what) }
    }

    /// `what`, then nats.c's own words for it.
    static func error(_ status: natsStatus, _ code: jsErrCode, _ what: String) -> FleetError {
        var last = NATS_OK
        let detail = nats_GetLastError(&last).map { String(cString: $0) } ?? String(cString: natsStatus_GetText(status))
        let unavailable = [NATS_NO_SERVER, NATS_TIMEOUT, NATS_CONNECTION_CLOSED, NATS_CONNECTION_DISCONNECTED, NATS_IO_ERROR,
                           NATS_NO_RESPONDERS, NATS_STALE_CONNECTION].contains(status)
        let text = detail.isEmpty ? String(cString: natsStatus_GetText(status)) : detail
        return FleetError(unavailable ? .unavailable : .refused,
                          "\(what): \(text.split(separator: "\n").first.map(String.init) ?? text)" + (code.rawValue != 0 ? " (JetStream error \(code.rawValue))" : ""))
    }
}
