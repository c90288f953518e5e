/* Benchmark (not a test) of the CPU's bf16 kernels (docs/kernels.md, "bf16 on the CPU"): on
 * GPT-2's prefill shapes the bf16 GEMM's GFLOP/s next to OpenBLAS sgemm's on the same values
 * (the bf16 weights and activations widened to fp32), on 1 and 2 threads; and the bf16 decode
 * GEMV's effective GB/s over the weights of GPT-2 124M's 12 layers, next to a plain read of the
 * same bytes. Best of N repeats; each GEMM result is checked against sgemm's as it is timed.
 *   OPENBLAS_CORETYPE=SkylakeX build/tools/tripar_bench_gemm_bf16 [repeats=5] [level] */
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/quant.h"
#include "tools/bench_util.h"

static void fill_uniform(float *x, long n, uint64_t *state) {
    for (long i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(*state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
}

/* Thread t's slice [*n0, *n1) of n columns in units of 16, as kernels/cpu/matmul.c splits. */
static void column_slice(int n, int t, int nt, int *n0, int *n1) {
    const int units = (n + 15) / 16;
    const int u0 = (int)((long)units * t / nt), u1 = (int)((long)units * (t + 1) / nt);
    *n0 = u0 * 16 < n ? u0 * 16 : n;
    *n1 = u1 * 16 < n ? u1 * 16 : n;
}

/* y (rows, n) = x @ w^T through the level's bf16 GEMM on nt threads, each with its own pack. */
static void gemm_bf16_run(const cpu_matmul_kernels *mk, float *y, const uint16_t *x,
                          const uint16_t *w, int rows, int k, int n, char *packs, long pack,
                          int nt) {
    memset(y, 0, sizeof(float) * (size_t)rows * (size_t)n);
#pragma omp parallel num_threads(nt)
    {
        int n0, n1;
        column_slice(n, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
        if (n1 > n0)
            mk->gemm_bf16(y + n0, n, x, w + (long)n0 * k, rows, k, n1 - n0,
                          packs + (size_t)omp_get_thread_num() * (size_t)pack);
    }
}

static int bench_gemm(const cpu_matmul_kernels *mk, int repeats) {
    static const int shapes[][3] = {
        {512, 768, 2304}, {512, 768, 768}, {512, 768, 3072}, {512, 3072, 768}};
    int bad = 0;
    printf("GEMM, GPT-2 prefill shapes, best of %d (GFLOP/s; sgemm on the widened bf16 values)\n",
           repeats);
    printf("%5s %5s %5s %3s %10s %10s %7s %10s\n", "rows", "k", "n", "thr", "sgemm", "bf16",
           "ratio", "rel.err");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int rows = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        const long nx = (long)rows * k, nw = (long)n * k, ny = (long)rows * n;
        uint64_t rng = 1 + s;
        float *xf = malloc(sizeof(float) * (size_t)nx), *wf = malloc(sizeof(float) * (size_t)nw);
        float *ys = malloc(sizeof(float) * (size_t)ny), *yb = malloc(sizeof(float) * (size_t)ny);
        uint16_t *xb = malloc(sizeof(uint16_t) * (size_t)nx);
        uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)nw);
        const long pack = mk->gemm_bf16_pack_bytes(k);
        char *packs = aligned_alloc(64, 2 * (size_t)pack);
        if (!xf || !wf || !ys || !yb || !xb || !wb || !packs) {
            fprintf(stderr, "bench_gemm_bf16: out of memory\n");
            exit(1);
        }
        fill_uniform(xf, nx, &rng);
        fill_uniform(wf, nw, &rng);
        mk->round_bf16(xb, xf, nx);
        mk->round_bf16(wb, wf, nw);
        convert_bf16_to_f32(xf, xb, nx); // sgemm multiplies exactly the bf16 values
        convert_bf16_to_f32(wf, wb, nw);
        const double flop = 2.0 * rows * k * n;
        for (int nt = 1; nt <= 2; nt++) {
            openblas_set_num_threads(nt);
            omp_set_num_threads(nt);
            double t_s = 1e30, t_b = 1e30;
            for (int r = 0; r < repeats; r++) {
                double t0 = bench_now();
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f, xf, k, wf, k,
                            0.0f, ys, n);
                double t1 = bench_now();
                gemm_bf16_run(mk, yb, xb, wb, rows, k, n, packs, pack, nt);
                double t2 = bench_now();
                t_s = t1 - t0 < t_s ? t1 - t0 : t_s;
                t_b = t2 - t1 < t_b ? t2 - t1 : t_b;
            }
            const double err = bench_rel_error(yb, ys, ny);
            bad |= !(err < 1e-5);
            printf("%5d %5d %5d %3d %10.1f %10.1f %6.2fx %10.2e%s\n", rows, k, n, nt,
                   flop / t_s * 1e-9, flop / t_b * 1e-9, t_s / t_b, err,
                   err < 1e-5 ? "" : "  WRONG");
        }
        free(xf), free(wf), free(ys), free(yb), free(xb), free(wb), free(packs);
    }
    return bad;
}

