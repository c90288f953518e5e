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

/* y[r * ldy] += x[r] . wo for r < NR (1..4); the tail of k under 8 is summed in scalar. */
static inline __attribute__((always_inline)) void dot_rows_f32(float *y, long ldy, const float *x,
                                                               const float *wo, int k, int NR) {
    __m256 acc[4][2];
    for (int i = 0; i < NR; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    int c = 0;
    for (; c + 16 <= k; c += 16) {
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
    .round_bf16 = round_bf16_scalar,
    .gemv_bf16 = gemv_bf16_scalar,
    .gemm_bf16 = NULL,
    .gemm_bf16_pack_bytes = NULL,
    .quantize_q8 = quantize_q8_scalar,
    .gemv_q8 = gemv_q8_scalar,
};
