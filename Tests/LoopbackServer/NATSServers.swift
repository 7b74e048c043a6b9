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
        /// Where the node's log (its stderr) stood when it was last started: what follows is
        /// that run's.
        var logOffset: UInt64 = 0
    }

    /// A node that exited before it became ready.
    private struct EarlyExit: Error {
        var index: Int
        var message: String
        /// Whether its log says a port was taken ("address already in use").
        var portTaken: Bool
    }

    private var nodes: [Node]
    private let directory: String
    /// The largest message a node takes (its `max_payload`); `nil` for nats-server's 1 MiB.
    private let maxPayload: Int?

    /// How long a node may take to answer once started: a wait, not a measure (a loaded
    /// machine starts it slowly).
    static let readinessWait = 60
    /// How many times the nodes are started when one finds a port of its taken.
    static let startAttempts = 5

    /// Starts `count` nodes (1, or 3 for a cluster) and waits (up to 60 s a node) until
    /// JetStream answers on every one. A node that finds one of its ports taken (another
    /// process bound it since it was chosen) gets fresh ones, and the nodes start again, a few
    /// times; a node that exits otherwise is an error at once, with the end of its log.
    /// `maxPayload` sets the largest message the nodes take, headers included.
    public init(count: Int = 1, maxPayload: Int? = nil) throws {
        directory = NSTemporaryDirectory() + "eventlog-nats-\(UUID().uuidString)"
        self.maxPayload = maxPayload
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        nodes = []
        for index in 0..<count {
            let ports = try Self.freePorts(3, besides: nodes.flatMap { [$0.port, $0.clusterPort, $0.monitorPort] })
            nodes.append(Node(name: "n\(index)", port: ports[0], clusterPort: ports[1], monitorPort: ports[2]))
        }
        var attempt = 1
        while true {
            do {
                for index in nodes.indices { try start(index) }
                for index in nodes.indices { try waitUntilReady(index) }
                return
            } catch let exit as EarlyExit where exit.portTaken && attempt < Self.startAttempts {
                // Every node again, on a fresh store: the others' routes name the new cluster port.
                for index in nodes.indices {
                    kill(index)
                    try? FileManager.default.removeItem(atPath: directory + "/" + nodes[index].name)
                }
                let others = nodes.indices.filter { $0 != exit.index }.flatMap { [nodes[$0].port, nodes[$0].clusterPort, nodes[$0].monitorPort] }
                let ports = try Self.freePorts(3, besides: others + [nodes[exit.index].port, nodes[exit.index].clusterPort, nodes[exit.index].monitorPort])
                nodes[exit.index].port = ports[0]
                nodes[exit.index].clusterPort = ports[1]
                nodes[exit.index].monitorPort = ports[2]
                attempt += 1
            } catch let exit as EarlyExit {
                throw LoopbackServerError(message: exit.message)
            }
        }
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

    /// Starts node `index` again on its ports and store, and waits (up to 60 s) until it
    /// answers; a node that exits meanwhile is an error at once, with the end of its log.
    public func restart(_ index: Int) throws {
        kill(index)
        try start(index)
        do { try waitUntilReady(index) } catch let exit as EarlyExit { throw LoopbackServerError(message: exit.message) }
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
        if let maxPayload {
            // No flag sets it: a configuration file does.
            let config = directory + "/" + node.name + ".conf"
            try "max_payload: \(maxPayload)\n".write(toFile: config, atomically: true, encoding: .utf8)
            arguments += ["-c", config]
        }
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        // The node's log, kept across its restarts, in the directory that goes with the servers.
        let log = logPath(index)
        let fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw LoopbackServerError(message: "cannot open \(log): \(String(cString: strerror(errno)))") }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        nodes[index].logOffset = UInt64(lseek(fd, 0, SEEK_END))
        process.standardError = handle
        try process.run()
        nodes[index].process = process
    }

    /// Where node `index` writes its log (its stderr).
    private func logPath(_ index: Int) -> String { directory + "/" + nodes[index].name + ".log" }

    /// The log node `index` wrote since it was last started.
    private func logOfThisRun(_ index: Int) -> String {
        guard let handle = FileHandle(forReadingAtPath: logPath(index)) else { return "" }
        defer { try? handle.close() }
        try? handle.seek(toOffset: nodes[index].logOffset)
        return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
    }

    /// The last lines of the log node `index` wrote since it was last started, to quote.
    private func endOfLog(_ index: Int) -> String {
        let lines = logOfThisRun(index).split(separator: "\n", omittingEmptySubsequences: true).suffix(12)
        return lines.isEmpty ? "(its log \(logPath(index)) is empty)" : "the end of its log \(logPath(index)):\n" + lines.joined(separator: "\n")
    }

    /// Polls the node's `/healthz` until JetStream is current (a cluster has elected its
    /// leader). Throws `EarlyExit` at once when any started node has exited (a cluster's node
    /// would wait for it in vain), and an error when the node does not answer within 60 s.
    private func waitUntilReady(_ index: Int) throws {
        let deadline = Date().addingTimeInterval(TimeInterval(Self.readinessWait))
        while Date() < deadline {
            for other in nodes.indices {
                guard let process = nodes[other].process, !process.isRunning else { continue }
                process.waitUntilExit()
                nodes[other].process = nil
                let how = process.terminationReason == .uncaughtSignal ? "was killed by signal \(process.terminationStatus)"
                    : "exited with status \(process.terminationStatus)"
                throw EarlyExit(index: other, message: "nats-server \(nodes[other].name) \(how) before it became ready; \(endOfLog(other))",
                                portTaken: logOfThisRun(other).contains("address already in use"))
            }
            if let data = Self.get("/healthz", port: nodes[index].monitorPort), String(decoding: data, as: UTF8.self).contains("\"ok\"") { return }
            usleep(100_000)
        }
        throw LoopbackServerError(message: "nats-server \(nodes[index].name) did not become ready within \(Self.readinessWait) s; \(endOfLog(index))")
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

    /// `count` distinct TCP ports on loopback, none in `besides`, that were free a moment ago:
    /// below the kernel's ephemeral range when it leaves room (`ip_local_port_range`), so that
    /// no outgoing connection of another test can take one that a killed node must get back
    /// on `restart`; from the kernel (port 0) otherwise.
    static func freePorts(_ count: Int, besides taken: [Int]) throws -> [Int] {
        var ports: [Int] = []
        let lowest = 20_000
        let ephemeral = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
            .flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } } ?? 0
        if ephemeral - lowest >= 1_000 {
            var tries = 0
            while ports.count < count, tries < 1_000 {
                tries += 1
                let port = Int.random(in: lowest..<ephemeral)
                if !taken.contains(port), !ports.contains(port), Self.binds(port) { ports.append(port) }
            }
        }
        while ports.count < count {
            let port = try Self.kernelPort()
            if !taken.contains(port), !ports.contains(port) { ports.append(port) }
        }
        return ports
    }

    /// Whether a TCP socket can be bound to `port` on 127.0.0.1 now (it is closed again).
    static func binds(_ port: Int) -> Bool {
        bound(to: port) != nil
    }

    /// A TCP port on loopback the kernel gave, free a moment ago (in the ephemeral range).
    static func kernelPort() throws -> Int {
        guard let port = bound(to: 0) else { throw LoopbackServerError(message: "no free port on loopback") }
        return port
    }

    /// Binds a TCP socket to `port` on 127.0.0.1 (0: any), closes it, and returns the port it
    /// had, or `nil` when it could not be bound.
    private static func bound(to port: Int) -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }
}
