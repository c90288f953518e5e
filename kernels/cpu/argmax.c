/* Row-wise argmax on the CPU (first maximum on ties), the local half of distributed greedy
 * decoding. NaN counts as larger than every number (kernels/backend.h says why). */
#include <math.h>
#include <omp.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

/* Chunks a row's columns split into at most (per-thread winners live on the stack). */
enum { ARGMAX_MAX_CHUNKS = 64 };

/* a beats the current best b: a NaN beats any number but not an earlier NaN, so the first
 * NaN wins as numpy and PyTorch pick it; otherwise strictly larger (the first maximum wins). */
static inline int argmax_beats(float a, float b) { return isnan(a) ? !isnan(b) : a > b; }

/* The first best column of x[c0, c1), c0 < c1. */
static int argmax_span(const float *x, int c0, int c1) {
    int best = c0;
    for (int c = c0 + 1; c < c1; c++)
        if (argmax_beats(x[c], x[best])) best = c;
    return best;
}

void cpu_argmax(void *vctx, float *max_val, int32_t *max_idx, const float *logits, int rows,
                int cols) {
    const cpu_ctx *ctx = vctx;
    CHECK(rows >= 0 && cols > 0, "argmax: bad shape rows %d cols %d", rows, cols);
    int nt = cpu_op_threads(ctx, rows, cols);
    if (nt > ARGMAX_MAX_CHUNKS) nt = ARGMAX_MAX_CHUNKS;
    if (nt == 1 || rows >= nt) {
        // Enough rows for every thread (prefill, a batch): each row whole on one thread.
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int r = 0; r < rows; r++) {
            const float *x = logits + (long)r * cols;
            const int best = argmax_span(x, 0, cols);
            max_val[r] = x[best];
            max_idx[r] = best;
        }
        return;
    }
    // Fewer rows than threads (decode): each row's columns in nt chunks, whose winners are
    // merged in column order with the same rule, so a tie or a NaN resolves exactly as the
    // serial scan: a later chunk wins only by beating every earlier one.
    for (int r = 0; r < rows; r++) {
        const float *x = logits + (long)r * cols;
        int wins[ARGMAX_MAX_CHUNKS];
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num(), n = omp_get_num_threads();
            const int c0 = (int)((long)cols * t / n), c1 = (int)((long)cols * (t + 1) / n);
            wins[t] = c0 < c1 ? argmax_span(x, c0, c1) : -1;
#pragma omp barrier
#pragma omp single
            {
                int best = -1;
                for (int i = 0; i < n; i++)
                    if (wins[i] >= 0 && (best < 0 || argmax_beats(x[wins[i]], x[best])))
                        best = wins[i];
                max_val[r] = x[best];
                max_idx[r] = best;
            }
        }
    }
}
