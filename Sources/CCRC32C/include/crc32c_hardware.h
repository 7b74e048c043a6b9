#ifndef EVENTLOG_CRC32C_HARDWARE_H
#define EVENTLOG_CRC32C_HARDWARE_H

#include <stddef.h>
#include <stdint.h>

/// Whether this CPU computes CRC-32C in hardware (x86-64 with SSE 4.2); checked once.
int eventlog_crc32c_hardware_available(void);

/// Continues the raw (not inverted) CRC-32C register `crc` over `length` bytes at `data`
/// with the CPU's CRC32 instruction. Call only when `eventlog_crc32c_hardware_available()`.
uint32_t eventlog_crc32c_hardware(uint32_t crc, const void *data, size_t length);

#endif
