#include "fault_guard.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

_Thread_local int eventlog_fault_guard_depth = 0;

enum { slots = 32 };
static _Atomic(uintptr_t) map_base[slots];
static _Atomic(size_t) map_size[slots];
static atomic_int slot_taken[slots];

static const char *fault_message = "";
static size_t fault_message_length = 0;
static struct sigaction previous[3];
static const int signals[3] = {SIGSEGV, SIGBUS, SIGABRT};

int eventlog_fault_guard_take_slot(void) {
    for (int slot = 0; slot < slots; slot++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&slot_taken[slot], &expected, 1)) return slot;
    }
    return -1;
}

void eventlog_fault_guard_set_map(int slot, const void *base, size_t size) {
    if (slot < 0 || slot >= slots) return;
    atomic_store(&map_size[slot], 0);
    atomic_store(&map_base[slot], (uintptr_t)base);
    atomic_store(&map_size[slot], size);
}

void eventlog_fault_guard_release_slot(int slot) {
    if (slot < 0 || slot >= slots) return;
    atomic_store(&map_size[slot], 0);
    atomic_store(&slot_taken[slot], 0);
}

static int inside_a_map(uintptr_t address) {
    for (int slot = 0; slot < slots; slot++) {
        uintptr_t base = atomic_load(&map_base[slot]);
        size_t size = atomic_load(&map_size[slot]);
        if (size != 0 && address >= base && address - base < size) return 1;
    }
    return 0;
}

static void on_fault(int number, siginfo_t *info, void *context) {
    (void)context;
    int damaged = eventlog_fault_guard_depth > 0
        || (number != SIGABRT && info != NULL && inside_a_map((uintptr_t)info->si_addr));
    if (damaged) {
        ssize_t written = write(STDERR_FILENO, fault_message, fault_message_length);
        (void)written;
        _exit(1);
    }
    // Not a fault of the storage: hand it to the handler that was there before.
    for (int index = 0; index < 3; index++) {
        if (signals[index] == number) sigaction(number, &previous[index], NULL);
    }
    // A fault repeats when the instruction runs again; an abort is raised again.
    if (number == SIGABRT) raise(number);
}

void eventlog_fault_guard_assertion_failed(void) {
    if (fault_message_length == 0) return;
    ssize_t written = write(STDERR_FILENO, fault_message, fault_message_length);
    (void)written;
    _exit(1);
}

void eventlog_fault_guard_install(const char *message) {
    fault_message = message;
    fault_message_length = strlen(message);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    for (int index = 0; index < 3; index++) sigaction(signals[index], &action, &previous[index]);
}
