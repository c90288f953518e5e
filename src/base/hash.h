/* Counter-based hashing: pure functions of their input, so any rank can draw any element of a
 * synthetic tensor, token stream or arrival stream without communicating. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* splitmix64's finaliser: a bijective mix with good avalanche, cheap enough per element. */
static inline uint64_t hash_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The i-th draw (i >= 0) of the splitmix64 stream started at seed. */
static inline uint64_t hash_stream(uint64_t seed, uint64_t i) {
    return hash_mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1));
}

/* FNV-1a 64 of a string: names tensors in the synthetic weights' key. */
uint64_t hash_fnv1a64(const char *text);

#ifdef __cplusplus
}
#endif
