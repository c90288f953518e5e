/* Every CPU backend op against its reference twin (tests/ref_ops.c) on fresh random inputs of
 * several shapes, odd sizes included, by norm-wise relative error; paged attention against
 * contiguous; and the backend's memory, marks and no-allocation-in-steady-state contract. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/backend.h"
#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref_ops.h"
#include "kernels/rope.h"

#define FP32_TOL 1e-5

static backend be;
/* The instruction-set level under test (argv[1]; CTest runs one test per level), NULL for the
 * best the CPU has. */
static const char *isa_under_test;

static int setup(void **state) {
    (void)state;
    backend_options opt = {.threads = 0, .max_marks = 8, .cpu_isa = isa_under_test};
    return backend_cpu_init(&be, &opt);
}

static int teardown(void **state) {
    (void)state;
    backend_free(&be);
    return 0;
}

static float *rand_floats(long n, uint64_t *rng, float lo, float hi) {
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(x);
    ref_fill_uniform(x, n, rng, lo, hi);
    return x;
}

static float *zeros(long n) {
    float *x = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(x);
    return x;
}

static void expect_close(const float *got, const float *want, long n, double tol,
                         const char *what) {
    double err = ref_rel_error(got, want, n);
    if (!(err < tol)) fail_msg("%s: relative error %.3g >= %.3g", what, err, tol);
}

/* Rows are sequences of n_new tokens at positions pos0..: prefill-like (n_new > 1, pos0 0 or
 * not) and decode-like (n_new 1, one row per sequence) against the twin given the positions
 * array that layout means. */
static void test_embed(void **state) {
    (void)state;
    uint64_t rng = 11;
    const int C = 33, vocab_begin = 10, vocab_end = 50, ctx = 20;
    const int layouts[][3] = {{13, 1, 0}, {13, 1, 19}, {12, 4, 0}, {12, 3, 7}, {7, 7, 13}};
    float *wte = rand_floats((long)(vocab_end - vocab_begin) * C, &rng, -1, 1);
    float *wpe = rand_floats((long)ctx * C, &rng, -1, 1);
    int32_t tokens[13], positions[13];
    float *got = zeros(13L * C), *want = zeros(13L * C);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        const int rows = layouts[l][0], n_new = layouts[l][1], pos0 = layouts[l][2];
        for (int r = 0; r < rows; r++) {
            tokens[r] = (int32_t)(ref_rng_next(&rng) % 60); // some outside the shard
            positions[r] = pos0 + r % n_new;
        }
        tokens[0] = vocab_begin;
        tokens[1] = vocab_end; // first token past the shard: zero from wte
        for (int with_wpe = 0; with_wpe < 2; with_wpe++) {
            const float *p = with_wpe ? wpe : NULL;
            be.ops->embed(be.ctx, got, tokens, wte, p, rows, C, n_new, pos0, vocab_begin,
                          vocab_end);
            ref_embed(want, tokens, positions, wte, p, rows, C, vocab_begin, vocab_end);
            expect_close(got, want, (long)rows * C, FP32_TOL, "embed");
            // a copy of the rows, not a sum: exact
            for (long i = 0; i < (long)rows * C; i++)
                if (got[i] != want[i]) fail_msg("embed layout %zu: element %ld differs", l, i);
        }
    }
    // Without wpe, an out-of-shard token gives an exact zero row.
    be.ops->embed(be.ctx, got, tokens, wte, NULL, 13, C, 1, 0, vocab_begin, vocab_end);
    for (int c = 0; c < C; c++)
        assert_true(got[C + c] == 0.0f);
    free(wte), free(wpe), free(got), free(want);
}

static void test_layernorm(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 1}, {5, 64}, {3, 771}, {17, 768}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t rng = 100 + s;
        int rows = shapes[s][0], C = shapes[s][1];
        long n = (long)rows * C;
        // An offset mean (+3) catches the single-pass variance formula.
        float *in = rand_floats(n, &rng, 2, 4), *gamma = rand_floats(C, &rng, 0.5f, 1.5f);
        float *beta = rand_floats(C, &rng, -0.5f, 0.5f);
        float *got = zeros(n), *want = zeros(n);
        be.ops->layernorm(be.ctx, got, in, gamma, beta, rows, C, 1e-5f);
        ref_layernorm(want, in, gamma, beta, rows, C, 1e-5f);
        expect_close(got, want, n, FP32_TOL, "layernorm");
        free(in), free(gamma), free(beta), free(got), free(want);
    }
}

static void test_residual_layernorm(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 7}, {9, 130}, {4, 1024}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t rng = 200 + s;
        int rows = shapes[s][0], C = shapes[s][1];
        long n = (long)rows * C;
        float *res = rand_floats(n, &rng, -2, 2), *delta = rand_floats(n, &rng, -1, 1);
        float *gamma = rand_floats(C, &rng, 0.5f, 1.5f), *beta = rand_floats(C, &rng, -0.5f, 0.5f);
        float *res_ref = zeros(n), *got = zeros(n), *want = zeros(n);
        memcpy(res_ref, res, sizeof(float) * (size_t)n);
        be.ops->residual_layernorm(be.ctx, res, got, delta, gamma, beta, rows, C, 1e-5f);
        ref_residual_layernorm(res_ref, want, delta, gamma, beta, rows, C, 1e-5f);
        expect_close(res, res_ref, n, FP32_TOL, "residual_layernorm residual");
        expect_close(got, want, n, FP32_TOL, "residual_layernorm norm");
        // norm_out NULL: add only, and the norm buffer is untouched.
        memset(got, 0, sizeof(float) * (size_t)n);
        be.ops->residual_layernorm(be.ctx, res, NULL, delta, gamma, beta, rows, C, 1e-5f);
        ref_residual_layernorm(res_ref, NULL, delta, gamma, beta, rows, C, 1e-5f);
        expect_close(res, res_ref, n, FP32_TOL, "residual add only");
        for (long i = 0; i < n; i++)
            assert_true(got[i] == 0.0f);
        free(res), free(delta), free(gamma), free(beta), free(res_ref), free(got), free(want);
    }
}

/* RMSNorm against its twin, on inputs with an offset mean (+3), up to Llama 3 8B's width;
 * and a row of zeros. */
static void test_rmsnorm(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 1}, {5, 64}, {3, 771}, {4, 8192}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t rng = 150 + s;
        int rows = shapes[s][0], C = shapes[s][1];
        long n = (long)rows * C;
        float *in = rand_floats(n, &rng, 2, 4), *w = rand_floats(C, &rng, 0.5f, 1.5f);
        float *got = zeros(n), *want = zeros(n);
        be.ops->rmsnorm(be.ctx, got, in, w, rows, C, 1e-5f);
        ref_rmsnorm(want, in, w, rows, C, 1e-5f);
        expect_close(got, want, n, FP32_TOL, "rmsnorm");
        free(in), free(w), free(got), free(want);
    }
    // eps matters for a row of zeros: out is exactly 0, not NaN
    float zero_in[4] = {0}, w[4] = {1, 1, 1, 1}, out[4] = {1, 1, 1, 1};
    be.ops->rmsnorm(be.ctx, out, zero_in, w, 1, 4, 1e-6f);
    for (int c = 0; c < 4; c++)
        assert_true(out[c] == 0.0f);
}

/* The fused residual add + RMSNorm, with residual_layernorm's convention: the residual is
 * updated, norm_out normalised, and norm_out NULL adds only. */
static void test_residual_rmsnorm(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 7}, {9, 130}, {4, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t rng = 250 + s;
        int rows = shapes[s][0], C = shapes[s][1];
        long n = (long)rows * C;
        float *res = rand_floats(n, &rng, -2, 2), *delta = rand_floats(n, &rng, -1, 1);
        float *w = rand_floats(C, &rng, 0.5f, 1.5f);
        float *res_ref = zeros(n), *got = zeros(n), *want = zeros(n);
        memcpy(res_ref, res, sizeof(float) * (size_t)n);
        be.ops->residual_rmsnorm(be.ctx, res, got, delta, w, rows, C, 1e-6f);
        ref_residual_rmsnorm(res_ref, want, delta, w, rows, C, 1e-6f);
        expect_close(res, res_ref, n, FP32_TOL, "residual_rmsnorm residual");
        expect_close(got, want, n, FP32_TOL, "residual_rmsnorm norm");
        memset(got, 0, sizeof(float) * (size_t)n);
        be.ops->residual_rmsnorm(be.ctx, res, NULL, delta, w, rows, C, 1e-6f);
        ref_residual_rmsnorm(res_ref, NULL, delta, w, rows, C, 1e-6f);
        expect_close(res, res_ref, n, FP32_TOL, "residual_rmsnorm add only");
        for (long i = 0; i < n; i++)
            assert_true(got[i] == 0.0f);
        free(res), free(delta), free(w), free(res_ref), free(got), free(want);
    }
}

/* SwiGLU over the [gate | up] layout, with gates far out on both sides (no NaN, silu(-100) is
 * about -4e-42 * up, silu(100) = 100 * up). */
static void test_swiglu(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 1}, {3, 257}, {8, 1376}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t rng = 1050 + s;
        int rows = shapes[s][0], cols = shapes[s][1];
        float *gu = rand_floats((long)rows * 2 * cols, &rng, -8, 8);
        gu[0] = 3.0f; // keeps max|ref| away from 0 in the 1x1 case
        if (cols > 2) gu[1] = -100.0f, gu[2] = 100.0f, gu[cols + 1] = 0.5f;
        float *got = zeros((long)rows * cols), *want = zeros((long)rows * cols);
        be.ops->swiglu(be.ctx, got, gu, rows, cols);
        ref_swiglu(want, gu, rows, cols);
        expect_close(got, want, (long)rows * cols, FP32_TOL, "swiglu");
        if (cols > 2) assert_true(got[1] == got[1] && fabsf(got[1]) < 1e-30f);
        free(gu), free(got), free(want);
    }
}

/* Mixture of experts: an expert's rows gathered out of order (every third row, from the end),
 * and its outputs added back weighted into rows that already hold values; rows it does not
 * serve are left as they were. Shapes large enough to split over threads. */
static void test_gather_scatter_rows(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 1}, {5, 33}, {200, 96}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t rng = 1070 + s;
        const int rows = shapes[s][0], C = shapes[s][1], n = (rows + 2) / 3;
        int32_t *idx = malloc((size_t)n * sizeof(int32_t));
        for (int i = 0; i < n; i++)
            idx[i] = rows - 1 - 3 * i;
        float *in = rand_floats((long)rows * C, &rng, -2, 2);
        float *got = zeros((long)n * C), *want = zeros((long)n * C);
        be.ops->gather_rows(be.ctx, got, in, idx, n, C);
        ref_gather_rows(want, in, idx, n, C);
        assert_memory_equal(got, want, (size_t)n * C * sizeof(float)); /* copies are exact */
        float *w = rand_floats(n, &rng, 0, 1), *out = rand_floats((long)rows * C, &rng, -1, 1);
        float *out_ref = malloc((size_t)rows * C * sizeof(float));
        memcpy(out_ref, out, (size_t)rows * C * sizeof(float));
        be.ops->scatter_add_rows(be.ctx, out, got, idx, w, n, C);
        ref_scatter_add_rows(out_ref, got, idx, w, n, C);
        expect_close(out, out_ref, (long)rows * C, FP32_TOL, "scatter_add_rows");
        free(idx), free(in), free(got), free(want), free(w), free(out), free(out_ref);
    }
}

