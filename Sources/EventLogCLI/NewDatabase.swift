import EventLog
import Foundation

/// What a writing command is about to create for a database that may not exist yet, so that
/// when it fails before committing anything it removes exactly that, and nothing else.
struct NewDatabase: Sendable {
    let path: String
    private let createsDirectory: Bool
    private let createsFiles: [String]

    init(at path: String) {
        self.path = path
        createsDirectory = !FileManager.default.fileExists(atPath: path)
        createsFiles = ["data.mdb", "lock.mdb"].filter { !FileManager.default.fileExists(atPath: path + "/" + $0) }
    }

    /// Removes the files (never recursively) and the directory this command created, when the
    /// log in them still holds no event, checked under the log's write lock so that no other
    /// process's events can go with them.
    func removeIfStillEmpty() {
        // Opening a writer on an unfinished creation would make the log it is to remove.
        guard !createsFiles.isEmpty, EventStore.exists(at: path),
              let store = try? EventStore(path: path) else { return }
        _ = try? store.transact { batch in
            if batch.lastSeq == 0 { removeFiles() }
        }
        if createsDirectory { rmdir(path) }
    }

    /// The same, from a signal handler while this process's own write transaction holds the
    /// write lock (so no other process can commit meanwhile): the check reads a snapshot.
    func removeIfStillEmpty(whileWriting store: EventStore) {
        guard !createsFiles.isEmpty, (try? store.lastSeq()) == 0 else { return }
        removeFiles()
        if createsDirectory { rmdir(path) }
    }

    private func removeFiles() {
        for file in createsFiles { unlink(path + "/" + file) }
    }
}
