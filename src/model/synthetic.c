/* Synthetic weights: each element is a pure function of (seed, tensor name, global index),
 * so any rank can fill just its shard and every factorization holds the same model.
 * The formula is documented in docs/design.md; changing it changes every synthetic model. */
#include <math.h>
#include <stdint.h>

#include "base/hash.h"
#include "model/model.h"

/* splitmix64 with the golden-ratio increment folded in: the published formula
 * (docs/design.md) hashes x + 0x9e37..., so keep this exact form. */
uint64_t synthetic_hash64(uint64_t x) { return hash_mix64(x + 0x9e3779b97f4a7c15ull); }

uint64_t synthetic_name_hash(const char *name) { return hash_fnv1a64(name); }

/* Irwin-Hall sum of four uniforms from the four 16-bit fields of one hash, rescaled to unit
 * variance: integer-exact up to the final scaling, so identical on every machine. */
static float unit_normal_from_hash(uint64_t h) {
    double sum = 0.0;
    for (int k = 0; k < 4; k++)
        sum += ((double)((h >> (16 * k)) & 0xffff) + 0.5) / 65536.0;
    return (float)((sum - 2.0) * 1.7320508075688772); /* sqrt(3) */
}

uint64_t synthetic_key(uint64_t seed, const char *tensor_name) {
    return synthetic_hash64(seed ^ synthetic_name_hash(tensor_name));
}

float synthetic_value_keyed(uint64_t key, long global_index, init_kind init, float std) {
    float z = unit_normal_from_hash(synthetic_hash64(key + (uint64_t)global_index));
    switch (init) {
    case INIT_ONES_NOISE: return 1.0f + std * z;
    case INIT_NORMAL:
    case INIT_ZEROS_NOISE: return std * z;
    }
    return std * z;
}

float synthetic_value(uint64_t seed, const char *tensor_name, long global_index, init_kind init,
                      float std) {
    return synthetic_value_keyed(synthetic_key(seed, tensor_name), global_index, init, std);
}