/* The inverse-frequency table: Llama 3.1 8B (head_dim 128, theta 500000, factor 8, low 1,
 * high 4, original 8192) against hand-computed values, inv_i = 500000^(-i/64) and
 * wavelen_i = 2 pi / inv_i against the bounds 8192/4 = 2048 and 8192/1 = 8192; the whole table
 * against the twin; the plain table (theta 10000, head_dim 64); and the usable-config check. */
static void test_rope_inv_freq(void **state) {
    (void)state;
    float table[64];
    double twin[64];
    const rope_llama3 l31 = {.factor = 8.0,
                             .low_freq_factor = 1.0,
                             .high_freq_factor = 4.0,
                             .original_max_position_embeddings = 8192};
    rope_inv_freq_fill(table, 128, 500000.0, &l31);
    const struct {
        int i;
        double want;
    } hand[] = {
        {0, 1.0},                    // wavelen 2 pi: kept
        {28, 0.003211445994752591},  // 500000^(-28/64), wavelen 1956.5 < 2048: kept
        {29, 0.002166570763503359},  // wavelen 2401.7: s = (8192/2401.7 - 1)/3 = 0.8036,
                                     // inv ((1 - s)/8 + s)
        {32, 0.0005248461609929547}, // 1/sqrt(500000), wavelen 4442.9: s = 0.2813
        {34, 0.0001785078127679964}, // wavelen 6695.1: s = 0.0745
        {35, 9.556212353964683e-05}, // wavelen 8218.7 > 8192: 500000^(-35/64) / 8
        {63, 3.068925988914511e-07}, // 500000^(-63/64) / 8
    };
    for (size_t k = 0; k < sizeof hand / sizeof hand[0]; k++) {
        double got = table[hand[k].i], want = hand[k].want;
        if (fabs(got - want) > 1e-7 * want)
            fail_msg("llama3 inv_freq[%d] = %.9g, want %.9g", hand[k].i, got, want);
    }
    ref_rope_inv_freq(twin, 128, 500000.0, 1, 8.0, 1.0, 4.0, 8192.0);
    for (int i = 0; i < 64; i++)
        if (fabs(table[i] - twin[i]) > 1e-7 * twin[i])
            fail_msg("llama3 inv_freq[%d] = %.9g, twin %.9g", i, table[i], twin[i]);

    rope_inv_freq_fill(table, 64, 10000.0, NULL);
    ref_rope_inv_freq(twin, 64, 10000.0, 0, 0, 0, 0, 0);
    assert_true(table[0] == 1.0f);
    assert_true(fabs(table[1] - 0.7498942093324559) < 1e-7);             // 10000^(-2/64)
    assert_true(fabs(table[31] - 1.333521432163324e-4) < 1e-7 * 1.3e-4); // 10000^(-62/64)
    for (int i = 0; i < 32; i++)
        if (fabs(table[i] - twin[i]) > 1e-7 * twin[i])
            fail_msg("inv_freq[%d] = %.9g, twin %.9g", i, table[i], twin[i]);

    assert_null(rope_llama3_problem(&l31));
    rope_llama3 bad = l31;
    bad.high_freq_factor = 1.0; // equal to low: the blend would divide by zero
    assert_non_null(strstr(rope_llama3_problem(&bad), "high_freq_factor"));
    bad = l31, bad.factor = 0.0;
    assert_non_null(strstr(rope_llama3_problem(&bad), "rope_scaling.factor"));
    bad = l31, bad.low_freq_factor = __builtin_nan("");
    assert_non_null(strstr(rope_llama3_problem(&bad), "low_freq_factor"));
    bad = l31, bad.original_max_position_embeddings = 0;
    assert_non_null(strstr(rope_llama3_problem(&bad), "original_max_position_embeddings"));
}

/* Runs the backend matmul on w and compares with the reference on the same host weights. */
static void check_matmul(weight_view w, int rows, int in_dim, int out_dim, uint64_t seed,
                         int with_bias, const char *what) {
    uint64_t rng = seed;
    float *in = rand_floats((long)rows * in_dim, &rng, -1, 1);
    float *bias = with_bias ? rand_floats(out_dim, &rng, -1, 1) : NULL;
    float *got = zeros((long)rows * out_dim), *want = zeros((long)rows * out_dim);
    be.ops->matmul(be.ctx, got, in, w, bias, rows, in_dim, out_dim);
    ref_matmul_cpu(want, in, w, bias, rows, in_dim, out_dim);
    char msg[160];
    snprintf(msg, sizeof msg, "matmul %s (%s) rows %d in %d out %d bias %d", what,
             cpu_isa_name(backend_cpu_isa(&be)), rows, in_dim, out_dim, with_bias);
    expect_close(got, want, (long)rows * out_dim, FP32_TOL, msg);
    free(in), free(bias), free(got), free(want);
}

/* rows, in_dim, out_dim: odd sizes, every GEMV row count (1..CPU_GEMV_MAX_ROWS) and GEMM ones
 * past it, widths past the tile budget so the tile holds the minimum rows, out_dim not a
 * multiple of the tile rows or of a thread's column slice, and in_dim with and without a tail
 * under one vector or one int8 block. */
static const int matmul_shapes[][3] = {
    {1, 64, 48},  {7, 129, 65}, {33, 300, 17}, {5, 100, 2000}, {3, 9000, 37}, {1, 9000, 37},
    {2, 768, 97}, {4, 96, 300}, {8, 33, 129},  {6, 1024, 40},  {9, 256, 70},  {3, 17, 5},
};

static void test_matmul_f32(void **state) {
    (void)state;
    for (size_t s = 0; s < sizeof matmul_shapes / sizeof matmul_shapes[0]; s++) {
        int rows = matmul_shapes[s][0], in_dim = matmul_shapes[s][1], out_dim = matmul_shapes[s][2];
        uint64_t rng = 300 + s;
        float *w = rand_floats((long)out_dim * in_dim, &rng, -1, 1);
        weight_view v = {.type = DTYPE_F32, .data = w, .scale = NULL};
        check_matmul(v, rows, in_dim, out_dim, 400 + s, (int)(s & 1), "f32");
        check_matmul(v, rows, in_dim, out_dim, 500 + s, !(s & 1), "f32");
        free(w);
    }
}

/* ggml's block formats (kernels/quant_blocks.h) at this level: against the double reference
 * (ref_matmul_blocks, which reads the blocks' bytes itself) for every GEMV row count and GEMM
 * ones; the bits of the scalar twin (quantize_q8, then gemv_blocks or gemm_blocks of
 * cpu_matmul_scalar: every level gives them, test_matmul_blocks checks each kernel alone); and
 * q8_0 and q4_0 bit for bit as int8w with scales per 32 columns holding the same quants and
 * scales, at GEMM rows (one block GEMM for both) and at GEMV rows on the 512-bit levels, whose
 * int8 GEMV sums in the block GEMV's order: the blocks add no rounding of their own. Widths are
 * multiples of 32; q4_k takes those of 256 (one GEMV of one row, one of several, one GEMM, and a
 * super-block row of one). */
static void test_matmul_blocks(void **state) {
    (void)state;
    static const int shapes[][3] = {{1, 64, 48},  {7, 128, 65},  {33, 96, 17}, {5, 160, 2000},
                                    {3, 9024, 37}, {8, 32, 129},  {2, 768, 97}, {9, 256, 70},
                                    {1, 512, 40},  {12, 1024, 33}};
    static const dtype types[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q4_K};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            const int rows = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
            if (k % qblock_weights(types[t])) continue;
            const long count = (long)n * k;
            uint64_t rng = 1600 + s;
            float *w = rand_floats(count, &rng, -1, 1);
            if (s == 2) // an all-zero block and a constant one: d = 0, and q4_1's d = 0 with m
                for (int c = 0; c < 64; c++)
                    w[c] = c < 32 ? 0.0f : 0.25f;
            void *blocks = malloc(dtype_bytes(types[t], (size_t)count));
            int8_t *q = malloc((size_t)count);
            float *d = zeros(count / 32), *m = zeros(count / 32);
            assert_non_null(blocks);
            assert_non_null(q);
            qblocks_quantize(types[t], blocks, w, n, k);
            const weight_view v = {.type = types[t], .data = blocks};
            const char *what = dtype_name(types[t]);
            check_matmul(v, rows, k, n, 1700 + s, (int)(s & 1), what);
            qblocks_unpack(types[t], q, d, m, blocks, n, k);
            float *in = rand_floats((long)rows * k, &rng, -1, 1);
            float *got = zeros((long)rows * n), *want = zeros((long)rows * n);
            be.ops->matmul(be.ctx, got, in, v, NULL, rows, k, n);
            {
                int8_t *xq = malloc((size_t)rows * k);
                float *xd = zeros((long)rows * k / 32);
                int32_t *xs = malloc(sizeof(int32_t) * (size_t)rows * (k / 32));
                void *pack = malloc((size_t)cpu_matmul_scalar.gemm_blocks_pack_bytes(types[t], k));
                assert_true(xq && xs && pack);
                cpu_matmul_scalar.quantize_q8(xq, xd, in, rows, k, 32);
                if (rows <= CPU_GEMV_MAX_ROWS) {
                    cpu_matmul_scalar.gemv_blocks(want, n, xq, xd, blocks, types[t], rows, k, n);
                } else {
                    block_sums(xs, xq, rows, k);
                    cpu_matmul_scalar.gemm_blocks(want, n, xq, xd, xs, v, rows, k, n, pack);
                }
                if (memcmp(got, want, sizeof(float) * (size_t)rows * n))
                    fail_msg("matmul %s (%s) rows %d k %d n %d: not the scalar twin's bits", what,
                             cpu_isa_name(backend_cpu_isa(&be)), rows, k, n);
                free(xq), free(xd), free(xs), free(pack);
            }
            if (!qblock_has_mins(types[t]) &&
                (rows > CPU_GEMV_MAX_ROWS || backend_cpu_isa(&be) >= CPU_ISA_AVX512)) {
                const weight_view i8 = {.type = DTYPE_INT8, .data = q, .scale = d, .group = 32,
                                        .act_block = CPU_Q8_BLOCK};
                memset(want, 0, sizeof(float) * (size_t)rows * n);
                be.ops->matmul(be.ctx, want, in, i8, NULL, rows, k, n);
                if (memcmp(got, want, sizeof(float) * (size_t)rows * n))
                    fail_msg("matmul %s (%s) rows %d k %d n %d: not int8w's bits on its quants",
                             what, cpu_isa_name(backend_cpu_isa(&be)), rows, k, n);
            }
            free(in), free(got), free(want);
            free(blocks), free(q), free(d), free(m), free(w);
        }
}

