/* The block formats' decode GEMV on 512-bit vectors (kernels/cpu/matmul_kernels.h,
 * gemv_blocks), shared by matmul_q8_avx512.c and matmul_q8_avx512vnni.c, which include it
 * after matmul_q8_zmm.h with their q8_row, q8_col and q8_dot (q8_0's signed weights) and
 *   __m512i q8_dot_u(__m512i init, __m512i x, __m512i w)
 *       init + the 16 lanes of x . w for unsigned weight bytes w <= 15 (the q4 nibbles) and
 *       signed x, each the exact int32 sum of 4 neighbouring products. A 64-byte vector holds two
 * blocks of 32 weights, widened from the packed bytes in registers (nibbles split and masked,
 * fp16 scales converted exactly), so memory streams the blocks as stored and nothing is
 * unpacked through memory. Its int32 lanes are 4-product sums, exact, and meet the scales in
 * the order gemv_blocks_scalar defines: that of q8_zmm_tile with group = block = 32, so q8_0
 * and q4_0 give the bits int8w gives on the same quants at these levels. */
#pragma once
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/matmul_blocks_walk.h"
#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant_blocks.h"

/* Blocks b and b + 1 of a weight row as a chunk: w the 64 weights (q8_0's int8; q4's nibbles,
 * unsigned), s and m the lanes' weight scales and mins (lanes 0-7 block b, 8-15 block b + 1),
 * zero for an absent block b + 1 (two == 0), whose activations load as zero too. */
typedef struct {
    __m512i w;
    __m512 s, m;
} qb_zmm_chunk;

/* The fp16 values of e0 and e1 (4 bytes each: q4_1's d and m; else d and 2 bytes more),
 * widened in one conversion, exactly, and spread: lanes 0-7 of *s e0's first and 8-15 e1's
 * first, *m likewise with their seconds. */
static inline __attribute__((always_inline)) void qb_zmm_scales(uint32_t e0, uint32_t e1, __m512 *s,
                                                                __m512 *m) {
    const __m128 h = _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)e0), (int)e1, 1));
    const __m512 v = _mm512_castps128_ps512(h); // lanes past 3 are never selected
    *s =
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), v);
    *m =
        _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), v);
}

static inline __attribute__((always_inline)) uint32_t qb_u32(const uint8_t *p) {
    uint32_t u;
    __builtin_memcpy(&u, p, sizeof u);
    return u;
}

/* Lanes 0-7 of v's element i, 8-15 of its element i + 1. */
static inline __attribute__((always_inline)) __m512 qb_zmm_spread(__m256 v, int i) {
    const __m512i idx = _mm512_add_epi32(
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), _mm512_set1_epi32(i));
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(v));
}

/* 16 bytes of q4 nibbles of each of two blocks (lo, hi) as 64 weights: byte j's low nibble is
 * weight j, its high nibble weight j + 16 (ggml's q4_0 and q4_1 layout). */
static inline __attribute__((always_inline)) __m512i qb_zmm_nibbles(__m128i lo, __m128i hi) {
    const __m512i both = _mm512_castsi256_si512(_mm256_set_m128i(hi, lo));
    const __m512i dup = _mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(1, 1, 0, 0));
    const __m512i shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    return _mm512_and_si512(_mm512_srlv_epi64(dup, shift), _mm512_set1_epi8(0x0F));
}

/* Blocks b, b + 1 of the row at p (its first byte); q4_k's scales and mins from ks, km, its
 * super-block's (qb_k4_scales). TYPE is a constant where this inlines. */
static inline __attribute__((always_inline)) qb_zmm_chunk
qb_zmm_load(const uint8_t *p, dtype type, int b, int two, __m256 ks, __m256 km) {
    qb_zmm_chunk c = {.m = _mm512_setzero_ps()};
    if (type == DTYPE_Q8_0) {
        const uint8_t *p0 = p + (size_t)b * 34, *p1 = p0 + 34;
        const __m256i lo = _mm256_loadu_si256((const __m256i *)(p0 + 2));
        const __m256i hi =
            two ? _mm256_loadu_si256((const __m256i *)(p1 + 2)) : _mm256_setzero_si256();
        c.w = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        __m512 unused;
        qb_zmm_scales(qb_u32(p0), two ? qb_u32(p1) : 0, &c.s, &unused);
    } else if (type == DTYPE_Q4_0 || type == DTYPE_Q4_1) {
        const size_t bb = type == DTYPE_Q4_0 ? 18 : 20, off = type == DTYPE_Q4_0 ? 2 : 4;
        const uint8_t *p0 = p + (size_t)b * bb, *p1 = p0 + bb;
        const __m128i lo = _mm_loadu_si128((const __m128i *)(p0 + off));
        const __m128i hi = two ? _mm_loadu_si128((const __m128i *)(p1 + off)) : _mm_setzero_si128();
        c.w = qb_zmm_nibbles(lo, hi);
        // q4_0's 2 bytes past d are quants; their lanes in m are dropped
        __m512 m;
        qb_zmm_scales(qb_u32(p0), two ? qb_u32(p1) : 0, &c.s, &m);
        if (type == DTYPE_Q4_1) c.m = m;
    } else { /* DTYPE_Q4_K: b even, sub-blocks b % 8 and b % 8 + 1 of super-block b / 8 */
        const int j = b % 8; // sub-block 2c is the low nibbles of bytes 32c.., 2c + 1 the high
        const __m256i v =
            _mm256_loadu_si256((const __m256i *)(p + (size_t)(b / 8) * 144 + 16 + 16 * j));
        const __m256i f = _mm256_set1_epi8(0x0F);
        c.w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, f)),
                                 _mm256_and_si256(_mm256_srli_epi16(v, 4), f), 1);
        c.s = qb_zmm_spread(ks, j);
        c.m = qb_zmm_spread(km, j);
    }
    return c;
}

