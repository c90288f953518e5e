/* Every CUDA backend op against the CPU backend and the reference twins (tests/ref_ops.c) on
 * fresh random inputs: fp32 to 1e-5, TF32 to 5e-3, bf16/f16 activations to 2e-2; the decode
 * GEMV on every dtype, aligned and not; attention through prefill, decode and chunked appends
 * on contiguous and paged caches, grouped-query (kv_heads 1, 2, heads) with and without RoPE
 * (plain and Llama 3.1 tables), and split-key decode at long contexts; RMSNorm (plain and
 * fused with the residual add) and SwiGLU; argmax exactly, NaN rows included;
 * plus memory, timing marks, the optional entries (stream, pinned host memory, device memory)
 * and CUDA-graph replay. Exits 77 (CTest: skipped) without a GPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kernels/backend.h"
#include "base/check.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref_ops.h"
#include "kernels/rope.h"

#define FP32_TOL 1e-5
#define TF32_TOL 5e-3
#define HALF_TOL 2e-2
#define CEIL4(n) (((n) + 3) / 4 * 4) /* paged test caches have 4 positions per block */

static backend gpu, cpu;

static int setup(void **state) {
    (void)state;
    backend_options opt = {.threads = 1, .device = 0, .allow_tf32 = 0, .max_marks = 8};
    if (backend_init(&gpu, "cuda", &opt) != 0) {
        fprintf(stderr, "%s\n", error_message());
        return -1;
    }
    return backend_init(&cpu, "cpu", &opt);
}

static int teardown(void **state) {
    (void)state;
    backend_free(&gpu);
    backend_free(&cpu);
    return 0;
}

/* --- helpers ------------------------------------------------------------------------------ */

static void *host_alloc(size_t bytes) {
    void *p = calloc(bytes ? bytes : 1, 1);
    assert_non_null(p);
    return p;
}

static float *rand_floats(long n, uint64_t *rng, float lo, float hi) {
    float *x = host_alloc(sizeof(float) * (size_t)n);
    ref_fill_uniform(x, n, rng, lo, hi);
    return x;
}

/* device copy of host data */
static void *up(const void *host, size_t bytes) {
    void *d = gpu.ops->alloc(gpu.ctx, bytes);
    gpu.ops->copy_to_device(gpu.ctx, d, host, bytes);
    return d;
}

static void down(void *host, const void *dev, size_t bytes) {
    gpu.ops->copy_to_host(gpu.ctx, host, dev, bytes);
}

static void rel(void *dev) { gpu.ops->release(gpu.ctx, dev); }

static void expect_close(const float *got, const float *want, long n, double tol,
                         const char *what) {
    double err = ref_rel_error(got, want, n);
    printf("  %-48s rel err %.3g (tol %.0e)\n", what, err, tol);
    if (!(err < tol)) fail_msg("%s: relative error %.3g >= %.3g", what, err, tol);
}

/* --- ops ---------------------------------------------------------------------------------- */

/* Rows are sequences of n_new tokens at positions pos0..: decode-like (n_new 1) and
 * prefill-like layouts, against the cpu and the twin given the positions that layout means. */
static void test_embed(void **state) {
    (void)state;
    uint64_t rng = 101;
    const int rows = 36, C = 96, vb = 100, ve = 300, ctx = 64;
    const int layouts[][2] = {{1, 0}, {1, 63}, {4, 0}, {9, 20}, {36, 5}}; // (n_new, pos0)
    float *wte = rand_floats((long)(ve - vb) * C, &rng, -1, 1);
    float *wpe = rand_floats((long)ctx * C, &rng, -1, 1);
    int32_t tokens[36], positions[36];
    for (int r = 0; r < rows; r++) tokens[r] = (int32_t)(ref_rng_next(&rng) % 400);
    float *want = host_alloc(sizeof(float) * rows * C), *got = host_alloc(sizeof(float) * rows * C);
    float *d_wte = up(wte, sizeof(float) * (ve - vb) * C), *d_wpe = up(wpe, sizeof(float) * ctx * C);
    int32_t *d_tok = up(tokens, sizeof tokens);
    float *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * rows * C);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        const int n_new = layouts[l][0], pos0 = layouts[l][1];
        for (int r = 0; r < rows; r++) positions[r] = pos0 + r % n_new;
        for (int with_wpe = 0; with_wpe < 2; with_wpe++) {
            const float *h_wpe = with_wpe ? wpe : NULL, *g_wpe = with_wpe ? d_wpe : NULL;
            char what[64];
            cpu.ops->embed(cpu.ctx, want, tokens, wte, h_wpe, rows, C, n_new, pos0, vb, ve);
            gpu.ops->embed(gpu.ctx, d_out, d_tok, d_wte, g_wpe, rows, C, n_new, pos0, vb, ve);
            down(got, d_out, sizeof(float) * rows * C);
            snprintf(what, sizeof what, "embed n_new %d pos0 %d%s vs cpu", n_new, pos0,
                     with_wpe ? " +wpe" : "");
            expect_close(got, want, (long)rows * C, FP32_TOL, what);
            ref_embed(want, tokens, positions, wte, h_wpe, rows, C, vb, ve);
            snprintf(what, sizeof what, "embed n_new %d pos0 %d%s vs ref", n_new, pos0,
                     with_wpe ? " +wpe" : "");
            expect_close(got, want, (long)rows * C, FP32_TOL, what);
        }
    }
    rel(d_wte); rel(d_wpe); rel(d_tok); rel(d_out);
    free(wte); free(wpe); free(want); free(got);
}

