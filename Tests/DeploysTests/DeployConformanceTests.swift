@testable import Deploys
import EventLog
import EventLogTesting
import Foundation
import Testing

/// Rules of Expo Updates v1 (docs/pages/technical-specs/expo-updates-1.mdx) the client keeps,
/// against the update server on loopback, with the cases of Expo's own client tests
/// (expo-updates' ResponseHeaderDataSpec and SelectionPolicyFilterAwareSpec, in
/// ../shared/reference/conformance/expo/expo-updates-tests.json).
struct DeployConformanceTests {
    /// Expo's SFV cases: the supported types, and the kinds its client leaves out.
    @Test func structuredFieldsReadAsExposClientReadsThem() throws {
        let supported = try #require(StructuredFields.dictionary(#"string="string-0000", true=?1, false=?0, integer=47, decimal=47.5"#))
        #expect(supported.map(\.key) == ["string", "true", "false", "integer", "decimal"])
        #expect(supported.map(\.value) == ["string-0000", true, false, 47, 47.5])
        let others = try #require(StructuredFields.dictionary(#"branch-name="rollout-1", data=:w4ZibGV0w6ZydGUK:, list=(1 2)"#))
        #expect(others.map(\.key) == ["branch-name"] && others.map(\.value) == ["rollout-1"])
        // A bare key is true, parameters are ignored, a token reads as a string, the last of
        // two members wins, escapes are read.
        let more = try #require(StructuredFields.dictionary(#"sig, keyid="root";p=1, alg=rsa-v1_5-sha256, keyid="two", q="a\"b\\c""#))
        #expect(more.map(\.key) == ["sig", "alg", "keyid", "q"])
        #expect(more.map(\.value) == [true, "rsa-v1_5-sha256", "two", #"a"b\c"#])
        #expect(StructuredFields.dictionary("")?.isEmpty == true)
        for malformed in ["Upper=1", "a=", "a=\"unterminated", "a=1,", "a=1 b=2", "a=?2", "a=\"\u{7}\"", "a=1234567890123456", "=1"] {
            #expect(StructuredFields.dictionary(malformed) == nil, "\(malformed)")
        }
    }

