/* Token + position embedding on the CPU, vocab-parallel: a rank adds only the rows of its
 * vocabulary shard, and an all-reduce completes the sum. Row r is at position pos0 + r % n_new. */
#include <string.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

void cpu_embed(void *ctx, float *out, const int32_t *tokens, const float *wte, const float *wpe,
               int rows, int C, int n_new, int pos0, int vocab_begin, int vocab_end) {
    CHECK(rows >= 0 && C > 0 && vocab_begin <= vocab_end && n_new > 0 && pos0 >= 0 &&
              rows % n_new == 0,
          "embed: bad shape rows %d C %d n_new %d pos0 %d", rows, C, n_new, pos0);
#pragma omp parallel for schedule(static) num_threads(cpu_op_threads(ctx, rows, C))
    for (int r = 0; r < rows; r++) {
        float *o = out + (long)r * C;
        int tok = tokens[r];
        if (tok >= vocab_begin && tok < vocab_end)
            memcpy(o, wte + (long)(tok - vocab_begin) * C, sizeof(float) * (size_t)C);
        else
            memset(o, 0, sizeof(float) * (size_t)C);
        if (wpe) {
            const float *p = wpe + (long)(pos0 + r % n_new) * C;
            for (int c = 0; c < C; c++)
                o[c] += p[c];
        }
    }
}
