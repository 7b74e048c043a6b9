import CCurl
import Foundation

/// One HTTP GET, made synchronously on the caller's thread through libcurl, its body handed
/// over chunk by chunk as it arrives so that a large body is never held in memory.
///
/// Every way a request can end badly, whatever the server or the network does (a connection
/// closed mid-headers, bytes that are not HTTP, a body that does not decode), is a
/// `HTTPFetchError` with a one-line reason; nothing a server sends can end the process.
/// A URL's credentials (its userinfo, and query values named like secrets) never appear in
/// an error: see ``redacted(_:)``.
package struct HTTPFetch: Sendable {
    /// The longest the server may stay silent (connecting, or between two chunks), in seconds.
    package var idleTimeout: Double
    /// The longest the requests made with this value may take in all, redirects included, in
    /// seconds, counted from when it was made: one value used for several requests (an
    /// update's assets) bounds them together.
    package let totalTimeout: Double
    /// When `totalTimeout` runs out.
    package let deadline: ContinuousClock.Instant
    /// Asked while a request waits or streams (at least once a second): `true` stops it with
    /// ``HTTPFetchError/cancelled``.
    package var isCancelled: @Sendable () -> Bool = { false }

    /// The most redirects one request follows.
    package static let maxRedirects = 10

    package init(idleTimeout: Double = 10, totalTimeout: Double = 3_600) {
        self.idleTimeout = idleTimeout
        self.totalTimeout = totalTimeout
        deadline = .now + .seconds(totalTimeout)
    }

    /// The status and headers (names lowercased; repeated ones joined with ", ") of a response.
    package struct Response: Sendable {
        package var status: Int
        package var headers: [String: String]
        package var contentType: String? { headers["content-type"] }
    }

    /// GETs `url` with `headers`, calling `head` once with the final response's status and
    /// headers (throw from it to stop before the body) and `body` with each chunk of the body
    /// as it arrives, decoded when the server compressed it (throw from it to stop).
    ///
    /// Redirects (301, 302, 303, 307, 308) to http or https URLs are followed, at most
    /// ``maxRedirects``; an `Authorization` header is dropped at the first hop to another
    /// origin (scheme, host and port) and never sent back.
    package func get(_ url: URL, headers: [String: String] = [:], head: (Response) throws -> Void = { _ in },
                     body: (Data) throws -> Void) throws(HTTPFetchError) -> Response {
        if let problem = Self.problem(with: url) { throw .badURL(problem) }
        for (name, value) in headers where !Self.isHeader(name: name, value: value) {
            throw .badURL("the header \(Self.quoted(name)) cannot be sent: a name must be a token and a value one line")
        }
        let transfer = try Transfer()
        let origin = Self.origin(of: url)
        var url = url
        var headers = headers
        for _ in 0...Self.maxRedirects {
            let hop = withoutActuallyEscaping(head) { head in
                withoutActuallyEscaping(body) { body in
                    Result { () throws(HTTPFetchError) in
                        try transfer.perform(url, headers: headers, idleTimeout: idleTimeout, totalTimeout: totalTimeout,
                                             deadline: deadline, isCancelled: isCancelled, head: head, body: body)
                    }
                }
            }
            switch try hop.get() {
            case .response(let response):
                return response
            case .redirect(let next):
                if let problem = Self.problem(with: next) { throw .transport("\(Self.server(of: url)) redirected to a URL that cannot be fetched: \(problem)") }
                if Self.origin(of: next) != origin { headers = headers.filter { $0.key.lowercased() != "authorization" } }
                url = next
            }
        }
        throw .transport("\(Self.server(of: url)) redirected more than \(Self.maxRedirects) times")
    }

    /// Why `url` cannot be fetched (not http or https, no host, a port outside 1…65535), or `nil`.
    package static func problem(with url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return "not an http or https URL: \(redacted(url))" }
        guard let host = url.host, !host.isEmpty else { return "no host in \(redacted(url))" }
        if let port = url.port, !(1...65_535).contains(port) { return "port \(port) is outside 1…65535 in \(redacted(url))" }
        return nil
    }

    /// Scheme, host and port: where credentials may go.
    package static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// `url` as it may be recorded or shown: a userinfo (`user:password@`) and the values of
    /// query parameters named like credentials (`token`, `key`, `secret`, `password`,
    /// `signature`, `auth`, `credential`, …, in any case, also inside longer names such as
    /// `access_token` or `X-Amz-Signature`) are replaced by `REDACTED`. Everything else is
    /// kept as it was written.
    package static func redacted(_ url: URL) -> String { redacted(url.absoluteString) }

    /// `text` with the credentials of the URL it holds replaced, as ``redacted(_:)-(URL)``;
    /// text that is not a URL with an authority is returned as it is.
    package static func redacted(_ text: String) -> String {
        guard var components = URLComponents(string: text) else { return text }
        var changed = false
        if components.percentEncodedUser != nil || components.percentEncodedPassword != nil {
            components.percentEncodedUser = "REDACTED"
            components.percentEncodedPassword = nil
            changed = true
        }
        if let items = components.percentEncodedQueryItems {
            components.percentEncodedQueryItems = items.map { item in
                guard item.value != nil, isCredentialName(item.name) else { return item }
                changed = true
                return URLQueryItem(name: item.name, value: "REDACTED")
            }
        }
        return changed ? components.string ?? text : text
    }

    private static let credentialWords = ["token", "key", "secret", "password", "passwd", "pwd", "signature", "sig", "auth", "credential", "session"]

    private static func isCredentialName(_ name: String) -> Bool {
        let lowered = (name.removingPercentEncoding ?? name).lowercased()
        return credentialWords.contains { lowered.contains($0) }
    }

    /// GETs `url` and returns its body whole, refusing one larger than `maxBytes`.
    package func data(_ url: URL, headers: [String: String] = [:], maxBytes: Int) throws(HTTPFetchError) -> (Response, Data) {
        var data = Data()
        do {
            let response = try get(url, headers: headers) { chunk in
                guard data.count + chunk.count <= maxBytes else { throw HTTPFetchError.tooLarge(maxBytes) }
                data.append(chunk)
            }
            return (response, data)
        } catch .stopped(let limit as HTTPFetchError) {
            throw limit
        }
    }

    /// `host:port` (the port when the URL gives one), for messages.
    static func server(of url: URL) -> String {
        guard let host = url.host else { return redacted(url) }
        let shown = host.contains(":") ? "[\(host)]" : host
        return url.port.map { "\(shown):\($0)" } ?? shown
    }

    /// A header name that is an RFC 9110 token, and a value without a line break or NUL: what
    /// can travel as one header line and nothing more.
    static func isHeader(name: String, value: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains($0) }
            && !value.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0x00 }
    }

    static func quoted(_ text: String) -> String {
        "\"" + text.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? String($0) : $0.escaped(asASCII: true) }.joined() + "\""
    }
}

