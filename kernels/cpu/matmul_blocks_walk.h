/* How a block-format decode GEMV walks its output (kernels/cpu/matmul_kernels.h,
 * gemv_blocks), and how it sums its lanes, shared by matmul_blocks_avx2.c and
 * matmul_blocks_zmm.h (AVX2 and up). The including file defines:
 *   void qb_tile(float *y, long ldy, const int8_t *q, const float *d, const uint8_t *w,
 *                size_t row_bytes, dtype type, int k, int NR, int NC)
 *       y[r * ldy + j] += the product of activation rows r < NR and weight rows j < NC
 *       (row_bytes apart from w), all of k; always inline, so that each (type, NR, NC) the
 *       walk names is compiled straight-line
 *   int qb_tile_cols(int NR)    the weight rows of a tile for NR activation rows (<= 4)
 * Every activation row is in each tile, so each weight byte is read from memory once; the
 * weight rows of a tile are contiguous, which is what the tiles' prefetch relies on. */
#pragma once
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
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
