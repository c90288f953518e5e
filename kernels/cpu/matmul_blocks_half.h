/* A block's fp16 scale (or min) widened to fp32, for the block kernels' shared headers
 * (matmul_blocks_walk.h, matmul_blocks_pack.h). It takes F16C, which every file including it has:
 * they are compiled for AVX2 and up, whose flags (CMakeLists.txt) include -mf16c. */
#pragma once
#include <immintrin.h>
#include <stdint.h>

/* The fp16 at p, widened (exact): convert_f16_to_f32's value, but for a signalling NaN, which
 * comes back quiet, as the first product it meets would make it anyway. */
static inline __attribute__((always_inline)) float qb_half(const uint8_t *p) {
    uint16_t h;
    __builtin_memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}
