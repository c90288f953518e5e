/* Row-wise argmax on the CPU (first maximum on ties), the local half of distributed greedy
 * decoding. */
#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

void cpu_argmax(void *ctx, float *max_val, int32_t *max_idx, const float *logits, int rows,
                int cols) {
    (void)ctx;
    CHECK(rows >= 0 && cols > 0, "argmax: bad shape rows %d cols %d", rows, cols);
    for (int r = 0; r < rows; r++) {
        const float *x = logits + (long)r * cols;
        int best = 0;
        for (int c = 1; c < cols; c++)
            if (x[c] > x[best]) best = c; // strict: the first maximum wins
        max_val[r] = x[best];
        max_idx[r] = best;
    }
}
