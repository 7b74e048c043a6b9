import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// One HTTP GET, made synchronously through `URLSession`, its body handed over chunk by chunk
/// as it arrives so that a large body is never held in memory. Every way it can fail is a
/// `HTTPFetchError` with a one-line reason.
package struct HTTPFetch: Sendable {
    /// The longest the server may stay silent (connecting, or between two chunks), in seconds.
    package var idleTimeout: Double
    /// The longest the whole request may take, in seconds.
    package var totalTimeout: Double

    package init(idleTimeout: Double = 10, totalTimeout: Double = 3_600) {
        self.idleTimeout = idleTimeout
        self.totalTimeout = totalTimeout
    }

    /// The status and headers (names lowercased) of a response.
    package struct Response: Sendable {
        package var status: Int
        package var headers: [String: String]
        package var contentType: String? { headers["content-type"] }
    }

    /// GETs `url` with `headers`, calling `head` once with the response's status and headers
    /// (throw from it to stop before the body) and `body` with each chunk of the body as it
    /// arrives (throw from it to stop). Redirects are followed by `URLSession`.
    package func get(_ url: URL, headers: [String: String] = [:], head: (Response) throws -> Void = { _ in },
                     body: (Data) throws -> Void) throws(HTTPFetchError) -> Response {
        if let problem = Self.problem(with: url) { throw .badURL(problem) }
        // URLSession knows its schemes in lowercase only.
        var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        components?.scheme = url.scheme?.lowercased()
        var request = URLRequest(url: components?.url ?? url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = idleTimeout
        configuration.timeoutIntervalForResource = totalTimeout
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let receiver = Receiver(origin: Self.origin(of: url))
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: configuration, delegate: receiver, delegateQueue: queue)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: request).resume()
        // The caller's closures run on this thread: the delegate only hands events over.
        var response: Response?
        // URLSession does not hold to `timeoutIntervalForResource` on Linux: the deadline is kept here.
        let deadline = DispatchTime.now() + totalTimeout
        while true {
            guard let item = receiver.next(before: deadline) else {
                receiver.cancel(session)
                throw .timedOut(totalTimeout)
            }
            switch item {
            case .head(let received):
                response = received
                do { try head(received) } catch { receiver.cancel(session); throw .stopped(error) }
            case .chunk(let data):
                do { try body(data) } catch { receiver.cancel(session); throw .stopped(error) }
            case .finished(let error):
                if let error { throw HTTPFetchError(error, url: url, idleTimeout: idleTimeout) }
                guard let response else { throw .transport("\(url.host ?? "the server") sent no response") }
                return response
            }
        }
    }

    /// Why `url` cannot be fetched (not http or https, no host, a port outside 1…65535), or `nil`.
    package static func problem(with url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return "not an http or https URL: \(url.absoluteString)" }
        guard let host = url.host, !host.isEmpty else { return "no host in \(url.absoluteString)" }
        if let port = url.port, !(1...65_535).contains(port) { return "port \(port) is outside 1…65535 in \(url.absoluteString)" }
        return nil
    }

    /// Scheme, host and port: where credentials may go.
    package static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    /// GETs `url` and returns its body whole, refusing one larger than `maxBytes`.
    package func data(_ url: URL, headers: [String: String] = [:], maxBytes: Int) throws(HTTPFetchError) -> (Response, Data) {
        var data = Data()
        let response = try get(url, headers: headers) { chunk in
            guard data.count + chunk.count <= maxBytes else { throw HTTPFetchError.tooLarge(maxBytes) }
            data.append(chunk)
        }
        return (response, data)
    }
}

/// Why a fetch failed, in one line.
package enum HTTPFetchError: Error, CustomStringConvertible {
    case badURL(String)
    case timedOut(Double)
    case transport(String)
    case tooLarge(Int)
    /// The caller's `head` or `body` closure threw.
    case stopped(any Error)

    init(_ error: any Error, url: URL, idleTimeout: Double) {
        let server = url.host.map { host in url.port.map { "\(host):\($0)" } ?? host } ?? url.absoluteString
        guard let urlError = error as? URLError else { self = .transport("\(server): \(error.localizedDescription)"); return }
        switch urlError.code {
        case .timedOut: self = .timedOut(idleTimeout)
        case .cannotConnectToHost: self = .transport("cannot connect to \(server) (connection refused)")
        case .cannotFindHost, .dnsLookupFailed: self = .transport("cannot find host \(server)")
        case .networkConnectionLost: self = .transport("the connection to \(server) was lost")
        case .notConnectedToInternet: self = .transport("no network to reach \(server)")
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid:
            self = .transport("the TLS connection to \(server) failed: \(urlError.localizedDescription)")
        default: self = .transport("\(server): \(urlError.localizedDescription)")
        }
    }

    package var description: String {
        switch self {
        case .badURL(let problem): problem
        case .timedOut(let seconds): "timed out (no answer within \(seconds.formatted(.number.precision(.fractionLength(0...1)))) s)"
        case .transport(let reason): reason
        case .tooLarge(let limit): "the response is larger than \(limit) bytes"
        case .stopped(let error): "\(error)"
        }
    }
}

/// Turns `URLSession`'s delegate calls, on its queue, into a sequence the caller's thread
/// waits on. At most `window` chunks wait for the caller: past that the delegate queue waits
/// too, so a caller slower than the network holds the delivery back instead of buffering.
private final class Receiver: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    static let window = 64

    enum Item {
        case head(HTTPFetch.Response)
        case chunk(Data)
        case finished((any Error)?)
    }

    /// The first request's origin: a redirect elsewhere loses its `Authorization` header.
    private let origin: String
    private let items = Mutex<[Item]>([])
    private let available = DispatchSemaphore(value: 0)
    /// Created empty and filled: libdispatch traps when a semaphore is released holding less
    /// than it was created with, as this one does when a fetch stops early.
    private let space = DispatchSemaphore(value: 0)
    private let cancelled = Atomic<Bool>(false)

    init(origin: String) {
        self.origin = origin
        super.init()
        for _ in 0..<Self.window { space.signal() }
    }

    private func push(_ item: Item) {
        items.withLock { $0.append(item) }
        available.signal()
    }

    /// The next item, or `nil` when none came before `deadline`.
    func next(before deadline: DispatchTime) -> Item? {
        guard available.wait(timeout: deadline) == .success else { return nil }
        let item = items.withLock { $0.removeFirst() }
        if case .chunk = item { space.signal() }
        return item
    }

    func cancel(_ session: URLSession) {
        cancelled.store(true, ordering: .relaxed)
        space.signal() // a delivery waiting for room goes on, and drops its chunk
        session.invalidateAndCancel()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        let http = response as? HTTPURLResponse
        var headers: [String: String] = [:]
        for (name, value) in http?.allHeaderFields ?? [:] {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        push(.head(HTTPFetch.Response(status: http?.statusCode ?? 0, headers: headers)))
        completionHandler(cancelled.load(ordering: .relaxed) ? .cancel : .allow)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        var request = request
        if let url = request.url, HTTPFetch.origin(of: url) != origin { request.setValue(nil, forHTTPHeaderField: "Authorization") }
        completionHandler(request)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard !cancelled.load(ordering: .relaxed) else { return }
        space.wait()
        guard !cancelled.load(ordering: .relaxed) else { return }
        push(.chunk(data))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        push(.finished(error))
    }
}
