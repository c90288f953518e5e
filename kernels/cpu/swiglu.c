/* SwiGLU on the CPU (Llama's MLP activation): out = silu(gate) * up over the [gate | up] rows
 * of the fused gate/up GEMM (layout in backend.h). */
#include <math.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

void cpu_swiglu(void *ctx, float *out, const float *gate_up, int rows, int cols) {
    CHECK(rows >= 0 && cols > 0, "swiglu: bad shape rows %d cols %d", rows, cols);
    CHECK(out != gate_up, "swiglu: out must not alias gate_up");
    // Rows are independent and each is computed as on one thread: bit-identical at any count.
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, cols))
    for (int r = 0; r < rows; r++) {
        const float *g = gate_up + (long)r * 2 * cols, *u = g + cols;
        float *o = out + (long)r * cols;
        // g / (1 + e^-g): for g below about -88 e^-g overflows to inf and the quotient is -0,
        // the right limit, with no NaN.
        for (int c = 0; c < cols; c++)
            o[c] = g[c] / (1.0f + expf(-g[c])) * u[c];
    }
}
