/* The matmul family in portable C (kernels/cpu/matmul_kernels.h): the path of processors
 * without AVX2, and the floor every faster level is tested against. Sixteen independent
 * partial sums per dot product let the compiler vectorise each with whatever the baseline has,
 * without reassociating. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant.h"

enum { LANES = 16 };

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void gemv_f32_scalar(float *y, long ldy, const float *x, const float *w, int rows, int k, int n) {
    const int k_main = k - k % LANES;
    for (int o = 0; o < n; o++) {
        const float *wo = w + (long)o * k;
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (long)r * k;
            float lane[LANES] = {0};
            for (int c = 0; c < k_main; c += LANES)
                for (int j = 0; j < LANES; j++)
                    lane[j] += xr[c + j] * wo[c + j];
            float dot = 0.0f;
            for (int c = k_main; c < k; c++)
                dot += xr[c] * wo[c];
            for (int j = 0; j < LANES; j++)
                dot += lane[j];
            y[(long)r * ldy + o] += dot;
        }
    }
}

void round_bf16_scalar(uint16_t *out, const float *x, long n) { convert_f32_to_bf16(out, x, n); }

void gemv_bf16_scalar(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                      int n) {
    const int k_main = k - k % LANES;
    for (int o = 0; o < n; o++) {
        const uint16_t *wo = w + (long)o * k;
        for (int r = 0; r < rows; r++) {
            const uint16_t *xr = x + (long)r * k;
            float lane[LANES] = {0};
            for (int c = 0; c < k_main; c += LANES)
                for (int j = 0; j < LANES; j++)
                    lane[j] += bf16_to_f32(xr[c + j]) * bf16_to_f32(wo[c + j]);
            float dot = 0.0f;
            for (int c = k_main; c < k; c++)
                dot += bf16_to_f32(xr[c]) * bf16_to_f32(wo[c]);
            for (int j = 0; j < LANES; j++)
                dot += lane[j];
            y[(long)r * ldy + o] += dot;
        }
    }
}

void quantize_q8_scalar(int8_t *q, float *d, const float *x, int rows, int k, int block) {
    const int nb = (k + block - 1) / block;
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < nb; b++) {
            const float *xb = x + (long)r * k + (long)b * block;
            int8_t *qb = q + (long)r * k + (long)b * block;
            const int len = k - b * block < block ? k - b * block : block;
            float amax = 0.0f;
            for (int i = 0; i < len; i++)
                amax = fmaxf(amax, fabsf(xb[i]));
            const float scale = amax / 127.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
            d[(long)r * nb + b] = scale;
            for (int i = 0; i < len; i++) {
                float v = rintf(xb[i] * inv); // the default rounding mode: to nearest even
                qb[i] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
            }
        }
}

void gemv_q8_scalar(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                    const float *ws, int group, int rows, int k, int n, int block) {
    const int nb = (k + block - 1) / block, ng = group ? (k + group - 1) / group : 1;
    for (int o = 0; o < n; o++) {
        const int8_t *wo = w + (long)o * k;
        for (int r = 0; r < rows; r++) {
            const int8_t *qr = q + (long)r * k;
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const int c0 = b * block, c1 = c0 + block < k ? c0 + block : k;
                int32_t isum = 0;
                for (int c = c0; c < c1; c++)
                    isum += (int32_t)qr[c] * (int32_t)wo[c];
                const float s = group ? ws[(long)o * ng + c0 / group] : 1.0f;
                acc += d[(long)r * nb + b] * s * (float)isum;
            }
            y[(long)r * ldy + o] += group ? acc : acc * ws[o];
        }
    }
}

const cpu_matmul_kernels cpu_matmul_scalar = {
    .gemv_f32 = gemv_f32_scalar,
    .round_bf16 = round_bf16_scalar,
    .gemv_bf16 = gemv_bf16_scalar,
    .gemm_bf16 = NULL, // matmul.c widens to fp32 and calls sgemm
    .gemm_bf16_pack_bytes = NULL,
    .quantize_q8 = quantize_q8_scalar,
    .gemv_q8 = gemv_q8_scalar,
    .gemv_blocks = gemv_blocks_scalar,
    .gemm_blocks = gemm_blocks_scalar,
    .gemm_blocks_pack_bytes = gemm_blocks_pack_bytes_scalar,
};