static void test_layernorm(void **state) {
    (void)state;
    uint64_t rng = 202;
    const int shapes[][2] = {{19, 768}, {5, 50}, {3, 4100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], C = shapes[s][1];
        long n = (long)rows * C;
        float *in = rand_floats(n, &rng, -3, 5), *delta = rand_floats(n, &rng, -1, 1);
        float *g = rand_floats(C, &rng, 0.5f, 1.5f), *b = rand_floats(C, &rng, -0.2f, 0.2f);
        float *want = host_alloc(sizeof(float) * n), *got = host_alloc(sizeof(float) * n);
        float *res_want = host_alloc(sizeof(float) * n), *res_got = host_alloc(sizeof(float) * n);
        float *d_in = up(in, sizeof(float) * n), *d_delta = up(delta, sizeof(float) * n);
        float *d_g = up(g, sizeof(float) * C), *d_b = up(b, sizeof(float) * C);
        float *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * n);

        ref_layernorm(want, in, g, b, rows, C, 1e-5f);
        gpu.ops->layernorm(gpu.ctx, d_out, d_in, d_g, d_b, rows, C, 1e-5f);
        down(got, d_out, sizeof(float) * n);
        expect_close(got, want, n, FP32_TOL, "layernorm vs ref");
        cpu.ops->layernorm(cpu.ctx, want, in, g, b, rows, C, 1e-5f);
        expect_close(got, want, n, FP32_TOL, "layernorm vs cpu");

        // fused residual: once with the norm, once add-only
        memcpy(res_want, in, sizeof(float) * n);
        ref_residual_layernorm(res_want, want, delta, g, b, rows, C, 1e-5f);
        gpu.ops->residual_layernorm(gpu.ctx, d_in, d_out, d_delta, d_g, d_b, rows, C, 1e-5f);
        down(got, d_out, sizeof(float) * n);
        down(res_got, d_in, sizeof(float) * n);
        expect_close(res_got, res_want, n, FP32_TOL, "residual_layernorm residual vs ref");
        expect_close(got, want, n, FP32_TOL, "residual_layernorm norm vs ref");
        ref_residual_layernorm(res_want, NULL, delta, g, b, rows, C, 1e-5f);
        gpu.ops->residual_layernorm(gpu.ctx, d_in, NULL, d_delta, d_g, d_b, rows, C, 1e-5f);
        down(res_got, d_in, sizeof(float) * n);
        expect_close(res_got, res_want, n, FP32_TOL, "residual add-only vs ref");

        rel(d_in); rel(d_delta); rel(d_g); rel(d_b); rel(d_out);
        free(in); free(delta); free(g); free(b); free(want); free(got); free(res_want); free(res_got);
    }
}

/* Host weights of a dtype: fp32 values in [-1, 1) rounded to the dtype (int8 per-row scaled). */
static void make_weight(dtype type, int rows, int cols, uint64_t *rng, void **data, float **scale) {
    long n = (long)rows * cols;
    float *f = rand_floats(n, rng, -1, 1);
    *scale = NULL;
    switch (type) {
    case DTYPE_F32: *data = f; return;
    case DTYPE_BF16: *data = host_alloc(2 * (size_t)n); convert_f32_to_bf16(*data, f, n); break;
    case DTYPE_F16: *data = host_alloc(2 * (size_t)n); convert_f32_to_f16(*data, f, n); break;
    case DTYPE_INT8:
        *data = host_alloc((size_t)n);
        *scale = host_alloc(sizeof(float) * (size_t)rows);
        quant_rows_int8(*data, *scale, f, rows, cols, NULL);
        break;
    default: // an out-of-range dtype; without this case -O2 -g sees *data maybe unset
        *data = NULL;
        fail_msg("make_weight: unknown dtype %d", (int)type);
    }
    free(f);
}

static void matmul_case(dtype type, int allow_tf32, int rows, int in_dim, int out_dim,
                        int with_bias, uint64_t *rng) {
    void *w_host;
    float *s_host;
    make_weight(type, out_dim, in_dim, rng, &w_host, &s_host);
    float *in = rand_floats((long)rows * in_dim, rng, -1, 1);
    float *bias = rand_floats(out_dim, rng, -0.5f, 0.5f);
    long n = (long)rows * out_dim;
    float *want = host_alloc(sizeof(float) * n), *got = host_alloc(sizeof(float) * n);
    void *d_w = up(w_host, dtype_size(type) * (size_t)in_dim * out_dim);
    float *d_s = s_host ? up(s_host, sizeof(float) * out_dim) : NULL;
    float *d_in = up(in, sizeof(float) * rows * in_dim), *d_bias = up(bias, sizeof(float) * out_dim);
    float *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * n);

    weight_view hv = {type, w_host, s_host, 0, 0}, dv = {type, d_w, d_s, 0, 0};
    ref_matmul_view(want, in, hv, with_bias ? bias : NULL, rows, in_dim, out_dim);
    // TF32 is an init option: a second context on the same device shares the buffers
    backend tmp = gpu;
    if (allow_tf32) {
        backend_options opt = {.device = 0, .allow_tf32 = 1, .max_marks = 1};
        assert_int_equal(backend_init(&tmp, "cuda", &opt), 0);
    }
    tmp.ops->matmul(tmp.ctx, d_out, d_in, dv, with_bias ? d_bias : NULL, rows, in_dim, out_dim);
    tmp.ops->synchronize(tmp.ctx);
    down(got, d_out, sizeof(float) * n);
    if (allow_tf32) backend_free(&tmp);

    // bf16/f16 round the activations above 8 rows (tensor-core GEMM); fewer rows use a GEMV
    // that keeps fp32 activations
    double tol = allow_tf32 ? TF32_TOL : FP32_TOL;
    if ((type == DTYPE_BF16 || type == DTYPE_F16) && rows > 8) tol = HALF_TOL;
    else if (type == DTYPE_BF16 || type == DTYPE_F16 || type == DTYPE_INT8) tol = allow_tf32 ? TF32_TOL : 1e-4;
    char what[96];
    snprintf(what, sizeof what, "matmul %s%s %dx%dx%d%s vs ref", dtype_name(type),
             allow_tf32 ? "/tf32" : "", rows, in_dim, out_dim, with_bias ? " +bias" : "");
    expect_close(got, want, n, tol, what);
    cpu.ops->matmul(cpu.ctx, want, in, hv, with_bias ? bias : NULL, rows, in_dim, out_dim);
    snprintf(what, sizeof what, "matmul %s%s %dx%dx%d vs cpu", dtype_name(type),
             allow_tf32 ? "/tf32" : "", rows, in_dim, out_dim);
    expect_close(got, want, n, tol, what);

    rel(d_w); if (d_s) rel(d_s); rel(d_in); rel(d_bias); rel(d_out);
    free(w_host); free(s_host); free(in); free(bias); free(want); free(got);
}

