/* How a block-format decode GEMV walks its output (kernels/cpu/matmul_kernels.h,
 * gemv_blocks), and how it sums its lanes, shared by matmul_blocks_avx2.c and
 * matmul_blocks_zmm.h (AVX2 and up). The including file defines:
 *   void qb_tile(float *y, long ldy, const int8_t *q, const float *d, const uint8_t *w,
 *                size_t row_bytes, dtype type, int k, int NR, int NC)
 *       y[r * ldy + j] += the product of activation rows r < NR and weight rows j < NC
 *       (row_bytes apart from w), all of k; always inline, so that each (type, NR, NC) the
 *       walk names is compiled straight-line
 *   int qb_tile_cols(int NR)    the weight rows of a tile for NR activation rows (at most what
 *                               the tile's accumulators hold)
 * Every activation row is in each tile, so each weight byte is read from memory once; the
 * weight rows of a tile are contiguous, which is what the tiles' prefetch relies on. */
#pragma once
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/cpu/matmul_blocks_half.h"
#include "kernels/quant_blocks.h"

static inline void qb_tile(float *y, long ldy, const int8_t *q, const float *d, const uint8_t *w,
                           size_t row_bytes, dtype type, int k, int NR, int NC);
static inline int qb_tile_cols(int NR);

/* gemv_blocks_scalar's lanes_sum of the 16 lanes a (0-7) and b (8-15): halved pairwise, as
 * _mm512_reduce_add_ps does. */
static inline __attribute__((always_inline)) float qb_lanes_sum(__m256 a, __m256 b) {
    const __m256 h8 = _mm256_add_ps(a, b);
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

/* A q4_k super-block's eight sub-block scales d * sc (*s) and mins -(dmin * mn) (*m) from its
 * first 16 bytes, as qblocks_unpack gives them (exact in fp32: an fp16 times a 6-bit integer):
 * the 6-bit fields of qblocks_k4_scales taken four bytes at a time, so a tile reads them once
 * per super-block and not per block. */
static inline __attribute__((always_inline)) void qb_k4_scales(const uint8_t *p, __m256 *s,
                                                               __m256 *m) {
    uint32_t u[3];
    __builtin_memcpy(u, p + 4, sizeof u);
    const uint32_t lo6 = 0x3F3F3F3Fu, lo4 = 0x0F0F0F0Fu, top2 = 0x03030303u;
    // sc[0..3] = low six bits of bytes 0-3; sc[4..7] = low nibbles of bytes 8-11 over the top
    // two bits of bytes 0-3; mn likewise from bytes 4-7 and the high nibbles of 8-11
    const uint64_t sc = (uint64_t)(u[0] & lo6) | (uint64_t)((u[2] & lo4) | (u[0] >> 6 & top2) << 4)
                                                     << 32;
    const uint64_t mn =
        (uint64_t)(u[1] & lo6) | (uint64_t)((u[2] >> 4 & lo4) | (u[1] >> 6 & top2) << 4) << 32;
    const __m256 scf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc)));
    const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn)));
    *s = _mm256_mul_ps(_mm256_set1_ps(qb_half(p)), scf);
    *m = _mm256_xor_ps(_mm256_mul_ps(_mm256_set1_ps(qb_half(p + 2)), mnf), _mm256_set1_ps(-0.0f));
}

/* Columns by tiles of qb_tile_cols(NR), the last ones one by one. */
static inline __attribute__((always_inline)) void qb_walk_cols(float *y, long ldy, const int8_t *q,
                                                               const float *d, const uint8_t *w,
                                                               dtype type, int k, int n, int NR) {
    const int NC = qb_tile_cols(NR);
    const size_t row_bytes = qblock_bytes(type) * (size_t)(k / qblock_weights(type));
    int o = 0;
    for (; o + NC <= n; o += NC)
        qb_tile(y + o, ldy, q, d, w + (size_t)o * row_bytes, row_bytes, type, k, NR, NC);
    for (; o < n; o++)
        qb_tile(y + o, ldy, q, d, w + (size_t)o * row_bytes, row_bytes, type, k, NR, 1);
}

/* One instance per format, so that a tile's block loads are straight-line code. */
static inline __attribute__((always_inline)) void qb_walk_types(float *y, long ldy, const int8_t *q,
                                                                const float *d, const uint8_t *w,
                                                                dtype type, int k, int n, int NR) {
    switch (type) {
    case DTYPE_Q8_0: qb_walk_cols(y, ldy, q, d, w, DTYPE_Q8_0, k, n, NR); break;
    case DTYPE_Q4_0: qb_walk_cols(y, ldy, q, d, w, DTYPE_Q4_0, k, n, NR); break;
    case DTYPE_Q4_1: qb_walk_cols(y, ldy, q, d, w, DTYPE_Q4_1, k, n, NR); break;
    default: qb_walk_cols(y, ldy, q, d, w, DTYPE_Q4_K, k, n, NR); break;
    }
}

static void qb_walk(float *y, long ldy, const int8_t *q, const float *d, const void *w, dtype type,
                    int rows, int k, int n) {
    const uint8_t *wb = w;
    switch (rows) {
    case 1: qb_walk_types(y, ldy, q, d, wb, type, k, n, 1); break;
    case 2: qb_walk_types(y, ldy, q, d, wb, type, k, n, 2); break;
    case 3: qb_walk_types(y, ldy, q, d, wb, type, k, n, 3); break;
    case 4: qb_walk_types(y, ldy, q, d, wb, type, k, n, 4); break;
    case 5: qb_walk_types(y, ldy, q, d, wb, type, k, n, 5); break;
    case 6: qb_walk_types(y, ldy, q, d, wb, type, k, n, 6); break;
    case 7: qb_walk_types(y, ldy, q, d, wb, type, k, n, 7); break;
    default: qb_walk_types(y, ldy, q, d, wb, type, k, n, 8); break;
    }
}
