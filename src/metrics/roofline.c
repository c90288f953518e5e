/* Same-run ceilings for the benchmark (see roofline.h): the model's prefill products timed as
 * bare sgemm calls, and the read bandwidth that bounds a decode step. */
#include "metrics/roofline.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "base/check.h"
#include "base/stats.h"
#include "metrics/timing.h"

/* One pass over the model's prefill products, each shape once per layer, in the layout the CPU
 * backend uses (x @ W^T). Returns seconds. */
static double sgemm_pass(const float *a, const float *w, float *c, const long shapes[4][2],
                         int layers, int rows) {
    double t0 = timer_host_seconds();
    for (int l = 0; l < layers; l++)
        for (int s = 0; s < 4; s++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, (int)shapes[s][1],
                        (int)shapes[s][0], 1.0f, a, (int)shapes[s][0], w, (int)shapes[s][0], 0.0f,
                        c, (int)shapes[s][1]);
    return timer_host_seconds() - t0;
}

void roofline_model_shapes(const model_config *cfg, long shapes[4][2], long *max_in,
                           long *max_out) {
    const long C = cfg->embd, M = cfg->mlp;
    /* Llama: grouped-query QKV and SwiGLU's stacked gate|up */
    const int llama = arch_is_llama(cfg->arch);
    const long hd = model_head_dim(cfg), A = (long)cfg->heads * hd; /* A = C for GPT-2 */
    const long QKV = llama ? ((long)cfg->heads + 2L * cfg->kv_heads) * hd : 3 * C;
    const long UP = llama ? 2 * M : M;
    const long s[4][2] = {{C, QKV}, {A, C}, {C, UP}, {M, C}}; /* (in, out) per layer */
    *max_in = *max_out = 0;
    for (int i = 0; i < 4; i++) {
        shapes[i][0] = s[i][0], shapes[i][1] = s[i][1];
        if (s[i][0] > *max_in) *max_in = s[i][0];
        if (s[i][1] > *max_out) *max_out = s[i][1];
    }
}

double roofline_model_counts(roofline *r, const model_config *cfg, int batch, int T) {
    long shapes[4][2], max_in, max_out;
    roofline_model_shapes(cfg, shapes, &max_in, &max_out);
    const long rows = (long)batch * T, hd = model_head_dim(cfg), A = (long)cfg->heads * hd;
    double flops = 0;
    for (int s = 0; s < 4; s++)
        flops += cfg->layers * 2.0 * rows * shapes[s][0] * shapes[s][1];
    /* attention: QK^T and PV per head over the causal half, and the LM head's last rows */
    double attention = cfg->layers * 2.0 * 2.0 * batch * (double)T * T / 2.0 * A;
    double head = 2.0 * batch * (double)cfg->embd * cfg->vocab;
    r->model_flops = flops + attention + head;
    /* a decode step reads every cached k and v row of every layer: kv_heads of them per
     * position (heads for GPT-2), so grouped-query attention divides it by heads / kv_heads */
    r->heads = cfg->heads;
    r->kv_heads = cfg->kv_heads > 0 ? cfg->kv_heads : cfg->heads;
    r->kv_bytes_per_pos = 2.0 * cfg->layers * r->kv_heads * (double)hd * sizeof(float) * batch;
    return flops;
}

double roofline_sgemm(roofline *r, const model_config *cfg, int batch, int T) {
    enum { PASSES = 5 };
    long shapes[4][2], max_in, max_out;
    roofline_model_shapes(cfg, shapes, &max_in, &max_out);
    const long rows = (long)batch * T;
    float *a = xcalloc((size_t)rows * max_in, sizeof(float));
    float *w = xcalloc((size_t)max_out * max_in, sizeof(float));
    float *c = xcalloc((size_t)rows * max_out, sizeof(float));
    for (long i = 0; i < rows * max_in; i++)
        a[i] = (float)((i % 13) - 6) * 0.01f;
    for (long i = 0; i < max_out * max_in; i++)
        w[i] = (float)((i % 7) - 3) * 0.01f;
    double seconds[PASSES];
    const double flops = roofline_model_counts(r, cfg, batch, T);
    for (int p = 0; p < PASSES; p++)
        seconds[p] = sgemm_pass(a, w, c, shapes, cfg->layers, (int)rows);
    stats_sort(seconds, PASSES);
    free(a);
    free(w);
    free(c);
    return flops / stats_percentile(seconds, PASSES, 50) / 1e9;
}

/* Sums n floats on `threads` OpenMP threads, eight partial sums per thread so loads stay in
 * flight; returns seconds. With `prefetch`, each thread also asks for the bytes 1 KiB ahead of
 * its loads, as the decode GEMV does (kernels/cpu/matmul_avx512.c): on Sapphire Rapids one
 * thread then reads 10% faster than on the hardware streamer alone, and a bound that left that
 * out would flatter every kernel that prefetches. */
static double stream_read(const float *buf, size_t n, int threads, int prefetch, double *sink) {
    double t0 = timer_host_seconds(), total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (size_t c = 0; c < n / 64; c++) {
        float part[8] = {0};
        const float *p = buf + c * 64;
        if (prefetch)
            for (int line = 0; line < 4; line++)
                __builtin_prefetch(p + 256 + 16 * line, 0, 3);
        for (int i = 0; i < 64; i += 8)
            for (int j = 0; j < 8; j++)
                part[j] += p[i + j];
        for (int j = 0; j < 8; j++)
            total += part[j];
    }
    *sink += total;
    return timer_host_seconds() - t0;
}