static void test_matmul(void **state) {
    (void)state;
    uint64_t rng = 303;
    const dtype types[] = {DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_INT8};
    const int rows_list[] = {1, 5, 8, 9, 64};
    for (size_t t = 0; t < 4; t++)
        for (size_t r = 0; r < 5; r++) {
            matmul_case(types[t], 0, rows_list[r], 130, 200, (int)(r % 2 == 0), &rng);
            matmul_case(types[t], 0, rows_list[r], 96, 33, (int)(r % 2 == 1), &rng);
        }
    matmul_case(DTYPE_F32, 1, 64, 256, 192, 1, &rng);
    matmul_case(DTYPE_INT8, 1, 64, 256, 192, 1, &rng);
}

/* ggml's block formats (kernels/cuda/matmul_blocks.cu) against the fp32 product of the blocks'
 * values (qblocks_dequantize, exact): the GEMV at 1 to 8 rows, the tiled dequantise-then-cuBLAS
 * path above them; q4_k of one and several super-blocks; with and without a bias. The GPU keeps
 * fp32 activations, so the CPU's int8-activation result is not the comparison. */
static void blocks_case(dtype type, int rows, int in_dim, int out_dim, int with_bias,
                        uint64_t *rng) {
    const long count = (long)out_dim * in_dim, n = (long)rows * out_dim;
    const size_t bytes = dtype_bytes(type, (size_t)count);
    float *wf = rand_floats(count, rng, -1, 1), *wv = host_alloc(sizeof(float) * (size_t)count);
    void *blocks = host_alloc(bytes);
    qblocks_quantize(type, blocks, wf, out_dim, in_dim);
    qblocks_dequantize(type, wv, blocks, out_dim, in_dim);
    float *in = rand_floats((long)rows * in_dim, rng, -1, 1);
    float *bias = rand_floats(out_dim, rng, -0.5f, 0.5f);
    float *want = host_alloc(sizeof(float) * n), *got = host_alloc(sizeof(float) * n);
    void *d_w = up(blocks, bytes);
    float *d_in = up(in, sizeof(float) * rows * in_dim);
    float *d_bias = up(bias, sizeof(float) * out_dim);
    float *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * n);
    const weight_view dv = {type, d_w, NULL, 0, 0};
    gpu.ops->matmul(gpu.ctx, d_out, d_in, dv, with_bias ? d_bias : NULL, rows, in_dim, out_dim);
    gpu.ops->synchronize(gpu.ctx);
    down(got, d_out, sizeof(float) * n);
    ref_matmul(want, in, wv, with_bias ? bias : NULL, rows, in_dim, out_dim);
    char what[96];
    snprintf(what, sizeof what, "matmul %s %dx%dx%d%s vs ref", dtype_name(type), rows, in_dim,
             out_dim, with_bias ? " +bias" : "");
    expect_close(got, want, n, 1e-4, what);
    rel(d_w); rel(d_in); rel(d_bias); rel(d_out);
    free(wf); free(wv); free(blocks); free(in); free(bias); free(want); free(got);
}

static void test_matmul_blocks(void **state) {
    (void)state;
    uint64_t rng = 333;
    const dtype types[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q4_K};
    const int rows_list[] = {1, 3, 8, 9, 64};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t r = 0; r < sizeof rows_list / sizeof rows_list[0]; r++) {
            blocks_case(types[t], rows_list[r], 256, 200, (int)(r % 2 == 0), &rng);
            blocks_case(types[t], rows_list[r], 1280, 33, (int)(r % 2 == 1), &rng);
        }
}

/* The decode GEMV (rows <= 8) of one dtype and shape, with the weight (misalign bit 0) and
 * activation (bit 1) pointers 16-byte aligned or moved one element off it. */
static void gemv_case(dtype type, int rows, int in_dim, int out_dim, int misalign, uint64_t *rng) {
    void *w_host;
    float *s_host;
    make_weight(type, out_dim, in_dim, rng, &w_host, &s_host);
    float *in = rand_floats((long)rows * in_dim, rng, -1, 1);
    float *bias = rand_floats(out_dim, rng, -0.5f, 0.5f);
    const size_t esz = dtype_size(type), w_bytes = esz * (size_t)in_dim * out_dim;
    const size_t w_off = (misalign & 1) ? esz : 0, in_off = (misalign & 2) ? 1 : 0;
    long n = (long)rows * out_dim;
    float *want = host_alloc(sizeof(float) * n), *got = host_alloc(sizeof(float) * n);
    char *d_wbuf = gpu.ops->alloc(gpu.ctx, w_bytes + 16); // alloc is 64-byte aligned
    gpu.ops->copy_to_device(gpu.ctx, d_wbuf + w_off, w_host, w_bytes);
    float *d_inbuf = gpu.ops->alloc(gpu.ctx, sizeof(float) * ((size_t)rows * in_dim + 4));
    gpu.ops->copy_to_device(gpu.ctx, d_inbuf + in_off, in, sizeof(float) * rows * in_dim);
    float *d_s = s_host ? up(s_host, sizeof(float) * out_dim) : NULL;
    float *d_bias = up(bias, sizeof(float) * out_dim);
    float *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * n);
    weight_view hv = {type, w_host, s_host, 0, 0}, dv = {type, d_wbuf + w_off, d_s, 0, 0};
    gpu.ops->matmul(gpu.ctx, d_out, d_inbuf + in_off, dv, d_bias, rows, in_dim, out_dim);
    down(got, d_out, sizeof(float) * n);
    ref_matmul_view(want, in, hv, bias, rows, in_dim, out_dim);
    // fp32 accumulation of exact products (the weights are widened exactly)
    const double tol = type == DTYPE_F32 ? FP32_TOL : 1e-4;
    char what[96];
    snprintf(what, sizeof what, "gemv %s %dx%dx%d misalign %d vs ref", dtype_name(type), rows,
             in_dim, out_dim, misalign);
    expect_close(got, want, n, tol, what);
    cpu.ops->matmul(cpu.ctx, want, in, hv, bias, rows, in_dim, out_dim);
    snprintf(what, sizeof what, "gemv %s %dx%dx%d misalign %d vs cpu", dtype_name(type), rows,
             in_dim, out_dim, misalign);
    expect_close(got, want, n, tol, what);
    rel(d_wbuf); rel(d_inbuf); if (d_s) rel(d_s); rel(d_bias); rel(d_out);
    free(w_host); free(s_host); free(in); free(bias); free(want); free(got);
}

