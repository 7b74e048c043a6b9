#include "crc32c_hardware.h"

#include <string.h>

#if defined(__x86_64__)

int eventlog_crc32c_hardware_available(void) {
    static int available = -1;
    if (available < 0) {
        __builtin_cpu_init();
        available = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    return available;
}

__attribute__((target("sse4.2")))
uint32_t eventlog_crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const unsigned char *bytes = data;
    uint64_t wide = crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, bytes, 8); // unaligned-safe; compiles to one load
        wide = __builtin_ia32_crc32di(wide, word);
        bytes += 8;
        length -= 8;
    }
    uint32_t narrow = (uint32_t)wide;
    while (length > 0) {
        narrow = __builtin_ia32_crc32qi(narrow, *bytes);
        bytes += 1;
        length -= 1;
    }
    return narrow;
}

#else

int eventlog_crc32c_hardware_available(void) { return 0; }

uint32_t eventlog_crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    (void)data;
    (void)length;
    return crc; // never called: the software tables are used instead
}

#endif
