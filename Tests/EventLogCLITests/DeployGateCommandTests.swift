import EventLog
import EventLogTesting
import Foundation
import LoopbackServer
import Testing

/// `eventlog deploy gate`: a rollout halted by what the shipped logs of the installs that took
/// the update say, against nats-server on loopback and a server directory.
@Suite(.serialized) struct DeployGateCommandTests {
    let dir = TemporaryDirectory("deploy-gate")
    var server: String { dir.file("server") }
    var gateLog: String { dir.file("gate.lmdb") }

    /// An install's log: it runs `v1`, then (with `takes`) takes `v2`, and (with `rollsBack`)
    /// rolls back to `v1` (its fifth event, when it took `v2`); then one event more. Ships it
    /// and returns its log id.
    func install(_ index: Int, takes: Bool, rollsBack: Bool, servers: String) throws -> String {
        var phase: String?, working: String?
        var lines: [String] = []
        func event(_ type: String, working newWorking: String? = nil, phase newPhase: String) {
            var writes = [#"{"path":"deploy.phase"\#(phase.map { #","old":"\#($0)""# } ?? ""),"new":"\#(newPhase)"}"#]
            if let newWorking, newWorking != working {
                writes.append(#"{"path":"deploy.workingUpdate"\#(working.map { #","old":"\#($0)""# } ?? ""),"new":"\#(newWorking)"}"#)
                working = newWorking
            }
            phase = newPhase
            lines.append(#"{"stream":"install","type":"\#(type)","origin":"test","writes":[\#(writes.joined(separator: ","))]}"#)
        }
        event("didReloadWebView", working: "v1", phase: "launched")
        event("launchConfirmed", phase: "confirmed")
        if takes {
            event("didReloadWebView", working: "v2", phase: "launched")
            event("launchConfirmed", phase: "confirmed")
        }
        if rollsBack { event("rolledBack", working: "v1", phase: "rolledBack") }
        event("noNewDeploy", phase: "upToDate")
        let db = dir.file("install-\(index).lmdb")
        let imported = eventlog(["import", "-", "--db", db], stdin: lines.joined(separator: "\n") + "\n")
        #expect(imported.code == 0, "\(imported.err)")
        #expect(eventlog(["ship", "--servers", servers, "--db", db]).code == 0)
        return try #require(try StateValue(json: eventlog(["info", "--json", "--db", db]).out)["logId"]?.stringValue)
    }

    func publish(_ id: String, _ extra: [String] = []) throws {
        let bundle = dir.file("bundle-\(id)")
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data(id.utf8).write(to: URL(fileURLWithPath: bundle + "/index.html"))
        let published = eventlog(["deploy", "publish", bundle, "--server-dir", server, "--runtime-version", "1", "--id", id] + extra)
        #expect(published.code == 0, "\(published.err)")
    }

    func gate(_ servers: String, maxShare: String = "30", where predicate: String = #"deploy.phase == "rolledBack""#, _ extra: [String] = []) -> CommandOutcome {
        eventlog(["deploy", "gate", "v2", "--servers", servers, "--server-dir", server, "--runtime-version", "1",
                  "--where", predicate, "--max-share", maxShare, "--db", gateLog] + extra)
    }

    var rollout: String? { try? String(contentsOfFile: server + "/updates/1/rollout", encoding: .utf8) }

    /// Ten installs: five took v2, and two of those rolled back (40%); one that never took it
    /// rolled back too, and is not counted. Within 50% the rollout goes on; over 30% it is
    /// halted to 0%, naming the two logs and their first bad events; again, it says it was
    /// already halted and changes nothing. Each decision is an event of the gate's log.
    @Test func aRolloutIsHaltedWhenMoreThanTheShareOfItsInstallsRolledBack() throws {
        let nats = try NATSServers()
        var rolledBack: [String] = []
        for index in 0..<10 {
            let takes = index < 5, rollsBack = index < 2 || index == 9
            let id = try install(index, takes: takes, rollsBack: rollsBack, servers: nats.urls)
            if takes && rollsBack { rolledBack.append(id) }
        }
        try publish("v1")
        try publish("v2", ["--rollout", "10"])
        let before = rollout

        let kept = gate(nats.urls, maxShare: "50%")
        #expect(kept.code == 0, "\(kept.err)")
        #expect(kept.out.hasSuffix("2 of 5 installs that took update v2 reached deploy.phase == \"rolledBack\" (40.0%, within the 50% allowed): the rollout stays at 10%\n"),
                "\(kept.out)")
        #expect(rollout == before)

        let halted = gate(nats.urls, maxShare: "30", ["--json"])
        #expect(halted.code == 1, "\(halted.err)")
        let decision = try StateValue(json: halted.out)
        #expect(decision["halted"] == true && decision["percent"] == 0 && decision["wasPercent"] == 10 && decision["took"] == 5 && decision["reached"] == 2)
        #expect(Set(decision["reachedBy"]?.arrayValue?.compactMap { $0["logId"]?.stringValue } ?? []) == Set(rolledBack))
        // Each install rolled back at its fifth event, having taken v2 at its third.
        #expect(decision["reachedBy"]?.arrayValue?.allSatisfy { $0["took"] == 3 && $0["reached"] == 5 } == true, "\(halted.out)")
        let served = try StateValue(json: try #require(rollout))
        #expect(served["update"] == "v2" && served["percent"] == 0, "\(String(describing: rollout))")

        let again = gate(nats.urls, maxShare: "30")
        #expect(again.code == 1)
        #expect(again.out.hasSuffix("(40.0%, more than the 30% allowed): the rollout was already halted (0%)\n"), "\(again.out)")
        for id in rolledBack { #expect(again.out.contains("\(id)  took it at event 3; first bad event 5, "), "\(again.out)") }

        // A fleet that cannot be read is exit 3, never the 1 of a tripped gate.
        let unread = gate(nats.urls, ["--stream", "NOPE"])
        #expect(unread.code == 3 && unread.err.hasPrefix("Error: cannot read stream NOPE"), "\(unread.err)")

        let log = eventlog(["log", "--json", "--db", gateLog])
        let types = log.out.split(separator: "\n").compactMap { try? StateValue(json: String($0))["type"]?.stringValue }
        #expect(types == ["rolloutKept", "rolloutHalted", "rolloutHalted"], "\(log.out)")
        let state = try StateValue(json: eventlog(["snapshot", "3", "--json", "--db", gateLog]).out)
        #expect(state["deployGate"]?["v2"]?["percent"] == 0, "\(state)")
        #expect(eventlog(["replay", "--verify", "--db", gateLog]).code == 0)
    }

    /// Bad input is exit 2 and an unreachable server exit 3, each before the rollout or the
    /// gate's log changes; an update that is not rolling out is refused by name.
    @Test func badInputAndAnUnreachableFleetChangeNothing() throws {
        try publish("v1")
        try publish("v2", ["--rollout", "10"])
        let before = rollout
        let nowhere = "nats://127.0.0.1:1"
        for (refused, message) in [(gate(nowhere, maxShare: "101"), "Error: --max-share must be a whole percent, 0 to 100, not \"101\""),
                                   (gate(nowhere, where: "deploy.phase =="), "Error: --where: column 16: expected a value after '=='"),
                                   (gate(nowhere, ["--logs", "nope"]), "Error: --logs: \"nope\" is not a log id")] {
            #expect(refused.code == 2 && refused.err.hasPrefix(message), "\(message): \(refused.err)")
        }
        let other = eventlog(["deploy", "gate", "v1", "--servers", nowhere, "--server-dir", server, "--runtime-version", "1",
                              "--where", "deploy.phase == \"rolledBack\"", "--max-share", "2", "--db", gateLog])
        #expect(other.code == 2 && other.err.hasPrefix("Error: update v1 is not rolling out on channel default of runtime version 1 in \(server)"), "\(other.err)")
        let missing = eventlog(["deploy", "gate", "v2", "--servers", nowhere, "--server-dir", server, "--runtime-version", "1", "--max-share", "2", "--db", gateLog])
        #expect(missing.code == 2 && missing.err.hasPrefix("Error: deploy gate needs --where EXPR"), "\(missing.err)")
        let unreachable = gate(nowhere, ["--timeout", "1"])
        #expect(unreachable.code == 3, "\(unreachable.err)")
        // A rollout whose update is no longer published could not be halted: refused first.
        try FileManager.default.removeItem(atPath: server + "/updates/1/v2.json")
        let unpublished = gate(nowhere)
        #expect(unpublished.code == 2 && unpublished.err.hasPrefix("Error: no update v2 is published for runtime version 1 in \(server)"), "\(unpublished.err)")
        #expect(rollout == before)
        #expect(!FileManager.default.fileExists(atPath: gateLog))
    }
}