/* The block codec: ggml's reference rules on known values, and pack(unpack(b)) == b. */
static void test_quant_blocks(void **state) {
    (void)state;
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 16) / 4.0f; // -4 .. 3.75: q8_0 d = 4/127, q4_0 d = 4/8 = 0.5
    unsigned char b[34], b2[34];
    int8_t q[32];
    float d, m;
    qblocks_quantize(DTYPE_Q4_0, b, x, 1, 32);
    qblocks_unpack(DTYPE_Q4_0, q, &d, NULL, b, 1, 32);
    assert_true(d == 0.5f);
    // x / d + 8.5 = i / 2 + 0.5 truncated: i / 2 rounded up, saturated at nibble 15
    for (int i = 0; i < 32; i++)
        assert_int_equal(q[i], ((i + 1) / 2 < 15 ? (i + 1) / 2 : 15) - 8);
    // ggml's layout: byte j of the nibbles holds value j low and value j + 16 high
    assert_int_equal(b[2] & 15, q[0] + 8);
    assert_int_equal(b[2] >> 4, q[16] + 8);
    qblocks_pack(DTYPE_Q4_0, b2, q, &d, NULL, 1, 32);
    assert_memory_equal(b, b2, 18);
    qblocks_quantize(DTYPE_Q8_0, b, x, 1, 32);
    qblocks_unpack(DTYPE_Q8_0, q, &d, NULL, b, 1, 32);
    assert_int_equal(q[0], -127);
    qblocks_pack(DTYPE_Q8_0, b2, q, &d, NULL, 1, 32);
    assert_memory_equal(b, b2, 34);
    qblocks_quantize(DTYPE_Q4_1, b, x, 1, 32);
    qblocks_unpack(DTYPE_Q4_1, q, &d, &m, b, 1, 32);
    assert_true(m == -4.0f);
    assert_int_equal(q[0], 0);
    assert_int_equal(q[31], 15);
    qblocks_pack(DTYPE_Q4_1, b2, q, &d, &m, 1, 32);
    assert_memory_equal(b, b2, 20);
    // every fp16 scale (subnormals, Inf and NaN included) widens as convert_f16_to_f32 does
    for (uint32_t h = 0; h < 65536; h++) {
        memset(b, 0, sizeof b);
        memcpy(b, &(uint16_t){(uint16_t)h}, 2);
        float want;
        convert_f16_to_f32(&want, &(uint16_t){(uint16_t)h}, 1);
        qblocks_unpack(DTYPE_Q8_0, q, &d, NULL, b, 1, 32);
        assert_memory_equal(&d, &want, sizeof d);
    }
    assert_int_equal(dtype_bytes(DTYPE_Q8_0, 64), 68);
    assert_int_equal(dtype_bytes(DTYPE_Q4_0, 64), 36);
    assert_int_equal(dtype_bytes(DTYPE_Q4_1, 64), 40);
    assert_int_equal(dtype_bytes(DTYPE_Q4_K, 512), 288);
}

/* q4_k: the super-block's bytes against the double twin that reads them (ref_q4k_dequantize:
 * every 6-bit scale and min, both nibble halves, negative d and dmin), planes as q4_1's
 * (q * d + m is ggml's (d * sc) * q - dmin * mn to the bit), pack(unpack(b)) == b for blocks
 * tripar quantised, the same values for any bytes, and the quantiser's error within a step. */
static void test_quant_blocks_k4(void **state) {
    (void)state;
    enum { N = 4 * 256 };
    unsigned char b[4 * 144], b2[4 * 144];
    uint64_t rng = 2700;
    float *bytes = rand_floats((long)sizeof b, &rng, 0, 255.99f);
    for (int i = 0; i < (int)sizeof b; i++)
        b[i] = (unsigned char)bytes[i];
    free(bytes);
    // d, dmin finite: random exponents below 0x7C; block 1 with negative ones
    for (int s = 0; s < 4; s++)
        for (int h = 0; h < 2; h++)
            b[s * 144 + 2 * h + 1] = (unsigned char)(b[s * 144 + 2 * h + 1] % 0x30 | (s == 1) << 7);
    int8_t q[N];
    float d[N / 32], m[N / 32], out[N], d2[N / 32], m2[N / 32];
    int8_t q2[N];
    double want[N];
    ref_q4k_dequantize(want, b, N);
    qblocks_dequantize(DTYPE_Q4_K, out, b, 1, N);
    qblocks_unpack(DTYPE_Q4_K, q, d, m, b, 1, N);
    for (int i = 0; i < N; i++) {
        assert_true(q[i] >= 0 && q[i] <= 15);
        // two fp32 roundings, of the product and of the sum, against the exact double
        const double terms = fabs((double)q[i] * d[i / 32]) + fabs((double)m[i / 32]);
        assert_true(fabs(out[i] - want[i]) <= 0x1p-23 * terms);
        assert_true(out[i] == (float)q[i] * d[i / 32] + m[i / 32]);
    }
    qblocks_pack(DTYPE_Q4_K, b2, q, d, m, 1, N);
    qblocks_unpack(DTYPE_Q4_K, q2, d2, m2, b2, 1, N);
    assert_memory_equal(q, q2, N);
    for (int j = 0; j < N / 32; j++)
        assert_true(d[j] == d2[j] && m[j] == m2[j]);
    // tripar's quantiser: bytes that pack back to themselves, values within a step
    float *x = rand_floats(N, &rng, -1, 1);
    for (int i = 0; i < 32; i++) // an all-zero sub-block, and a positive one (min 0)
        x[i] = 0.0f, x[32 + i] = 0.5f + (float)i / 64;
    qblocks_quantize(DTYPE_Q4_K, b, x, 1, N);
    qblocks_unpack(DTYPE_Q4_K, q, d, m, b, 1, N);
    qblocks_pack(DTYPE_Q4_K, b2, q, d, m, 1, N);
    assert_memory_equal(b, b2, sizeof b);
    qblocks_dequantize(DTYPE_Q4_K, out, b, 1, N);
    // half a step inside the sub-block's range, and at its ends what rounding sc and mn to
    // 6 bits moves them: 15 steps of d / 2 at the top, dmin / 2 at the bottom
    for (int i = 0; i < N; i++) {
        uint16_t h[2];
        float sd, smin;
        memcpy(h, b + i / 256 * 144, sizeof h);
        convert_f16_to_f32(&sd, &h[0], 1);
        convert_f16_to_f32(&smin, &h[1], 1);
        assert_true(fabsf(out[i] - x[i]) <= 0.5f * d[i / 32] + 7.5f * sd + 0.5f * smin + 1e-6f);
        if (i < 32) assert_true(out[i] == 0.0f);
    }
    free(x);
}

static void test_matmul_lowp(void **state) {
    (void)state;
    for (size_t s = 0; s < sizeof matmul_shapes / sizeof matmul_shapes[0]; s++) {
        int rows = matmul_shapes[s][0], in_dim = matmul_shapes[s][1], out_dim = matmul_shapes[s][2];
        long n = (long)out_dim * in_dim;
        uint64_t rng = 600 + s;
        float *w = rand_floats(n, &rng, -1, 1), *scale = zeros(out_dim);
        int8_t *q = malloc((size_t)n);
        uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
        assert_non_null(q);
        assert_non_null(h);
        quant_rows_int8(q, scale, w, out_dim, in_dim, NULL);
        check_matmul((weight_view){.type = DTYPE_INT8, .data = q, .scale = scale}, rows, in_dim,
                     out_dim, 700 + s, 1, "int8");
        // activations in int8 blocks of 32: one scale per row, and per group of 32 and 128
        check_matmul(
            (weight_view){.type = DTYPE_INT8, .data = q, .scale = scale, .act_block = CPU_Q8_BLOCK},
            rows, in_dim, out_dim, 750 + s, 1, "int8 q8");
        for (int group = 32; group <= 128; group *= 4) {
            const int groups = (in_dim + group - 1) / group;
            float *gs = zeros((long)out_dim * groups);
            quant_groups_int8(q, gs, w, out_dim, in_dim, group);
            check_matmul((weight_view){.type = DTYPE_INT8,
                                       .data = q,
                                       .scale = gs,
                                       .group = group,
                                       .act_block = CPU_Q8_BLOCK},
                         rows, in_dim, out_dim, 760 + s, s & 1,
                         group == 32 ? "int8 q8 g32" : "int8 q8 g128");
            check_matmul((weight_view){.type = DTYPE_INT8, .data = q, .scale = gs, .group = group},
                         rows, in_dim, out_dim, 770 + s, 0, "int8 fp32-act grouped");
            free(gs);
        }
        convert_f32_to_bf16(h, w, n);
        check_matmul((weight_view){.type = DTYPE_BF16, .data = h}, rows, in_dim, out_dim, 800 + s,
                     1, "bf16");
        convert_f32_to_f16(h, w, n);
        check_matmul((weight_view){.type = DTYPE_F16, .data = h}, rows, in_dim, out_dim, 900 + s, 0,
                     "f16");
        free(w), free(scale), free(q), free(h);
    }
}

/* The level's round_bf16 gives kernels/quant.c's bits for every input: signed zeros,
 * denormals (which vcvtneps2bf16 would flush), ties to even both ways, the largest finite
 * values rounding to infinity, infinities, quiet and signalling NaNs of both signs (kept NaN and
 * quiet), then random bit patterns; every length up to past two vectors, from unaligned starts,
 * so each tail is taken. */
static void test_round_bf16(void **state) {
    (void)state;
    const cpu_matmul_kernels *mk = cpu_kernel_set_for(backend_cpu_isa(&be))->matmul;
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00008000u, 0x00018000u,
        0x007FFFFFu, 0x00800000u, 0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu,
        0xBF818000u, 0x7F7FFFFFu, 0xFF7F8000u, 0x7F7F7FFFu, 0x7F800000u, 0xFF800000u,
        0x7F800001u, 0xFF800001u, 0x7FC00000u, 0xFFFFFFFFu, 0x7FFFFFFFu, 0x7F80FFFFu,
    };
    enum { N = 300 };
    const int nspecial = (int)(sizeof special / sizeof special[0]);
    float x[N];
    uint16_t got[N + 1], want[N];
    uint64_t rng = 1234;
    for (int i = 0; i < N; i++) {
        const uint32_t u = i < nspecial ? special[i] : (uint32_t)(ref_rng_next(&rng) >> 32);
        memcpy(&x[i], &u, sizeof u);
    }
    convert_f32_to_bf16(want, x, N);
    for (int off = 0; off < 4; off++)
        for (int len = 0; off + len <= N; len += len < 40 ? 1 : 37) {
            got[len] = 0xABCD; // one past the end must stay untouched
            mk->round_bf16(got, x + off, len);
            assert_int_equal(got[len], 0xABCD);
            for (int i = 0; i < len; i++)
                if (got[i] != want[off + i]) {
                    uint32_t u;
                    memcpy(&u, &x[off + i], sizeof u);
                    fail_msg("round_bf16 (%s) of 0x%08x: 0x%04x, want 0x%04x (offset %d length %d)",
                             cpu_isa_name(backend_cpu_isa(&be)), u, got[i], want[off + i], off,
                             len);
                }
        }
}

/* bf16 shapes for the GEMV and GEMM kernels of every level: GEMM rows past CPU_GEMV_MAX_ROWS
 * and not a multiple of the micro-tile's 8 rows; odd k (the last pair half empty), k under one
 * 32-wide vector, k a multiple of 32 and not; k past one 768-deep block (1537: three blocks,
 * the last odd; 3072: four); n under and over a 48-column panel and a 240-column block, and not
 * a multiple of 16 (a thread's slice ends mid-vector); GEMV rows whose activations pass 16 KiB
 * (the avx512_bf16 GEMV then goes by blocks of weights, a pass per group of rows); for the
 * amx_bf16 GEMM's 32 x 32 tiles, whole strips of whole 32-deep steps (read in place, y loaded
 * into the tiles), past one 768-deep block, and strips, steps and columns that pad. */
static const int bf16_shapes[][3] = {
    {9, 31, 47},    {10, 1, 3},     {15, 64, 48},   {16, 96, 49},   {17, 33, 100},
    {23, 129, 241}, {31, 17, 96},   {40, 1537, 97}, {47, 256, 500}, {64, 768, 300},
    {70, 255, 17},  {12, 3072, 64}, {25, 32, 289},  {1, 1, 1},      {2, 31, 245},
    {5, 63, 33},    {8, 1537, 50},  {4, 3, 16},     {3, 3072, 70},  {7, 2001, 41},
    {32, 768, 64},  {64, 3072, 96}, {33, 100, 65},  {48, 17, 31},   {96, 800, 513},
};

