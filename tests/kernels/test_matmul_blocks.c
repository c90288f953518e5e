/* The block formats' decode GEMV and prefill GEMM (kernels/cpu/matmul_kernels.h, gemv_blocks
 * and gemm_blocks) at every instruction-set level this CPU has: bit for bit the scalar twin's,
 * and within fp32 rounding of a double-precision product of the same activation quants and the
 * blocks' values (qblocks_dequantize, exact). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref_ops.h"

/* Room past n in each output row, which must stay untouched (y's ld is n + PAD). */
enum { PAD = 3, MAX_ROWS = CPU_GEMV_MAX_ROWS };

static float *floats(long n, uint64_t *rng, float lo, float hi) {
    float *x = malloc(sizeof(float) * (size_t)n);
    assert_non_null(x);
    ref_fill_uniform(x, n, rng, lo, hi);
    return x;
}

/* The product in double of quants q, scales d (rows, k) and the weights' values wv (n, k),
 * and the sum of its terms' magnitudes, which bounds the fp32 rounding of any order. */
static void reference(double *want, double *mag, long ldy, const int8_t *q, const float *d,
                      const float *wv, int rows, int k, int n) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < n; o++) {
            double acc = 0.0, abs = 0.0;
            for (int c = 0; c < k; c++) {
                const double t = (double)q[(long)r * k + c] *
                                 d[(long)r * (k / QBLOCK) + c / QBLOCK] * wv[(long)o * k + c];
                acc += t, abs += fabs(t);
            }
            want[(long)r * ldy + o] = acc, mag[(long)r * ldy + o] = abs;
        }
}

/* got (from y = 0) against the double product: each output within 1e-5 of its terms'
 * magnitudes (the block-scaled fp32 sums of k terms round far less). */
static void expect_near_reference(const float *got, long ldy, const int8_t *q, const float *d,
                                  const float *wv, int rows, int k, int n, const char *what) {
    double *ref = malloc(sizeof(double) * rows * ldy), *mag = malloc(sizeof(double) * rows * ldy);
    assert_true(ref && mag);
    reference(ref, mag, ldy, q, d, wv, rows, k, n);
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < n; o++) {
            const long i = (long)r * ldy + o;
            if (!(fabs(got[i] - ref[i]) <= 1e-5 * mag[i]))
                fail_msg("%s: output (%d, %d) %.9g, double %.9g (terms' magnitude %.3g)", what, r,
                         o, got[i], ref[i], mag[i]);
        }
    free(ref), free(mag);
}

/* The product under test for activation row r alone and weight rows [c0, c0 + nc), added into
 * y (ld ldy); args holds the product's operands. */
typedef void (*row_product)(const void *args, float *y, long ldy, int r, int c0, int nc);

/* Each output a function of its own row and weight row: every row alone from y0, its columns
 * split at an odd point, gives the bits got holds (the product of all rows from y0). y: room for
 * rows * ldy floats. */
static void expect_rows_alone(row_product run, const void *args, float *y, const float *y0,
                              const float *got, long ldy, int rows, int n, const char *what) {
    const int n1 = n / 2 + 1 < n ? n / 2 + 1 : n;
    for (int r = 0; r < rows; r++) {
        float *one = y + (long)r * ldy;
        memcpy(one, y0 + (long)r * ldy, sizeof(float) * ldy);
        run(args, one, ldy, r, 0, n1);
        if (n > n1) run(args, one + n1, ldy, r, n1, n - n1);
        if (memcmp(one, got + (long)r * ldy, sizeof(float) * n))
            fail_msg("%s: row %d alone or split at column %d differs", what, r, n1);
    }
}

/* gemv_blocks' operands, for expect_rows_alone. */
typedef struct {
    const cpu_matmul_kernels *mk;
    const int8_t *q;
    const float *d;
    const void *blocks;
    dtype type;
    int k;
} gemv_args;

