/* The matmul family for AVX-512 (F, BW, VL, DQ): the fp32 decode GEMV. The weights stream once,
 * one row at a time, while up to four activation rows wait in L1; row by row keeps a single
 * sequential stream, which the hardware prefetcher follows best (four interleaved rows measured
 * 13 against 15-16 GB/s here, and 27 with huge pages: kernels/cpu/backend_cpu.c). */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

/* y[r * ldy] += x[r] . wo for r < NR (1..4): two accumulators per activation row hide the FMA
 * latency; the tail of k under 16 uses masked loads, which read nothing past the end. */
static inline __attribute__((always_inline)) void dot_rows_f32(float *y, long ldy, const float *x,
                                                               const float *wo, int k, int NR) {
    __m512 acc[4][2];
    for (int i = 0; i < NR; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    int c = 0;
    for (; c + 32 <= k; c += 32) {
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
    .round_bf16 = round_bf16_scalar,
    .gemv_bf16 = gemv_bf16_scalar,
    .gemm_bf16 = NULL,
    .gemm_bf16_pack_bytes = NULL,
    .quantize_q8 = quantize_q8_scalar,
    .gemv_q8 = gemv_q8_scalar,
};