/* Every dtype, rows 1..8, and row lengths (in_dim) that take each path of the kernel: 16-byte
 * loads with no tail (768, 64), short rows sharing a warp between 2 or 4 outputs (20, 64), a
 * tail after the 16-byte loads with every other weight row aligned (772 for bf16/f16, 776 for
 * int8), odd lengths that are scalar throughout (131, 7); odd out_dim leaves part of the last
 * block without an output. Each aligned, then with the weights, the activations or both one
 * element off 16-byte alignment. */
static void test_gemv(void **state) {
    (void)state;
    uint64_t rng = 313;
    const dtype types[] = {DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_INT8};
    const int shapes[][2] = {{768, 37}, {64, 45}, {20, 33}, {772, 29}, {776, 31}, {131, 70},
                             {7, 9}};
    for (size_t t = 0; t < 4; t++)
        for (int rows = 1; rows <= 8; rows++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int misalign = 0; misalign < 4; misalign++)
                    gemv_case(types[t], rows, shapes[s][0], shapes[s][1], misalign, &rng);
}

static void test_bias_gelu(void **state) {
    (void)state;
    uint64_t rng = 404;
    const int rows = 7, cols = 300;
    long n = (long)rows * cols;
    float *x = rand_floats(n, &rng, -6, 6), *bias = rand_floats(cols, &rng, -1, 1);
    float *want = host_alloc(sizeof(float) * n), *got = host_alloc(sizeof(float) * n);
    float *d_x = gpu.ops->alloc(gpu.ctx, sizeof(float) * n), *d_b = up(bias, sizeof(float) * cols);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        memcpy(want, x, sizeof(float) * n);
        ref_bias_gelu(want, with_bias ? bias : NULL, rows, cols);
        gpu.ops->copy_to_device(gpu.ctx, d_x, x, sizeof(float) * n);
        gpu.ops->bias_gelu(gpu.ctx, d_x, with_bias ? d_b : NULL, rows, cols);
        down(got, d_x, sizeof(float) * n);
        expect_close(got, want, n, FP32_TOL, with_bias ? "bias_gelu vs ref" : "gelu vs ref");
    }
    rel(d_x); rel(d_b);
    free(x); free(bias); free(want); free(got);
}

/* RMSNorm and the fused residual add + RMSNorm (once with the norm, once add-only), against
 * the twin and the cpu. */
static void test_rmsnorm(void **state) {
    (void)state;
    uint64_t rng = 212;
    const int shapes[][2] = {{19, 4096}, {5, 50}, {3, 8192}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], C = shapes[s][1];
        long n = (long)rows * C;
        float *in = rand_floats(n, &rng, -3, 5), *delta = rand_floats(n, &rng, -1, 1);
        float *w = rand_floats(C, &rng, 0.5f, 1.5f);
        float *want = host_alloc(sizeof(float) * n), *got = host_alloc(sizeof(float) * n);
        float *res_want = host_alloc(sizeof(float) * n), *res_got = host_alloc(sizeof(float) * n);
        float *d_in = up(in, sizeof(float) * n), *d_delta = up(delta, sizeof(float) * n);
        float *d_w = up(w, sizeof(float) * C), *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * n);

        ref_rmsnorm(want, in, w, rows, C, 1e-5f);
        gpu.ops->rmsnorm(gpu.ctx, d_out, d_in, d_w, rows, C, 1e-5f);
        down(got, d_out, sizeof(float) * n);
        expect_close(got, want, n, FP32_TOL, "rmsnorm vs ref");
        cpu.ops->rmsnorm(cpu.ctx, want, in, w, rows, C, 1e-5f);
        expect_close(got, want, n, FP32_TOL, "rmsnorm vs cpu");

        memcpy(res_want, in, sizeof(float) * n);
        ref_residual_rmsnorm(res_want, want, delta, w, rows, C, 1e-5f);
        gpu.ops->residual_rmsnorm(gpu.ctx, d_in, d_out, d_delta, d_w, rows, C, 1e-5f);
        down(got, d_out, sizeof(float) * n);
        down(res_got, d_in, sizeof(float) * n);
        expect_close(res_got, res_want, n, FP32_TOL, "residual_rmsnorm residual vs ref");
        expect_close(got, want, n, FP32_TOL, "residual_rmsnorm norm vs ref");
        ref_residual_rmsnorm(res_want, NULL, delta, w, rows, C, 1e-5f);
        gpu.ops->residual_rmsnorm(gpu.ctx, d_in, NULL, d_delta, d_w, rows, C, 1e-5f);
        down(res_got, d_in, sizeof(float) * n);
        expect_close(res_got, res_want, n, FP32_TOL, "residual_rmsnorm add-only vs ref");

        rel(d_in); rel(d_delta); rel(d_w); rel(d_out);
        free(in); free(delta); free(w); free(want); free(got); free(res_want); free(res_got);
    }
}

/* SwiGLU over [gate | up] rows, gates far out on both sides included. */
static void test_swiglu(void **state) {
    (void)state;
    uint64_t rng = 414;
    const int rows = 7, cols = 1376;
    long n = (long)rows * cols;
    float *gu = rand_floats(2 * n, &rng, -8, 8);
    gu[1] = -100.0f, gu[2] = 100.0f;
    float *want = host_alloc(sizeof(float) * n), *got = host_alloc(sizeof(float) * n);
    float *d_gu = up(gu, sizeof(float) * 2 * n), *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * n);
    gpu.ops->swiglu(gpu.ctx, d_out, d_gu, rows, cols);
    down(got, d_out, sizeof(float) * n);
    ref_swiglu(want, gu, rows, cols);
    expect_close(got, want, n, FP32_TOL, "swiglu vs ref");
    cpu.ops->swiglu(cpu.ctx, want, gu, rows, cols);
    expect_close(got, want, n, FP32_TOL, "swiglu vs cpu");
    rel(d_gu); rel(d_out);
    free(gu); free(want); free(got);
}

/* Mixture of experts: an expert's rows gathered out of order, and its outputs added back
 * weighted into rows that already hold values. */