static void gemv_row(const void *args, float *y, long ldy, int r, int c0, int nc) {
    const gemv_args *a = args;
    const int k = a->k;
    a->mk->gemv_blocks(y, ldy, a->q + (long)r * k, a->d + (long)r * (k / QBLOCK),
                       (const char *)a->blocks + dtype_bytes(a->type, (size_t)k) * c0, a->type, 1,
                       k, nc);
}

/* One format, one shape, at one level against the scalar twin and the reference. extreme:
 * activation quants of +-127 everywhere, where a 4-product sum is largest. */
static void check_shape(const cpu_matmul_kernels *mk, const char *level, dtype type, int rows,
                        int k, int n, int extreme, uint64_t seed) {
    uint64_t rng = seed;
    const long ldy = n + PAD, count = (long)n * k;
    float *wf = floats(count, &rng, -1, 1), *x = floats((long)rows * k, &rng, -2, 2);
    // an all-zero block and a constant one (d = 0; q4_1's d = 0 with a min)
    for (int c = 0; c < 64 && c < k; c++)
        wf[c] = c < 32 ? 0.0f : 0.25f;
    void *blocks = malloc(dtype_bytes(type, (size_t)count));
    int8_t *q = malloc((size_t)rows * k);
    float *d = malloc(sizeof(float) * (size_t)rows * (k / QBLOCK)),
          *wv = malloc(sizeof(float) * count);
    float *y0 = floats((long)rows * ldy, &rng, -1, 1);
    float *got = malloc(sizeof(float) * rows * ldy), *want = malloc(sizeof(float) * rows * ldy);
    assert_true(blocks && q && d && wv && got && want);
    qblocks_quantize(type, blocks, wf, n, k);
    qblocks_dequantize(type, wv, blocks, n, k);
    cpu_matmul_scalar.quantize_q8(q, d, x, rows, k, QBLOCK);
    if (extreme)
        for (long c = 0; c < (long)rows * k; c++)
            q[c] = (int8_t)(c % 3 ? -127 : 127);
    char what[160];
    snprintf(what, sizeof what, "gemv_blocks %s (%s) rows %d k %d n %d extreme %d",
             dtype_name(type), level, rows, k, n, extreme);

    memcpy(got, y0, sizeof(float) * rows * ldy), memcpy(want, y0, sizeof(float) * rows * ldy);
    mk->gemv_blocks(got, ldy, q, d, blocks, type, rows, k, n);
    cpu_matmul_scalar.gemv_blocks(want, ldy, q, d, blocks, type, rows, k, n);
    if (memcmp(got, want, sizeof(float) * rows * ldy)) // the padding included: untouched
        fail_msg("%s: not the scalar twin's bits", what);

    // From y = 0 against double.
    memset(want, 0, sizeof(float) * rows * ldy);
    mk->gemv_blocks(want, ldy, q, d, blocks, type, rows, k, n);
    expect_near_reference(want, ldy, q, d, wv, rows, k, n, what);

    const gemv_args args = {.mk = mk, .q = q, .d = d, .blocks = blocks, .type = type, .k = k};
    expect_rows_alone(gemv_row, &args, want, y0, got, ldy, rows, n, what);
    free(wf), free(x), free(blocks), free(q), free(d), free(wv), free(y0), free(got), free(want);
}

/* Every format at every level: every GEMV row count; k of one block, of an odd count of blocks
 * (the last 64-byte chunk half empty) and long; q4_k of one super-block and several; n odd and
 * even around the tiles of 1, 2 and 3 weight rows. */
static void test_gemv_blocks_levels(void **state) {
    (void)state;
    static const dtype types[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q4_K};
    static const int ks[] = {32, 64, 96, 288, 768, 256, 512, 1280};
    static const int ns[] = {1, 2, 5, 7, 10};
    int levels = 0;
    for (int isa = 0; isa <= (int)cpu_isa_detect(); isa++) {
        const cpu_matmul_kernels *mk = cpu_kernel_set_for((cpu_isa)isa)->matmul;
        const char *level = cpu_isa_name((cpu_isa)isa);
        levels++;
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
                if (ks[i] % qblock_weights(types[t])) continue;
                for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
                    for (int rows = 1; rows <= MAX_ROWS; rows++)
                        check_shape(mk, level, types[t], rows, ks[i], ns[j],
                                    (rows + (int)j) % 4 == 3, 7000 + 100 * t + 10 * i + j);
            }
    }
    printf("gemv_blocks: %d level(s) checked, best %s\n", levels, cpu_isa_name(cpu_isa_detect()));
}