/* Rows r < NR and weight rows j < NC, all of k: q8_0's chunks meet the activations through
 * q8_row, q8_col and q8_dot; the q4 nibbles, unsigned already, through q8_dot_u on the
 * activations as they are (q4_0's - 8 taken off as 8 * the activation sums). */
static inline __attribute__((always_inline)) void qb_tile(float *y, long ldy, const int8_t *q,
                                                          const float *d, const uint8_t *w,
                                                          size_t row_bytes, dtype type, int k,
                                                          int NR, int NC) {
    // the activations' 4-value sums serve the mins and q4_0's - 8: every format but q8_0
    const int nb = k / QBLOCK, mins = qblock_has_mins(type), xsums = type != DTYPE_Q8_0;
    const size_t chunk_bytes = row_bytes * 64 / (size_t)k; // bytes of two blocks
    const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    const __m512i pair_idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 acc[8][4];
    __m256 ks[4], km[4];
    for (int j = 0; j < NC; j++)
        ks[j] = km[j] = _mm256_setzero_ps();
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++)
            acc[r][j] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        const __mmask64 xm = two ? ~0ULL : 0xFFFFFFFFULL;
        qb_zmm_chunk ch[4];
        __m512i init[4];
        for (int j = 0; j < NC; j++) {
            // the NC rows are NC * row_bytes contiguous bytes, read one chunk of each at a time
            _mm_prefetch((const char *)(w + (size_t)NC * (size_t)(b / 2) * chunk_bytes + 64 * j +
                                        Q8_ZMM_PREFETCH),
                         _MM_HINT_T0);
            if (type == DTYPE_Q4_K && b % 8 == 0)
                qb_k4_scales(w + (size_t)j * row_bytes + (size_t)(b / 8) * 144, &ks[j], &km[j]);
            ch[j] = qb_zmm_load(w + (size_t)j * row_bytes, type, b, two, ks[j], km[j]);
            init[j] = type == DTYPE_Q8_0 ? q8_col(ch[j].w) : zero;
        }
        for (int r = 0; r < NR; r++) {
            const __m512i x = _mm512_maskz_loadu_epi8(xm, q + (long)r * k + (long)b * QBLOCK);
            const q8_xrow xr = q8_row(type == DTYPE_Q8_0 ? x : zero);
            // the activation scales of blocks b and b + 1 (0 when absent) over the lanes
            const __m512 dv = _mm512_permutexvar_ps(
                pair_idx,
                _mm512_castps128_ps512(_mm_maskz_loadu_ps(two ? 3 : 1, d + (long)r * nb + b)));
            const __m512i xs = xsums ? q8_dot_u(zero, x, ones) : zero;
            const __m512i xs8 = _mm512_slli_epi32(xs, 3);
            for (int j = 0; j < NC; j++) {
                __m512i isum =
                    type == DTYPE_Q8_0 ? q8_dot(init[j], xr, ch[j].w) : q8_dot_u(zero, x, ch[j].w);
                if (type == DTYPE_Q4_0) isum = _mm512_sub_epi32(isum, xs8);
                acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dv, ch[j].s),
                                            acc[r][j]);
                if (mins)
                    acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(xs), _mm512_mul_ps(dv, ch[j].m),
                                                acc[r][j]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++)
            y[(long)r * ldy + j] += qb_lanes_sum(
                _mm512_castps512_ps256(acc[r][j]),
                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][j]), 1)));
}

/* As q8_zmm_cols chooses them. */
static inline __attribute__((always_inline)) int qb_tile_cols(int NR) { return NR <= 2 ? 2 : 3; }