static void test_gather_scatter_rows(void **state) {
    (void)state;
    uint64_t rng = 415;
    const int rows = 50, C = 96, n = 17;
    int32_t idx[17];
    for (int i = 0; i < n; i++)
        idx[i] = rows - 1 - 3 * i;
    float *in = rand_floats((long)rows * C, &rng, -2, 2), *w = rand_floats(n, &rng, 0, 1);
    float *out = rand_floats((long)rows * C, &rng, -1, 1);
    float *got = host_alloc(sizeof(float) * rows * C), *want = host_alloc(sizeof(float) * rows * C);
    float *d_in = up(in, sizeof(float) * rows * C), *d_w = up(w, sizeof(float) * n);
    float *d_out = up(out, sizeof(float) * rows * C);
    int32_t *d_idx = up(idx, sizeof idx);
    float *d_rows = gpu.ops->alloc(gpu.ctx, sizeof(float) * n * C);
    gpu.ops->gather_rows(gpu.ctx, d_rows, d_in, d_idx, n, C);
    down(got, d_rows, sizeof(float) * n * C);
    ref_gather_rows(want, in, idx, n, C);
    assert_memory_equal(got, want, sizeof(float) * n * C); /* copies are exact */
    gpu.ops->scatter_add_rows(gpu.ctx, d_out, d_rows, d_idx, d_w, n, C);
    down(got, d_out, sizeof(float) * rows * C);
    float *ref = host_alloc(sizeof(float) * rows * C);
    memcpy(ref, out, sizeof(float) * rows * C);
    ref_scatter_add_rows(ref, want, idx, w, n, C); /* want holds the gathered rows */
    expect_close(got, ref, (long)rows * C, FP32_TOL, "scatter_add_rows vs ref");
    rel(d_in); rel(d_w); rel(d_out); rel(d_idx); rel(d_rows);
    free(in); free(w); free(out); free(got); free(want); free(ref);
}

/* A cache of either layout over `seqs` sequences, on host (for cpu) and device, in one type. */
typedef struct {
    kv_view host, dev;
    long rows;     // cache rows (positions x kv heads) in k, and in v
    size_t bytes;  // of k, and of v
    int32_t *table_host;
} test_cache;

/* kv_heads heads stored, serving heads query heads. */
static void cache_make(test_cache *c, int paged, int seqs, int heads, int kv_heads, int hd,
                       int max_ctx, dtype type, uint64_t *rng) {
    memset(c, 0, sizeof *c);
    kv_view v = {0};
    v.type = type;
    v.max_ctx = max_ctx;
    v.heads = heads;
    v.kv_heads = kv_heads;
    v.head_dim = hd;
    if (paged) {
        v.block_size = 4;
        v.blocks_per_seq = max_ctx / 4;
        int blocks = seqs * v.blocks_per_seq + 3; // spare blocks stay unused
        c->rows = (long)blocks * kv_heads * v.block_size;
        // a shuffled block assignment so a sequence's keys really are scattered
        int n = seqs * v.blocks_per_seq;
        c->table_host = host_alloc(sizeof(int32_t) * (size_t)n);
        for (int i = 0; i < n; i++) c->table_host[i] = i + 3;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(ref_rng_next(rng) % (uint64_t)(i + 1));
            int32_t t = c->table_host[i];
            c->table_host[i] = c->table_host[j];
            c->table_host[j] = t;
        }
    } else {
        c->rows = (long)seqs * kv_heads * max_ctx;
    }
    c->bytes = kv_row_bytes(type, hd) * (size_t)c->rows;
    c->host = v;
    c->host.k = host_alloc(c->bytes);
    c->host.v = host_alloc(c->bytes);
    c->host.block_table = c->table_host;
    c->dev = v;
    c->dev.k = gpu.ops->alloc(gpu.ctx, c->bytes);
    c->dev.v = gpu.ops->alloc(gpu.ctx, c->bytes);
    c->dev.block_table =
        paged ? up(c->table_host, sizeof(int32_t) * (size_t)seqs * v.blocks_per_seq) : NULL;
}

static void cache_free(test_cache *c) {
    free(c->host.k); free(c->host.v); free(c->table_host);
    rel(c->dev.k); rel(c->dev.v);
    if (c->dev.block_table) rel((void *)c->dev.block_table);
}

/* Prefill 9 tokens, decode 4 single tokens, then a chunk of 4: each call's output rows are
 * compared against whole-sequence reference attention and against the cpu backend. kv_heads
 * kv heads serve the heads query heads; rope (head_dim / 2 host floats) or NULL. */
static dtype kv_type = DTYPE_F32; // the cache type of attention_case (test_attention's loop)