/* gemm_blocks' operands, for expect_rows_alone. groups: int8w's scales per weight row. */
typedef struct {
    const cpu_matmul_kernels *mk;
    const int8_t *q;
    const float *d;
    const int32_t *xs;
    weight_view w;
    int k, groups;
    void *pack;
} gemm_args;

static void gemm_row(const void *args, float *y, long ldy, int r, int c0, int nc) {
    const gemm_args *a = args;
    const int k = a->k, nb = k / QBLOCK;
    // Weight rows from c0 as their own slice: data (and int8 scales) at its first row.
    weight_view w = a->w;
    const size_t row_bytes = w.type == DTYPE_INT8 ? (size_t)k : dtype_bytes(w.type, (size_t)k);
    w.data = (const char *)w.data + row_bytes * c0;
    if (w.type == DTYPE_INT8) w.scale += (long)c0 * a->groups;
    a->mk->gemm_blocks(y, ldy, a->q + (long)r * k, a->d + (long)r * nb, a->xs + (long)r * nb, w, 1,
                       k, nc, a->pack);
}

/* The block GEMM (gemm_blocks) of one format and shape at one level: the scalar twin's bits,
 * the padding past n untouched; within 1e-5 of the terms' magnitudes of the double product; and
 * the same bits for one row alone and for the columns split at an odd point. type DTYPE_INT8
 * runs int8w's rows with a scale per row (group 0) or per group. */
static void check_gemm_shape(const cpu_matmul_kernels *mk, const char *level, dtype type, int group,
                             int rows, int k, int n, int extreme, uint64_t seed) {
    uint64_t rng = seed;
    const long ldy = n + PAD, count = (long)n * k;
    const int nb = k / QBLOCK, groups = group ? (k + group - 1) / group : 1;
    float *wf = floats(count, &rng, -1, 1), *x = floats((long)rows * k, &rng, -2, 2);
    for (int c = 0; c < 64 && c < k; c++) // an all-zero block and a constant one
        wf[c] = c < 32 ? 0.0f : 0.25f;
    void *blocks = malloc(type == DTYPE_INT8 ? (size_t)count : dtype_bytes(type, (size_t)count));
    float *ws = malloc(sizeof(float) * (size_t)n * groups);
    int8_t *q = malloc((size_t)rows * k);
    int32_t *xs = malloc(sizeof(int32_t) * (size_t)rows * nb);
    float *d = malloc(sizeof(float) * (size_t)rows * nb), *wv = malloc(sizeof(float) * count);
    float *y0 = floats((long)rows * ldy, &rng, -1, 1);
    float *got = malloc(sizeof(float) * rows * ldy), *want = malloc(sizeof(float) * rows * ldy);
    const long pack_bytes =
        mk->gemm_blocks_pack_bytes(type, k) > cpu_matmul_scalar.gemm_blocks_pack_bytes(type, k)
            ? mk->gemm_blocks_pack_bytes(type, k)
            : cpu_matmul_scalar.gemm_blocks_pack_bytes(type, k);
    void *pack = aligned_alloc(64, (size_t)(pack_bytes + 63) / 64 * 64);
    assert_true(blocks && ws && q && xs && d && wv && got && want && pack);
    weight_view w = {.type = type, .data = blocks};
    if (type == DTYPE_INT8) {
        if (group)
            quant_groups_int8(blocks, ws, wf, n, k, group);
        else
            quant_rows_int8(blocks, ws, wf, n, k, NULL);
        for (long c = 0; c < count; c++)
            wv[c] =
                (float)((int8_t *)blocks)[c] * ws[(c / k) * groups + (group ? c % k / group : 0)];
        w.scale = ws, w.group = group, w.act_block = QBLOCK;
    } else {
        qblocks_quantize(type, blocks, wf, n, k);
        qblocks_dequantize(type, wv, blocks, n, k);
    }
    cpu_matmul_scalar.quantize_q8(q, d, x, rows, k, QBLOCK);
    if (extreme)
        for (long c = 0; c < (long)rows * k; c++)
            q[c] = (int8_t)(c % 3 ? -127 : 127);
    block_sums(xs, q, rows, k);
    char what[160];
    snprintf(what, sizeof what, "gemm_blocks %s group %d (%s) rows %d k %d n %d extreme %d",
             dtype_name(type), group, level, rows, k, n, extreme);

    memcpy(got, y0, sizeof(float) * rows * ldy), memcpy(want, y0, sizeof(float) * rows * ldy);
    mk->gemm_blocks(got, ldy, q, d, xs, w, rows, k, n, pack);
    cpu_matmul_scalar.gemm_blocks(want, ldy, q, d, xs, w, rows, k, n, pack);
    if (memcmp(got, want, sizeof(float) * rows * ldy))
        fail_msg("%s: not the scalar twin's bits", what);

    memset(want, 0, sizeof(float) * rows * ldy);
    mk->gemm_blocks(want, ldy, q, d, xs, w, rows, k, n, pack);
    expect_near_reference(want, ldy, q, d, wv, rows, k, n, what);

    const gemm_args args = {
        .mk = mk, .q = q, .d = d, .xs = xs, .w = w, .k = k, .groups = groups, .pack = pack};
    expect_rows_alone(gemm_row, &args, want, y0, got, ldy, rows, n, what);
    free(wf), free(x), free(blocks), free(ws), free(q), free(xs), free(d), free(wv), free(y0),
        free(got), free(want), free(pack);
}

