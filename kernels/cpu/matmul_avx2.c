/* The matmul family for AVX2 with FMA and F16C: the fp32 decode GEMV, one weight row at a time
 * as the AVX-512 level does (matmul_avx512.c says why). */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- bf16 (no bf16 dot product at this level) ---------------------------------------------
 * round_bf16 in integer ops, so every level gives kernels/quant.c's bits; gemv_bf16 widens
 * bf16 to fp32 in registers (a bf16 is the top half of an fp32), exact, and uses FMA. */

/* The bf16 bits of 8 floats, in the low half of each 32-bit lane: convert_f32_to_bf16's
 * integer rounding (kernels/quant.c). */
static inline __m256i bf16x8_round(__m256i u) {
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF),
                                             _mm256_and_si256(hi, _mm256_set1_epi32(1)))),
        16);
    // |u| > infinity's bits is NaN; the signed compare is right as both sides are below 2^31.
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                           _mm256_set1_epi32(0x7F800000));
    return _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, _mm256_set1_epi32(0x0040)), nan);
}

void round_bf16_avx2(uint16_t *out, const float *x, long n) {
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i a = bf16x8_round(_mm256_loadu_si256((const __m256i *)(x + i)));
        const __m256i b = bf16x8_round(_mm256_loadu_si256((const __m256i *)(x + i + 8)));
        // packus works within 128-bit lanes (a0-3 b0-3 | a4-7 b4-7): the permute restores order.
        const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(out + i), h);
    }
    round_bf16_scalar(out + i, x + i, n - i);
}

/* 16 bf16 at p as two fp32 vectors: the even elements (shifted into the top half) and the odd
 * ones (already there, low half cleared), so the halves of a product meet the same halves. */
static inline __attribute__((always_inline)) void bf16x16_widen(__m256 *even, __m256 *odd,
                                                                const uint16_t *p) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

static inline float bf16_widen1(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}

/* y[r * ldy] += x[r] . wo for r < NR (1..4); the tail of k under 16 is summed in scalar. */
static inline __attribute__((always_inline)) void
dot_rows_bf16(float *y, long ldy, const uint16_t *x, const uint16_t *wo, int k, int NR) {
    __m256 acc[4][2];
    for (int i = 0; i < NR; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    int c = 0;
    for (; c + 16 <= k; c += 16) {
        __m256 we, wd, xe, xd;
        bf16x16_widen(&we, &wd, wo + c);
        for (int i = 0; i < NR; i++) {
            bf16x16_widen(&xe, &xd, x + (long)i * k + c);
            acc[i][0] = _mm256_fmadd_ps(we, xe, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(wd, xd, acc[i][1]);
        }
    }
    for (int i = 0; i < NR; i++) {
        float dot = hsum256(_mm256_add_ps(acc[i][0], acc[i][1]));
        for (int j = c; j < k; j++)
            dot += bf16_widen1(x[(long)i * k + j]) * bf16_widen1(wo[j]);
        y[(long)i * ldy] += dot;
    }
}

/* Weight row by weight row, like gemv_f32_avx2 (one sequential stream). */
void gemv_bf16_avx2(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                    int n) {
    for (int o = 0; o < n; o++) {
        const uint16_t *wo = w + (long)o * k;
        for (int r0 = 0; r0 < rows; r0 += 4) {
            float *yr = y + (long)r0 * ldy + o;
            const uint16_t *xr = x + (long)r0 * k;
            switch (rows - r0 < 4 ? rows - r0 : 4) {
            case 1: dot_rows_bf16(yr, ldy, xr, wo, k, 1); break;
            case 2: dot_rows_bf16(yr, ldy, xr, wo, k, 2); break;
            case 3: dot_rows_bf16(yr, ldy, xr, wo, k, 3); break;
            default: dot_rows_bf16(yr, ldy, xr, wo, k, 4); break;
            }
        }
    }
}
/* ---- end of bf16 ------------------------------------------------------------------------- */

/* y[r * ldy] += x[r] . wo for r < NR (1..4); the tail of k under 8 is summed in scalar. */
static inline __attribute__((always_inline)) void dot_rows_f32(float *y, long ldy, const float *x,
                                                               const float *wo, int k, int NR) {
    __m256 acc[4][2];
    for (int i = 0; i < NR; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    int c = 0;
    for (; c + 16 <= k; c += 16) {
        _mm_prefetch((const char *)(wo + c) + GEMV_F32_PREFETCH_BYTES, _MM_HINT_T0);
        const __m256 w0 = _mm256_loadu_ps(wo + c), w1 = _mm256_loadu_ps(wo + c + 8);
        for (int i = 0; i < NR; i++) {
            acc[i][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (long)i * k + c), acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + (long)i * k + c + 8), acc[i][1]);
        }
    }
    for (int i = 0; i < NR; i++) {
        float dot = hsum256(_mm256_add_ps(acc[i][0], acc[i][1]));
        for (int j = c; j < k; j++)
            dot += x[(long)i * k + j] * wo[j];
        y[(long)i * ldy] += dot;
    }
}

void gemv_f32_avx2(float *y, long ldy, const float *x, const float *w, int rows, int k, int n) {
    for (int o = 0; o < n; o++) {
        const float *wo = w + (long)o * k;
        for (int r0 = 0; r0 < rows; r0 += 4) {
            float *yr = y + (long)r0 * ldy + o;
            const float *xr = x + (long)r0 * k;
            switch (rows - r0 < 4 ? rows - r0 : 4) {
            case 1: dot_rows_f32(yr, ldy, xr, wo, k, 1); break;
            case 2: dot_rows_f32(yr, ldy, xr, wo, k, 2); break;
            case 3: dot_rows_f32(yr, ldy, xr, wo, k, 3); break;
            default: dot_rows_f32(yr, ldy, xr, wo, k, 4); break;
            }
        }
    }
}

const cpu_matmul_kernels cpu_matmul_avx2 = {
    .gemv_f32 = gemv_f32_avx2,
    .round_bf16 = round_bf16_avx2,
    .gemv_bf16 = gemv_bf16_avx2,
    .gemm_bf16 = NULL,
    .gemm_bf16_pack_bytes = NULL,
    .quantize_q8 = quantize_q8_avx2,
    .gemv_q8 = gemv_q8_avx2,
    .gemv_blocks = gemv_blocks_avx2,
    .gemm_blocks = gemm_blocks_avx2,
    .gemm_blocks_pack_bytes = gemm_blocks_pack_bytes_avx2,
};
