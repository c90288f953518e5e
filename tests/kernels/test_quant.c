/* The host weight conversions of kernels/quant.c: INT8 per-row error bound, bf16/f16 round to
 * nearest even (checked exhaustively against an independent decoder), and the CPU matmul on
 * low-precision weights against the reference on the dequantized weights. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/backend.h"
#include "kernels/quant.h"
#include "kernels/ref_ops.h"

static void test_int8_error_bound(void **state) {
    (void)state;
    const long rows = 37, cols = 301;
    uint64_t rng = 1;
    float *x = malloc(sizeof(float) * rows * cols), *scale = malloc(sizeof(float) * rows);
    float *absmax = malloc(sizeof(float) * rows);
    int8_t *q = malloc((size_t)(rows * cols));
    assert_non_null(x), assert_non_null(scale), assert_non_null(absmax), assert_non_null(q);
    for (long r = 0; r < rows; r++) {
        float mag = ldexpf(1.0f, (int)(r % 12) - 6); // rows of very different magnitudes
        ref_fill_uniform(x + r * cols, cols, &rng, -mag, mag);
    }
    memset(x + 3 * cols, 0, sizeof(float) * cols); // an all-zero row

    for (int external = 0; external < 2; external++) {
        quant_row_absmax(absmax, x, rows, cols);
        // External absmax as when a row spans TP ranks: the other shards may be larger.
        if (external)
            for (long r = 0; r < rows; r++) absmax[r] *= 1.5f;
        quant_rows_int8(q, scale, x, rows, cols, external ? absmax : NULL);
        for (long r = 0; r < rows; r++) {
            float m = 0.0f;
            for (long c = 0; c < cols; c++) m = fmaxf(m, fabsf(x[r * cols + c]));
            assert_true(fabsf(absmax[r] - (external ? 1.5f * m : m)) <= 1e-7f * m);
            assert_true(scale[r] == absmax[r] / 127.0f);
            double bound = absmax[r] / 127.0 / 2.0 * (1.0 + 1e-6);
            for (long c = 0; c < cols; c++) {
                double err = fabs((double)q[r * cols + c] * scale[r] - x[r * cols + c]);
                if (err > bound) fail_msg("row %ld col %ld: error %g > bound %g", r, c, err, bound);
                assert_true(q[r * cols + c] >= -127 && q[r * cols + c] <= 127);
            }
        }
        for (long c = 0; c < cols; c++) assert_int_equal(q[3 * cols + c], 0);
    }
    // The row's extreme maps to +-127 exactly.
    float row[4] = {0.5f, -2.0f, 1.0f, 0.0f}, s;
    int8_t qr[4];
    quant_rows_int8(qr, &s, row, 1, 4, NULL);
    assert_int_equal(qr[1], -127);
    assert_int_equal(qr[0], 32); // 0.5 / (2/127) = 31.75
    free(x), free(scale), free(absmax), free(q);
}

static uint16_t bf16_of(float f) {
    uint16_t h;
    convert_f32_to_bf16(&h, &f, 1);
    return h;
}

static uint16_t f16_of(float f) {
    uint16_t h;
    convert_f32_to_f16(&h, &f, 1);
    return h;
}

static void test_bf16(void **state) {
    (void)state;
    // Ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
    assert_int_equal(bf16_of(1.0f + 0x1p-8f), 0x3F80);
    assert_int_equal(bf16_of(1.0f + 0x1p-7f + 0x1p-8f), 0x3F82);
    assert_int_equal(bf16_of(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
    assert_int_equal(bf16_of(-2.0f), 0xC000);
    assert_int_equal(bf16_of(INFINITY), 0x7F80);
    assert_true(isnan(ref_bf16_to_f32(bf16_of(NAN))));
    assert_int_equal(bf16_of(FLT_MAX), 0x7F80); // overflow rounds to infinity

    uint64_t rng = 2;
    const long n = 100000;
    float *x = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    assert_non_null(x), assert_non_null(back), assert_non_null(h);
    for (long i = 0; i < n; i++)
        x[i] = ldexpf(ref_rng_uniform(&rng, -1, 1), (int)(ref_rng_next(&rng) % 200) - 100);
    convert_f32_to_bf16(h, x, n);
    convert_bf16_to_f32(back, h, n);
    for (long i = 0; i < n; i++) {
        assert_true(back[i] == ref_bf16_to_f32(h[i]));
        // Half an ulp of 7 stored mantissa bits (2^-8 relative); subnormals: half of 2^-133.
        if (!(fabsf(back[i] - x[i]) <= fmaxf(0x1p-8f * fabsf(x[i]), 0x1p-134f)))
            fail_msg("bf16(%a) = %a", (double)x[i], (double)back[i]);
    }
    free(x), free(back), free(h);
}

static void test_f16(void **state) {
    (void)state;
    // Every half decodes as the independent decoder says and re-encodes to itself.
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t hb = (uint16_t)b, again;
        float f;
        convert_f16_to_f32(&f, &hb, 1);
        float want = ref_f16_to_f32(hb);
        if (isnan(want)) {
            assert_true(isnan(f));
            continue;
        }
        assert_true(f == want && signbit(f) == signbit(want));
        convert_f32_to_f16(&again, &f, 1);
        assert_int_equal(again, hb);
    }
    // Midpoints between neighbouring positive halves go to the even one.
    for (uint32_t b = 0; b < 0x7BFF; b++) {
        double lo = ref_f16_to_f32((uint16_t)b), hi = ref_f16_to_f32((uint16_t)(b + 1));
        float mid = (float)((lo + hi) / 2); // exact: halves have 11 significant bits
        uint16_t want = (uint16_t)((b & 1) ? b + 1 : b);
        assert_int_equal(f16_of(mid), want);
        assert_int_equal(f16_of(nextafterf(mid, 0.0f)), b);
        assert_int_equal(f16_of(nextafterf(mid, INFINITY)), b + 1);
    }
    assert_int_equal(f16_of(65504.0f), 0x7BFF);
    assert_int_equal(f16_of(65519.0f), 0x7BFF);
    assert_int_equal(f16_of(65520.0f), 0x7C00); // the tie with 2^16 rounds to infinity
    assert_int_equal(f16_of(-1e6f), 0xFC00);
    assert_int_equal(f16_of(0x1p-25f), 0x0000);            // tie with zero: even
    assert_int_equal(f16_of(0x1p-25f + 0x1p-40f), 0x0001); // just above: smallest subnormal
    assert_int_equal(f16_of(-0.0f), 0x8000);
    assert_true(isnan(ref_f16_to_f32(f16_of(NAN))));

    // Random values: normal range within 2^-11 relative, subnormal range within 2^-25.
    uint64_t rng = 3;
    for (int i = 0; i < 100000; i++) {
        float x = ldexpf(ref_rng_uniform(&rng, -1, 1), (int)(ref_rng_next(&rng) % 45) - 28);
        float back;
        uint16_t h = f16_of(x);
        convert_f16_to_f32(&back, &h, 1);
        float bound = fabsf(x) >= 0x1p-14f ? 0x1p-11f * fabsf(x) : 0x1p-25f;
        if (fabsf(x) >= 65520.0f) continue;
        if (!(fabsf(back - x) <= bound)) fail_msg("f16(%a) = %a", (double)x, (double)back);
    }
}

/* The CPU matmul on stored low-precision weights equals the reference matmul on the same
 * weights expanded to fp32 (ref_weight_to_f32): expansion belongs to the product, no more. */
