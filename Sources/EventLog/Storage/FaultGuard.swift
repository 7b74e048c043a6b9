import CFaultGuard
#if canImport(Glibc)
import Glibc
#endif

/// Runs one call into LMDB marked as such: with `FaultGuard.install`, a fault inside it is
/// reported as a damaged database (LMDB follows its pages unchecked; a damaged one can send
/// it anywhere) instead of killing the process by a signal.
@inline(__always)
func guarded<R>(_ call: () -> R) -> R {
    eventlog_fault_guard_enter()
    defer { eventlog_fault_guard_leave() }
    return call()
}

/// The command line's answer to a damaged database that `verify` has not caught yet: a fault
/// inside an LMDB call, or at an address inside an environment's map (a value read from a
/// damaged or truncated file), becomes a one-line error and exit status 1. Any other fault is
/// left to the handler that was there before, so a bug still crashes with its backtrace.
/// For programs only (it installs process-wide signal handlers), not for a library's users.
package enum FaultGuard {
    /// Installs the handlers; `message` (one line) is written on a storage fault.
    package static func install(message: String) {
        // Kept for the life of the process: the handler reads it.
        let copy = strdup(message)
        eventlog_fault_guard_install(copy)
    }

    /// A slot for an environment's map, or -1 when there is none left (faults there are then
    /// only caught inside LMDB calls).
    static func takeSlot() -> Int32 { eventlog_fault_guard_take_slot() }

    /// Called by LMDB before it prints a failed assertion and aborts: with the guard
    /// installed, it writes the guard's message and exits with status 1 instead; without, it
    /// returns and LMDB goes on as it would.
    static func lmdbAssertionFailed() { eventlog_fault_guard_assertion_failed() }

    /// Records the map of the environment in `slot`; size 0 forgets it.
    static func setMap(_ slot: Int32, base: UnsafeRawPointer?, size: Int) {
        eventlog_fault_guard_set_map(slot, base, size)
    }

    /// Forgets the map in `slot` and frees the slot (the environment is closed).
    static func releaseSlot(_ slot: Int32) {
        eventlog_fault_guard_release_slot(slot)
    }
}
