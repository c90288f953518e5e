/* Benchmark (not a test): the CPU attention op alone on GPT-2 124M's shape (12 heads of 64,
 * batch 1), prefill of N tokens through each prefill path (two sgemm per head, tiled with
 * sgemm tiles, tiled with the level's own kernels) and one decode step at context N, on 1 and
 * 2 threads; the best of several repetitions, in milliseconds. Checks the paths agree.
 *   build/tests/bench_attention [--isa LEVEL] [N...] (default 128 512 2048) */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/ref_ops.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int lens[8] = {128, 512, 2048}, nlens = 3, arg = 1;
    const char *isa = NULL;
    if (argc > 2 && !strcmp(argv[1], "--isa")) isa = argv[2], arg = 3;
    if (argc > arg) {
        nlens = argc - arg < 8 ? argc - arg : 8;
        for (int i = 0; i < nlens; i++)
            lens[i] = atoi(argv[arg + i]);
    }
    const int H = 12, hd = 64, reps = 5;
    const long C = (long)H * hd, row = 3 * C;
    const char *names[] = {"two-sgemm", "tiled-sgemm", "tiled-own"};
    printf("%-6s %-8s %-12s %12s %12s\n", "N", "threads", "prefill", "prefill_ms", "decode_ms");
    for (int li = 0; li < nlens; li++) {
        const int n = lens[li];
        uint64_t rng = 7;
        float *qkv = malloc(sizeof(float) * (size_t)(n * row));
        float *out = malloc(sizeof(float) * (size_t)(n * C)), *first = NULL;
        ref_fill_uniform(qkv, (long)n * row, &rng, -1, 1);
        for (int th = 1; th <= 2; th++) {
            backend be;
            backend_options opt = {.threads = th, .max_marks = 1, .cpu_isa = isa};
            if (backend_cpu_init(&be, &opt)) return 1;
            cpu_ctx *ctx = be.ctx;
            kv_view kv = {.max_ctx = n + 1, .heads = H, .kv_heads = H, .head_dim = hd};
            kv.k = be.ops->alloc(be.ctx, sizeof(float) * (size_t)(H * (n + 1) * hd));
            kv.v = be.ops->alloc(be.ctx, sizeof(float) * (size_t)(H * (n + 1) * hd));
            for (int m = 0; m < 3; m++) {
                ctx->attn_tiled_min = m == 0 ? INT_MAX : 1;
                ctx->attn_tile_gemm = m == 1;
                double best = 1e9, dbest = 1e9;
                for (int r = 0; r < reps; r++) {
                    double t0 = now();
                    be.ops->attention(be.ctx, out, qkv, kv, NULL, 0, 1, n, 0);
                    double t1 = now();
                    best = t1 - t0 < best ? t1 - t0 : best;
                }
                for (int r = 0; r < 4 * reps; r++) {
                    double t0 = now();
                    be.ops->attention(be.ctx, out + C, qkv, kv, NULL, 0, 1, 1, n);
                    double t1 = now();
                    dbest = t1 - t0 < dbest ? t1 - t0 : dbest;
                }
                be.ops->attention(be.ctx, out, qkv, kv, NULL, 0, 1, n, 0);
                if (!first) {
                    first = malloc(sizeof(float) * (size_t)(n * C));
                    for (long i = 0; i < n * C; i++)
                        first[i] = out[i];
                } else {
                    double err = ref_rel_error(out, first, n * C);
                    if (!(err < 1e-5)) printf("MISMATCH %s: %.3g\n", names[m], err);
                }
                printf("%-6d %-8d %-12s %12.3f %12.4f\n", n, th, names[m], 1e3 * best, 1e3 * dbest);
                fflush(stdout);
            }
            be.ops->release(be.ctx, kv.k);
            be.ops->release(be.ctx, kv.v);
            backend_free(&be);
        }
        free(qkv), free(out), free(first);
    }
    return 0;
}
