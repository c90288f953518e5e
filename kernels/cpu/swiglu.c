/* SwiGLU on the CPU (Llama's MLP activation): out = silu(gate) * up over the [gate | up] rows
 * of the fused gate/up GEMM (layout in backend.h); rows over threads, each row through the
 * level's kernel (kernels/cpu/activation_kernels.h). */
#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

void cpu_swiglu(void *vctx, float *out, const float *gate_up, int rows, int cols) {
    CHECK(rows >= 0 && cols > 0, "swiglu: bad shape rows %d cols %d", rows, cols);
    CHECK(out != gate_up, "swiglu: out must not alias gate_up");
    cpu_ctx *ctx = vctx;
    const cpu_activation_kernels *k = ctx->kern->activation;
    // Rows are independent and each is computed as on one thread: bit-identical at any count.
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, cols))
    for (int r = 0; r < rows; r++) {
        const float *g = gate_up + (long)r * 2 * cols;
        k->swiglu(out + (long)r * cols, g, g + cols, cols);
    }
}