    /// "The client MUST store [expo-server-defined-headers] until overwritten … and MUST
    /// include [them] in every subsequent update request": stored, kept across a response
    /// without the header, replaced by a newer dictionary.
    @Test func serverDefinedHeadersAreStoredSentAndReplaced() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1")
        try harness.serve(#"branch-name="rollout-1", n=3"#, as: "server-defined-headers")
        try client.check()
        #expect(try harness.deploy("serverDefinedHeaders") == ["branch-name": "rollout-1", "n": "3"])
        try harness.serve(nil, as: "server-defined-headers")
        try client.check()
        try harness.serve(#"branch-name="rollout-2""#, as: "server-defined-headers")
        try client.check()
        try client.check()
        let sent = try harness.manifestRequests()
        #expect(sent.count == 4)
        #expect(sent[0]["branch-name"] == nil)
        #expect(sent[1]["branch-name"] == "rollout-1" && sent[1]["n"] == "3")
        #expect(sent[2]["branch-name"] == "rollout-1" && sent[2]["n"] == "3", "kept across a response without the header")
        #expect(sent[3]["branch-name"] == "rollout-2" && sent[3]["n"] == nil, "replaced by the newer dictionary")
        // A server-defined header never replaces the protocol's own.
        try harness.serve(#"expo-platform="android""#, as: "server-defined-headers")
        try client.check()
        try client.check()
        #expect(try harness.manifestRequests().last?["expo-platform"] == "ios")
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// "MUST load the most recent update … filtered by manifest metadata": an update whose
    /// metadata contradicts the stored `expo-manifest-filters` is not taken (Expo's case:
    /// filters `branchname="rollout"`, an update of `branchName` `default`); one that lacks
    /// the field or matches it is.
    @Test func manifestFiltersKeepOutAnUpdateThatContradictsThem() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.serve(#"branchname="rollout""#, as: "manifest-filters")
        try publish(harness, id: "u-default", metadata: ["branchName": "default"])
        let before = try harness.store.lastSeq()
        #expect(try client.check() == nil)
        #expect(try harness.transitions(after: before) == ["checkStarted", "responseHeadersStored", "noNewDeploy"])
        let refused = try #require(try harness.store.record(try harness.store.lastSeq()))
        #expect(refused.event.payload["reason"] == "filteredOut" && refused.event.payload["filter"] == "branchName=default")
        #expect(try harness.deploy("manifestFilters") == ["branchname": "rollout"])
        try publish(harness, id: "u-rollout", metadata: ["branchName": "rollout"])
        #expect(try client.check()?.id == "u-rollout")
        try publish(harness, id: "u-plain", metadata: [:])
        #expect(try client.check()?.id == "u-plain")
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// Expo's client ignores a rollBackToEmbedded whose commitTime is before the launched
    /// update's (its case: the launched update a year newer); a newer rollback is followed.
    @Test func aRollbackMadeBeforeTheWorkingUpdateIsIgnored() throws {
        let harness = try DeployHarness()
        let client = try harness.client()
        try harness.publish(["index.html": "one"], id: "u1", createdAt: Timestamp(rfc3339: "2021-01-12T19:39:22.480Z")!)
        try client.deliver()
        try client.confirmLaunch()
        try harness.serve("rollBackToEmbedded", as: "updates/1.0/current")
        let current = harness.serverDirectory + "/updates/1.0/current"
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_578_857_962.48)], ofItemAtPath: current)  // 2020-01-12
        #expect(try client.check() == nil)
        let ignored = try #require(try harness.store.record(try harness.store.lastSeq()))
        #expect(ignored.event.type == "noNewDeploy" && ignored.event.payload["reason"] == "rollbackOlderThanWorking")
        #expect(try harness.deploy("workingUpdate") == "u1" && harness.workingFile() == "one")
        try FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: current)
        #expect(try client.check() == nil)
        #expect(try harness.deploy("workingUpdate") == nil && harness.deploy("phase") == "rolledBack")
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// The reference client's `expo-embedded-update-id`: sent with every request, and as
    /// `expo-current-update-id` while the embedded bundle runs, so that the update server
    /// (as Expo's reference server) answers a rollback to the embedded update with
    /// `noUpdateAvailable` once the app runs it, instead of rolling back again and again. An
    /// installed update is the current one; without the id, neither header names it.
    @Test func theEmbeddedUpdateIdIsSentAndEndsARollbackToIt() throws {
        let harness = try DeployHarness()
        let embedded = "D3A1F7C2-5B7E-4C1A-9E0B-2F6D8A4C1E3B"
        #expect(throws: DeployError.usage("the embedded update id must be a UUID, not \"embedded\"")) {
            try DeployTarget(runtimeVersion: "1.0", embeddedUpdateID: "embedded")
        }
        try harness.publish(["index.html": "one"], id: "u1")
        let client = try harness.client(embeddedUpdateID: embedded)
        try client.deliver()
        try client.confirmLaunch()
        try harness.serve("rollBackToEmbedded", as: "updates/1.0/current")
        #expect(try client.check() == nil)
        #expect(try harness.deploy("workingUpdate") == nil && harness.deploy("phase") == "rolledBack")
        let before = try harness.store.lastSeq()
        #expect(try client.check() == nil)
        #expect(try harness.transitions(after: before) == ["checkStarted", "noNewDeploy"])
        let sent = try harness.manifestRequests()
        #expect(sent.count == 3)
        #expect(sent.allSatisfy { $0["expo-embedded-update-id"] == .string(embedded.lowercased()) })
        #expect(sent.map { $0["expo-current-update-id"] } == [.string(embedded.lowercased()), "u1", .string(embedded.lowercased())])
        let plain = try DeployHarness()
        try plain.publish(["index.html": "one"], id: "u1")
        try plain.client().check()
        #expect(try plain.manifestRequests().allSatisfy { $0["expo-embedded-update-id"] == nil && $0["expo-current-update-id"] == nil })
        #expect(try harness.expectReplayAgrees().divergence == nil)
    }

    /// Publishes a one-page update and gives its manifest `metadata`, as a server would.
    private func publish(_ harness: DeployHarness, id: String, metadata: [String: String]) throws {
        try harness.publish(["index.html": id], id: id)
        let path = harness.serverDirectory + "/updates/1.0/\(id).json"
        guard case .object(var manifest) = try StateValue(json: String(contentsOfFile: path, encoding: .utf8)) else { return }
        var fields = StateObject()
        for (key, value) in metadata { fields[key] = .string(value) }
        manifest["metadata"] = .object(fields)
        try Data(StateValue.object(manifest).json().utf8).write(to: URL(fileURLWithPath: path))
    }
}
