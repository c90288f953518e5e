/* Mixture of experts on the CPU: gathering the token rows an expert serves and adding its
 * weighted output rows back (layout in backend.h). Rows are independent, and each is computed
 * as on one thread, so the result is bit-identical at any thread count. */
#include <string.h>

#include "base/check.h"
#include "kernels/cpu/backend_cpu.h"

void cpu_gather_rows(void *vctx, float *out, const float *in, const int32_t *idx, int n, int C) {
    CHECK(n >= 0 && C > 0, "gather_rows: bad shape n %d C %d", n, C);
    cpu_ctx *ctx = vctx;
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, n, C))
    for (int i = 0; i < n; i++)
        memcpy(out + (long)i * C, in + (long)idx[i] * C, (size_t)C * sizeof(float));
}

void cpu_scatter_add_rows(void *vctx, float *out, const float *in, const int32_t *idx,
                          const float *weight, int n, int C) {
    CHECK(n >= 0 && C > 0, "scatter_add_rows: bad shape n %d C %d", n, C);
    cpu_ctx *ctx = vctx;
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, n, C))
    for (int i = 0; i < n; i++) {
        float *o = out + (long)idx[i] * C;
        const float *x = in + (long)i * C, w = weight[i];
        for (int c = 0; c < C; c++)
            o[c] += w * x[c];
    }
}