/* Every format, and int8w with a scale per row, per 32 and per 128 columns, at every level:
 * row counts around the kernels' row blocks (1 to 4 rows at a time) and past GEMV sizes; k of
 * one block, an odd count and long; q4_k of one super-block and several; n around the tiles of
 * 16 and 32 columns. */
static void test_gemm_blocks_levels(void **state) {
    (void)state;
    static const struct {
        dtype type;
        int group;
    } formats[] = {{DTYPE_Q8_0, 0}, {DTYPE_Q4_0, 0},  {DTYPE_Q4_1, 0},  {DTYPE_Q4_K, 0},
                   {DTYPE_INT8, 0}, {DTYPE_INT8, 32}, {DTYPE_INT8, 128}};
    static const int ks[] = {32, 96, 768, 256, 512};
    static const int ns[] = {1, 7, 16, 17, 32, 45, 70};
    static const int rowss[] = {1, 2, 3, 5, 9, 14};
    int levels = 0;
    for (int isa = 0; isa <= (int)cpu_isa_detect(); isa++) {
        const cpu_matmul_kernels *mk = cpu_kernel_set_for((cpu_isa)isa)->matmul;
        levels++;
        for (size_t t = 0; t < sizeof formats / sizeof formats[0]; t++)
            for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
                const dtype type = formats[t].type;
                if (type != DTYPE_INT8 && ks[i] % qblock_weights(type)) continue;
                for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
                    for (size_t r = 0; r < sizeof rowss / sizeof rowss[0]; r++)
                        check_gemm_shape(mk, cpu_isa_name((cpu_isa)isa), type, formats[t].group,
                                         rowss[r], ks[i], ns[j], (r + j) % 4 == 3,
                                         9000 + 1000 * t + 100 * i + 10 * j + r);
            }
    }
    printf("gemm_blocks: %d level(s) checked, best %s\n", levels, cpu_isa_name(cpu_isa_detect()));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemv_blocks_levels),
        cmocka_unit_test(test_gemm_blocks_levels),
    };
    return cmocka_run_group_tests_name("matmul_blocks", tests, NULL, NULL);
}