static void test_matmul_dequantized(void **state) {
    (void)state;
    backend be;
    backend_options opt = {.threads = 0, .max_marks = 1};
    assert_int_equal(backend_cpu_init(&be, &opt), 0);
    const int rows = 9, in_dim = 515, out_dim = 131;
    const long n = (long)in_dim * out_dim;
    uint64_t rng = 4;
    float *w = malloc(sizeof(float) * n), *wf = malloc(sizeof(float) * n);
    float *x = malloc(sizeof(float) * rows * in_dim), *bias = malloc(sizeof(float) * out_dim);
    float *scale = malloc(sizeof(float) * out_dim);
    float *got = malloc(sizeof(float) * rows * out_dim),
          *want = malloc(sizeof(float) * rows * out_dim);
    int8_t *q = malloc((size_t)n);
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    assert_non_null(w), assert_non_null(wf), assert_non_null(x), assert_non_null(q);
    ref_fill_uniform(w, n, &rng, -0.2f, 0.2f);
    ref_fill_uniform(x, (long)rows * in_dim, &rng, -1, 1);
    ref_fill_uniform(bias, out_dim, &rng, -1, 1);
    quant_rows_int8(q, scale, w, out_dim, in_dim, NULL);

    weight_view views[3] = {{.type = DTYPE_INT8, .data = q, .scale = scale},
                            {.type = DTYPE_BF16, .data = h},
                            {.type = DTYPE_F16, .data = h}};
    for (int k = 0; k < 3; k++) {
        if (views[k].type == DTYPE_BF16) convert_f32_to_bf16(h, w, n);
        if (views[k].type == DTYPE_F16) convert_f32_to_f16(h, w, n);
        be.ops->matmul(be.ctx, got, x, views[k], bias, rows, in_dim, out_dim);
        ref_matmul_cpu(want, x, views[k], bias, rows, in_dim, out_dim);
        double err = ref_rel_error(got, want, (long)rows * out_dim);
        if (!(err < 1e-5)) fail_msg("%s matmul: relative error %g", dtype_name(views[k].type), err);
        // And the quantized product stays close to the fp32 one: the quantization error itself.
        ref_matmul(want, x, w, bias, rows, in_dim, out_dim);
        err = ref_rel_error(got, want, (long)rows * out_dim);
        if (!(err < 2e-2))
            fail_msg("%s vs fp32 weights: relative error %g", dtype_name(views[k].type), err);
    }
    backend_free(&be);
    free(w), free(wf), free(x), free(bias), free(scale), free(got), free(want), free(q), free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_error_bound),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_f16),
        cmocka_unit_test(test_matmul_dequantized),
    };
    return cmocka_run_group_tests_name("quant", tests, NULL, NULL);
}
