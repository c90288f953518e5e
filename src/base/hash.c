/* String hashing for counter-based generators (hash.h). */
#include "base/hash.h"

uint64_t hash_fnv1a64(const char *text) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}