/// Why a fetch failed, in one line.
package enum HTTPFetchError: Error, CustomStringConvertible {
    case badURL(String)
    /// The server stayed silent for longer than the idle timeout, in seconds.
    case timedOut(Double)
    /// The whole request took longer than the total timeout, in seconds.
    case deadlineExceeded(Double)
    case transport(String)
    case tooLarge(Int)
    /// `isCancelled` said so.
    case cancelled
    /// The caller's `head` or `body` closure threw.
    case stopped(any Error)

    package var description: String {
        switch self {
        case .badURL(let problem): problem
        case .timedOut(let seconds): "timed out (no answer within \(Self.format(seconds)) s)"
        case .deadlineExceeded(let seconds): "timed out (not done within \(Self.format(seconds)) s in all)"
        case .transport(let reason): reason
        case .tooLarge(let limit): "the response is larger than \(limit) bytes"
        case .cancelled: "cancelled"
        case .stopped(let error): "\(error)"
        }
    }

    private static func format(_ seconds: Double) -> String { seconds.formatted(.number.precision(.fractionLength(0...1))) }
}

/// One libcurl easy handle, reused across the hops of a request (so a redirect to the same
/// server reuses its connection), and the state its callbacks share with the caller's thread
/// during one `curl_easy_perform`. Every callback runs on that thread, inside the call.
private final class Transfer {
    enum Hop {
        case response(HTTPFetch.Response)
        case redirect(URL)
    }

    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    private let handle: UnsafeMutableRawPointer
    private let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    // The hop being performed.
    private var status = 0
    private var headers: [String: String] = [:]
    /// The final response, once its headers ended; `nil` while they have not.
    private var response: HTTPFetch.Response?
    /// A redirect's headers ended: its body is not the caller's.
    private var redirecting = false
    /// Why a callback stopped the transfer.
    private var failure: HTTPFetchError?
    private var lastHeard = ContinuousClock.now
    private var idleLimit = Duration.zero
    private var idleTimeout = 0.0
    private var totalTimeout = 0.0
    private var deadline = ContinuousClock.now
    private var isCancelled: @Sendable () -> Bool = { false }
    private var head: (HTTPFetch.Response) throws -> Void = { _ in }
    private var body: (Data) throws -> Void = { _ in }

