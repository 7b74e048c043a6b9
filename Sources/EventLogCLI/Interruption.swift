import EventLog
import Foundation
import Synchronization

/// Listens for the signals that interrupt a command: Ctrl-C (SIGINT), SIGTERM and a hang-up
/// (SIGHUP, a closed terminal). The first of them calls `handler` with its number, on a queue
/// of its own, instead of ending the process mid-write; later ones add nothing. A signal the
/// process was started ignoring stays ignored (`nohup`, a job a script put in the background).
/// `stop()` restores the handling there was before.
package final class InterruptSignals: @unchecked Sendable {
    private static let numbers = [SIGINT, SIGTERM, SIGHUP]
    /// The first signal's number, 0 until one comes: a second one (Ctrl-C twice) adds nothing.
    private let first = Atomic<Int32>(0)
    /// Set by `init` and cleared by `stop`, both on the command's thread.
    private var sources: [(number: Int32, source: any DispatchSourceSignal, previous: __sighandler_t?)] = []

    package init(_ handler: @escaping @Sendable (Int32) -> Void = { _ in }) {
        let ignored = unsafeBitCast(SIG_IGN, to: Int.self)
        sources = Self.numbers.compactMap { number in
            let previous = signal(number, SIG_IGN)
            guard unsafeBitCast(previous, to: Int.self) != ignored else { return nil }
            // A process started from a thread that blocks the signal (a Dispatch worker's,
            // say) inherits the block, and would never see it: this thread takes it now.
            var unblocked = sigset_t()
            sigemptyset(&unblocked)
            sigaddset(&unblocked, number)
            pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                guard first.compareExchange(expected: 0, desired: number, ordering: .acquiringAndReleasing).exchanged else { return }
                handler(number)
            }
            source.resume()
            return (number, source, previous)
        }
    }

    /// The number of the first signal received, or 0.
    package var received: Int32 { first.load(ordering: .acquiring) }

    package func stop() {
        for (number, source, previous) in sources {
            source.cancel()
            signal(number, previous)
        }
        sources.removeAll()
    }

    /// Tells the person what was kept (`Interrupted: TEXT`) and ends the process with the
    /// shell's status for `signal` (128 + its number).
    package static func exit(saying text: String, signal: Int32) -> Never {
        let clear = isatty(STDERR_FILENO) == 1 ? "\r\u{1B}[2K" : ""
        FileHandle.standardError.write(Data("\(clear)Interrupted: \(text)\n".utf8))
        Foundation.exit(128 + signal)
    }
}

/// What to tell a person who interrupts an import (see `InterruptSignals`): what was kept
/// and how to continue. Until the first commit, nothing was kept.
final class InterruptionNotice: @unchecked Sendable {
    /// What the commits so far kept; `nil` before the first.
    private let kept = Locked<String?>(nil)
    /// The log the command writes, once open; held while it opens, so that a signal is
    /// handled either before anything exists or with the log in hand.
    private let store = Locked<EventStore?>(nil)
    private var signals: InterruptSignals?

    /// Starts listening, before the command opens (and may create) its database with
    /// `opening`, so that no moment leaves one behind; `remove()` restores the handling there
    /// was before. Interrupted before its first commit, the command removes the database it
    /// created, if it did.
    static func install(removingIfEmpty created: NewDatabase) -> InterruptionNotice {
        let notice = InterruptionNotice()
        notice.signals = InterruptSignals { [notice] number in
            notice.store.withLock { store in
                // The command may be inside its write transaction, which holds the lock that
                // `removeIfStillEmpty()` would wait for; before the log is open, nothing is.
                if let store, notice.kept.withLock({ $0 }) == nil { created.removeIfStillEmpty(whileWriting: store) }
            }
            InterruptSignals.exit(saying: notice.kept.withLock { $0 } ?? "nothing was imported", signal: number)
        }
        return notice
    }

    /// Opens the log the command writes with `open`, which a signal waits for.
    func opening(_ open: () throws(CLIError) -> EventStore) throws(CLIError) -> EventStore {
        try store.withLock { (store) throws(CLIError) -> EventStore in
            let opened = try open()
            store = opened
            return opened
        }
    }

    /// Says what a commit kept.
    func committed(_ text: String) {
        kept.withLock { $0 = text }
    }

    /// Restores the signal handling there was, and lets go of the log at once: the handler
    /// may outlive this call (Dispatch cancels its sources later), and must not keep the log
    /// open meanwhile (`compact --in-place` in the same process would take it for open).
    func remove() {
        signals?.stop()
        signals = nil
        store.withLock { $0 = nil }
    }
}