/* The bytes of w read with plain 64-bit loads, four independent sums (the compiler
 * vectorises them): the streaming rate a kernel that touches every byte once can reach. */
static uint64_t read_all(const uint64_t *w, long words) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (long i = 0; i + 4 <= words; i += 4)
        s0 += w[i], s1 += w[i + 1], s2 += w[i + 2], s3 += w[i + 3];
    return s0 ^ s1 ^ s2 ^ s3;
}

/* The decode step's GEMVs over GPT-2 124M's 12 layers, (n, k) = (2304, 768), (768, 768),
 * (3072, 768), (768, 3072), each matrix in the one huge-page weight buffer as the backend
 * keeps them; single-threaded, as one thread's slice is. */
static void bench_gemv(const cpu_matmul_kernels *mk, int repeats) {
    enum { LAYERS = 12, MATS = 4, C = 768 };
    static const int mats[MATS][2] = {{3 * C, C}, {C, C}, {4 * C, C}, {C, 4 * C}};
    long per_layer = 0;
    for (int m = 0; m < MATS; m++)
        per_layer += (long)mats[m][0] * mats[m][1];
    const long count = per_layer * LAYERS;
    const size_t bytes = sizeof(uint16_t) * (size_t)count;
    uint16_t *w = bench_huge_alloc(bytes, "bench_gemm_bf16");
    float *tmp = malloc(sizeof(float) * 4 * C * 4);
    uint16_t *x = malloc(sizeof(uint16_t) * 4 * 4 * C);
    float *y = calloc(4 * 4 * C, sizeof(float));
    uint64_t rng = 99;
    // Random weights (every byte touched, so every page exists) in chunks.
    for (long i = 0; i < count; i += 4 * C) {
        const long len = count - i < 4 * C ? count - i : 4 * C;
        fill_uniform(tmp, len, &rng);
        mk->round_bf16(w + i, tmp, len);
    }
    fill_uniform(tmp, 4L * 4 * C, &rng);
    mk->round_bf16(x, tmp, 4L * 4 * C);
    printf("\nGEMV, GPT-2 124M decode weights (%.1f MB bf16, 12 layers), one thread, best of %d\n",
           (double)bytes * 1e-6, repeats);
    double t_read = 1e30;
    uint64_t sink = 0;
    for (int r = 0; r < repeats; r++) {
        const double t0 = bench_now();
        sink ^= read_all((const uint64_t *)w, (long)(bytes / sizeof(uint64_t)));
        const double t = bench_now() - t0;
        t_read = t < t_read ? t : t_read;
    }
    printf("  plain read      %7.2f ms  %6.1f GB/s   (sink %llx)\n", t_read * 1e3,
           (double)bytes / t_read * 1e-9, (unsigned long long)(sink & 0xF));
    for (int rows = 1; rows <= 4; rows += 3) {
        double best = 1e30;
        for (int r = 0; r < repeats; r++) {
            const double t0 = bench_now();
            const uint16_t *wl = w;
            for (int l = 0; l < LAYERS; l++)
                for (int m = 0; m < MATS; m++) {
                    const int n = mats[m][0], k = mats[m][1];
                    mk->gemv_bf16(y, n, x, wl, rows, k, n);
                    wl += (long)n * k;
                }
            const double t = bench_now() - t0;
            best = t < best ? t : best;
        }
        printf("  gemv_bf16 rows %d %6.2f ms  %6.1f GB/s   %.2fx the plain read's time\n", rows,
               best * 1e3, (double)bytes / best * 1e-9, best / t_read);
    }
    free(w), free(tmp), free(x), free(y);
}

int main(int argc, char **argv) {
    const int repeats = argc > 1 ? atoi(argv[1]) : 5;
    cpu_isa isa = cpu_isa_detect();
    if (argc > 2) {
        const int want = cpu_isa_from_name(argv[2]);
        if (want < 0 || want > (int)isa) {
            fprintf(stderr, "bench_gemm_bf16: level %s unknown or not on this CPU (%s)\n", argv[2],
                    cpu_isa_names());
            return 2;
        }
        isa = (cpu_isa)want;
    }
    const cpu_kernel_set *set = cpu_kernel_set_for(isa);
    if (repeats < 1 || !set) {
        fprintf(stderr, "usage: %s [repeats >= 1] [level]\n", argv[0]);
        return 2;
    }
    printf("level %s, OPENBLAS_CORETYPE=%s\n", cpu_isa_name(isa),
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)");
    int bad = 0;
    if (set->matmul->gemm_bf16)
        bad = bench_gemm(set->matmul, repeats);
    else
        printf("this level has no bf16 GEMM (matmul.c widens to fp32 and calls sgemm)\n");
    bench_gemv(set->matmul, repeats);
    return bad ? 1 : 0;
}