void roofline_bandwidth(roofline *r, double weight_bytes, int threads) {
    /* Stream a buffer four times the weights so no cache holds it: at least 512 MiB, and at
     * most 2 GiB, which is already far past any last-level cache; four times a 1B-class
     * model's fp32 weights (20 GB) would not fit in memory beside the weights themselves.
     * On huge pages, as the cpu backend places the weights (kernels/cpu/backend_cpu.c): a
     * bound read on 4 KiB pages would be the prefetcher's page-boundary stalls, not memory. */
    size_t n = (size_t)(weight_bytes * 4 / sizeof(float));
    if (n < (512u << 20) / sizeof(float)) n = (512u << 20) / sizeof(float);
    if (n > ((size_t)2 << 30) / sizeof(float)) n = ((size_t)2 << 30) / sizeof(float);
    const size_t huge = 2 << 20, bytes = (n * sizeof(float) + huge - 1) / huge * huge;
    void *mem = NULL;
    CHECK(posix_memalign(&mem, huge, bytes) == 0, "bandwidth probe: cannot allocate %zu bytes",
          bytes);
    (void)madvise(mem, bytes, MADV_HUGEPAGE);
    float *buf = mem;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++)
        buf[i] = 1.0f; /* first touch on the threads that will read */
    if (threads < 1) threads = 1;
    /* Best of 3 for each probe: OpenBLAS's sasum on its threads (as fast as OpenBLAS knows this
     * CPU to be), and tripar's own read, plain and prefetching, on one thread and on the run's
     * threads. */
    double best_blas = 1e30, best_one = 1e30, best_all = 1e30, sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = timer_host_seconds();
        sink += cblas_sasum((int)n, buf, 1);
        const double t_blas = timer_host_seconds() - t0;
        best_blas = t_blas < best_blas ? t_blas : best_blas;
        for (int prefetch = 0; prefetch < 2; prefetch++) {
            const double t_one = stream_read(buf, n, 1, prefetch, &sink);
            best_one = t_one < best_one ? t_one : best_one;
            const double t_all =
                threads > 1 ? stream_read(buf, n, threads, prefetch, &sink) : t_one;
            best_all = t_all < best_all ? t_all : best_all;
        }
    }
    CHECK(sink > 0, "bandwidth probe read nothing");
    const double gb = (double)n * sizeof(float) / 1e9;
    r->stream_gbs_one = gb / best_one;
    r->stream_gbs = gb / (best_all < best_blas ? best_all : best_blas);
    r->stream_threads = threads;
    r->weight_bytes = weight_bytes;
    free(mem);
}

void roofline_print(const roofline *r, const run_metrics *rm, int batch, int T, int new_tokens) {
    double sorted[rm->iterations > 0 ? rm->iterations : 1];
    for (int i = 0; i < rm->iterations; i++)
        sorted[i] = rm->ttft[i];
    stats_sort(sorted, rm->iterations);
    double prefill = stats_percentile(sorted, rm->iterations, 50);
    for (int i = 0; i < rm->iterations; i++)
        sorted[i] = rm->tpot[i];
    stats_sort(sorted, rm->iterations);
    double tpot = stats_percentile(sorted, rm->iterations, 50);
    double achieved = r->model_flops / prefill / 1e9;
    double bound = r->weight_bytes / (r->stream_gbs * 1e9);
    double sgemm = 0.5 * (r->sgemm_gflops_before + r->sgemm_gflops_after);
    printf("  roofline (measured in this run, this rank's BLAS threads)\n");
    printf("    prefill      %8.2f GFLOP/s achieved vs %8.2f GFLOP/s bare sgemm on the same "
           "shapes (%.2f before the run, %.2f after): %5.1f%% (target >= 70%%)\n",
           achieved, sgemm, r->sgemm_gflops_before, r->sgemm_gflops_after,
           100.0 * achieved / sgemm);
    printf("    prefill      %8.1f tokens/s (%d x %d tokens in %.3f s)\n",
           batch * (double)T / prefill, batch, T, prefill);
    if (new_tokens > 1)
        printf("    decode       %8.3f ms/token vs %.3f ms to stream %.1f MB of weights at "
               "%.2f GB/s: %.2fx the bound (target <= 1.5x); %.1f tokens/s\n",
               tpot * 1e3, bound * 1e3, r->weight_bytes / 1e6, r->stream_gbs, tpot / bound,
               batch / tpot);
    if (new_tokens > 1 && r->stream_threads > 1) /* what one thread alone could draw */
        printf("    decode       on %d threads; one thread streams %.2f GB/s (%.3f ms for the "
               "weights: %.2fx); %d draw %.2f GB/s, %.2fx one\n",
               r->stream_threads, r->stream_gbs_one,
               r->weight_bytes / (r->stream_gbs_one * 1e9) * 1e3,
               tpot / (r->weight_bytes / (r->stream_gbs_one * 1e9)), r->stream_threads,
               r->stream_gbs, r->stream_gbs / r->stream_gbs_one);
    if (new_tokens > 1) {
        /* decode step i attends T + i positions; over the run that averages T + new_tokens/2 */
        double context = T + new_tokens / 2.0, kv = r->kv_bytes_per_pos * context;
        double with_kv = (r->weight_bytes + kv) / (r->stream_gbs * 1e9);
        printf("    decode KV    %8.2f MB of KV cache read per step at the mean context %.0f "
               "(%d kv heads for %d query heads: %.2fx full attention's); weights + KV "
               "bound %.3f ms: %.2fx\n",
               kv / 1e6, context, r->kv_heads, r->heads, (double)r->kv_heads / r->heads,
               with_kv * 1e3, tpot / with_kv);
    }
}
