import EventLog
import Foundation
import HTTPFetch

extension Origin {
    /// A deploy transition made by the deploy client: at launch, on entering the foreground,
    /// or by a manual call.
    public static let deploy: Origin = "deploy"
}

/// What the client does at launch (`deliver`) or on entering the foreground, as Stork's
/// behaviours: each one includes the ones before it.
public enum DeployBehavior: String, Sendable, CaseIterable {
    case none
    /// Ask the server whether a newer update exists.
    case checkNewDeploy
    /// And download it into holding; it is installed at the next launch (or by `install`).
    case downloadNewDeploy
    /// And install it into working and reload the web view now.
    case reloadNewDeploy
}

/// The deploy client of one app install: it checks for web bundles, downloads them into
/// holding, installs them into working and reloads, each transition an event of the `deploy`
/// stream (`DeployRules`). The app directory only changes by atomic renames
/// (`AppDirectory`); a new install stays pending until `confirmLaunch`, and a launch that
/// finds it still pending rolls back to the previous bundle. One client per app install, used
/// from one thread at a time.
public final class DeployClient {
    /// The log the `deploy` events are recorded in.
    public let store: EventStore
    /// The app directory the bundles are kept in; this client holds its lock.
    public let directory: AppDirectory
    /// Where updates come from.
    public let source: DeploySource
    /// Who this install is: the manifest request's runtime version, platform and token.
    public let target: DeployTarget
    /// Stork's defaults: at launch check, download, install and reload.
    public var launchBehavior = DeployBehavior.reloadNewDeploy
    /// Stork's default: on entering the foreground, check again once `foregroundCheckInterval` has passed.
    public var foregroundBehavior = DeployBehavior.checkNewDeploy
    /// One day, in microseconds of the store's clock.
    public var foregroundCheckInterval: Int64 = 86_400_000_000
    /// How long a server may stay silent, in seconds.
    public var timeout: Double = 30
    /// How long one exchange with the source may take in all, in seconds: a manifest request,
    /// or the download of every asset of an update. A server that trickles bytes without ever
    /// falling silent is cut off here, and the failure recorded.
    public var deadline: Double = 600
    /// The most bytes an update's assets may hold in all, decoded: a download passing it is
    /// refused at once (a small compressed answer can expand without end).
    public var maxUpdateBytes: Int64 = 1 << 30
    /// The certificates whose signatures this client requires (Expo code signing). Empty, the
    /// default: no `expo-expect-signature` is sent and nothing is checked. Not empty: every
    /// manifest and directive must be signed by one of them, or the check records
    /// `signatureInvalid` and nothing is downloaded. An app adds the ones it ships with
    /// `TrustedCertificates.trustShipped(in:)`.
    public var certificates = TrustedCertificates()

    /// CodePush's `rollbackRetryOptions`: an update rolled back after a launch the app never
    /// confirmed is offered again once `delay` has passed since its last rollback, at most
    /// `maxRetries` times. `nil`, the default: never again.
    public var rejectedRetry: RejectedRetry?
    /// Capgo's `appReadyTimeout`, in microseconds of the log's clock: a launch the app
    /// confirms later than this after the web view loaded it counts as failed. `nil`, the
    /// default: a confirmation is never too late.
    public var readyTimeout: Int64?

    /// When and how often a rejected update may be offered again.
    public struct RejectedRetry: Sendable, Hashable {
        /// How long after a rollback the update may be offered again, in microseconds of the log's clock.
        public var delay: Int64
        /// How many times it may be offered again in all (CodePush's `maxRetryAttempts`).
        public var maxRetries: Int

        /// A retry `delay` after each rollback, `maxRetries` times at most.
        public init(delay: Int64, maxRetries: Int = 1) {
            self.delay = delay
            self.maxRetries = maxRetries
        }
    }

    /// Asked between the chunks of a download and while the source is silent (at least once a
    /// second): `true` stops the download, which takes back what it created and records
    /// `downloadFailed` with the reason `cancelled`. The CLI sets it on SIGINT, SIGTERM and SIGHUP.
    public var isCancelled: @Sendable () -> Bool = { false }

    /// A download records progress at most once per this many percent.
    public static let progressStep: Int64 = 5

    /// The steps of an install, in order; `installStepHook` runs after each (tests kill the
    /// process there to prove a crash between any two leaves a whole working directory).
    public enum InstallStep: String, Sendable, CaseIterable {
        case recordedWillUpdate, wrotePending, switchedWorking, removedHolding, recordedDidUpdate
    }
    package var installStepHook: (InstallStep) -> Void = { _ in }
    /// The steps of a reap, in order; `reapStepHook` runs after each, as `installStepHook` does.
    public enum ReapStep: String, Sendable, CaseIterable {
        case recordedReap, removedUpdate, recordedReapFinished
    }
    package var reapStepHook: (ReapStep) -> Void = { _ in }
    /// `link(2)`, through which a download links the assets it reuses (tests make it fail,
    /// as another file system or a refusing one would, to prove the copy that follows).
    package var hardLink: (_ existing: String, _ new: String) -> Int32 = { link($0, $1) }

    /// The manifest the last check found, for `download`.
    private var checked: (manifest: UpdateManifest, assetHeaders: [String: [String: String]])?

