/* The CPU kernels' per-context scratch: grown on first use at a shape and kept, so the decode
 * loop allocates nothing once every shape has run (grow_count lets the tests check that). The
 * kernels call it, and the backend reserves the matmul tiles with it at init; on its own here so
 * that neither calls back into the other. */
#include <stdlib.h>

#include "base/check.h"
#include "kernels/cpu/backend_cpu.h"

float *cpu_scratch_reserve(cpu_ctx *ctx, cpu_scratch *s, size_t floats) {
    if (floats <= s->cap) return s->data;
    free(s->data);
    void *p = NULL;
    CHECK(posix_memalign(&p, 64, floats * sizeof(float)) == 0,
          "cpu backend: cannot allocate %zu bytes of scratch", floats * sizeof(float));
    s->data = p;
    s->cap = floats;
    ctx->grow_count++;
    return s->data;
}