static void attention_case(int paged, int heads, int kv_heads, int hd, const float *rope,
                           uint64_t *rng) {
    const int batch = 2, seq0 = 1, seqs = 3, max_ctx = 40, total = 17;
    const int steps[][2] = {{0, 9}, {9, 1}, {10, 1}, {11, 1}, {12, 1}, {13, 4}}; // (pos0, n_new)
    const long C = (long)heads * hd, row = C + 2L * kv_heads * hd;
    float *qkv_all = rand_floats(batch * total * row, rng, -1, 1);
    float *want_all = host_alloc(sizeof(float) * batch * total * C);
    if (kv_heads == heads && !rope && kv_type == DTYPE_F32)
        ref_attention(want_all, qkv_all, batch, total, heads, hd);
    else // keys and values as a cache of kv_type holds them
        ref_attention_gqa_kv(want_all, qkv_all, batch, total, heads, kv_heads, hd, rope, kv_type);
    // A narrow cache with RoPE: keys rotated in float may round to the type one step apart
    // from the twin's (and, through sin/cos in two libraries, from the cpu's): 1e-4, as
    // tests/kernels/test_ops.c allows.
    const double tol = kv_type != DTYPE_F32 && rope ? 1e-4 : FP32_TOL;
    float *d_rope = rope ? up(rope, sizeof(float) * (size_t)(hd / 2)) : NULL;
    test_cache tc;
    cache_make(&tc, paged, seqs, heads, kv_heads, hd, max_ctx, kv_type, rng);
    float *qkv = host_alloc(sizeof(float) * batch * total * row);
    float *got = host_alloc(sizeof(float) * batch * total * C);
    float *want = host_alloc(sizeof(float) * batch * total * C);
    float *cpu_out = host_alloc(sizeof(float) * batch * total * C);
    float *d_qkv = gpu.ops->alloc(gpu.ctx, sizeof(float) * batch * total * row);
    float *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * batch * total * C);
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        int pos0 = steps[s][0], n_new = steps[s][1];
        for (int b = 0; b < batch; b++)
            for (int i = 0; i < n_new; i++) {
                memcpy(qkv + ((long)b * n_new + i) * row,
                       qkv_all + ((long)b * total + pos0 + i) * row, sizeof(float) * row);
                memcpy(want + ((long)b * n_new + i) * C,
                       want_all + ((long)b * total + pos0 + i) * C, sizeof(float) * C);
            }
        long n_out = (long)batch * n_new * C;
        gpu.ops->copy_to_device(gpu.ctx, d_qkv, qkv, sizeof(float) * batch * n_new * row);
        gpu.ops->attention(gpu.ctx, d_out, d_qkv, tc.dev, d_rope, seq0, batch, n_new, pos0);
        down(got, d_out, sizeof(float) * n_out);
        cpu.ops->attention(cpu.ctx, cpu_out, qkv, tc.host, rope, seq0, batch, n_new, pos0);
        char what[112];
        snprintf(what, sizeof what, "attention %s h%d kv%d d%d%s pos0 %d n_new %d kv %s vs ref",
                 paged ? "paged" : "contig", heads, kv_heads, hd, rope ? " rope" : "", pos0,
                 n_new, dtype_name(kv_type));
        expect_close(got, want, n_out, tol, what);
        snprintf(what, sizeof what, "attention %s h%d kv%d d%d%s pos0 %d n_new %d kv %s vs cpu",
                 paged ? "paged" : "contig", heads, kv_heads, hd, rope ? " rope" : "", pos0,
                 n_new, dtype_name(kv_type));
        expect_close(got, cpu_out, n_out, tol, what);
    }
    // The device cache holds what the cpu one does (same layout, same slots, same rounding).
    // Unrotated keys are copies (or the same rounding of them), so equal; rotated ones come
    // from the same float arithmetic, but the sine and cosine from two libraries may differ
    // in their last double bit (and a narrow type's rounding may then land a step apart).
    const long n_vals = tc.rows * hd;
    unsigned char *kd = host_alloc(tc.bytes);
    float *k = host_alloc(sizeof(float) * (size_t)n_vals), *kc = host_alloc(sizeof(float) * (size_t)n_vals);
    down(kd, tc.dev.k, tc.bytes);
    const size_t rb = kv_row_bytes(kv_type, hd);
    for (long r = 0; r < tc.rows; r++) {
        ref_kv_decode(k + r * hd, kd + r * rb, hd, kv_type);
        ref_kv_decode(kc + r * hd, (const unsigned char *)tc.host.k + r * rb, hd, kv_type);
    }
    expect_close(k, kc, n_vals, rope ? (kv_type == DTYPE_F32 ? 1e-6 : 1e-2) : 1e-12,
                 "kv cache keys vs cpu cache");
    free(k); free(kc); free(kd);
    cache_free(&tc);
    rel(d_qkv); rel(d_out);
    if (d_rope) rel(d_rope);
    free(qkv_all); free(want_all); free(qkv); free(got); free(want); free(cpu_out);
}

static void test_attention(void **state) {
    (void)state;
    uint64_t rng = 505;
    const dtype types[] = {DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_INT8};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        kv_type = types[t];
        for (int paged = 0; paged < 2; paged++) {
            attention_case(paged, 3, 3, 64, NULL, &rng);
            attention_case(paged, 2, 2, 48, NULL, &rng);  // head_dim not dividing the block
            attention_case(paged, 1, 1, 160, NULL, &rng); // head_dim above one warp group
        }
    }
    kv_type = DTYPE_F32;
}

/* Grouped-query attention, kv_heads 1, 2 and heads, without and with RoPE (plain and Llama 3.1
 * scaled with a small original context, so all three bands are present). */
static void test_attention_gqa(void **state) {
    (void)state;
    uint64_t rng = 525;
    float plain[64], scaled[64];
    rope_inv_freq_fill(plain, 128, 500000.0, NULL);
    const rope_llama3 l3 = {.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                            .original_max_position_embeddings = 64};
    rope_inv_freq_fill(scaled, 128, 10000.0, &l3);
    const float *ropes[] = {NULL, plain, scaled};
    const int kv[] = {1, 2, 4};
    float small[16];
    rope_inv_freq_fill(small, 32, 10000.0, NULL);
    const dtype types[] = {DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_INT8};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        kv_type = types[t];
        for (int paged = 0; paged < 2; paged++)
            for (size_t r = 0; r < 3; r++)
                for (size_t k = 0; k < 3; k++) attention_case(paged, 4, kv[k], 128, ropes[r], &rng);
        attention_case(1, 6, 3, 32, small, &rng); // head_dim 32: four key groups per block
    }
    kv_type = DTYPE_F32;
}

/* Split-key decode at long contexts: a prefill of T tokens fills the cache, then decode steps
 * at T, T + 1, ... (the last one captured into a CUDA graph, which must not grow the split
 * workspace: the prefill reserved it) are compared with the cpu backend on the same cache.
 * Splits are about 2 * SMs / (batch * kv_heads), at least 64 keys each; a block takes the
 * query heads of its kv head in turn. */
static void attention_split_case(int paged, int batch, int heads, int kv_heads, int hd,
                                 const float *rope, int T, uint64_t *rng) {
    const int decode = 3, seq0 = 1, seqs = batch + 1, max_ctx = CEIL4(T + decode);
    const long C = (long)heads * hd, row = C + 2L * kv_heads * hd;
    test_cache tc;
    cache_make(&tc, paged, seqs, heads, kv_heads, hd, max_ctx, DTYPE_F32, rng);
    float *d_rope = rope ? up(rope, sizeof(float) * (size_t)(hd / 2)) : NULL;
    float *qkv = rand_floats((long)batch * T * row, rng, -1, 1);
    float *got = host_alloc(sizeof(float) * batch * T * C);
    float *want = host_alloc(sizeof(float) * batch * T * C);
    float *d_qkv = up(qkv, sizeof(float) * batch * T * row);
    float *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * batch * T * C);
    gpu.ops->attention(gpu.ctx, d_out, d_qkv, tc.dev, d_rope, seq0, batch, T, 0);
    cpu.ops->attention(cpu.ctx, want, qkv, tc.host, rope, seq0, batch, T, 0);
    void *exec = NULL;
    for (int i = 0; i < decode; i++) {
        const int pos0 = T + i, captured = i == decode - 1;
        ref_fill_uniform(qkv, batch * row, rng, -1, 1);
        gpu.ops->copy_to_device(gpu.ctx, d_qkv, qkv, sizeof(float) * batch * row);
        if (captured) assert_int_equal(gpu.ops->graph_begin(gpu.ctx), 0);
        gpu.ops->attention(gpu.ctx, d_out, d_qkv, tc.dev, d_rope, seq0, batch, 1, pos0);
        if (captured && gpu.ops->graph_end_and_launch(gpu.ctx, &exec) != 0)
            fail_msg("%s", error_message());
        down(got, d_out, sizeof(float) * batch * C);
        cpu.ops->attention(cpu.ctx, want, qkv, tc.host, rope, seq0, batch, 1, pos0);
        char what[128];
        snprintf(what, sizeof what, "split decode %s b%d h%d kv%d d%d%s pos0 %d%s vs cpu",
                 paged ? "paged" : "contig", batch, heads, kv_heads, hd, rope ? " rope" : "",
                 pos0, captured ? " (graph)" : "");
        expect_close(got, want, (long)batch * C, FP32_TOL, what);
    }
    gpu.ops->graph_destroy(gpu.ctx, exec);
    cache_free(&tc);
    rel(d_qkv); rel(d_out);
    if (d_rope) rel(d_rope);
    free(qkv); free(got); free(want);
}

