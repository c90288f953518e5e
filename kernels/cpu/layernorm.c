/* LayerNorm on the CPU, and the fused residual add + LayerNorm that reads the residual stream
 * once. Two passes (mean, then variance of the centred values) in float: the single-pass
 * E[x^2] - E[x]^2 form loses digits when the mean is large against the spread. */
#include <math.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

static void layernorm_row(float *out, const float *x, const float *gamma, const float *beta, int C,
                          float eps) {
    float mean = 0.0f;
    for (int c = 0; c < C; c++)
        mean += x[c];
    mean /= (float)C;
    float var = 0.0f;
    for (int c = 0; c < C; c++) {
        float d = x[c] - mean;
        var += d * d;
    }
    var /= (float)C; // biased, as PyTorch's LayerNorm
    float rstd = 1.0f / sqrtf(var + eps);
    for (int c = 0; c < C; c++)
        out[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
}

void cpu_layernorm(void *ctx, float *out, const float *in, const float *gamma, const float *beta,
                   int rows, int C, float eps) {
    CHECK(rows >= 0 && C > 0, "layernorm: bad shape rows %d C %d", rows, C);
    // Rows are independent and each is computed as on one thread: bit-identical at any count.
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, C))
    for (int r = 0; r < rows; r++)
        layernorm_row(out + (long)r * C, in + (long)r * C, gamma, beta, C, eps);
}

void cpu_residual_layernorm(void *ctx, float *residual, float *norm_out, const float *delta,
                            const float *gamma, const float *beta, int rows, int C, float eps) {
    CHECK(rows >= 0 && C > 0, "residual_layernorm: bad shape rows %d C %d", rows, C);
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, C))
    for (int r = 0; r < rows; r++) {
        float *x = residual + (long)r * C;
        const float *d = delta + (long)r * C;
        for (int c = 0; c < C; c++)
            x[c] += d[c];
        // The row is still in cache from the add: normalising it now is the fusion.
        if (norm_out) layernorm_row(norm_out + (long)r * C, x, gamma, beta, C, eps);
    }
}
