import Foundation

/// `nats-server` with JetStream (Debian's `nats-server`), started by a test on loopback: one
/// server, or a cluster of three that replicates streams with RAFT. Each node stores in a
/// temporary directory of its own; all are killed and removed when the test lets go.
public final class NATSServers: @unchecked Sendable {
    private struct Node {
        var name: String
        var port: Int
        var clusterPort: Int
        var monitorPort: Int
        var process: Process?
    }

    private var nodes: [Node]
    private let directory: String

    /// Starts `count` nodes (1, or 3 for a cluster) and waits (up to 20 s) until JetStream
    /// answers on every one.
    public init(count: Int = 1) throws {
        directory = NSTemporaryDirectory() + "eventlog-nats-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        nodes = try (0..<count).map { index in
            Node(name: "n\(index)", port: try Self.freePort(), clusterPort: try Self.freePort(), monitorPort: try Self.freePort())
        }
        for index in nodes.indices { try start(index) }
        for index in nodes.indices { try waitUntilReady(index) }
    }

    deinit {
        for index in nodes.indices { kill(index) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Every node's client URL, comma-separated (what `--to` takes).
    public var urls: String { nodes.map { "nats://127.0.0.1:\($0.port)" }.joined(separator: ",") }

    /// One node's client URL.
    public func url(_ index: Int) -> String { "nats://127.0.0.1:\(nodes[index].port)" }

    /// Kills node `index` at once, as a crash would.
    public func kill(_ index: Int) {
        guard let process = nodes[index].process, process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        nodes[index].process = nil
    }

    /// Starts node `index` again on its ports and store, and waits until it answers.
    public func restart(_ index: Int) throws {
        kill(index)
        try start(index)
        try waitUntilReady(index)
    }

    /// The index of the node that leads `stream` in a cluster (its RAFT leader), from a live
    /// node's `/jsz`; `nil` when no node names one.
    public func leader(of stream: String) -> Int? {
        for node in nodes where node.process != nil {
            guard let data = Self.get("/jsz?streams=true", port: node.monitorPort),
                  let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                  let accounts = json["account_details"] as? [[String: Any]] else { continue }
            for account in accounts {
                for detail in account["stream_detail"] as? [[String: Any]] ?? [] where detail["name"] as? String == stream {
                    if let leader = (detail["cluster"] as? [String: Any])?["leader"] as? String {
                        return nodes.firstIndex { $0.name == leader }
                    }
                }
            }
        }
        return nil
    }

    /// Publishes `data` on `subject` through node 0 as any NATS client may (core NATS, no
    /// JetStream expectations), with header `Nats-Msg-Id` when `messageID` is given, and
    /// returns once the server has processed it (a PING answered after it). A stream whose
    /// subjects match stores it: how a test puts someone else's message on a log's subject.
    public func publish(_ data: [UInt8], on subject: String, messageID: String? = nil) throws {
        guard let fd = Self.connected(to: nodes[0].port, timeout: 5) else {
            throw LoopbackServerError(message: "cannot reach nats-server on port \(nodes[0].port)")
        }
        defer { close(fd) }
        var request = Array("CONNECT {\"verbose\":false,\"headers\":true}\r\n".utf8)
        if let messageID {
            let headers = Array("NATS/1.0\r\nNats-Msg-Id: \(messageID)\r\n\r\n".utf8)
            request += Array("HPUB \(subject) \(headers.count) \(headers.count + data.count)\r\n".utf8) + headers
        } else {
            request += Array("PUB \(subject) \(data.count)\r\n".utf8)
        }
        request += data + Array("\r\nPING\r\n".utf8)
        guard write(fd, request, request.count) == request.count else { throw LoopbackServerError(message: "cannot publish to nats-server") }
        var answer = ""
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while !answer.contains("PONG") {
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { throw LoopbackServerError(message: "nats-server did not answer the publish: \(answer)") }
            answer += String(decoding: buffer[..<count], as: UTF8.self)
            if answer.contains("-ERR") { throw LoopbackServerError(message: "nats-server refused the publish: \(answer)") }
        }
    }

    private func start(_ index: Int) throws {
        let node = nodes[index]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        var arguments = ["-js", "-sd", directory + "/" + node.name, "-a", "127.0.0.1", "-p", String(node.port),
                         "-m", String(node.monitorPort), "-n", node.name]
        if nodes.count > 1 {
            let routes = nodes.filter { $0.name != node.name }.map { "nats://127.0.0.1:\($0.clusterPort)" }.joined(separator: ",")
            arguments += ["--cluster_name", "eventlog", "--cluster", "nats://127.0.0.1:\(node.clusterPort)", "--routes", routes]
        }
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        nodes[index].process = process
    }

    /// Polls the node's `/healthz` until JetStream is current (a cluster has elected its leader).
    private func waitUntilReady(_ index: Int) throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let data = Self.get("/healthz", port: nodes[index].monitorPort), String(decoding: data, as: UTF8.self).contains("\"ok\"") { return }
            usleep(100_000)
        }
        throw LoopbackServerError(message: "nats-server \(nodes[index].name) did not become ready within 20 s")
    }

    /// The body of `GET path` from the monitoring port, over a plain socket (no URLSession,
    /// which can wait on the main thread's run loop), or `nil` when it does not answer.
    static func get(_ path: String, port: Int) -> Data? {
        guard let fd = connected(to: port, timeout: 2) else { return nil }
        defer { close(fd) }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard write(fd, request, request.count) == request.count else { return nil }
        var response = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            response.append(contentsOf: buffer[..<count])
        }
        guard let end = response.range(of: Data("\r\n\r\n".utf8)) else { return nil }
        return response[end.upperBound...]
    }

    /// A TCP socket connected to `port` on 127.0.0.1, whose reads give up after `timeout`
    /// seconds, or `nil` when nothing listens there.
    static func connected(to port: Int, timeout seconds: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { close(fd); return nil }
        return fd
    }

    /// `nats-server` from Debian (`/usr/sbin`), else from `PATH`.
    static var executable: String {
        FileManager.default.isExecutableFile(atPath: "/usr/sbin/nats-server") ? "/usr/sbin/nats-server" : "/usr/bin/nats-server"
    }

    /// A TCP port on loopback that was free a moment ago.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw LoopbackServerError(message: "no free port on loopback") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