/* On a 132-SM device (H100/H200) the multi-head shapes take about 71, 11, 5, 11, 2 and 1
 * splits; the grouped ones (Llama 3 8B's 32 heads over 8 kv heads, and 1 and 2 kv heads) 16,
 * 44 and 71. */
static void test_attention_split(void **state) {
    (void)state;
    uint64_t rng = 515;
    float rope[64];
    const rope_llama3 l31 = {.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                             .original_max_position_embeddings = 8192};
    rope_inv_freq_fill(rope, 128, 500000.0, &l31);
    for (int paged = 0; paged < 2; paged++) {
        attention_split_case(paged, 1, 1, 1, 64, NULL, 4500, &rng);
        attention_split_case(paged, 2, 12, 12, 64, NULL, 1000, &rng);
        attention_split_case(paged, 1, 4, 4, 128, NULL, 300, &rng);
        attention_split_case(paged, 1, 2, 2, 160, NULL, 700, &rng); // head_dim above a warp group
        attention_split_case(paged, 4, 64, 64, 48, NULL, 200, &rng);
        attention_split_case(paged, 8, 64, 64, 64, NULL, 130, &rng);
        attention_split_case(paged, 1, 32, 8, 128, rope, 1000, &rng);
        attention_split_case(paged, 2, 8, 1, 128, rope, 2800, &rng);
        attention_split_case(paged, 1, 6, 2, 64, NULL, 4500, &rng);
    }
}

static void test_argmax(void **state) {
    (void)state;
    uint64_t rng = 606;
    const int rows = 5, cols = 50257;
    long n = (long)rows * cols;
    float *x = rand_floats(n, &rng, -10, 10);
    // planted ties: the first of two equal maxima must win
    x[0 * cols + 7] = 20.0f; x[0 * cols + 9000] = 20.0f;
    x[1 * cols + cols - 1] = 30.0f;
    x[2 * cols + 0] = 25.0f; x[2 * cols + 1] = 25.0f;
    float want_v[5], got_v[5];
    int32_t want_i[5], got_i[5];
    ref_argmax(want_v, want_i, x, rows, cols);
    float *d_x = up(x, sizeof(float) * n);
    float *d_v = gpu.ops->alloc(gpu.ctx, sizeof got_v);
    int32_t *d_i = gpu.ops->alloc(gpu.ctx, sizeof got_i);
    gpu.ops->argmax(gpu.ctx, d_v, d_i, d_x, rows, cols);
    down(got_v, d_v, sizeof got_v);
    down(got_i, d_i, sizeof got_i);
    for (int r = 0; r < rows; r++) {
        assert_int_equal(got_i[r], want_i[r]);
        assert_true(got_v[r] == want_v[r]);
    }
    assert_int_equal(got_i[0], 7);
    assert_int_equal(got_i[1], cols - 1);
    assert_int_equal(got_i[2], 0);
    rel(d_x); rel(d_v); rel(d_i);
    free(x);
}

/* NaN policy (kernels/backend.h): the GPU reports the first NaN like the CPU twin, also when
 * the NaN sits in another warp or block-stride lane than the row's largest number. */
static void test_argmax_nan(void **state) {
    (void)state;
    uint64_t rng = 616;
    const float nan = __builtin_nanf(""), inf = __builtin_inff();
    enum { ROWS = 7, COLS = 4099 }; // more columns than threads: every lane sees several
    long n = (long)ROWS * COLS;
    float *x = rand_floats(n, &rng, -10, 10);
    x[0 * COLS + 0] = nan;                                     // first element
    x[1 * COLS + 2000] = nan, x[1 * COLS + 10] = 50.0f;        // middle, after a big number
    for (int c = 0; c < COLS; c++) x[2 * COLS + c] = nan;      // all NaN: column 0
    x[3 * COLS + 300] = 20.0f, x[3 * COLS + 301] = nan;        // ties around a NaN
    x[3 * COLS + 302] = 20.0f, x[3 * COLS + 3000] = nan;
    x[4 * COLS + 4000] = nan, x[4 * COLS + 17] = inf;          // NaN beats +inf
    x[4 * COLS + 3999 - 256] = nan;                            // first of two, other lanes
    x[5 * COLS + COLS - 1] = nan;                              // last column
    for (int c = 0; c < COLS; c++) x[6 * COLS + c] = -inf;     // all -inf, no NaN: column 0
    const int want_col[ROWS] = {0, 2000, 0, 301, 3999 - 256, COLS - 1, 0};
    float want_v[ROWS], got_v[ROWS];
    int32_t want_i[ROWS], got_i[ROWS];
    ref_argmax(want_v, want_i, x, ROWS, COLS);
    float *d_x = up(x, sizeof(float) * n);
    float *d_v = gpu.ops->alloc(gpu.ctx, sizeof got_v);
    int32_t *d_i = gpu.ops->alloc(gpu.ctx, sizeof got_i);
    gpu.ops->argmax(gpu.ctx, d_v, d_i, d_x, ROWS, COLS);
    down(got_v, d_v, sizeof got_v);
    down(got_i, d_i, sizeof got_i);
    for (int r = 0; r < ROWS; r++) {
        if (got_i[r] != want_col[r] || want_i[r] != want_col[r])
            fail_msg("argmax NaN row %d: gpu column %d, twin %d, want %d", r, got_i[r],
                     want_i[r], want_col[r]);
        if (r == ROWS - 1) assert_true(got_v[r] == -inf && want_v[r] == -inf);
        else assert_true(isnan(got_v[r]) && isnan(want_v[r]));
    }
    rel(d_x); rel(d_v); rel(d_i);
    free(x);
}

