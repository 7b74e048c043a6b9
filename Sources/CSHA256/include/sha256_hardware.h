#ifndef EVENTLOG_SHA256_HARDWARE_H
#define EVENTLOG_SHA256_HARDWARE_H

#include <stddef.h>
#include <stdint.h>

/// Whether this CPU has the SHA extensions (x86-64 SHA-NI with SSE 4.1); checked once.
int eventlog_sha256_hardware_available(void);

/// Runs the SHA-256 compression over `blocks` 64-byte blocks at `data`, carrying the eight
/// state words `state` (a, b, …, h, as FIPS 180-4 numbers them) on, with the CPU's SHA
/// instructions and FIPS 180-4's 64 round constants `rounds` (the caller's table). Call only
/// when `eventlog_sha256_hardware_available()`.
void eventlog_sha256_hardware(uint32_t state[8], const void *data, size_t blocks, const uint32_t rounds[64]);

#endif
