/* RMSNorm on the CPU (Llama), and the fused residual add + RMSNorm that reads the residual
 * stream once, with residual_layernorm's calling convention. The sum of squares accumulates in
 * double: it has no cancellation, but a float sum over C of 8192 loses about C * 2^-24. */
#include <math.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

static void rmsnorm_row(float *out, const float *x, const float *w, int C, float eps) {
    double sq = 0.0;
    for (int c = 0; c < C; c++)
        sq += (double)x[c] * x[c];
    float rstd = (float)(1.0 / sqrt(sq / C + (double)eps));
    for (int c = 0; c < C; c++)
        out[c] = x[c] * rstd * w[c];
}

void cpu_rmsnorm(void *ctx, float *out, const float *in, const float *w, int rows, int C,
                 float eps) {
    CHECK(rows >= 0 && C > 0, "rmsnorm: bad shape rows %d C %d", rows, C);
    // Rows are independent and each is computed as on one thread: bit-identical at any count.
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, C))
    for (int r = 0; r < rows; r++)
        rmsnorm_row(out + (long)r * C, in + (long)r * C, w, C, eps);
}

void cpu_residual_rmsnorm(void *ctx, float *residual, float *norm_out, const float *delta,
                          const float *w, int rows, int C, float eps) {
    CHECK(rows >= 0 && C > 0, "residual_rmsnorm: bad shape rows %d C %d", rows, C);
    CHECK(norm_out != residual, "residual_rmsnorm: norm_out must not alias residual");
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, C))
    for (int r = 0; r < rows; r++) {
        float *x = residual + (long)r * C;
        const float *d = delta + (long)r * C;
        for (int c = 0; c < C; c++)
            x[c] += d[c];
        // The row is still in cache from the add: normalising it now is the fusion.
        if (norm_out) rmsnorm_row(norm_out + (long)r * C, x, w, C, eps);
    }
}