    /// A client with Stork's default behaviours; nothing is recorded or fetched until a
    /// lifecycle call.
    public init(store: EventStore, directory: AppDirectory, source: DeploySource, target: DeployTarget) {
        self.store = store
        self.directory = directory
        self.source = source
        self.target = target
    }

    /// A fetch whose deadline starts now: one per exchange with the source.
    private func startFetching() -> HTTPFetch {
        var fetch = HTTPFetch(idleTimeout: timeout, totalTimeout: deadline)
        fetch.isCancelled = isCancelled
        return fetch
    }

    /// The `deploy` state now.
    /// - Throws: The errors of `EventStore.currentState` when the log cannot be read.
    public func state() throws -> StateValue { try store.currentState[StatePath([.key(DeployRules.stream)])] ?? .emptyObject }

    private func state(_ key: String) throws -> StateValue? { try store.currentState[DeployRules.path(key)] }

    @discardableResult
    private func record(_ transition: DeployRules.Transition, _ payload: StateObject = [:]) throws -> EventRecord {
        try store.transact { batch in try DeployRules.append(Self.event(transition, payload), at: store.clock.now(), to: &batch) }
    }

    /// Queues `transition`'s event after `previous`: it commits on the store's writer thread
    /// while the caller goes on, and is refused when `previous` failed.
    private func enqueue(_ transition: DeployRules.Transition, _ payload: StateObject, after previous: QueuedAppend?) -> QueuedAppend {
        DeployRules.enqueue(Self.event(transition, payload), after: previous, to: store)
    }

    private static func event(_ transition: DeployRules.Transition, _ payload: StateObject) -> Event {
        Event(stream: DeployRules.stream, type: transition.rawValue, origin: .deploy, payload: .object(payload))
    }

    // MARK: The lifecycle

    /// Asks the source for a newer update; records the check and its answer. Returns the
    /// manifest of a new update, or `nil`.
    ///
    /// A source that cannot be reached or answers badly, and a manifest the client refuses
    /// (another runtime version, an unsafe id or asset key, an asset without a hash), are
    /// recorded as `checkFailed`, not thrown; with `certificates`, a manifest or directive
    /// whose signature does not check out is recorded as `signatureInvalid`; an update already working, already in holding,
    /// rolled back before, created before the working one, or refused by the stored manifest
    /// filters is recorded as `noNewDeploy`. A `rollBackToEmbedded` directive rolls back at
    /// once, unless it was made before the working update. Server-defined headers and manifest
    /// filters a response carries are recorded (`responseHeadersStored`) and used from then on.
    /// - Throws: `DeployError.filesystem` when the app directory's links or pending install
    ///   cannot be read (or, on a rollback, changed); `EventStoreError` or `LMDBError` when an
    ///   event cannot be recorded (`.readOnly` on a read-only store); the errors of `recover()`.
    @discardableResult
    public func check() throws -> UpdateManifest? {
        try recover()
        var started: StateObject = ["source": .string(source.description), "runtimeVersion": .string(target.runtimeVersion)]
        if let channel = target.channel { started["channel"] = .string(channel) }
        try record(.checkStarted, started)
        let working = try directory.target(of: AppDirectory.working)
        // A working bundle of another runtime is not this app's current update: the server
        // would answer noUpdateAvailable for it.
        let current = working.flatMap { keptProblem($0) == nil ? $0 : nil }
        let serverDefinedHeaders = try storedHeaders("serverDefinedHeaders")
        let installID = try directory.installID()
        let answer: ManifestAnswer
        let kept: KeptHeaders
        do {
            (answer, kept) = try source.latest(for: target, current: current, installID: installID, serverDefinedHeaders: serverDefinedHeaders,
                                               certificates: certificates, fetch: startFetching())
        } catch {
            // Nothing the unverified answer says is kept, not even its headers.
            if case .signature = error { try record(.signatureInvalid, ["reason": .string(error.description)]) } else {
                try record(.checkFailed, ["reason": .string(error.description)])
            }
            return nil
        }
        // Stored until a later response replaces them (Expo Updates v1: the client "MUST store"
        // both, and send the server-defined headers "in every subsequent update request").
        if kept != .none {
            var payload = StateObject()
            for (key, headers) in [("serverDefinedHeaders", kept.serverDefinedHeaders), ("manifestFilters", kept.manifestFilters)] {
                guard let headers else { continue }
                var object = StateObject()
                for (name, value) in headers.sorted(by: { $0.key < $1.key }) { object[name] = .string(value) }
                payload[key] = .object(object)
            }
            try record(.responseHeadersStored, payload)
        }
        let running = current.flatMap { try? directory.manifest(of: $0) }
        switch answer {
        case .noUpdateAvailable:
            try record(.noNewDeploy, ["reason": "noUpdateAvailable"])
            return nil
        case .rollBackToEmbedded(let commitTime):
            // Made before the working update was: the working update is the most recent (as
            // Expo's client decides by commit times).
            if let running, let commitTime, let made = Timestamp(rfc3339: commitTime),
               let created = Timestamp(rfc3339: running.createdAt), made < created {
                try record(.noNewDeploy, ["reason": "rollbackOlderThanWorking", "commitTime": .string(commitTime),
                                          "workingCreatedAt": .string(running.createdAt)])
                return nil
            }
            try rollBack(to: nil, reason: "the server sent rollBackToEmbedded")
            return nil
        case .update(let manifest, let assetHeaders):
            if let refusal = refusal(of: manifest) {
                try record(.checkFailed, ["reason": .string(refusal), "updateId": .string(manifest.id)])
                return nil
            }
            if let (key, value) = KeptHeaders.contradiction(in: manifest, filters: try storedHeaders("manifestFilters")) {
                try record(.noNewDeploy, ["reason": "filteredOut", "updateId": .string(manifest.id),
                                          "filter": .string("\(key)=\(value)")])
                return nil
            }
            let holding = try directory.target(of: AppDirectory.holding)
            let rejection = try rejection(of: manifest.id)
            let rejected = rejection == .standing
            // A kept bundle counts only when it is this runtime's (an id published again for
            // another runtime is another update).
            let isWorking = manifest.id == working && keptProblem(manifest.id) == nil
            let isHolding = manifest.id == holding && keptProblem(manifest.id) == nil
            if isWorking || isHolding || rejected {
                let reason = rejected ? "rolledBackBefore" : isWorking ? "alreadyWorking" : "alreadyDownloaded"
                try record(.noNewDeploy, ["reason": .string(reason), "updateId": .string(manifest.id)])
                return nil
            }
            // The most recent update is the one to run (Expo Updates v1: the client "MUST load
            // the most recent update"): one created before the working update is not taken.
            if let running, manifest.isOlder(than: running) {
                try record(.noNewDeploy, ["reason": "olderThanWorking", "updateId": .string(manifest.id), "createdAt": .string(manifest.createdAt),
                                          "workingCreatedAt": .string(running.createdAt)])
                return nil
            }
            checked = (manifest, assetHeaders)
            var available: StateObject = ["updateId": .string(manifest.id), "createdAt": .string(manifest.createdAt),
                                          "assets": .int(Int64(manifest.allAssets.count))]
            if case .retried(let times) = rejection { available["retryAfterRejections"] = .int(times) }
            try record(.newDeployAvailable, available)
            return manifest
        }
    }