static void test_matmul_bf16(void **state) {
    (void)state;
    for (size_t s = 0; s < sizeof bf16_shapes / sizeof bf16_shapes[0]; s++) {
        const int rows = bf16_shapes[s][0], in_dim = bf16_shapes[s][1], out_dim = bf16_shapes[s][2];
        const long n = (long)out_dim * in_dim;
        uint64_t rng = 1500 + s;
        float *w = rand_floats(n, &rng, -1, 1);
        uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
        assert_non_null(h);
        convert_f32_to_bf16(h, w, n);
        check_matmul((weight_view){.type = DTYPE_BF16, .data = h}, rows, in_dim, out_dim, 1600 + s,
                     (int)(s & 1), "bf16 kernels");
        free(w), free(h);
    }
}

static void test_bias_gelu(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 1}, {3, 257}, {8, 3072}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint64_t rng = 1000 + s;
        int rows = shapes[s][0], cols = shapes[s][1];
        long n = (long)rows * cols;
        float *x = rand_floats(n, &rng, -6, 6), *bias = rand_floats(cols, &rng, -1, 1);
        float *want = zeros(n);
        x[0] = 3.0f; // keeps max|ref| away from 0: a lone negative input has a tiny GELU
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *b = with_bias ? bias : NULL;
            memcpy(want, x, sizeof(float) * (size_t)n);
            ref_bias_gelu(want, b, rows, cols);
            float *got = zeros(n);
            memcpy(got, x, sizeof(float) * (size_t)n);
            be.ops->bias_gelu(be.ctx, got, b, rows, cols);
            expect_close(got, want, n, FP32_TOL, "bias_gelu");
            free(got);
        }
        free(x), free(bias), free(want);
    }
}

/* The level's activation kernels against the scalar twin, bit for bit (the int8w path quantises
 * what follows them), on every tail length around the vector widths and on the edge values;
 * and against the formulas in double, within the float rounding of exp's argument. */
static void test_activation_kernels(void **state) {
    (void)state;
    const cpu_activation_kernels *k = ((const cpu_ctx *)be.ctx)->kern->activation;
    const float edges[] = {-0.0f, 0.0f, NAN, INFINITY, -INFINITY, -100.0f, 100.0f, -20.0f, 1e-30f};
    const int sizes[] = {1, 7, 8, 9, 15, 16, 17, 33, 100, 3072};
    uint64_t rng = 1900;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int n = sizes[s];
        float *x = rand_floats(n, &rng, -10, 10), *bias = rand_floats(n, &rng, -1, 1);
        float *u = rand_floats(n, &rng, -3, 3), *got = zeros(n), *want = zeros(n);
        for (int e = 0; e < (int)(sizeof edges / sizeof edges[0]) && e < n; e++)
            x[(e * 7) % n] = edges[e];
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *b = with_bias ? bias : NULL;
            memcpy(got, x, sizeof(float) * (size_t)n);
            memcpy(want, x, sizeof(float) * (size_t)n);
            k->bias_gelu(got, b, n);
            cpu_activation_scalar.bias_gelu(want, b, n);
            assert_memory_equal(got, want, sizeof(float) * (size_t)n);
            for (int i = 0; i < n; i++) {
                const double v = (double)x[i] + (b ? b[i] : 0.0);
                if (!isfinite(v) || fabs(v) > 8) continue; // edges: checked bitwise above
                const double a = 0.7978845608028654 * (v + 0.044715 * v * v * v);
                const double gelu = v / (1 + exp(-2 * a)); // 0.5 v (1 + tanh a), no cancellation
                // u = -2a takes three float roundings, and exp turns u's relative error into
                // |u| times as much: 3 x 2|a| ulps, plus the exp's own and the division's
                if (fabs(got[i] - gelu) > 1.2e-7 * (4 + 6 * fabs(a)) * fabs(gelu) + 1e-30)
                    fail_msg("gelu(%.9g) = %.9g, in double %.9g", v, got[i], gelu);
            }
        }
        k->swiglu(got, x, u, n);
        cpu_activation_scalar.swiglu(want, x, u, n);
        assert_memory_equal(got, want, sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) {
            if (!isfinite(x[i]) || fabsf(x[i]) > 80) continue;
            const double silu = (double)x[i] / (1 + exp(-(double)x[i])) * u[i];
            if (fabs(got[i] - silu) > 1.2e-7 * (4 + fabs(x[i])) * fabs(silu) + 1e-30)
                fail_msg("swiglu(%.9g, %.9g) = %.9g, exp form %.9g", x[i], u[i], got[i], silu);
        }
        free(x), free(bias), free(u), free(got), free(want);
    }
}

static void test_argmax(void **state) {
    (void)state;
    uint64_t rng = 1100;
    const int rows = 6, cols = 1001;
    float *x = rand_floats((long)rows * cols, &rng, -5, 5);
    x[0 * cols + 5] = 9.0f, x[0 * cols + 20] = 9.0f; // tie: the first wins
    for (int c = 0; c < cols; c++)
        x[1 * cols + c] = 1.0f;     // all equal: column 0
    x[2 * cols + cols - 1] = 50.0f; // last column
    float got_v[6], want_v[6];
    int32_t got_i[6], want_i[6];
    be.ops->argmax(be.ctx, got_v, got_i, x, rows, cols);
    ref_argmax(want_v, want_i, x, rows, cols);
    assert_int_equal(got_i[0], 5);
    assert_int_equal(got_i[1], 0);
    assert_int_equal(got_i[2], cols - 1);
    for (int r = 0; r < rows; r++) {
        assert_int_equal(got_i[r], want_i[r]);
        assert_true(got_v[r] == want_v[r]);
        assert_true(got_v[r] == x[(long)r * cols + got_i[r]]);
    }
    free(x);
}

/* NaN policy (kernels/backend.h): NaN counts as larger than every number, the first NaN
 * wins. Each row: expected column, whether its value is NaN. */
