import Foundation

/// Group commit: concurrent producers share durable commits.
///
/// Each caller's event waits in a queue; the first caller to find no commit in progress
/// becomes the leader, appends every waiting event in one write transaction (one fsync), and
/// wakes the others. Under load, N producers pay for about one commit per round instead of N.
final class GroupCommitter: @unchecked Sendable {
    final class Pending {
        let event: Event
        var result: Result<EventRecord, any Error>?
        init(_ event: Event) { self.event = event }
    }

    private let condition = NSCondition()
    private var queue: [Pending] = []
    private var committing = false

    func append(_ event: Event, to store: EventStore) throws -> EventRecord {
        let mine = Pending(event)
        condition.lock()
        queue.append(mine)
        while mine.result == nil {
            if committing {
                condition.wait()
                continue
            }
            committing = true
            let group = queue
            queue = []
            condition.unlock()
            let results = Self.commit(group, to: store)
            condition.lock()
            for (pending, result) in zip(group, results) { pending.result = result }
            committing = false
            condition.broadcast()
        }
        condition.unlock()
        return try mine.result!.get()
    }

    /// Appends a group in one transaction. An event that is refused (a stale write) gets its
    /// error and the others still commit; a failed commit fails them all.
    private static func commit(_ group: [Pending], to store: EventStore) -> [Result<EventRecord, any Error>] {
        do {
            return try store.transact { batch in
                group.map { pending in Result { try batch.append(pending.event) } }
            }
        } catch {
            return group.map { _ in .failure(error) }
        }
    }
}

extension EventStore {
    /// Appends `event` durably like `append(_:)`, but shares the commit with whatever other
    /// threads are appending through this method at the same moment (group commit). Returns
    /// once the event is committed; throws if it was refused or the commit failed.
    ///
    /// - Throws: What ``append(_:)`` throws. An event refused does not stop the others of its
    ///   group; a commit that fails (an ``LMDBError``, or ``EventStoreError/readOnly``) fails
    ///   every event of the group with the same error.
    @discardableResult
    public func appendGrouped(_ event: Event) throws -> EventRecord {
        try groupCommitter.append(event, to: self)
    }
}