    init() throws(HTTPFetchError) {
        guard Self.initialized, let handle = curl_easy_init() else { throw .transport("libcurl could not be started") }
        self.handle = handle
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        let context = Unmanaged.passUnretained(self).toOpaque()
        var set = CURLE_OK
        func check(_ code: CURLcode) { if set == CURLE_OK { set = code } }
        check(eventlog_curl_set_pointer(handle, CURLOPT_ERRORBUFFER, errorText))
        check(eventlog_curl_set_long(handle, CURLOPT_NOSIGNAL, 1))
        check(eventlog_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        // Decoded as the server encoded it (gzip, deflate, and what else this libcurl knows).
        check(eventlog_curl_set_string(handle, CURLOPT_ACCEPT_ENCODING, ""))
        check(eventlog_curl_set_long(handle, CURLOPT_BUFFERSIZE, 256 << 10))
        check(eventlog_curl_set_write_callback(handle, CURLOPT_HEADERFUNCTION, { bytes, size, count, context in
            Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().received(header: bytes, count: size * count)
        }))
        check(eventlog_curl_set_pointer(handle, CURLOPT_HEADERDATA, context))
        check(eventlog_curl_set_write_callback(handle, CURLOPT_WRITEFUNCTION, { bytes, size, count, context in
            Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().received(body: bytes, count: size * count)
        }))
        check(eventlog_curl_set_pointer(handle, CURLOPT_WRITEDATA, context))
        check(eventlog_curl_set_long(handle, CURLOPT_NOPROGRESS, 0))
        check(eventlog_curl_set_progress_callback(handle, { context, _, _, _, _ in
            Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().shouldStop() ? 1 : 0
        }))
        check(eventlog_curl_set_pointer(handle, CURLOPT_XFERINFODATA, context))
        guard set == CURLE_OK else {
            curl_easy_cleanup(handle)
            errorText.deallocate()
            throw .transport("libcurl refused an option: \(String(cString: curl_easy_strerror(set)))")
        }
    }

    deinit {
        curl_easy_cleanup(handle)
        errorText.deallocate()
    }

    /// One GET of `url`: the final response, or where it redirects.
    func perform(_ url: URL, headers requestHeaders: [String: String], idleTimeout: Double, totalTimeout: Double,
                 deadline: ContinuousClock.Instant, isCancelled: @escaping @Sendable () -> Bool,
                 head: @escaping (HTTPFetch.Response) throws -> Void, body: @escaping (Data) throws -> Void) throws(HTTPFetchError) -> Hop {
        (status, headers, response, redirecting, failure) = (0, [:], nil, false, nil)
        (self.idleTimeout, self.totalTimeout, self.deadline, self.head, self.body) = (idleTimeout, totalTimeout, deadline, head, body)
        self.isCancelled = isCancelled
        idleLimit = .milliseconds(Int64((idleTimeout * 1_000).rounded(.up)))
        lastHeard = .now
        defer { (self.head, self.body) = ({ _ in }, { _ in }) }

        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        for (name, value) in requestHeaders.sorted(by: { $0.key < $1.key }) {
            // "Name;" is how libcurl sends a header with an empty value ("Name:" removes it).
            list = curl_slist_append(list, value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        let remaining = deadline - .now
        guard remaining > .zero else { throw .deadlineExceeded(totalTimeout) }
        _ = eventlog_curl_set_string(handle, CURLOPT_URL, url.absoluteString)
        _ = eventlog_curl_set_pointer(handle, CURLOPT_HTTPHEADER, list)
        _ = eventlog_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(idleTimeout * 1_000)))
        // A backstop: the progress callback holds the deadline to the millisecond it can.
        _ = eventlog_curl_set_long(handle, CURLOPT_TIMEOUT_MS, max(1, Int(Self.milliseconds(remaining))))
        errorText[0] = 0
        let code = curl_easy_perform(handle)
        _ = eventlog_curl_set_pointer(handle, CURLOPT_HTTPHEADER, nil)
        if let failure { throw failure }
        guard code == CURLE_OK else { throw error(code, url: url) }
        if redirecting {
            var location: UnsafeMutablePointer<CChar>?
            guard eventlog_curl_get_string(handle, CURLINFO_REDIRECT_URL, &location) == CURLE_OK, let location,
                  let next = URL(string: String(cString: location)) else {
                throw .transport("\(HTTPFetch.server(of: url)) sent a redirect without a location that can be followed")
            }
            return .redirect(next)
        }
        guard let response else { throw .transport("\(HTTPFetch.server(of: url)) closed the connection before its headers ended") }
        return .response(response)
    }

    /// `duration` in whole milliseconds, rounded up: libcurl's timer never fires before the deadline.
    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000 + (duration.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    }

    /// What a failed `curl_easy_perform` means, in one line.
    private func error(_ code: CURLcode, url: URL) -> HTTPFetchError {
        let server = HTTPFetch.server(of: url)
        let detail = errorText[0] == 0 ? String(cString: curl_easy_strerror(code)) : String(cString: errorText)
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            // libcurl's own timers: the whole request's (set to the deadline), or connecting's
            // (the idle timeout), which can only fire well before the deadline.
            return deadline - ContinuousClock.now < .milliseconds(100) ? .deadlineExceeded(totalTimeout) : .timedOut(idleTimeout)
        case CURLE_COULDNT_CONNECT: return .transport("cannot connect to \(server) (\(detail))")
        case CURLE_COULDNT_RESOLVE_HOST: return .transport("cannot find host \(server)")
        case CURLE_GOT_NOTHING: return .transport("\(server) closed the connection without answering")
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE:
            return .transport("the connection to \(server) was lost (\(detail))")
        case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            return .transport("\(server) did not answer in HTTP (\(detail))")
        case CURLE_BAD_CONTENT_ENCODING:
            return .transport("\(server) sent a body that does not decode as its content-encoding says (\(detail))")
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE:
            return .transport("the TLS connection to \(server) failed: \(detail)")
        default:
            return .transport("\(server): \(detail)")
        }
    }

