/* The same-run ceilings' probes (src/metrics/roofline.c, roofline_backend.c). The device probes
 * use only the backend table, so the CPU backend runs the code a GPU run takes: both give
 * finite positive ceilings and set the model's counts as the host probe does. (The numbers
 * themselves are the machine's: nothing here asserts a speed.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "metrics/roofline.h"

static model_config tiny_llama(void) {
    return (model_config){.layers = 2,
                          .heads = 4,
                          .embd = 32,
                          .vocab = 64,
                          .ctx = 32,
                          .mlp = 48,
                          .norm = NORM_PRE,
                          .arch = ARCH_LLAMA,
                          .kv_heads = 2};
}

/* qkv (4 + 2 x 2) x 8 = 64 rows, o 32, gate|up 96, down 32 */
static void test_model_shapes(void **state) {
    (void)state;
    const model_config cfg = tiny_llama();
    long s[4][2], max_in, max_out;
    roofline_model_shapes(&cfg, s, &max_in, &max_out);
    const long want[4][2] = {{32, 64}, {32, 32}, {32, 96}, {48, 32}};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s[i][0], want[i][0]);
        assert_int_equal(s[i][1], want[i][1]);
    }
    assert_int_equal(max_in, 48);
    assert_int_equal(max_out, 96);
    roofline r = {0};
    /* 2 layers x 2 R (in x out summed over the four products), R = 2 x 4 rows */
    double products = roofline_model_counts(&r, &cfg, 2, 4);
    assert_true(products == 2 * 2.0 * 8 * (32 * 64 + 32 * 32 + 32 * 96 + 48 * 32));
    assert_true(r.model_flops > products);
    assert_true(r.kv_bytes_per_pos == 2.0 * 2 * 2 * 8 * 4 * 2);
}

static void test_backend_probes_on_cpu(void **state) {
    (void)state;
    const model_config cfg = tiny_llama();
    backend be;
    backend_options opt = {.threads = 1, .max_marks = 0};
    assert_int_equal(backend_init(&be, "cpu", &opt), 0);
    assert_false(roofline_backend_is_device(&be));
    roofline host = {0}, dev = {0};
    const double sgemm = roofline_sgemm(&host, &cfg, 2, 4);
    const double gemm = roofline_backend_gemm(&dev, &be, &cfg, 2, 4);
    assert_true(isfinite(sgemm) && sgemm > 0);
    assert_true(isfinite(gemm) && gemm > 0);
    assert_true(dev.model_flops == host.model_flops);
    roofline_backend_bandwidth(&dev, &be, 1e6);
    assert_true(isfinite(dev.stream_gbs) && dev.stream_gbs > 0);
    assert_true(dev.weight_bytes == 1e6);
    backend_free(&be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_shapes),
        cmocka_unit_test(test_backend_probes_on_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