    /// The server-defined headers or manifest filters the log holds, from the last response
    /// that carried them.
    private func storedHeaders(_ key: String) throws -> [String: String] {
        var headers: [String: String] = [:]
        for (name, value) in try state(key)?.objectValue ?? StateObject() { headers[name] = value.stringValue }
        return headers
    }

    /// Why a manifest cannot be installed here, or `nil`.
    private func refusal(of manifest: UpdateManifest) -> String? {
        guard manifest.runtimeVersion == target.runtimeVersion else {
            return "update \(manifest.id) is for runtime version \(manifest.runtimeVersion), this app runs \(target.runtimeVersion)"
        }
        guard AppDirectory.isSafeUpdateID(manifest.id) else { return "the update id \"\(manifest.id)\" cannot name a directory" }
        var keys = Set<String>()
        for asset in manifest.allAssets {
            if let problem = AppDirectory.keyProblem(asset.key) { return "asset key \"\(asset.key)\" \(problem)" }
            guard keys.insert(asset.key).inserted else { return "asset key \"\(asset.key)\" appears twice" }
            guard asset.hash != nil else { return "asset \(asset.key) has no hash to check it against" }
        }
        return nil
    }

    /// Downloads the checked update (checking first when there is none) into holding,
    /// verifying every asset's SHA-256 as it streams to disk. Returns the update id, or `nil`
    /// when there was nothing to download or the download failed (recorded).
    ///
    /// An asset a complete update on disk already holds (the same SHA-256 and content type) is
    /// hard-linked from there, or copied where the link is refused, and hashed again; one that
    /// does not check out is fetched. The files of other updates are only read. `downloaded`
    /// counts the assets and bytes reused and fetched.
    ///
    /// A failed download (`DeployError` of any kind) is recorded as `downloadFailed`, or
    /// `integrityFailed` for a hash that differs, and the files and directories this call
    /// created are removed; it is not thrown. A complete copy already on disk is used as it
    /// is, and refused when its manifest differs from the server's.
    /// - Throws: The errors of `check()` when it checks first; `EventStoreError` or
    ///   `LMDBError` when an event cannot be recorded.
    @discardableResult
    public func download() throws -> String? {
        if checked == nil { try check() }
        guard let (manifest, assetHeaders) = checked else { return nil }
        checked = nil
        // What this call creates, and takes back if it fails: nothing else is ever removed.
        let created = CreatedPaths()
        var tally = DownloadTally()
        do {
            let complete = directory.updatePath(manifest.id)
            if directory.hasUpdate(manifest.id) {
                // A complete copy is on disk (a rollback target, or one downloaded before a
                // crash): it is used as it is, never deleted and fetched again.
                guard try directory.manifest(of: manifest.id) == manifest else {
                    throw DeployError.refused("update \(manifest.id) on the server differs from the copy on disk; a published update must never change")
                }
            } else if FileManager.default.fileExists(atPath: complete) {
                // Moved into place by a call killed before it wrote the manifest: completed if
                // every asset is there as the manifest says, else refused; never deleted.
                guard holdsEveryAsset(of: manifest, in: complete) else {
                    throw DeployError.refused("\(complete) is an interrupted download that differs from the update; remove it to download the update again")
                }
                try Files.writeAtomically(Data(manifest.json.json().utf8), to: directory.manifestPath(manifest.id))
            } else {
                let partial = directory.newPartialPath(manifest.id)
                try created.makeDirectory(partial)
                tally = try downloadAssets(of: manifest, headers: assetHeaders, into: partial, created: created)
                tally.madeDirectory = true
                try created.syncDirectories()
                guard rename(partial, complete) == 0 else { throw DeployError.filesystem("cannot move \(partial) into place: \(String(cString: strerror(errno)))") }
                // The manifest last: its presence marks the update complete.
                try Files.writeAtomically(Data(manifest.json.json().utf8), to: directory.manifestPath(manifest.id))
                try Files.syncDirectory(directory.updatesPath)
            }
        } catch let error as DeployError {
            created.removeAll()
            if case .integrity = error {
                try record(.integrityFailed, ["updateId": .string(manifest.id), "reason": .string(error.description)])
            } else {
                try record(.downloadFailed, ["updateId": .string(manifest.id), "reason": .string(error.description)])
            }
            return nil
        } catch {
            // The client's own failure (the log refusing a progress event): thrown as it is.
            created.removeAll()
            throw error
        }
        // Recorded before holding names it: a call that dies between leaves the log saying
        // so, and the next `recover()` points holding.
        try record(.downloaded, tally.payload(updateId: manifest.id))
        try directory.point(AppDirectory.holding, at: manifest.id)
        return manifest.id
    }

