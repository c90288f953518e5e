/* The block formats' decode GEMV for AVX2 (kernels/cpu/matmul_kernels.h, gemv_blocks): one
 * block of 32 weights per 256-bit vector, widened from the packed bytes in registers, with
 * maddubs as gemv_q8_avx2 (docs/kernels.md, "int8 on the CPU"). The scalar
 * twin's 16 lanes are two accumulators here, even blocks in one and odd in the other, summed
 * at the end as the 512-bit levels halve theirs, so every level gives the same bits. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/matmul_blocks_walk.h"
#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant_blocks.h"

/* How far ahead of a tile's progress its weight bytes are prefetched (as gemv_q8_avx2). */
enum { QB_YMM_PREFETCH = 8192 };

/* Block b of the row at p: its 32 weights (q8_0 int8; q4 the nibbles, unsigned), its scale *s
 * and min *m (0 without one). q4_k's come from ks, km, its super-block's (qb_k4_scales). TYPE
 * is a constant where this inlines. */
static inline __attribute__((always_inline)) __m256i
block_load(const uint8_t *p, dtype type, int b, __m256 ks, __m256 km, __m256 *s, __m256 *m) {
    const __m256i f = _mm256_set1_epi8(0x0F);
    *m = _mm256_setzero_ps();
    if (type == DTYPE_Q8_0) {
        const uint8_t *pb = p + (size_t)b * 34;
        *s = _mm256_set1_ps(qb_half(pb));
        return _mm256_loadu_si256((const __m256i *)(pb + 2));
    }
    if (type == DTYPE_Q4_0 || type == DTYPE_Q4_1) {
        const size_t bb = type == DTYPE_Q4_0 ? 18 : 20, off = type == DTYPE_Q4_0 ? 2 : 4;
        const uint8_t *pb = p + (size_t)b * bb;
        *s = _mm256_set1_ps(qb_half(pb));
        if (type == DTYPE_Q4_1) *m = _mm256_set1_ps(qb_half(pb + 2));
        // byte j's low nibble is weight j, its high nibble weight j + 16
        const __m128i v = _mm_loadu_si128((const __m128i *)(pb + off));
        return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), f);
    }
    /* DTYPE_Q4_K: sub-block b % 8 of super-block b / 8; sub-block 2c is the low nibbles of
     * bytes 32c.., 2c + 1 their high nibbles */
    const int j = b % 8;
    *s = _mm256_permutevar8x32_ps(ks, _mm256_set1_epi32(j));
    *m = _mm256_permutevar8x32_ps(km, _mm256_set1_epi32(j));
    const __m256i v =
        _mm256_loadu_si256((const __m256i *)(p + (size_t)(b / 8) * 144 + 16 + 32 * (j / 2)));
    return _mm256_and_si256(j % 2 ? _mm256_srli_epi16(v, 4) : v, f);
}

/* Rows r < NR and weight rows j < NC, all of k: per block, the 4-product sums of q8_0 with the
 * sign trick (maddubs multiplies unsigned by signed bytes, so x's sign moves onto w), of the
 * q4 nibbles straight (unsigned already; q4_0's - 8 taken off as 8 * the x sums); madd with
 * ones widens pairs to int32 lanes, exactly. */
static inline __attribute__((always_inline)) void qb_tile(float *y, long ldy, const int8_t *q,
                                                          const float *d, const uint8_t *w,
                                                          size_t row_bytes, dtype type, int k,
                                                          int NR, int NC) {
    // the activations' 4-value sums serve the mins and q4_0's - 8: every format but q8_0
    const int nb = k / QBLOCK, mins = qblock_has_mins(type), xsums = type != DTYPE_Q8_0;
    const size_t block_bytes = row_bytes * QBLOCK / (size_t)k;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256 acc[8][2][2], ks[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, km[2] = {ks[0], ks[0]};
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++)
            acc[r][j][0] = acc[r][j][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i wv[2];
        __m256 s[2], m[2];
        for (int j = 0; j < NC; j++) {
            if (b % 2 == 0)
                _mm_prefetch((const char *)(w + (size_t)NC * (size_t)b * block_bytes + 64 * j +
                                            QB_YMM_PREFETCH),
                             _MM_HINT_T0);
            if (type == DTYPE_Q4_K && b % 8 == 0)
                qb_k4_scales(w + (size_t)j * row_bytes + (size_t)(b / 8) * 144, &ks[j], &km[j]);
            wv[j] = block_load(w + (size_t)j * row_bytes, type, b, ks[j], km[j], &s[j], &m[j]);
        }
        for (int r = 0; r < NR; r++) {
            const __m256i x =
                _mm256_loadu_si256((const __m256i *)(q + (long)r * k + (long)b * QBLOCK));
            const __m256 dv = _mm256_broadcast_ss(d + (long)r * nb + b);
            const __m256i xs =
                xsums ? _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, x), ones16) : x;
            const __m256i xa = type == DTYPE_Q8_0 ? _mm256_abs_epi8(x) : x;
            for (int j = 0; j < NC; j++) {
                const __m256i pairs = type == DTYPE_Q8_0
                                          ? _mm256_maddubs_epi16(xa, _mm256_sign_epi8(wv[j], x))
                                          : _mm256_maddubs_epi16(wv[j], x);
                __m256i isum = _mm256_madd_epi16(pairs, ones16);
                if (type == DTYPE_Q4_0) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(xs, 3));
                __m256 *a = &acc[r][j][b % 2];
                *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dv, s[j]), *a);
                if (mins) *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(xs), _mm256_mul_ps(dv, m[j]), *a);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++)
            y[(long)r * ldy + j] += qb_lanes_sum(acc[r][j][0], acc[r][j][1]);
}

/* Two weight rows for one or two activation rows (8 accumulators), one from three rows, where
 * the accumulators alone fill the 16 registers at 8. */
static inline __attribute__((always_inline)) int qb_tile_cols(int NR) { return NR <= 2 ? 2 : 1; }

void gemv_blocks_avx2(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                      dtype type, int rows, int k, int n) {
    qb_walk(y, ldy, q, d, w, type, rows, k, n);
}
