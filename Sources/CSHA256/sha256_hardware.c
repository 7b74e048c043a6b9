#include "sha256_hardware.h"

#if defined(__x86_64__)

#include <immintrin.h>

int eventlog_sha256_hardware_available(void) {
    static int available = -1;
    if (available < 0) {
        __builtin_cpu_init();
        available = __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") ? 1 : 0;
    }
    return available;
}

__attribute__((target("sha,sse4.1")))
void eventlog_sha256_hardware(uint32_t state[8], const void *data, size_t blocks, const uint32_t rounds[64]) {
    // Big-endian words of the message into the lanes' order.
    const __m128i byteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    // SHA256RNDS2 keeps the state as ABEF and CDGH.
    __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    const unsigned char *bytes = data;
    for (; blocks > 0; blocks--, bytes += 64) {
        const __m128i abefBefore = abef, cdghBefore = cdgh;
        __m128i words[16];
        for (int group = 0; group < 16; group++) {
            if (group < 4) {
                words[group] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(bytes + 16 * group)), byteSwap);
            } else {
                // W[t-16] + σ0(W[t-15]), + W[t-7], then + σ1(W[t-2]) word by word.
                __m128i partial = _mm_sha256msg1_epu32(words[group - 4], words[group - 3]);
                partial = _mm_add_epi32(partial, _mm_alignr_epi8(words[group - 1], words[group - 2], 4));
                words[group] = _mm_sha256msg2_epu32(partial, words[group - 1]);
            }
            __m128i message = _mm_add_epi32(words[group], _mm_loadu_si128((const __m128i *)&rounds[4 * group]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, message);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(message, 0x0E));
        }
        abef = _mm_add_epi32(abef, abefBefore);
        cdgh = _mm_add_epi32(cdgh, cdghBefore);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

#else

int eventlog_sha256_hardware_available(void) { return 0; }

void eventlog_sha256_hardware(uint32_t state[8], const void *data, size_t blocks, const uint32_t rounds[64]) {
    (void)rounds;
    (void)state;
    (void)data;
    (void)blocks;
}

#endif