    /// Whether `directory` holds every asset of `manifest` with the hash the manifest gives.
    private func holdsEveryAsset(of manifest: UpdateManifest, in directory: String) -> Bool {
        manifest.allAssets.allSatisfy { asset in asset.hash != nil && Files.sha256(of: directory + "/" + asset.key) == asset.hash }
    }

    /// What one download took from updates already on disk and what it fetched, and whether it
    /// made the update's directory (then the client may reap it), as the `downloaded` event
    /// records it (a complete copy already on disk: all zero, not made).
    struct DownloadTally {
        var reusedAssets = 0, reusedBytes: Int64 = 0, downloadedAssets = 0, downloadedBytes: Int64 = 0
        var madeDirectory = false

        func payload(updateId: String) -> StateObject {
            var payload: StateObject = ["updateId": .string(updateId), "reusedAssets": .int(Int64(reusedAssets)), "reusedBytes": .int(reusedBytes),
                                        "downloadedAssets": .int(Int64(downloadedAssets)), "downloadedBytes": .int(downloadedBytes)]
            if madeDirectory { payload["madeUpdateDirectory"] = true }
            return payload
        }
    }

    /// An asset as reuse matches it: its SHA-256 and what its content type means, so that the
    /// same bytes under another type are another asset, fetched and checked as such.
    private struct AssetIdentity: Hashable {
        let hash: String, type: String
        init?(_ asset: UpdateManifest.Asset) {
            guard let hash = asset.hash else { return nil }
            self.hash = hash
            type = MediaType(asset.contentType).meaning
        }
    }

    /// The files of the complete updates on disk but `id` (working's, holding's and every other
    /// one under `updates/` with its manifest), by what their manifests say they are. Nothing
    /// here is trusted: a file is hashed again where it is linked or copied.
    private func heldAssets(except id: String) -> [AssetIdentity: [String]] {
        var held: [AssetIdentity: [String]] = [:]
        let names = ((try? Files.names(in: directory.updatesPath)) ?? []).compactMap { String(validating: $0, as: UTF8.self) }.sorted()
        for kept in names where kept != id && AppDirectory.isSafeUpdateID(kept) && directory.hasUpdate(kept) {
            guard let manifest = try? directory.manifest(of: kept) else { continue }
            for asset in manifest.allAssets where AppDirectory.isSafeKey(asset.key) {
                guard let identity = AssetIdentity(asset) else { continue }
                held[identity, default: []].append(directory.updatePath(kept) + "/" + asset.key)
            }
        }
        return held
    }

    /// Puts a held copy of `asset` at `file`, a path new to this call: a hard link to the first
    /// of `candidates` whose bytes hash as the manifest says, or, where the file system refuses
    /// the link (another device, no permission), a copy hashed as it is written. A file that
    /// does not check out is taken back and the next candidate tried; the held files are only
    /// read. Returns the bytes reused, or `nil` when none checks out (the asset is fetched).
    private func reuse(_ asset: UpdateManifest.Asset, hash: String, from candidates: [String], at file: String,
                       created: CreatedPaths, flusher: BackgroundFlusher) throws(DeployError) -> Int64? {
        for held in candidates {
            if hardLink(held, file) == 0 {
                // The inode now in the new update is the one hashed: a symbolic link, a FIFO
                // or damaged bytes fail here.
                var info = stat()
                created.record(file: file)
                if Files.sha256(of: file) == hash, lstat(file, &info) == 0 { return Int64(info.st_size) }
                try created.remove(file: file)
            } else if let copied = try copy(held, to: file, created: created, flusher: flusher) {
                if copied.hash == hash { return copied.bytes }
                try created.remove(file: file)
            }
        }
        return nil
    }