static void test_argmax_nan(void **state) {
    (void)state;
    const float nan = __builtin_nanf(""), inf = __builtin_inff();
    enum { ROWS = 7, COLS = 9 };
    float x[ROWS][COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            x[r][c] = (float)(c % 4) - 1.0f; // max 2 at column 3
    x[0][0] = nan;                           // first element NaN: column 0
    x[1][5] = nan;                           // NaN in the middle beats the 2s
    for (int c = 0; c < COLS; c++)
        x[2][c] = nan;                            // all NaN: column 0
    x[3][3] = 7.0f, x[3][4] = nan, x[3][6] = nan; // ties around a NaN: the first NaN
    x[4][2] = nan, x[4][6] = nan, x[4][7] = inf;  // NaN beats +inf; first of two NaNs
    x[5][COLS - 1] = nan;                         // NaN in the last column
    for (int c = 0; c < COLS; c++)
        x[6][c] = -inf;            // all -inf (no NaN): column 0
    x[6][4] = nan, x[6][0] = -inf; // ... unless a NaN is there
    const int want_col[ROWS] = {0, 5, 0, 4, 2, COLS - 1, 4};
    float got_v[ROWS], want_v[ROWS];
    int32_t got_i[ROWS], want_i[ROWS];
    be.ops->argmax(be.ctx, got_v, got_i, &x[0][0], ROWS, COLS);
    ref_argmax(want_v, want_i, &x[0][0], ROWS, COLS);
    for (int r = 0; r < ROWS; r++) {
        if (got_i[r] != want_col[r] || want_i[r] != want_col[r])
            fail_msg("argmax NaN row %d: cpu column %d, twin %d, want %d", r, got_i[r], want_i[r],
                     want_col[r]);
        assert_true(isnan(got_v[r]) && isnan(want_v[r]));
    }
    // no NaN anywhere: unchanged, an all -inf row gives column 0 with value -inf
    for (int c = 0; c < COLS; c++)
        x[0][c] = -inf;
    be.ops->argmax(be.ctx, got_v, got_i, &x[0][0], 1, COLS);
    ref_argmax(want_v, want_i, &x[0][0], 1, COLS);
    assert_int_equal(got_i[0], 0);
    assert_int_equal(want_i[0], 0);
    assert_true(got_v[0] == -inf && want_v[0] == -inf);
}

/* One attention scenario: cache rows [seq0, seq0 + batch) of a cache holding cache_seqs
 * sequences; the sequence of T tokens is fed in the chunks of lens[] (prefill pieces then
 * decode steps). kv_heads 0 means heads (multi-head, GPT-2); rope, when not NULL, is the
 * inverse-frequency table (head_dim / 2). Returns the outputs for all T positions
 * (batch * T, heads * head_dim) so callers can compare layouts with each other; checks them
 * against the twin (ref_attention for multi-head without rope, else ref_attention_gqa; for a
 * cache in bf16, f16 or int8 ref_attention_gqa_kv, which rounds keys and values as the cache
 * holds them, and also within the type's rounding of the fp32 twin). */
typedef struct {
    int heads, head_dim, batch, T, seq0, cache_seqs, max_ctx;
    int block_size; // 0: contiguous
    int nchunks;
    int lens[8];
    int kv_heads;      // 0: heads
    const float *rope; // NULL: no rotary embeddings
    dtype kv_type;     // of the cache: DTYPE_F32 (zero), DTYPE_BF16, DTYPE_F16, DTYPE_INT8
} attn_case;

/* The cache types every attention test runs with. */
static const dtype kv_types[] = {DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_INT8};
enum { KV_TYPES = sizeof kv_types / sizeof kv_types[0] };

/* Norm-wise error of attention over a cache of type against the fp32 twin on inputs in
 * [-1, 1): a few of the type's half-ulps (bf16 2^-9, f16 2^-12, int8 1/254 of the row max). */
static double kv_type_tol(dtype type) {
    switch (type) {
    case DTYPE_BF16: return 1e-2;
    case DTYPE_F16: return 2e-3;
    case DTYPE_INT8: return 2e-2;
    default: break; // the block formats are never a cache type
    }
    return FP32_TOL;
}

/* got equals want element by element (+0 equals -0: an int8 zero decodes to +0). */
static void expect_equal_values(const float *got, const float *want, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("%s: element %d is %.9g, want %.9g", what, i, got[i], want[i]);
}

static float *run_attention_case(const attn_case *tc, uint64_t seed, int check_ref) {
    const int H = tc->heads, hd = tc->head_dim, B = tc->batch, T = tc->T;
    const int KV = tc->kv_heads ? tc->kv_heads : H;
    const long C = (long)H * hd, KC = (long)KV * hd, row = C + 2 * KC;
    uint64_t rng = seed;
    float *qkv = rand_floats((long)B * T * row, &rng, -1, 1);
    float *all = zeros((long)B * T * C);
    kv_view kv = {.max_ctx = tc->max_ctx, .heads = H, .kv_heads = KV, .head_dim = hd};
    int32_t *table = NULL;
    long cache_rows;
    const size_t rb = kv_row_bytes(tc->kv_type, hd);
    if (tc->block_size) {
        int bps = (tc->max_ctx + tc->block_size - 1) / tc->block_size;
        int nblocks = tc->cache_seqs * bps;
        table = malloc(sizeof(int32_t) * (size_t)nblocks);
        assert_non_null(table);
        for (int i = 0; i < nblocks; i++)
            table[i] = i;
        // A shuffled table scatters each sequence's blocks across the pool.
        for (int i = nblocks - 1; i > 0; i--) {
            int j = (int)(ref_rng_next(&rng) % (uint64_t)(i + 1));
            int32_t t = table[i];
            table[i] = table[j], table[j] = t;
        }
        kv.block_table = table;
        kv.block_size = tc->block_size;
        kv.blocks_per_seq = bps;
        cache_rows = (long)nblocks * KV * tc->block_size;
    } else {
        cache_rows = (long)tc->cache_seqs * KV * tc->max_ctx;
    }
    kv.type = tc->kv_type;
    kv.k = be.ops->alloc(be.ctx, rb * (size_t)cache_rows);
    kv.v = be.ops->alloc(be.ctx, rb * (size_t)cache_rows);

    int pos0 = 0;
    for (int c = 0; c < tc->nchunks; c++) {
        int n = tc->lens[c];
        float *in = zeros((long)B * n * row), *out = zeros((long)B * n * C);
        for (int b = 0; b < B; b++)
            memcpy(in + (long)b * n * row, qkv + ((long)b * T + pos0) * row,
                   sizeof(float) * (size_t)(n * row));
        be.ops->attention(be.ctx, out, in, kv, tc->rope, tc->seq0, B, n, pos0);
        for (int b = 0; b < B; b++)
            memcpy(all + ((long)b * T + pos0) * C, out + (long)b * n * C,
                   sizeof(float) * (size_t)(n * C));
        free(in), free(out);
        pos0 += n;
    }
    assert_int_equal(pos0, T);

    // The cache holds exactly the keys and values fed in, where the layout says, kv heads
    // only, rounded as its type rounds; with RoPE the keys turned to their absolute position
    // (to float rounding, so rounded to the type they may sit one of its steps away).
    float *want_k = zeros(hd), *got = zeros(hd), *want = zeros(hd);
    const double key_tol = tc->kv_type == DTYPE_F32 ? 1e-6 : kv_type_tol(tc->kv_type);
    for (int b = 0; b < B; b++)
        for (int g = 0; g < KV; g++)
            for (int p = 0; p < T; p += 3) {
                int s = tc->seq0 + b;
                long at =
                    tc->block_size
                        ? ((long)table[(long)s * kv.blocks_per_seq + p / tc->block_size] * KV +
                           g) * tc->block_size + p % tc->block_size
                        : ((long)s * KV + g) * tc->max_ctx + p;
                const float *r = qkv + ((long)b * T + p) * row;
                const char *krow = (const char *)kv.k + at * rb, *vrow = (const char *)kv.v + at * rb;
                ref_kv_decode(got, krow, hd, tc->kv_type);
                if (tc->rope) {
                    ref_rope_apply(want_k, r + C + (long)g * hd, hd, p, tc->rope);
                    expect_close(got, want_k, hd, key_tol, "rotated key in the cache");
                } else {
                    ref_kv_round(want, r + C + (long)g * hd, hd, tc->kv_type);
                    expect_equal_values(got, want, hd, "key in the cache");
                }
                ref_kv_decode(got, vrow, hd, tc->kv_type);
                ref_kv_round(want, r + C + KC + (long)g * hd, hd, tc->kv_type);
                expect_equal_values(got, want, hd, "value in the cache");
            }
    free(got), free(want);
    free(want_k);

    if (check_ref) {
        float *want = zeros((long)B * T * C);
        if (KV == H && !tc->rope)
            ref_attention(want, qkv, B, T, H, hd);
        else
            ref_attention_gqa(want, qkv, B, T, H, KV, hd, tc->rope);
        char msg[160];
        snprintf(msg, sizeof msg,
                 "attention H %d KV %d hd %d B %d T %d block %d chunks %d rope %d kv %s", H, KV,
                 hd, B, T, tc->block_size, tc->nchunks, tc->rope != NULL, dtype_name(tc->kv_type));
        // the fp32 twin bounds a narrow cache's error where it is cheap (the twin is O(T^2))
        if (tc->kv_type == DTYPE_F32 || T <= 200)
            expect_close(all, want, (long)B * T * C, kv_type_tol(tc->kv_type), msg);
        if (tc->kv_type != DTYPE_F32) { // the function on what the cache holds, to fp32 rounding
            ref_attention_gqa_kv(want, qkv, B, T, H, KV, hd, tc->rope, tc->kv_type);
            // With RoPE the kernels round keys rotated in float, the twin keys rotated in
            // double: where the float's last bit crosses the type's rounding point (about one
            // f16 element in 2^13) the two keys are a step of the type apart.
            expect_close(all, want, (long)B * T * C, tc->rope ? 1e-4 : FP32_TOL, msg);
        }
        free(want);
    }
    be.ops->release(be.ctx, kv.k);
    be.ops->release(be.ctx, kv.v);
    free(table), free(qkv);
    return all;
}

static int case_total(const attn_case *tc) {
    int sum = 0;
    for (int c = 0; c < tc->nchunks; c++)
        sum += tc->lens[c];
    return sum;
}

static const attn_case attn_cases[] = {
    // heads, hd, batch, T, seq0, cache_seqs, max_ctx, block, nchunks, lens
    {1, 16, 1, 1, 0, 1, 4, 0, 1, {1}, 0, NULL, DTYPE_F32},  // single token, decode path only
    {2, 16, 1, 9, 0, 1, 16, 0, 1, {9}, 0, NULL, DTYPE_F32}, // prefill only
    // prefill, decode, chunked prefill at pos0 > 0
    {3, 16, 2, 12, 1, 4, 20, 0, 4, {7, 1, 1, 3}, 0, NULL, DTYPE_F32},
    {2, 64, 2, 21, 0, 2, 32, 0, 3, {5, 8, 1}, 0, NULL, DTYPE_F32}, // T < max_ctx with chunks
    {1, 64, 1, 30, 0, 1, 33, 0, 8, {1, 1, 13, 1, 1, 11, 1, 1}, 0, NULL, DTYPE_F32},
};

static void test_attention_contiguous(void **state) {
    (void)state;
    for (int t = 0; t < KV_TYPES; t++)
        for (size_t i = 0; i < sizeof attn_cases / sizeof attn_cases[0]; i++) {
            attn_case tc = attn_cases[i];
            tc.T = case_total(&tc);
            tc.kv_type = kv_types[t];
            free(run_attention_case(&tc, 1200 + i, 1));
        }
}

static void test_attention_paged(void **state) {
    (void)state;
    const int block_sizes[] = {1, 4, 5, 16};
    for (int t = 0; t < KV_TYPES; t++)
    for (size_t i = 0; i < sizeof attn_cases / sizeof attn_cases[0]; i++)
        for (size_t k = 0; k < sizeof block_sizes / sizeof block_sizes[0]; k++) {
            attn_case tc = attn_cases[i];
            tc.T = case_total(&tc);
            tc.kv_type = kv_types[t];
            float *contiguous = run_attention_case(&tc, 1300 + i, 0);
            tc.block_size = block_sizes[k];
            float *paged = run_attention_case(&tc, 1300 + i, 1);
            long n = (long)tc.batch * tc.T * tc.heads * tc.head_dim;
            expect_close(paged, contiguous, n, 1e-6, "paged vs contiguous attention");
            free(contiguous), free(paged);
        }
}

/* The GQA twin with kv_heads == heads and no rope is the multi-head twin: the two agree. */
static void test_ref_attention_gqa_mha(void **state) {
    (void)state;
    const int B = 2, T = 7, H = 3, hd = 8;
    uint64_t rng = 1250;
    float *qkv = rand_floats((long)B * T * 3 * H * hd, &rng, -1, 1);
    float *a = zeros((long)B * T * H * hd), *b = zeros((long)B * T * H * hd);
    ref_attention(a, qkv, B, T, H, hd);
    ref_attention_gqa(b, qkv, B, T, H, H, hd, NULL);
    expect_close(b, a, (long)B * T * H * hd, 1e-7, "gqa twin vs mha twin");
    free(qkv), free(a), free(b);
}

/* Grouped-query attention, kv_heads 1, 2 and heads, with and without RoPE (plain and Llama 3.1
 * scaled tables), through prefill, decode and chunked prefill at pos0 > 0, contiguous and
 * paged (the paged result also equal to the contiguous one). */
static void test_attention_gqa(void **state) {
    (void)state;
    const int H = 4, hd = 32;
    float plain[16], scaled[16];
    rope_inv_freq_fill(plain, hd, 10000.0, NULL);
    // a small original context so the scaled table has all three bands within hd / 2 = 16
    const rope_llama3 l3 = {.factor = 8,
                            .low_freq_factor = 1,
                            .high_freq_factor = 4,
                            .original_max_position_embeddings = 64};
    rope_inv_freq_fill(scaled, hd, 10000.0, &l3);
    const float *ropes[] = {NULL, plain, scaled};
    const int kv_heads[] = {1, 2, H};
    const attn_case shapes[] = {
        // heads, hd, batch, T, seq0, cache_seqs, max_ctx, block, nchunks, lens
        {H, hd, 2, 0, 1, 3, 24, 0, 5, {9, 1, 1, 4, 1}, 0, NULL, DTYPE_F32},
        {H, hd, 1, 0, 0, 1, 80, 0, 4, {40, 1, 30, 1}, 0, NULL, DTYPE_F32}, // positions past the original 64
    };
    const int block_sizes[] = {0, 4, 5};
    uint64_t seed = 1260;
    for (int t = 0; t < KV_TYPES; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t k = 0; k < sizeof kv_heads / sizeof kv_heads[0]; k++)
            for (size_t r = 0; r < sizeof ropes / sizeof ropes[0]; r++) {
                attn_case tc = shapes[s];
                tc.T = case_total(&tc);
                tc.kv_heads = kv_heads[k];
                tc.rope = ropes[r];
                tc.kv_type = kv_types[t];
                float *contiguous = NULL;
                for (size_t b = 0; b < sizeof block_sizes / sizeof block_sizes[0]; b++) {
                    tc.block_size = block_sizes[b];
                    float *got = run_attention_case(&tc, seed, 1);
                    if (!contiguous) {
                        contiguous = got;
                        continue;
                    }
                    long n = (long)tc.batch * tc.T * tc.heads * tc.head_dim;
                    expect_close(got, contiguous, n, 1e-6, "paged vs contiguous GQA attention");
                    free(got);
                }
                free(contiguous);
                seed++;
            }
}

/* Sets the CPU backend's kernel threads and attention paths for the tests below, which
 * restore them: threads 0 keeps the count, tiled_min 0 and gemm -1 keep theirs. */
static void cpu_set(int threads, int tiled_min, int gemm) {
    cpu_ctx *ctx = be.ctx;
    if (threads) ctx->threads = threads;
    if (tiled_min) ctx->attn_tiled_min = tiled_min;
    if (gemm >= 0) ctx->attn_tile_gemm = gemm;
}

/* The prefill paths (two sgemm per head; tiled with sgemm tiles; tiled with the level's own
 * kernels) on 1 and 2 threads against the twin, at prompt lengths that are not multiples of
 * the 64-row and 64-key tiles, chunked prefill at unaligned pos0, MHA and GQA, with and without
 * RoPE, contiguous and paged (also equal to contiguous). */
static void test_attention_tiled(void **state) {
    (void)state;
    const cpu_ctx *ctx = be.ctx;
    const int threads0 = ctx->threads, tiled0 = ctx->attn_tiled_min, gemm0 = ctx->attn_tile_gemm;
    const int H = 4, hd = 32;
    float plain[16];
    rope_inv_freq_fill(plain, hd, 10000.0, NULL);
    const attn_case shapes[] = {
        // heads, hd, batch, T, seq0, cache_seqs, max_ctx, block, nchunks, lens
        {H, hd, 1, 0, 0, 1, 140, 0, 1, {131}, 0, NULL, DTYPE_F32},          // 2 full tiles + 3 rows
        {H, hd, 2, 0, 1, 3, 160, 0, 4, {70, 1, 59, 2}, 0, NULL, DTYPE_F32}, // unaligned pos0 = 71
        {H, hd, 1, 0, 0, 1, 70, 0, 3, {1, 64, 2}, 0, NULL, DTYPE_F32},      // pos0 1: 65 keys
    };
    const int kv_heads[] = {1, 2, H};
    const int block_sizes[] = {0, 5, 16};
    // path: 0 two sgemm, 1 tiled sgemm, 2 tiled own kernels
    const int tiled_min[] = {1 << 30, 1, 1}, gemm[] = {1, 1, 0};
    uint64_t seed = 1500;
    for (int t = 0; t < KV_TYPES; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t k = 0; k < sizeof kv_heads / sizeof kv_heads[0]; k++)
            for (int r = 0; r < 2; r++) {
                attn_case tc = shapes[s];
                tc.T = case_total(&tc);
                tc.kv_heads = kv_heads[k];
                tc.rope = r ? plain : NULL;
                tc.kv_type = kv_types[t];
                const long n = (long)tc.batch * tc.T * tc.heads * tc.head_dim;
                float *first = NULL;
                // A narrow cache: every path and layout on one thread (threads split items,
                // not the widening), the twin checked once and the rest against the first.
                const int narrow = tc.kv_type != DTYPE_F32;
                for (int path = 0; path < 3; path++)
                    for (int th = 1; th <= (narrow ? 1 : 2); th++)
                        for (size_t b = 0; b < sizeof block_sizes / sizeof block_sizes[0]; b++) {
                            cpu_set(th, tiled_min[path], gemm[path]);
                            tc.block_size = block_sizes[b];
                            float *got = run_attention_case(&tc, seed, !narrow || !first);
                            if (!first) {
                                first = got;
                                continue;
                            }
                            expect_close(got, first, n, 1e-6, "attention path vs two-sgemm");
                            free(got);
                        }
                free(first);
                seed++;
            }
    cpu_set(threads0, tiled0, gemm0);
}

/* Decode over a long context with few heads splits the context into spans whose partial
 * softmaxes merge afterwards: against the twin, contiguous and paged, on 1 and 2 threads. */
static void test_attention_decode_split(void **state) {
    (void)state;
    const cpu_ctx *ctx = be.ctx;
    const int threads0 = ctx->threads;
    // 2 heads (fewer than 8 items) at contexts past 1024: 2 and 3 spans
    attn_case tc = {2, 16, 1, 0, 0, 1, 1700, 0, 4, {1030, 1, 600, 1}, 1, NULL, DTYPE_F32};
    tc.T = case_total(&tc);
    const long n = (long)tc.batch * tc.T * tc.heads * tc.head_dim;
    for (int t = 0; t < KV_TYPES; t++) {
        tc.kv_type = kv_types[t];
        float *first = NULL;
        for (int th = 1; th <= 2; th++)
            for (int block = 0; block <= 7; block += 7) {
                cpu_set(th, 0, -1);
                tc.block_size = block;
                // a narrow cache checks the twin once, the rest against the first run
                float *got = run_attention_case(&tc, 1600, tc.kv_type == DTYPE_F32 || !first);
                if (!first) {
                    first = got;
                    continue;
                }
                expect_close(got, first, n, 1e-6, "split decode, threads and layouts");
                free(got);
            }
        free(first);
    }
    cpu_set(threads0, 0, -1);
}

/* n cache rows of type (kv_row_bytes apart) of random bits: f16 subnormals included, no NaN
 * or inf (a 16-bit exponent of all ones), an int8 row's scale finite and positive; with small,
 * |x| < 2 for bf16 too (its exponent's top bit clear), so that sums of products stay finite.
 * An fp32 cache gets uniform values in [-1, 1]. */
static unsigned char *rand_kv_rows(dtype type, int n, int hd, uint64_t *rng, int small) {
    const size_t rb = kv_row_bytes(type, hd);
    unsigned char *rows = calloc((size_t)n, rb);
    assert_non_null(rows);
    if (type == DTYPE_F32) {
        ref_fill_uniform((float *)rows, (long)n * hd, rng, -1, 1);
        return rows;
    }
    for (size_t b = 0; b < (size_t)n * rb; b++)
        rows[b] = (unsigned char)(ref_rng_next(rng) >> 24);
    for (int j = 0; j < n; j++) {
        float sc = ref_rng_uniform(rng, 0.001f, 0.1f);
        if (type == DTYPE_INT8) memcpy(rows + (j + 1) * rb - sizeof sc, &sc, sizeof sc);
    }
    if (type != DTYPE_INT8)
        for (long e = 0; e < (long)n * hd; e++) {
            unsigned char *hi = rows + 2 * e + 1;
            if (type == DTYPE_F16 && (*hi & 0x7c) == 0x7c) *hi &= 0xbf;
            if (type == DTYPE_BF16 && ((*hi & 0x7f) == 0x7f || small)) *hi &= 0xbf;
        }
    return rows;
}

/* The level's attention kernels equal their scalar twins bit for bit (every level computes
 * the same function, kernels/cpu/attention_kernels.h), at head sizes with and without tails;
 * the exp polynomial within 2 ulp of expf. */
static void test_attention_kernels(void **state) {
    (void)state;
    const cpu_attention_kernels *k = ((const cpu_ctx *)be.ctx)->kern->attention;
    uint64_t rng = 1700;
    const int sizes[] = {1, 7, 16, 33, 64, 100, 128};
    const dtype types[] = {DTYPE_F32, DTYPE_BF16, DTYPE_F16, DTYPE_INT8};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int n = sizes[s];
        float *x = rand_floats(n, &rng, -30, 5), *got = zeros(n), *want = zeros(n);
        x[0] = -85.0f; // x - 2 near the bottom of the vector exp's range
        float gs = k->exp_shift_sum(got, x, 2.0f, n);
        float ws = exp_shift_sum_scalar(want, x, 2.0f, n);
        for (int i = 0; i < n; i++) {
            if (got[i] != want[i])
                fail_msg("exp_shift_sum n %d element %d: %.9g vs %.9g", n, i, got[i], want[i]);
            // the shared polynomial is within 2 ulp of expf
            const float e = expf(x[i] - 2.0f);
            if (fabsf(got[i] - e) > 2.4e-7f * e)
                fail_msg("exp n %d element %d: %.9g vs expf %.9g", n, i, got[i], e);
        }
        assert_true(gs == ws);
        // exp_shift: the same exps, no sum
        float *ge = zeros(n);
        k->exp_shift(ge, x, 2.0f, n);
        assert_memory_equal(ge, want, sizeof(float) * (size_t)n);
        free(x), free(got), free(want), free(ge);

        // dot_keys and weigh_values over every cache type: the level's bits are the scalar
        // twin's, and a narrow cache read in place gives the bits of the fp32 kernel on its
        // rows widened by kv_rows_load (widening in registers changes no sum)
        const int hd = n, keys = 53; // blocks of 32 and 16 keys, then a tail of 5
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            unsigned char *kv = rand_kv_rows(types[t], keys, hd, &rng, 1);
            float *q = rand_floats(hd, &rng, -1, 1), *w = rand_floats(keys, &rng, 0, 1);
            float *sg = zeros(keys), *sw = zeros(keys), *sf = zeros(keys);
            float *og = rand_floats(hd, &rng, -1, 1), *ow = zeros(hd), *of = zeros(hd);
            float *wide = zeros((long)keys * hd);
            memcpy(ow, og, sizeof(float) * (size_t)hd);
            memcpy(of, og, sizeof(float) * (size_t)hd);
            if (types[t] == DTYPE_F32)
                memcpy(wide, kv, sizeof(float) * (size_t)keys * (size_t)hd);
            else
                kv_rows_load_scalar(wide, kv, keys, hd, types[t]);
            k->dot_keys(sg, q, kv, keys, hd, 0.125f, types[t]);
            dot_keys_scalar(sw, q, kv, keys, hd, 0.125f, types[t]);
            dot_keys_scalar(sf, q, wide, keys, hd, 0.125f, DTYPE_F32);
            if (memcmp(sg, sw, sizeof(float) * (size_t)keys) ||
                memcmp(sf, sw, sizeof(float) * (size_t)keys))
                fail_msg("dot_keys %s hd %d: not the scalar twin's bits", dtype_name(types[t]), hd);
            // the weights' sum continues the one passed in, in index order: split at 20 keys
            // (the runs of a paged cache) it is the sum of one loop over all 53
            float lw = 0.5f;
            for (int j = 0; j < keys; j++)
                lw += w[j];
            float lg = k->weigh_values(og, w, kv, 20, hd, types[t], 0.5f);
            lg = k->weigh_values(og, w + 20, kv + 20 * kv_row_bytes(types[t], hd), keys - 20, hd,
                                 types[t], lg);
            const float ls = weigh_values_scalar(ow, w, kv, keys, hd, types[t], 0.5f);
            weigh_values_scalar(of, w, wide, keys, hd, DTYPE_F32, 0.0f);
            if (memcmp(og, ow, sizeof(float) * (size_t)hd) ||
                memcmp(of, ow, sizeof(float) * (size_t)hd))
                fail_msg("weigh_values %s hd %d: not the scalar twin's bits", dtype_name(types[t]),
                         hd);
            if (lg != lw || ls != lw)
                fail_msg("weigh_values %s hd %d: weights' sum %.9g and twin's %.9g, not %.9g",
                         dtype_name(types[t]), hd, lg, ls, lw);
            free(kv), free(q), free(w), free(sg), free(sw), free(sf), free(og), free(ow), free(of);
            free(wide);
        }
    }
    // kv_rows_load: every cache type at head sizes with and without vector tails, against the
    // scalar twin bit for bit and the reference decoder
    for (size_t t = 1; t < sizeof types / sizeof types[0]; t++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            const int hd = sizes[z], n = 5;
            const size_t rb = kv_row_bytes(types[t], hd);
            unsigned char *rows = rand_kv_rows(types[t], n, hd, &rng, 0);
            float *got = zeros((long)n * hd), *want = zeros((long)n * hd), *dec = zeros(hd);
            k->kv_rows_load(got, rows, n, hd, types[t]);
            kv_rows_load_scalar(want, rows, n, hd, types[t]);
            if (memcmp(got, want, sizeof(float) * (size_t)(n * hd)))
                fail_msg("kv_rows_load %s hd %d: not the scalar twin's bits", dtype_name(types[t]), hd);
            for (int j = 0; j < n; j++) {
                ref_kv_decode(dec, rows + j * rb, hd, types[t]);
                assert_memory_equal(dec, want + (long)j * hd, sizeof(float) * (size_t)hd);
            }
            free(rows), free(got), free(want), free(dec);
        }
    // tile_step: two key blocks in a row (the first sets the running max, the second rescales),
    // a partial one crossing the rows' positions, rows and keys short of a tile
    const int steps[][5] = {
        // rows, kn, hd, first, k0 of the second block (the first is at 0 with 64 keys)
        {64, 64, 64, 127, 64},
        {37, 13, 64, 70, 64},
        {64, 64, 48, 64, 64},
        {5, 30, 20, 70, 64}};
    for (size_t t = 0; t < sizeof steps / sizeof steps[0]; t++) {
        const int rows = steps[t][0], kn = steps[t][1], hd = steps[t][2], first = steps[t][3];
        float *qt = zeros((long)hd * ATTN_TILE), *st = zeros(ATTN_TILE * ATTN_TILE);
        for (int d = 0; d < hd; d++)
            ref_fill_uniform(qt + (long)d * ATTN_TILE, rows, &rng, -0.5f, 0.5f);
        // keys and values of both blocks: the second starts 3 rows into the first's
        float *kv = rand_floats(2L * (ATTN_TILE + 3) * hd, &rng, -1, 1);
        float *v = kv + (long)(ATTN_TILE + 3) * hd;
        float *o[2], m[2][ATTN_TILE], l[2][ATTN_TILE];
        for (int w = 0; w < 2; w++) {
            o[w] = zeros((long)rows * hd);
            for (int i = 0; i < ATTN_TILE; i++)
                m[w][i] = -INFINITY, l[w][i] = 0.0f;
            const cpu_attention_kernels *kk = w ? &cpu_attention_scalar : k;
            kk->tile_step(o[w], hd, m[w], l[w], qt, kv, v, rows, ATTN_TILE, hd, first, 0, st);
            kk->tile_step(o[w], hd, m[w], l[w], qt, kv + 3L * hd, v + 3L * hd, rows, kn, hd, first,
                          steps[t][4], st);
        }
        char what[64];
        snprintf(what, sizeof what, "tile_step output, case %zu", t);
        if (memcmp(o[0], o[1], sizeof(float) * (size_t)(rows * hd)))
            fail_msg("%s: not bit for bit the scalar twin's", what);
        assert_memory_equal(l[0], l[1], sizeof(float) * (size_t)rows);
        assert_memory_equal(m[0], m[1], sizeof(float) * (size_t)rows);
        free(qt), free(st), free(kv), free(o[0]), free(o[1]);
    }
}

