#ifndef EVENTLOG_FAULT_GUARD_H
#define EVENTLOG_FAULT_GUARD_H

#include <stddef.h>

/// How many LMDB calls the current thread is inside (see eventlog_fault_guard_enter).
extern _Thread_local int eventlog_fault_guard_depth;

/// Marks the start and end of a call into LMDB: a fault inside one is a damaged file.
static inline void eventlog_fault_guard_enter(void) { eventlog_fault_guard_depth += 1; }
static inline void eventlog_fault_guard_leave(void) { eventlog_fault_guard_depth -= 1; }

/// Records (or, with size 0, forgets) the memory map of an environment in `slot` (0..<32):
/// a fault at an address inside a map is a damaged (or truncated) file read through it.
void eventlog_fault_guard_set_map(int slot, const void *base, size_t size);

/// Forgets the map in `slot` and frees the slot for another environment.
void eventlog_fault_guard_release_slot(int slot);

/// A free slot for a map, or -1 when all 32 are taken.
int eventlog_fault_guard_take_slot(void);

/// For LMDB's assertion callback: once the handlers are installed, writes the message and
/// exits with status 1 (an assertion LMDB fails is a damaged file); before, returns.
void eventlog_fault_guard_assertion_failed(void);

/// Installs handlers for SIGSEGV, SIGBUS and SIGABRT that, for a fault inside an LMDB call
/// or at an address inside a registered map, write `message` to stderr and exit with status
/// 1; any other fault goes to the handler installed before (a crash stays a crash).
void eventlog_fault_guard_install(const char *message);

#endif