/* --- backend contract --------------------------------------------------------------------- */

static double now_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_memory_and_marks(void **state) {
    (void)state;
    size_t before = gpu.ops->peak_memory(gpu.ctx);
    const size_t bytes = (size_t)3 << 20;
    unsigned char *d = gpu.ops->alloc(gpu.ctx, bytes);
    assert_true(gpu.ops->peak_memory(gpu.ctx) >= bytes);
    assert_true(gpu.ops->peak_memory(gpu.ctx) >= before);
    unsigned char *h = host_alloc(bytes);
    memset(h, 0xab, bytes);
    down(h, d, bytes);
    for (size_t i = 0; i < bytes; i++)
        if (h[i]) fail_msg("alloc: byte %zu is %d, not zero", i, h[i]);

    double t_host0 = now_monotonic();
    gpu.ops->mark(gpu.ctx, 0);
    memset(h, 1, bytes);
    gpu.ops->copy_to_device(gpu.ctx, d, h, bytes);
    gpu.ops->memset_zero(gpu.ctx, d, bytes);
    gpu.ops->mark(gpu.ctx, 1);
    gpu.ops->synchronize(gpu.ctx);
    double t_host1 = now_monotonic();
    double t0 = gpu.ops->mark_seconds(gpu.ctx, 0), t1 = gpu.ops->mark_seconds(gpu.ctx, 1);
    printf("  marks: host %.6f .. %.6f, device %.6f .. %.6f\n", t_host0, t_host1, t0, t1);
    assert_true(t1 >= t0);
    // the anchor pairs clocks to well under a millisecond; allow generous slack
    assert_true(t0 >= t_host0 - 0.01 && t1 <= t_host1 + 0.01);
    down(h, d, bytes);
    for (size_t i = 0; i < bytes; i++)
        if (h[i]) fail_msg("memset_zero: byte %zu is %d", i, h[i]);
    rel(d);
    free(h);
    assert_non_null(gpu.ops->stream(gpu.ctx));
    size_t free_b = 0, total_b = 0;
    gpu.ops->memory_info(gpu.ctx, &free_b, &total_b);
    assert_true(total_b > 0 && free_b <= total_b);
    unsigned char *pinned = gpu.ops->host_alloc(gpu.ctx, bytes);
    for (size_t i = 0; i < bytes; i++)
        if (pinned[i]) fail_msg("host_alloc: byte %zu is %d, not zero", i, pinned[i]);
    gpu.ops->host_free(gpu.ctx, pinned);
    char bus[32];
    backend_pci_bus_id("cuda", 0, bus, sizeof bus);
    assert_true(strlen(bus) > 0);
}

/* A layernorm + matmul captured into a graph, replayed after the input changed in place. */
static void test_graph(void **state) {
    (void)state;
    uint64_t rng = 707;
    const int rows = 16, C = 128, out_dim = 96;
    float *in = rand_floats(rows * C, &rng, -1, 1), *w = rand_floats(out_dim * C, &rng, -1, 1);
    float *g = rand_floats(C, &rng, 0.5f, 1.5f), *b = rand_floats(C, &rng, -0.1f, 0.1f);
    float *norm = host_alloc(sizeof(float) * rows * C);
    float *want = host_alloc(sizeof(float) * rows * out_dim), *got = host_alloc(sizeof(float) * rows * out_dim);
    float *d_in = up(in, sizeof(float) * rows * C), *d_w = up(w, sizeof(float) * out_dim * C);
    float *d_g = up(g, sizeof(float) * C), *d_b = up(b, sizeof(float) * C);
    float *d_norm = gpu.ops->alloc(gpu.ctx, sizeof(float) * rows * C);
    float *d_out = gpu.ops->alloc(gpu.ctx, sizeof(float) * rows * out_dim);
    weight_view wv = {DTYPE_F32, d_w, NULL, 0, 0};
    void *exec = NULL;
    for (int round = 0; round < 2; round++) {
        if (round == 0) {
            assert_int_equal(gpu.ops->graph_begin(gpu.ctx), 0);
            gpu.ops->layernorm(gpu.ctx, d_norm, d_in, d_g, d_b, rows, C, 1e-5f);
            gpu.ops->matmul(gpu.ctx, d_out, d_norm, wv, NULL, rows, C, out_dim);
            if (gpu.ops->graph_end_and_launch(gpu.ctx, &exec) != 0) fail_msg("%s", error_message());
        } else {
            ref_fill_uniform(in, rows * C, &rng, -2, 2);
            gpu.ops->copy_to_device(gpu.ctx, d_in, in, sizeof(float) * rows * C);
            gpu.ops->graph_launch(gpu.ctx, exec);
        }
        down(got, d_out, sizeof(float) * rows * out_dim);
        ref_layernorm(norm, in, g, b, rows, C, 1e-5f);
        ref_matmul(want, norm, w, NULL, rows, C, out_dim);
        expect_close(got, want, (long)rows * out_dim, FP32_TOL, round ? "graph replay" : "graph capture");
    }
    gpu.ops->graph_destroy(gpu.ctx, exec);
    rel(d_in); rel(d_w); rel(d_g); rel(d_b); rel(d_norm); rel(d_out);
    free(in); free(w); free(g); free(b); free(norm); free(want); free(got);
}

int main(void) {
    if (backend_device_count("cuda") == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed),     cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_matmul),    cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_matmul_blocks),
        cmocka_unit_test(test_bias_gelu), cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_swiglu),    cmocka_unit_test(test_gather_scatter_rows),
        cmocka_unit_test(test_attention), cmocka_unit_test(test_attention_gqa),
        cmocka_unit_test(test_attention_split),
        cmocka_unit_test(test_argmax),    cmocka_unit_test(test_argmax_nan),
        cmocka_unit_test(test_memory_and_marks), cmocka_unit_test(test_graph),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
