/* Row-wise argmax on the CPU (first maximum on ties), the local half of distributed greedy
 * decoding. NaN counts as larger than every number (kernels/backend.h says why). */
#include <math.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

/* a beats the current best b: a NaN beats any number but not an earlier NaN, so the first
 * NaN wins as numpy and PyTorch pick it; otherwise strictly larger (the first maximum wins). */
static inline int argmax_beats(float a, float b) { return isnan(a) ? !isnan(b) : a > b; }

void cpu_argmax(void *ctx, float *max_val, int32_t *max_idx, const float *logits, int rows,
                int cols) {
    (void)ctx;
    CHECK(rows >= 0 && cols > 0, "argmax: bad shape rows %d cols %d", rows, cols);
    for (int r = 0; r < rows; r++) {
        const float *x = logits + (long)r * cols;
        int best = 0;
        for (int c = 1; c < cols; c++)
            if (argmax_beats(x[c], x[best])) best = c;
        max_val[r] = x[best];
        max_idx[r] = best;
    }
}
