/* Benchmark (not a test): the CPU attention op alone on GPT-2 124M's shape (12 heads of 64,
 * batch 1), prefill of N tokens through each prefill path (two sgemm per head, tiled with
 * sgemm tiles, tiled with the level's own kernels) and one decode step at context N, on 1 and
 * 2 threads; the best of several repetitions, in milliseconds. Checks the paths agree.
 *   build/tests/bench_attention [--isa LEVEL] [N...] (default 128 512 2048)
 * With --kv N: decode at context N over each KV cache type (model.kv_dtype), through 12 layers'
 * caches in turn as a GPT-2 124M decode step reads them (so the cache streams from memory, not
 * from the last level cache), on 1 and 2 threads, the types' steps alternating: ms per step
 * (best and median), the KV bytes it reads, their rate at the best, the time (best/median)
 * and bytes against the fp32 cache's, and on one thread the median of the step's thread CPU
 * time (what the step took of its core, whatever else the machine ran) and its ratio.
 *   build/tests/bench_attention [--isa LEVEL] --kv N */
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

/* CPU time of the calling thread: a one-thread step's own time, without the time the shared
 * machine's other processes took the core from it. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Decode steps at context n over 12 layers' caches of each type; see the header. Every type's
 * caches exist at once and the steps alternate type by type (fp32, bf16, f16, int8, fp32, ...),
 * so a change in the shared machine's load falls on every type alike, not on whichever ran
 * last; the best and the median of the reps steps are given. */
static int bench_kv_types(const char *isa, int n) {
    enum { NT = 4, H = 12, hd = 64, L = 12, reps = 30 };
    const long C = (long)H * hd, row = 3 * C;
    const dtype types[NT] = {DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_INT8};
    uint64_t rng = 7;
    float *qkv = malloc(sizeof(float) * (size_t)((n + 1) * row));
    float *out = malloc(sizeof(float) * (size_t)((n + 1) * C));
    if (!qkv || !out) return 1;
    ref_fill_uniform(qkv, (long)(n + 1) * row, &rng, -1, 1);
    backend be;
    backend_options opt = {.threads = 2, .max_marks = 1, .cpu_isa = isa};
    if (backend_cpu_init(&be, &opt)) return 1;
    cpu_ctx *ctx = be.ctx;
    kv_view kv[NT][L];
    for (int t = 0; t < NT; t++)
        for (int l = 0; l < L; l++) {
            const size_t bytes = kv_row_bytes(types[t], hd) * (size_t)H * (size_t)(n + 1);
            kv[t][l] = (kv_view){.max_ctx = n + 1, .heads = H, .kv_heads = H, .head_dim = hd,
                                 .type = types[t]};
            kv[t][l].k = be.ops->alloc(be.ctx, bytes);
            kv[t][l].v = be.ops->alloc(be.ctx, bytes);
            be.ops->attention(be.ctx, out, qkv, kv[t][l], NULL, 0, 1, n, 0); // fill the cache
        }
    printf("%-6s %-8s %-6s %12s %12s %10s %8s %10s %10s %10s %9s\n", "N", "threads", "kv", "best_ms",
           "median_ms", "kv_MB", "GB/s", "time/fp32", "bytes/fp32", "cpu_ms", "cpu/fp32");
    for (int th = 1; th <= 2; th++) {
        ctx->threads = th;
        double steps[NT][reps], cpu[NT][reps];
        for (int r = 0; r < reps; r++)
            for (int t = 0; t < NT; t++) {
                double t0 = now(), c0 = cpu_now();
                for (int l = 0; l < L; l++)
                    be.ops->attention(be.ctx, out, qkv + (long)n * row, kv[t][l], NULL, 0, 1, 1, n);
                steps[t][r] = now() - t0;
                cpu[t][r] = cpu_now() - c0;
            }
        double best32 = 0, med32 = 0, cpu32 = 0, b32 = 0;
        for (int t = 0; t < NT; t++) {
            qsort(steps[t], reps, sizeof(double), cmp_double);
            qsort(cpu[t], reps, sizeof(double), cmp_double);
            const double cmed = 0.5 * (cpu[t][(reps - 1) / 2] + cpu[t][reps / 2]);
            const double best = steps[t][0], med = 0.5 * (steps[t][(reps - 1) / 2] + steps[t][reps / 2]);
            // keys and values of every position read once per layer (the new row too)
            const double read = 2.0 * L * H * (double)(n + 1) * kv_row_bytes(types[t], hd);
            if (t == 0) best32 = best, med32 = med, cpu32 = cmed, b32 = read;
            printf("%-6d %-8d %-6s %12.3f %12.3f %10.1f %8.2f %5.3f/%.3f %10.3f", n, th,
                   dtype_name(types[t]), 1e3 * best, 1e3 * med, read / 1e6, read / best / 1e9,
                   best / best32, med / med32, read / b32);
            if (th == 1) printf(" %10.3f %9.3f", 1e3 * cmed, cmed / cpu32);
            printf("\n");
        }
        fflush(stdout);
    }
    for (int t = 0; t < NT; t++)
        for (int l = 0; l < L; l++) {
            be.ops->release(be.ctx, kv[t][l].k);
            be.ops->release(be.ctx, kv[t][l].v);
        }
    backend_free(&be);
    free(qkv), free(out);
    return 0;
}

int main(int argc, char **argv) {
    int lens[8] = {128, 512, 2048}, nlens = 3, arg = 1;
    const char *isa = NULL;
    if (argc > 2 && !strcmp(argv[1], "--isa")) isa = argv[2], arg = 3;
    if (argc == arg + 2 && !strcmp(argv[arg], "--kv")) return bench_kv_types(isa, atoi(argv[arg + 1]));
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
