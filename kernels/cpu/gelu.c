/* Bias add + GELU (tanh approximation, as GPT-2) on the CPU, in place: rows over threads, each
 * row through the level's kernel (kernels/cpu/activation_kernels.h). */
#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

void cpu_bias_gelu(void *vctx, float *inout, const float *bias, int rows, int cols) {
    CHECK(rows >= 0 && cols > 0, "bias_gelu: bad shape rows %d cols %d", rows, cols);
    cpu_ctx *ctx = vctx;
    const cpu_activation_kernels *k = ctx->kern->activation;
    // Rows are independent and each is computed as on one thread: bit-identical at any count.
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, cols))
    for (int r = 0; r < rows; r++)
        k->bias_gelu(inout + (long)r * cols, bias, cols);
}