    // MARK: Callbacks (return what libcurl wants: the count taken, or 0 / non-zero to stop)

    private func received(header bytes: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        lastHeard = .now
        guard let bytes else { return count }
        let line = String(decoding: UnsafeRawBufferPointer(start: bytes, count: count), as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            // A new response begins (after a 1xx, or the next hop): its own status and headers.
            let fields = line.split(separator: " ", maxSplits: 2)
            status = fields.count > 1 ? Int(fields[1]) ?? 0 : 0
            headers = [:]
        } else if line == "\r\n" || line == "\n" {
            guard status >= 200 else { return count } // an interim answer; the real one follows
            if [301, 302, 303, 307, 308].contains(status), headers["location"] != nil {
                redirecting = true
                return count
            }
            let ended = HTTPFetch.Response(status: status, headers: headers)
            response = ended
            do { try head(ended) } catch {
                failure = .stopped(error)
                return 0
            }
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        return count
    }

    private func received(body bytes: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        lastHeard = .now
        guard !redirecting, count > 0, let bytes else { return count }
        guard response != nil else {
            failure = .transport("the server sent a body before its headers ended")
            return 0
        }
        do { try body(Data(bytes: bytes, count: count)) } catch {
            failure = .stopped(error)
            return 0
        }
        return count
    }

    private func shouldStop() -> Bool {
        let now = ContinuousClock.now
        if isCancelled() {
            failure = .cancelled
        } else if now >= deadline {
            failure = .deadlineExceeded(totalTimeout)
        } else if now - lastHeard > idleLimit {
            failure = .timedOut(idleTimeout)
        }
        return failure != nil
    }
}