    /// Copies regular file `source` to new file `file`, hashing the bytes as they pass, and
    /// hands it to `flusher`; `nil` when `source` cannot be read as a regular file (then `file`
    /// is not made).
    private func copy(_ source: String, to file: String, created: CreatedPaths,
                      flusher: BackgroundFlusher) throws(DeployError) -> (hash: String, bytes: Int64)? {
        let input = open(source, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard input >= 0 else { return nil }
        let reader = FileHandle(fileDescriptor: input, closeOnDealloc: true)
        var info = stat()
        guard fstat(input, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let fd = try created.createFile(file)
        var flushing = false
        defer { if !flushing { close(fd) } }
        var hasher = SHA256()
        var bytes: Int64 = 0
        while true {
            let chunk: Data?
            do { chunk = try reader.read(upToCount: 1 << 20) } catch {
                try created.remove(file: file)
                return nil
            }
            guard let chunk, !chunk.isEmpty else { break }
            hasher.update(chunk)
            try Files.writeAll(chunk, to: fd, path: file)
            bytes += Int64(chunk.count)
        }
        flusher.flush(fd, path: file)
        flushing = true
        return (hasher.finalizeBase64URL(), bytes)
    }

    /// Fills `partial` with every asset of `manifest`: an asset a complete update on disk
    /// already holds (same SHA-256, same content type) is linked or copied from there, checked
    /// again; the others are fetched from the source, hashed as they stream.
    private func downloadAssets(of manifest: UpdateManifest, headers: [String: [String: String]], into partial: String,
                                created: CreatedPaths) throws -> DownloadTally {
        let assets = manifest.allAssets
        let held = heldAssets(except: manifest.id)
        let fetch = startFetching()
        var tally = DownloadTally()
        var reported: Int64 = 0
        var total: Int64 = 0
        /// Counts `bytes` more of the update, refusing it past the client's limit.
        func count(_ bytes: Int64) throws(DeployError) {
            total += bytes
            guard total <= maxUpdateBytes else { throw .refused("update \(manifest.id) holds more than \(maxUpdateBytes) bytes (the client's limit)") }
        }
        var progress: [QueuedAppend] = []
        // Every file is on disk before this returns: the caller renames the update into place next.
        let fetched = Result { try BackgroundFlusher.flushing { flusher in
            for (index, asset) in assets.enumerated() {
                guard !isCancelled() else { throw DeployError.cancelled }
                let file = partial + "/" + asset.key
                try makeParents(of: asset.key, in: partial, created: created)
                if let identity = AssetIdentity(asset), let candidates = held[identity],
                   let bytes = try reuse(asset, hash: identity.hash, from: candidates, at: file, created: created, flusher: flusher) {
                    try count(bytes)
                    tally.reusedAssets += 1
                    tally.reusedBytes += bytes
                    continue
                }
                let fd = try created.createFile(file)
                var flushing = false
                defer { if !flushing { close(fd) } }
                var hasher = SHA256()
                var expected: Int?
                var received = 0
                try source.download(asset, headers: headers[asset.key] ?? [:], target: target, fetch: fetch,
                                    expectedLength: { expected = $0 }) { chunk in
                    // A log that refused a progress event stops the download: nothing more is recorded.
                    if case .failure(let error)? = progress.last?.outcome { throw error }
                    guard !isCancelled() else { throw DeployError.cancelled }
                    received += chunk.count
                    if let expected, received > expected {
                        throw DeployError.transport("asset \(asset.key) sent more than the \(expected) bytes its answer announced")
                    }
                    try count(Int64(chunk.count))
                    hasher.update(chunk)
                    try Files.writeAll(chunk, to: fd, path: file)
                    // Progress: assets done, plus this one's share when its length is known.
                    let share = expected.map { $0 > 0 ? min(1, Double(received) / Double($0)) : 1 } ?? 0
                    let percent = Int64((Double(index) + share) / Double(assets.count) * 100)
                    if percent >= reported + Self.progressStep, percent < 100 {
                        reported = percent - percent % Self.progressStep
                        // Queued: the download does not wait for the disk, the events still commit in order.
                        progress.append(enqueue(.downloadProgress, ["updateId": .string(manifest.id), "percent": .int(reported)],
                                                after: progress.last))
                    }
                }
                flusher.flush(fd, path: file)
                flushing = true
                if let expected, expected != received {
                    throw DeployError.transport("asset \(asset.key) ended after \(received) of \(expected) bytes")
                }
                let actual = hasher.finalizeBase64URL()
                if let hash = asset.hash, hash != actual { throw DeployError.integrity(key: asset.key, expected: hash, actual: actual) }
                tally.downloadedAssets += 1
                tally.downloadedBytes += Int64(received)
            }
        } }
        // The progress events commit before anything the caller records next.
        for queued in progress { _ = try queued.committed() }
        try fetched.get()
        return tally
    }

    /// Creates the directories on the way to `key` inside `root`, refusing to cross anything
    /// that is not a directory this download made.
    private func makeParents(of key: String, in root: String, created: CreatedPaths) throws(DeployError) {
        var path = root
        for component in key.split(separator: "/").dropLast() {
            path += "/" + component
            var info = stat()
            if lstat(path, &info) == 0 {
                guard (info.st_mode & S_IFMT) == S_IFDIR else { throw .refused("asset key \"\(key)\" runs through a file") }
            } else {
                try created.makeDirectory(path)
            }
        }
    }

    /// Installs the update in holding into working, in one rename; the new install is
    /// pending until `confirmLaunch`. Returns the update installed, or `nil` when holding is empty.
    ///
    /// An update missing from disk, or a switch that fails, is recorded as
    /// `failedToUpdateWorkingDirectory` and returns `nil`.
    /// - Throws: `DeployError.filesystem` when a link cannot be read or holding cannot be
    ///   removed, `.filesystem` or `.badManifest` when the update's manifest cannot be read;
    ///   `EventStoreError` or `LMDBError` when an event cannot be recorded; the errors of
    ///   `recover()`. When thrown after `willUpdateWorkingDirectory` was recorded, the next
    ///   `recover()` finishes or undoes the install.
    @discardableResult
    public func install() throws -> String? {
        try recover()
        guard let update = try directory.target(of: AppDirectory.holding) else { return nil }
        if let problem = keptProblem(update) {
            // Recorded before the link goes, so that the log never lags the directory.
            try record(.failedToUpdateWorkingDirectory, ["updateId": .string(update), "reason": .string(problem)])
            try directory.removeLink(AppDirectory.holding)
            return nil
        }
        try record(.willUpdateWorkingDirectory, ["updateId": .string(update)])
        installStepHook(.recordedWillUpdate)
        let index = "updates/" + update + "/" + (try directory.manifest(of: update).launchAsset.key)
        let previous: String?
        do {
            previous = try directory.target(of: AppDirectory.working)
            try directory.setPending(PendingInstall(update: update, previous: previous))
            installStepHook(.wrotePending)
            try directory.point(AppDirectory.working, at: update) // the one step that switches
        } catch {
            try? directory.setPending(nil)
            try record(.failedToUpdateWorkingDirectory, ["updateId": .string(update), "reason": .string(error.description)])
            return nil
        }
        installStepHook(.switchedWorking)
        try directory.removeLink(AppDirectory.holding) // if this fails, the next start finishes the install
        installStepHook(.removedHolding)
        // Relative to the app directory, whose absolute path an app container may change.
        try record(.didUpdateWorkingDirectory, ["updateId": .string(update), "indexURL": .string(index), "previousUpdate": StateValue(previous)])
        installStepHook(.recordedDidUpdate)
        return update
    }

    /// Reloads the web view on the working directory (records it; the app does the reload).
    /// From here a pending install counts as launched.
    /// - Throws: `DeployError.filesystem` when the pending install or the working link cannot
    ///   be read or the pending install cannot be written; `EventStoreError` or `LMDBError`
    ///   when the event cannot be recorded.
    public func reload() throws {
        // Recorded first: the pending install is marked launched after (`recover()` finishes it).
        let reloaded = try record(.didReloadWebView, ["updateId": StateValue(try directory.target(of: AppDirectory.working))])
        if var pending = try directory.pending(), !pending.launched {
            pending.launched = true
            pending.launchedAt = reloaded.time
            try directory.setPending(pending)
        }
    }

    /// The app confirms that the newly installed update launched well: it is no longer pending.
    /// A confirmation later than `readyTimeout` after the launch is recorded as
    /// `launchConfirmedTooLate` instead, and the install stays pending: the next start rolls
    /// it back.
    /// - Throws: `DeployError.usage` when no install is pending; `.filesystem` when the
    ///   pending install cannot be read or removed; `EventStoreError` or `LMDBError` when the
    ///   event cannot be recorded; the errors of `recover()`.
    public func confirmLaunch() throws {
        try recover()
        guard let pending = try directory.pending() else { throw DeployError.usage("no install is pending confirmation") }
        if let readyTimeout, pending.launched, let launchedAt = pending.launchedAt,
           case let waited = store.clock.now().microsecondsSince1970 - launchedAt.microsecondsSince1970, waited > readyTimeout {
            try record(.launchConfirmedTooLate, ["updateId": .string(pending.update), "waitedMicroseconds": .int(waited),
                                                 "reason": .string("update \(pending.update) was confirmed \(Self.seconds(waited)) after its launch, "
                                                     + "later than the ready timeout of \(Self.seconds(readyTimeout)): the next start rolls it back")])
            return
        }
        // Recorded first: a log that cannot take the event leaves the install pending, to
        // confirm again; one that took it has the next `recover()` remove `pending`.
        try record(.launchConfirmed, ["updateId": .string(pending.update)])
        try directory.setPending(nil)
        try reap()
    }

    /// The app launches (Stork's `deliver`): an install launched before and still unconfirmed
    /// rolls back; an update waiting in holding is installed; then the launch behaviour runs.
    /// A pending or newly installed update is then reloaded. The rolled-back update is
    /// recorded under `rejectedUpdates` and not installed again, unless `rejectedRetry`
    /// allows it.
    /// - Throws: The errors of `recover()`, `install()`, `check()`, `download()` and
    ///   `reload()`; `DeployError.filesystem` when the rollback cannot change the working
    ///   link or the pending install. Failed checks, downloads and installs are recorded,
    ///   not thrown.
    public func deliver() throws {
        try recover()
        if let pending = try directory.pending(), pending.launched {
            try rollBack(to: pending.previous, reason: "update \(pending.update) was launched but the app never confirmed a good launch (confirmLaunch)",
                         rejectingUpdate: true)
        }
        // A native release of another runtime version starts from its embedded bundle: the
        // working update was built for the one before (Capgo's resetWhenUpdate).
        if let working = try directory.target(of: AppDirectory.working),
           let built = try? directory.manifest(of: working).runtimeVersion, built != target.runtimeVersion {
            try rollBack(to: nil, reason: "the app's runtime version changed from \(built) to \(target.runtimeVersion), so the embedded bundle is used",
                         runtimeChange: (built, target.runtimeVersion))
        }
        if try directory.target(of: AppDirectory.holding) != nil, launchBehavior != .none {
            try install()
        }
        try run(launchBehavior)
        if try directory.pending() != nil || (try state("phase"))?.stringValue == DeployRules.Phase.installed.rawValue { try reload() }
        try reap()
    }

    /// The app enters the foreground: the foreground behaviour runs once
    /// `foregroundCheckInterval` has passed since the last check, or when the last check is
    /// recorded in the future (the clock was moved back).
    /// - Throws: The errors of `recover()`, `check()`, `download()`, `install()` and
    ///   `reload()`, as the foreground behaviour calls them; the errors of
    ///   `EventStore.currentState` when the last check cannot be read.
    public func enterForeground() throws {
        try recover()
        // A last check in the future (a clock moved back) is stale, or no check would come again.
        if let last = try state("lastCheck")?.stringValue.flatMap(Timestamp.init(rfc3339:)),
           case let elapsed = store.clock.now().microsecondsSince1970 - last.microsecondsSince1970,
           elapsed >= 0, elapsed < foregroundCheckInterval { return }
        try run(foregroundBehavior)
        if foregroundBehavior == .reloadNewDeploy, try directory.pending() != nil { try reload() }
    }

    private func run(_ behavior: DeployBehavior) throws {
        switch behavior {
        case .none: return
        case .checkNewDeploy: try check()
        case .downloadNewDeploy: if try check() != nil { try download() }
        case .reloadNewDeploy: if try check() != nil, try download() != nil { try install() }
        }
    }

    /// What a rollback of an update after a launch never confirmed means for offering it again.
    private enum Rejection: Equatable { case none, standing, retried(times: Int64) }

    /// Whether update `id` was rejected, and if so whether `rejectedRetry` lets it be offered
    /// again now (the `times` it was rejected).
    private func rejection(of id: String) throws -> Rejection {
        let state = try store.currentState
        guard state[StatePath([.key(DeployRules.stream), .key("rejectedUpdates"), .key(id)])] != nil else { return .none }
        // A rejection recorded before retries has no count or time: it stands.
        guard let retry = rejectedRetry, let rejection = state[StatePath([.key(DeployRules.stream), .key("rejections"), .key(id)])],
              let times = rejection["times"]?.intValue, let at = rejection["at"]?.stringValue.flatMap(Timestamp.init(rfc3339:)) else { return .standing }
        let due = store.clock.now().microsecondsSince1970 - at.microsecondsSince1970 >= retry.delay
        return times <= Int64(retry.maxRetries) && due ? .retried(times: times) : .standing
    }

    /// How many times update `id` was rejected before, by the log.
    private func timesRejected(_ id: String) throws -> Int64 {
        try store.currentState[StatePath([.key(DeployRules.stream), .key("rejections"), .key(id), .key("times")])]?.intValue ?? 0
    }

    /// `microseconds` as seconds for people ("12.5 s").
    private static func seconds(_ microseconds: Int64) -> String {
        let tenths = microseconds / 100_000
        return "\(tenths / 10).\(tenths % 10) s"
    }

    /// Points working back at `previous` (`nil`: the embedded bundle) and records why, with
    /// the runtime versions when a change of the app's is the reason.
    /// A bundle on disk that is not this runtime's, or is missing, is never restored.
    private func rollBack(to previous: String?, reason: String, rejectingUpdate: Bool = false,
                          runtimeChange: (from: String, to: String)? = nil) throws {
        let from = try directory.target(of: AppDirectory.working)
        var reason = reason
        var previous = previous
        if let kept = previous, let problem = keptProblem(kept) {
            reason += "; \(problem), so the embedded bundle is used"
            previous = nil
        }
        // The log first: a log that cannot take the event leaves the directory as it was, and
        // one that took it has the rest done here or, after a crash, by the next `recover()`.
        var fields: StateObject = ["from": StateValue(from), "to": StateValue(previous), "reason": .string(reason), "rejectsUpdate": .bool(rejectingUpdate)]
        if rejectingUpdate, let from { fields["rejection"] = .int(try timesRejected(from) + 1) }
        if let runtimeChange {
            fields["fromRuntimeVersion"] = .string(runtimeChange.from)
            fields["toRuntimeVersion"] = .string(runtimeChange.to)
        }
        try record(.rolledBack, fields)
        try finishRollBack(to: previous)
    }

    /// Makes the directory what a recorded rollback says: working at `previous`, nothing pending.
    private func finishRollBack(to previous: String?) throws {
        if try directory.target(of: AppDirectory.working) != previous {
            if let previous { try directory.point(AppDirectory.working, at: previous) } else { try directory.removeLink(AppDirectory.working) }
        }
        try directory.setPending(nil)
    }

    /// Why update `id` on disk cannot be kept or restored here, or `nil`: it is missing, its
    /// manifest cannot be read, or it was built for another runtime version.
    private func keptProblem(_ id: String) -> String? {
        guard directory.hasUpdate(id) else { return "update \(id) is missing from disk" }
        let manifest: UpdateManifest
        do { manifest = try directory.manifest(of: id) } catch { return "the manifest of update \(id) cannot be read (\(error))" }
        guard manifest.runtimeVersion == target.runtimeVersion else {
            return "update \(id) on disk is for runtime version \(manifest.runtimeVersion), this app runs \(target.runtimeVersion)"
        }
        return nil
    }

    /// Brings the app directory in line with the log after a call that was cut short (a
    /// crash, a log that could not take an event). An install cut short (phase `installing`)
    /// is finished or undone, and which is recorded. Every other change of the directory is
    /// recorded before it is made, so the newest transition says what the directory must be,
    /// and this finishes it: a recorded rollback points working back and removes `pending`, a
    /// recorded confirmation removes `pending`, a recorded reload marks it launched, a
    /// recorded download points holding. The other lifecycle calls run it first.
    /// - Throws: `DeployError.filesystem` when a link or the pending install cannot be read or
    ///   changed; `EventStoreError` (`.corruptRecord` among them) or `LMDBError` when the log
    ///   cannot be read or the event cannot be recorded.
    public func recover() throws {
        if let reaping = try state("reaping")?.objectValue { try finishReap(of: reaping) }
        let phase = try state("phase")?.stringValue.flatMap(DeployRules.Phase.init(rawValue:))
        guard phase == .installing else { return try finishRecordedChange(phase) }
        guard let installing = try lastInstallingUpdate() else { return }
        if try directory.target(of: AppDirectory.working) == installing {
            if try directory.target(of: AppDirectory.holding) == installing { try directory.removeLink(AppDirectory.holding) }
            var finished: StateObject = ["updateId": .string(installing), "result": "finished"]
            if let pending = try directory.pending(), pending.update == installing { finished["previousUpdate"] = StateValue(pending.previous) }
            try record(.installRecovered, finished)
        } else {
            if try directory.pending()?.update == installing { try directory.setPending(nil) }
            try record(.installRecovered, ["updateId": .string(installing), "result": "undone"])
        }
    }

    /// Finishes the directory change the newest transition (`phase`) recorded, if a call
    /// died or failed before making it; touches nothing that already agrees with the log.
    private func finishRecordedChange(_ phase: DeployRules.Phase?) throws {
        let working = try state("workingUpdate")?.stringValue
        switch phase {
        case .rolledBack:
            try finishRollBack(to: working)
        case .confirmed:
            if let pending = try directory.pending(), pending.update == working { try directory.setPending(nil) }
        case .launched:
            if var pending = try directory.pending(), !pending.launched, pending.update == working {
                pending.launched = true
                try directory.setPending(pending)
            }
        case .downloaded:
            if let holding = try state("holdingUpdate")?.stringValue, try directory.target(of: AppDirectory.holding) != holding,
               directory.hasUpdate(holding) {
                try directory.point(AppDirectory.holding, at: holding)
            }
        default:
            return
        }
    }

    /// Reaps the update directories this client's downloads made (`madeUpdates`) that it no
    /// longer needs: every one but working, holding, the pending install and the one it
    /// replaced, and the update working before the newest install. `updatesReaped` names them
    /// with why (`rejected` after a rollback, `otherRuntimeVersion` when built for another,
    /// else `superseded`) before anything is removed, `reapFinished` says what was removed and
    /// what stays; `recover()` finishes a reap cut short. A removal never fails (what cannot
    /// go stays, named), so reaping never stops the lifecycle.
    private func reap() throws {
        let state = try self.state().objectValue ?? StateObject()
        guard let made = state["madeUpdates"]?.objectValue, !made.isEmpty else { return }
        let pending = try directory.pending()
        let needed = Set([try directory.target(of: AppDirectory.working), try directory.target(of: AppDirectory.holding),
                          pending?.update, pending?.previous] + ["workingUpdate", "holdingUpdate", "pendingUpdate", "previousUpdate"].map { state[$0]?.stringValue })
        var unneeded = StateObject()
        for (id, _) in made where !needed.contains(id) {
            let runtime = try? directory.manifest(of: id).runtimeVersion
            unneeded[id] = state["rejectedUpdates"]?.objectValue?[id] != nil ? "rejected"
                : runtime != nil && runtime != target.runtimeVersion ? "otherRuntimeVersion" : "superseded"
        }
        guard !unneeded.isEmpty else { return }
        try record(.updatesReaped, ["updates": .object(unneeded)])
        reapStepHook(.recordedReap)
        try finishReap(of: unneeded)
    }

    /// Removes the updates a recorded `updatesReaped` names, skipping what is gone, and records
    /// `reapFinished`.
    private func finishReap(of updates: StateObject) throws {
        var removedFiles = 0
        var left = StateObject()
        for (id, _) in updates {
            let removal = directory.removeUpdate(id)
            removedFiles += removal.removedFiles
            if let reason = removal.left { left[id] = .string(reason) }
            reapStepHook(.removedUpdate)
        }
        try record(.reapFinished, ["removedFiles": .int(Int64(removedFiles)), "left": .object(left)])
        reapStepHook(.recordedReapFinished)
    }

    /// The update of the newest `willUpdateWorkingDirectory`.
    private func lastInstallingUpdate() throws -> String? {
        var found: String?
        let last = try store.lastSeq()
        var seq = last
        while seq > 0, found == nil {
            if let record = try store.record(seq), record.event.stream == DeployRules.stream,
               record.event.type == DeployRules.Transition.willUpdateWorkingDirectory.rawValue {
                found = record.event.payload["updateId"]?.stringValue
            }
            seq -= 1
        }
        return found
    }

}