/* matmul gives the same bits on 1, 2, 3 and 4 threads (docs/kernels.md, "Threads on the CPU")
 * for every weight type through the kernels and tiles it splits over threads: decode rows
 * (GEMV) and prefill rows (int8 blocks widened, weights in tiles, sgemm per tile), at shapes
 * whose tiles are ragged, narrow or one per thread; fp32's prefill too, its tiles read in
 * place. On one thread too the tiles' sgemm calls run single-threaded (sgemm_add), whatever
 * OpenMP's default count: OpenBLAS's split of a call moves bits with some of its kernels. */
static void test_matmul_threads_bitwise(void **state) {
    (void)state;
    const int threads0 = ((const cpu_ctx *)be.ctx)->threads;
    static const int shapes[][3] = {{3, 576, 576}, {37, 576, 576}, {40, 96, 300},
                                    {12, 1536, 200}, {9, 64, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int rows = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        const long count = (long)n * k;
        uint64_t rng = 2100 + s;
        float *wf = rand_floats(count, &rng, -1, 1), *x = rand_floats((long)rows * k, &rng, -1, 1);
        float *bias = rand_floats(n, &rng, -1, 1), *scale = rand_floats(count / 32, &rng, 0.01f, 0.02f);
        int8_t *q = malloc((size_t)count);
        uint16_t *h = malloc(sizeof(uint16_t) * (size_t)count);
        void *blocks[3];
        assert_non_null(q);
        assert_non_null(h);
        for (long i = 0; i < count; i++)
            q[i] = (int8_t)(ref_rng_next(&rng) % 255 - 127);
        convert_f32_to_bf16(h, wf, count);
        const weight_view views[] = {
            {.type = DTYPE_F32, .data = wf},
            {.type = DTYPE_BF16, .data = h},
            {.type = DTYPE_F16, .data = h},
            {.type = DTYPE_INT8, .data = q, .scale = scale},
            {.type = DTYPE_INT8, .data = q, .scale = scale, .act_block = CPU_Q8_BLOCK},
            {.type = DTYPE_INT8, .data = q, .scale = scale, .group = 32, .act_block = CPU_Q8_BLOCK},
            {.type = DTYPE_Q8_0}, {.type = DTYPE_Q4_0}, {.type = DTYPE_Q4_1},
        };
        const int nv = (int)(sizeof views / sizeof views[0]);
        for (int b = 0; b < 3; b++) {
            blocks[b] = malloc(dtype_bytes(views[nv - 3 + b].type, (size_t)count));
            assert_non_null(blocks[b]);
            qblocks_quantize(views[nv - 3 + b].type, blocks[b], wf, n, k);
        }
        float *one = zeros((long)rows * n), *got = zeros((long)rows * n);
        for (int v = 0; v < nv; v++) {
            weight_view wv = views[v];
            if (v >= nv - 3) wv.data = blocks[v - (nv - 3)];
            for (int t = 1; t <= 4; t++) {
                cpu_set(t, 0, -1);
                be.ops->matmul(be.ctx, t == 1 ? one : got, x, wv, bias, rows, k, n);
                if (t > 1 && memcmp(one, got, sizeof(float) * (size_t)rows * n))
                    fail_msg("matmul %s (%s) rows %d k %d n %d: %d threads differ from 1",
                             dtype_name(wv.type), cpu_isa_name(backend_cpu_isa(&be)), rows, k, n,
                             t);
            }
        }
        cpu_set(threads0, 0, -1);
        for (int b = 0; b < 3; b++)
            free(blocks[b]);
        free(wf), free(x), free(bias), free(scale), free(q), free(h), free(one), free(got);
    }
}

/* The row ops split over threads compute each row as one thread does: 2 threads give the
 * bits of 1, at shapes above the threading threshold (and argmax over one long row, split
 * into column chunks, with ties and NaN across the chunk boundary). */
static void test_row_ops_threads_bitwise(void **state) {
    (void)state;
    const cpu_ctx *ctx = be.ctx;
    const int threads0 = ctx->threads;
    const int rows = 37, C = 1000, vocab = 100;
    const long n = (long)rows * C;
    uint64_t rng = 1800;
    float *in = rand_floats(n, &rng, -3, 3), *delta = rand_floats(n, &rng, -1, 1);
    float *gu = rand_floats(2 * n, &rng, -4, 4), *g = rand_floats(C, &rng, 0.5f, 1.5f);
    float *bta = rand_floats(C, &rng, -0.5f, 0.5f),
          *wte = rand_floats((long)vocab * C, &rng, -1, 1);
    float *wpe = rand_floats((long)rows * C, &rng, -1, 1), *big = rand_floats(2 * n, &rng, -4, 4);
    int32_t tokens[37];
    for (int r = 0; r < rows; r++)
        tokens[r] = (int32_t)(ref_rng_next(&rng) % vocab);
    float *out[2][8];
    for (int t = 0; t < 2; t++) {
        cpu_set(t + 1, 0, -1);
        for (int o = 0; o < 8; o++)
            out[t][o] = zeros(2 * n);
        be.ops->layernorm(be.ctx, out[t][0], in, g, bta, rows, C, 1e-5f);
        memcpy(out[t][1], in, sizeof(float) * (size_t)n);
        be.ops->residual_layernorm(be.ctx, out[t][1], out[t][1] + n, delta, g, bta, rows, C, 1e-5f);
        be.ops->rmsnorm(be.ctx, out[t][2], in, g, rows, C, 1e-5f);
        memcpy(out[t][3], in, sizeof(float) * (size_t)n);
        be.ops->residual_rmsnorm(be.ctx, out[t][3], out[t][3] + n, delta, g, rows, C, 1e-5f);
        memcpy(out[t][4], in, sizeof(float) * (size_t)n);
        be.ops->bias_gelu(be.ctx, out[t][4], g, rows, C);
        be.ops->swiglu(be.ctx, out[t][5], gu, rows, C);
        be.ops->embed(be.ctx, out[t][6], tokens, wte, wpe, rows, C, rows, 0, 0, vocab);
        // argmax: every row, then one row of 2n columns (split into chunks)
        int32_t *idx = (int32_t *)(out[t][7] + n);
        be.ops->argmax(be.ctx, out[t][7], idx, in, rows, C);
        float *row = big;
        row[n - 1] = row[n] = 100.0f; // a tie across the middle of the row: the first wins
        be.ops->argmax(be.ctx, out[t][7] + rows, idx + rows, row, 1, (int)(2 * n));
        assert_int_equal(idx[rows], n - 1);
        row[n + 5] = __builtin_nanf(""); // a NaN in the second chunk beats every number
        be.ops->argmax(be.ctx, out[t][7] + rows + 1, idx + rows + 1, row, 1, (int)(2 * n));
        assert_int_equal(idx[rows + 1], n + 5);
        row[n + 5] = 0.0f;
    }
    const char *names[] = {"layernorm", "residual_layernorm",
                           "rmsnorm",   "residual_rmsnorm",
                           "bias_gelu", "swiglu",
                           "embed",     "argmax"};
    for (int o = 0; o < 8; o++) {
        if (memcmp(out[0][o], out[1][o], sizeof(float) * (size_t)(2 * n)))
            fail_msg("%s: 2 threads differ from 1", names[o]);
        free(out[0][o]), free(out[1][o]);
    }
    cpu_set(threads0, 0, -1);
    free(in), free(delta), free(gu), free(g), free(bta), free(wte), free(wpe), free(big);
}

/* After a first prefill + decode step has sized the scratch, further decode steps and
 * matmuls of the same widths allocate nothing: for multi-head attention, and for GQA with
 * RoPE (its cos/sin and rotated-query scratch included), over an fp32 and an int8 cache (whose
 * decode widens blocks of keys in its scratch). */
static void test_steady_state_no_alloc(void **state) {
    (void)state;
    const int H = 2, hd = 16, max_ctx = 64, prompt = 5, in_dim = 40, out_dim = 24;
    uint64_t rng = 1400;
    float inv_freq[8];
    rope_inv_freq_fill(inv_freq, hd, 10000.0, NULL);
    float *w = rand_floats((long)out_dim * in_dim, &rng, -1, 1), *scale = zeros(out_dim);
    int8_t q[24 * 40];
    quant_rows_int8(q, scale, w, out_dim, in_dim, NULL);
    weight_view wv = {.type = DTYPE_INT8, .data = q, .scale = scale};
    float *x = rand_floats((long)prompt * in_dim, &rng, -1, 1), *y = zeros((long)prompt * out_dim);
    for (int c = 0; c < 4; c++) {
        const int gqa = c % 2;
        const int KV = gqa ? 1 : H;
        const float *rope = gqa ? inv_freq : NULL;
        const long row = (long)(H + 2 * KV) * hd;
        kv_view kv = {.max_ctx = max_ctx, .heads = H, .kv_heads = KV, .head_dim = hd};
        kv.type = c < 2 ? DTYPE_F32 : DTYPE_INT8;
        kv.k = be.ops->alloc(be.ctx, kv_row_bytes(kv.type, hd) * (size_t)(KV * max_ctx));
        kv.v = be.ops->alloc(be.ctx, kv_row_bytes(kv.type, hd) * (size_t)(KV * max_ctx));
        float *qkv = rand_floats((long)prompt * row, &rng, -1, 1);
        float *out = zeros((long)prompt * H * hd);
        be.ops->matmul(be.ctx, y, x, wv, NULL, prompt, in_dim, out_dim);
        be.ops->attention(be.ctx, out, qkv, kv, rope, 0, 1, prompt, 0);
        be.ops->attention(be.ctx, out, qkv, kv, rope, 0, 1, 1, prompt);
        long grown = backend_cpu_grow_count(&be);
        for (int pos = prompt + 1; pos < max_ctx; pos++) {
            be.ops->matmul(be.ctx, y, x, wv, NULL, 1, in_dim, out_dim);
            be.ops->attention(be.ctx, out, qkv, kv, rope, 0, 1, 1, pos);
        }
        assert_int_equal(backend_cpu_grow_count(&be), grown);
        be.ops->release(be.ctx, kv.k);
        be.ops->release(be.ctx, kv.v);
        free(qkv), free(out);
    }
    free(w), free(scale), free(x), free(y);
}

static void test_memory_and_marks(void **state) {
    (void)state;
    const size_t bytes = 1000;
    unsigned char *d = be.ops->alloc(be.ctx, bytes);
    assert_int_equal((uintptr_t)d % 64, 0);
    for (size_t i = 0; i < bytes; i++)
        assert_int_equal(d[i], 0);
    unsigned char src[1000], back[1000];
    for (size_t i = 0; i < bytes; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    be.ops->copy_to_device(be.ctx, d, src, bytes);
    be.ops->copy_to_host(be.ctx, back, d, bytes);
    assert_memory_equal(back, src, bytes);
    be.ops->memset_zero(be.ctx, d, bytes);
    for (size_t i = 0; i < bytes; i++)
        assert_int_equal(d[i], 0);
    be.ops->release(be.ctx, d);

    be.ops->mark(be.ctx, 0);
    be.ops->synchronize(be.ctx);
    be.ops->mark(be.ctx, 7);
    double t0 = be.ops->mark_seconds(be.ctx, 0), t1 = be.ops->mark_seconds(be.ctx, 7);
    assert_true(t0 > 0.0);
    assert_true(t1 >= t0);
    assert_true(be.ops->peak_memory(be.ctx) > 0);
    assert_string_equal(be.ops->name, "cpu");
    assert_int_equal(dtype_size(DTYPE_INT8), 1);
    assert_int_equal(dtype_size(DTYPE_BF16), 2);
    assert_string_equal(dtype_name(DTYPE_F16), "f16");
}

/* The level's int8 kernels against the scalar ones (kernels/cpu/matmul_scalar.c, the twin
 * test_matmul_lowp checks against the reference): quantize_q8 bit for bit (zero blocks, every
 * tail, blocks 1..32) and as ref_quantize_q8; gemv_q8 by relative error for every GEMV row
 * count, k under one vector, not a multiple of a block or of a vector (17, 100), long rows
 * (3072); n odd and even (tile tails); blocks 32 and 16 (and 8, 4, 2); row scales and groups
 * of 32, 64, 128 and of 48, 96 (scales lane by lane); y accumulated (+=) with an ld past n
 * whose extra columns stay untouched; the largest magnitudes, where maddubs would saturate
 * without the sign trick; and each output the same bits whatever rows and columns share the
 * call (matmul.c's promise that a split or a micro-batch changes no token). */
static void test_matmul_q8_kernels(void **state) {
    (void)state;
    const cpu_matmul_kernels *mk = cpu_kernel_set_for(backend_cpu_isa(&be))->matmul;
    const cpu_matmul_kernels *sk = &cpu_matmul_scalar;
    const char *level = cpu_isa_name(backend_cpu_isa(&be));
    enum { MAX_K = 3072, MAX_N = 10, PAD = 3 }; // MAX_N >= CPU_GEMV_MAX_ROWS
    uint64_t rng = 4242;
    float *x = rand_floats((long)CPU_GEMV_MAX_ROWS * MAX_K, &rng, -2, 2);
    int8_t *q = malloc((size_t)CPU_GEMV_MAX_ROWS * MAX_K),
           *q2 = malloc((size_t)MAX_N * MAX_K); // also extreme weights
    int8_t *w = malloc((size_t)MAX_N * MAX_K);
    float *d = zeros((long)CPU_GEMV_MAX_ROWS * MAX_K), *d2 = zeros((long)CPU_GEMV_MAX_ROWS * MAX_K);
    float *ws = rand_floats((long)MAX_N * MAX_K, &rng, 0.001f, 0.02f);
    float *y0 = rand_floats((long)CPU_GEMV_MAX_ROWS * (MAX_N + PAD), &rng, -1, 1);
    float *got = zeros((long)CPU_GEMV_MAX_ROWS * (MAX_N + PAD));
    float *want = zeros((long)CPU_GEMV_MAX_ROWS * (MAX_N + PAD));
    assert_non_null(q), assert_non_null(q2), assert_non_null(w);
    // Zero blocks: the first 32 values of every row, and 16 more from 100 (a block of 16 or
    // 32 inside a longer one).
    for (int r = 0; r < CPU_GEMV_MAX_ROWS; r++)
        for (int c = 0; c < 32; c++)
            x[(long)r * MAX_K + c] = 0.0f, x[(long)r * MAX_K + 128 + c % 16] = 0.0f;
    for (long i = 0; i < (long)MAX_N * MAX_K; i++)
        w[i] = (int8_t)((int)(ref_rng_next(&rng) % 255) - 127);

    static const int qk[] = {1, 5, 17, 31, 32, 33, 100, 129, 768};
    for (int block = 1; block <= 32; block *= 2)
        for (size_t i = 0; i < sizeof qk / sizeof qk[0]; i++)
            for (int rows = 1; rows <= 3; rows++) {
                const int k = qk[i], nb = (k + block - 1) / block;
                memset(q, 0x55, (size_t)rows * k), memset(q2, 0x55, (size_t)rows * k);
                mk->quantize_q8(q, d, x, rows, k, block);
                sk->quantize_q8(q2, d2, x, rows, k, block);
                if (memcmp(q, q2, (size_t)rows * k) || memcmp(d, d2, sizeof(float) * rows * nb))
                    fail_msg("quantize_q8 (%s) rows %d k %d block %d: not the scalar bits", level,
                             rows, k, block);
                ref_quantize_q8(q2, d2, x, rows, k, block);
                if (memcmp(q, q2, (size_t)rows * k) || memcmp(d, d2, sizeof(float) * rows * nb))
                    fail_msg("quantize_q8 (%s) rows %d k %d block %d: not ref_quantize_q8's", level,
                             rows, k, block);
            }

    static const int ks[] = {32, 64, 96, 100, 768, 3072, 17};
    static const int layouts[][2] = {{32, 0}, {32, 32}, {32, 64}, {32, 128}, {32, 96},
                                     {16, 0}, {16, 16}, {16, 32}, {16, 48},  {16, 128},
                                     {8, 0},  {4, 64},  {2, 0}};
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
            for (int extreme = 0; extreme < 2; extreme++)
                for (int n = 9; n <= MAX_N; n++)
                    for (int rows = 1; rows <= CPU_GEMV_MAX_ROWS; rows++) {
                        const int block = layouts[l][0], group = layouts[l][1], k = ks[i];
                        const long ldy = n + PAD, ny = (long)rows * ldy;
                        sk->quantize_q8(q, d, x, rows, k, block);
                        int8_t *wq = w;
                        if (extreme) { // |q| = |w| = 127 everywhere, signs mixed
                            for (long c = 0; c < (long)rows * k; c++)
                                q[c] = (int8_t)(c % 3 ? -127 : 127);
                            wq = q2;
                            for (long c = 0; c < (long)n * k; c++)
                                wq[c] = (int8_t)(c % 5 ? -127 : 127);
                        }
                        memcpy(got, y0, sizeof(float) * ny), memcpy(want, y0, sizeof(float) * ny);
                        mk->gemv_q8(got, ldy, q, d, wq, ws, group, rows, k, n, block);
                        sk->gemv_q8(want, ldy, q, d, wq, ws, group, rows, k, n, block);
                        for (int r = 0; r < rows; r++)
                            for (long c = n; c < ldy; c++)
                                assert_true(got[r * ldy + c] == y0[r * ldy + c]);
                        char msg[160];
                        snprintf(msg, sizeof msg,
                                 "gemv_q8 (%s) rows %d k %d n %d block %d group %d extreme %d",
                                 level, rows, k, n, block, group, extreme);
                        expect_close(got, want, ny, FP32_TOL, msg);
                        // Each output is a function of its own row and weight row only: the
                        // same bits alone (one row; its columns split at an odd point).
                        const int nb = (k + block - 1) / block,
                                  ng = group ? (k + group - 1) / group : 1;
                        const int n1 = n / 2 + 1;
                        const float *ws1 = ws + (long)n1 * ng;
                        for (int r = 0; r < rows; r++) {
                            float *one = want + (long)r * ldy;
                            memcpy(one, y0 + (long)r * ldy, sizeof(float) * ldy);
                            mk->gemv_q8(one, ldy, q + (long)r * k, d + (long)r * nb, wq, ws, group,
                                        1, k, n1, block);
                            mk->gemv_q8(one + n1, ldy, q + (long)r * k, d + (long)r * nb,
                                        wq + (long)n1 * k, ws1, group, 1, k, n - n1, block);
                            if (memcmp(one, got + (long)r * ldy, sizeof(float) * n))
                                fail_msg("%s: row %d alone or split at column %d differs", msg, r,
                                         n1);
                        }
                    }
    free(x), free(q), free(q2), free(w), free(d), free(d2), free(ws), free(y0), free(got),
        free(want);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_residual_layernorm),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_residual_rmsnorm),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_gather_scatter_rows),
        cmocka_unit_test(test_rope_inv_freq),
        cmocka_unit_test(test_matmul_f32),
        cmocka_unit_test(test_matmul_lowp),
        cmocka_unit_test(test_round_bf16),
        cmocka_unit_test(test_matmul_bf16),
        cmocka_unit_test(test_bias_gelu),
        cmocka_unit_test(test_activation_kernels),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_argmax_nan),
        cmocka_unit_test(test_attention_contiguous),
        cmocka_unit_test(test_attention_paged),
        cmocka_unit_test(test_ref_attention_gqa_mha),
        cmocka_unit_test(test_attention_gqa),
        cmocka_unit_test(test_attention_tiled),
        cmocka_unit_test(test_attention_decode_split),
        cmocka_unit_test(test_attention_kernels),
        cmocka_unit_test(test_row_ops_threads_bitwise),
        cmocka_unit_test(test_steady_state_no_alloc),
        cmocka_unit_test(test_memory_and_marks),
        cmocka_unit_test(test_matmul_q8_kernels),
        cmocka_unit_test(test_matmul_blocks),
        cmocka_unit_test(test_matmul_threads_bitwise),
        cmocka_unit_test(test_quant_blocks),
        cmocka_unit_test(test_quant_blocks_k4),
    };
    /* test_ops [LEVEL]: every test against one instruction-set level of the CPU kernels; a
     * level this CPU lacks skips (exit 77), so CTest lists it as skipped with the reason. */
    if (argc > 1 && strcmp(argv[1], "auto")) {
        const int level = cpu_isa_from_name(argv[1]);
        if (level < 0) {
            fprintf(stderr, "test_ops: unknown level %s (%s)\n", argv[1], cpu_isa_names());
            return 2;
        }
        if (level > (int)cpu_isa_detect()) {
            printf("skipped: this CPU has no %s (best: %s; %s)\n", argv[1],
                   cpu_isa_name(cpu_isa_detect()), cpu_isa_detect_why());
            return 77;
        }
        isa_under_test = argv[1];
    }
    return cmocka_run_group_tests_name("ops", tests, setup, teardown);
}
