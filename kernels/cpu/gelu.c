/* Bias add + GELU (tanh approximation, as GPT-2) on the CPU, in place. */
#include <math.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

void cpu_bias_gelu(void *ctx, float *inout, const float *bias, int rows, int cols) {
    CHECK(rows >= 0 && cols > 0, "bias_gelu: bad shape rows %d cols %d", rows, cols);
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
    // Rows are independent and each is computed as on one thread: bit-identical at any count.
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, cols))
    for (int r = 0; r < rows; r++) {
        float *x = inout + (long)r * cols;
        for (int c = 0; c < cols; c++) {
            float v = x[c] + (bias ? bias[c] : 0.0f);
            // 0.5 v (1 + tanh(u)) == v * sigmoid(2u): one expf instead of tanhf, which is
            // several times slower, and no cancellation for negative u.
            x[c] = v / (1.0f + expf(-2.0f * k * (v + 0.044715f * v * v * v)));
        }
    }
}
