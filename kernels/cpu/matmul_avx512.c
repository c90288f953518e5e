/* The matmul family for AVX-512 (F, BW, VL, DQ): the fp32 decode GEMV. The weights stream once,
 * one row at a time, while up to four activation rows wait in L1, with a software prefetch
 * GEMV_F32_PREFETCH_BYTES ahead (matmul_isa.h). Row by row keeps a single sequential stream:
 * four interleaved rows measured 13 against 15-16 GB/s here, and two interleaved rows, although
 * faster in isolation, made a GPT-2 decode step 34.3 against 32.5 ms (docs/kernels.md, "Decode:
 * prefetch and lanes"). */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

/* ---- bf16 (levels without vdpbf16ps; matmul_avx512bf16.c has the dot-product ones) ----------
 * round_bf16 in integer ops, so every level gives kernels/quant.c's bits; gemv_bf16 widens
 * bf16 to fp32 in registers (a bf16 is the top half of an fp32), exact, and uses FMA. */

/* out[i] = x[i] to bf16, to nearest even, NaN kept quiet: convert_f32_to_bf16 (kernels/quant.c)
 * sixteen at a time; the tail under 16 through masks, which touch nothing past the end. */
void round_bf16_avx512(uint16_t *out, const float *x, long n) {
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1),
                  quiet = _mm512_set1_epi32(0x0040);
    for (long i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
        const __m512i hi = _mm512_srli_epi32(u, 16);
        // u + 0x7FFF + lsb, then the top half: ties go to the even one
        const __m512i rounded = _mm512_srli_epi32(
            _mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(hi, one))), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
        const __m512i h = _mm512_mask_or_epi32(rounded, nan, hi, quiet);
        _mm512_mask_cvtepi32_storeu_epi16(out + i, m, h);
    }
}

/* 32 bf16 at p (m selects those that are read, the others are 0) as two fp32 vectors: the even
 * elements (shifted into the top half) and the odd ones (already there, low half cleared). The
 * two halves of a product thus meet the same halves of the other operand. */
static inline __attribute__((always_inline)) void bf16x32_widen(__m512 *even, __m512 *odd,
                                                                const uint16_t *p, __mmask32 m) {
    const __m512i v = _mm512_maskz_loadu_epi16(m, p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* y[r * ldy] += x[r] . wo for r < NR (1..4), bf16 x and wo widened as they are loaded. */
static inline __attribute__((always_inline)) void
dot_rows_bf16(float *y, long ldy, const uint16_t *x, const uint16_t *wo, int k, int NR) {
    __m512 acc[4][2];
    for (int i = 0; i < NR; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int c = 0; c < k; c += 32) {
        const __mmask32 m = k - c >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << (k - c)) - 1);
        __m512 we, wd, xe, xd;
        bf16x32_widen(&we, &wd, wo + c, m);
        for (int i = 0; i < NR; i++) {
            bf16x32_widen(&xe, &xd, x + (long)i * k + c, m);
            acc[i][0] = _mm512_fmadd_ps(we, xe, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(wd, xd, acc[i][1]);
        }
    }
    for (int i = 0; i < NR; i++)
        y[(long)i * ldy] += _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
}

/* Weight row by weight row, like gemv_f32_avx512 (one sequential stream). */
void gemv_bf16_avx512(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
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

/* y[r * ldy] += x[r] . wo for r < NR (1..4): two accumulators per activation row hide the FMA
 * latency; the tail of k under 16 uses masked loads, which read nothing past the end. */
static inline __attribute__((always_inline)) void dot_rows_f32(float *y, long ldy, const float *x,
                                                               const float *wo, int k, int NR) {
    __m512 acc[4][2];
    for (int i = 0; i < NR; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    int c = 0;
    for (; c + 32 <= k; c += 32) {
        const char *ahead = (const char *)(wo + c) + GEMV_F32_PREFETCH_BYTES;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        const __m512 w0 = _mm512_loadu_ps(wo + c), w1 = _mm512_loadu_ps(wo + c + 16);
        for (int i = 0; i < NR; i++) {
            acc[i][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + (long)i * k + c), acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + (long)i * k + c + 16), acc[i][1]);
        }
    }
    for (; c < k; c += 16) {
        const __mmask16 m = k - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - c)) - 1);
        const __m512 w0 = _mm512_maskz_loadu_ps(m, wo + c);
        for (int i = 0; i < NR; i++)
            acc[i][0] =
                _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, x + (long)i * k + c), acc[i][0]);
    }
    for (int i = 0; i < NR; i++)
        y[(long)i * ldy] += _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
}

void gemv_f32_avx512(float *y, long ldy, const float *x, const float *w, int rows, int k, int n) {
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

const cpu_matmul_kernels cpu_matmul_avx512 = {
    .gemv_f32 = gemv_f32_avx512,
    .round_bf16 = round_bf16_avx512,
    .gemv_bf16 = gemv_bf16_avx512,
    .gemm_bf16 = NULL,
    .gemm_bf16_pack_bytes = NULL,
    .quantize_q8 = quantize_q8_avx512,
    .gemv_q8 = gemv_q8_avx512,
    .gemv_blocks = gemv_blocks_avx512,
    .gemm_blocks = gemm_blocks_avx2,
    .gemm_blocks_pack_bytes = gemm_blocks_pack_bytes_avx2,
};
