import EventLog
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `view --serve`: the page over HTTP at `/`, and at `/events` the events committed after it
/// as server-sent events, from any process. Each event stream ends after a second without an
/// event and the page reconnects from the last event it has (`Last-Event-ID`), so nothing is
/// missed and a headless browser's virtual time can move on. On a loopback address, requests
/// must name this server in their `Host` (a page elsewhere cannot read the log through a name
/// of its own that resolves here); bound to another address, it answers any name.
struct ViewServer: Sendable {
    /// The page, built once when the server starts.
    let page: [UInt8]
    /// The log whose new events `/events` streams.
    let store: EventStore
    /// The newest event the page holds: `/events` starts after it unless the request says otherwise.
    let after: UInt64
    /// The `Host` values a request may carry: the address and port it listens on, and
    /// `localhost`'s; `nil` for any.
    let hosts: Set<String>?

    /// How long an event stream waits for an event before it ends (the page reconnects at once).
    static let idleSeconds = 1.0

    /// Listens on `address` (IPv4) and `port` (0: one the system picks) for `store`, serving `page`.
    /// - Returns: The server and the listening socket, with the port it got.
    /// - Throws: ``CLIError`` (exit 2) for an address that is not IPv4, (exit 3) when it cannot listen.
    static func listen(address: String, port: UInt16, page: String, store: EventStore, after: UInt64) throws(CLIError) -> (server: ViewServer, socket: Int32, port: UInt16) {
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        guard inet_pton(AF_INET, address, &socketAddress.sin_addr) == 1 else {
            throw CLIError.usage("--bind takes an IPv4 address such as 127.0.0.1 or 0.0.0.0, not \"\(address)\"")
        }
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard listener >= 0, bound == 0, Glibc.listen(listener, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            if listener >= 0 { close(listener) }
            throw CLIError.unavailable("cannot listen on \(address):\(port): \(reason)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let actual = UInt16(bigEndian: socketAddress.sin_port)
        let loopback = address.hasPrefix("127.")
        let server = ViewServer(page: Array(page.utf8), store: store, after: after,
                                hosts: loopback ? ["\(address):\(actual)", "localhost:\(actual)", "127.0.0.1:\(actual)"] : nil)
        return (server, listener, actual)
    }

    /// Answers each connection on a thread of its own, until the process ends (Ctrl-C).
    /// - Throws: ``CLIError`` (exit 3) when accepting fails.
    func serve(_ listener: Int32) throws(CLIError) -> Never {
        // A browser that goes away mid-answer must end that answer, not the server.
        signal(SIGPIPE, SIG_IGN)
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                throw CLIError.unavailable("cannot accept connections: \(String(cString: strerror(errno)))")
            }
            Thread.detachNewThread { [self] in
                answer(connection)
                close(connection)
            }
        }
    }

    /// One request: the page, the event stream, or an error status.
    private func answer(_ connection: Int32) {
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let request = Request(reading: connection) else { return respond(connection, 400, "Bad Request") }
        guard request.method == "GET" else { return respond(connection, 405, "Method Not Allowed") }
        if let hosts, !hosts.contains(request.headers["host"] ?? "") {
            return respond(connection, 421, "Misdirected Request: this server answers for \(hosts.sorted().joined(separator: ", "))")
        }
        switch request.path {
        case "/":
            _ = send(connection, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(page.count)\r\n"
                     + "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n")
            _ = page.withUnsafeBytes { send(connection, $0) }
        case "/events":
            let from = request.headers["last-event-id"].flatMap(UInt64.init) ?? request.query["after"].flatMap(UInt64.init) ?? after
            stream(connection, after: from)
        default:
            respond(connection, 404, "Not Found")
        }
    }

    /// The events after `seq` as they commit, one `id:`/`data:` message each (the page's JSON
    /// of the event), until a second passes without one or the reader goes.
    private func stream(_ connection: Int32, after seq: UInt64) {
        guard send(connection, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
                   + "retry: 1000\n\n") else { return }
        var quietSince = Date()
        try? store.follow(after: seq, stop: { Date().timeIntervalSince(quietSince) > Self.idleSeconds }) { records in
            quietSince = Date()
            let messages = records.map { "id: \($0.seq)\ndata: \(ViewPage.event($0).json())\n\n" }.joined()
            return send(connection, messages)
        }
    }

    private func respond(_ connection: Int32, _ status: Int, _ text: String) {
        let body = text + "\n"
        _ = send(connection, "HTTP/1.1 \(status) \(text.prefix { $0 != ":" })\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body)
    }

    private func send(_ connection: Int32, _ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { send(connection, $0) }
    }

    /// Sends every byte; `false` when the reader has gone.
    private func send(_ connection: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = Glibc.send(connection, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }
}

/// The parts of an HTTP request the server reads: its method, path, query and headers
/// (names lower-cased).
private struct Request {
    var method: String
    var path: String
    var query: [String: String]
    var headers: [String: String]

    /// Reads the request line and headers (at most 16 KiB); `nil` for anything else.
    init?(reading connection: Int32) {
        var bytes: [UInt8] = []
        while !bytes.suffix(4).elementsEqual([13, 10, 13, 10]) {
            var byte: UInt8 = 0
            guard recv(connection, &byte, 1, 0) == 1, bytes.count < 16_384 else { return nil }
            bytes.append(byte)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let lines = text.components(separatedBy: "\r\n")
        let words = lines[0].split(separator: " ")
        guard words.count == 3, words[2].hasPrefix("HTTP/1.") else { return nil }
        method = String(words[0])
        let target = words[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        path = String(target[0])
        query = [:]
        for pair in target.dropFirst().first?.split(separator: "&") ?? [] {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { query[String(parts[0])] = String(parts[1]) }
        }
        headers = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }
}
