/* The expert-load imbalance (src/analysis/moe_load.c) on hand-computed loads: max/mean tokens
 * per expert per step, averaged over steps, the worst step, the ep blocks' ratio, the hottest
 * expert and its share, prefill and decode apart, empty steps skipped. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "analysis/moe_load.h"

/* One replica, 3 steps, 2 layers, 4 experts in 2 ep blocks of 2; [step][layer][expert].
 *   layer 0: prefill [4 2 1 1] ratio 4/2 = 2, blocks [6 2] 6/4 = 1.5
 *            step 1  [1 1 0 0] ratio 1/0.5 = 2, blocks [2 0] 2
 *            step 2  [0 1 1 0] ratio 2,         blocks [1 1] 1
 *   layer 1: prefill [2 2 2 2] ratio 1,         blocks [4 4] 1
 *            step 1  [0 0 1 1] ratio 2,         blocks [0 2] 2
 *            step 2  nothing routed: skipped */
static int32_t LOAD[3][2][4] = {
    {{4, 2, 1, 1}, {2, 2, 2, 2}},
    {{1, 1, 0, 0}, {0, 0, 1, 1}},
    {{0, 1, 1, 0}, {0, 0, 0, 0}},
};

static moe_load sample_load(int steps_run) {
    return (moe_load){.replicas = 1, .steps = 3, .layers = 2, .experts = 4, .top_k = 2, .ep = 2,
                      .iteration = 0, .steps_run = steps_run, .load = &LOAD[0][0][0]};
}

static void assert_near(double a, double b) {
    if (fabs(a - b) > 1e-12) fail_msg("%.15g != %.15g", a, b);
}

static void test_prefill(void **state) {
    (void)state;
    moe_load l = sample_load(3);
    moe_imbalance m;
    moe_imbalance_compute(&l, MOE_PREFILL, 0, &m);
    assert_int_equal(m.samples, 1);
    assert_near(m.ratio_mean, 2.0);
    assert_near(m.ratio_max, 2.0);
    assert_near(m.block_ratio_mean, 1.5);
    assert_int_equal(m.rows, 8);
    assert_int_equal(m.hottest_expert, 0);
    assert_near(m.hottest_share, 0.5);
    assert_int_equal(m.hottest_block, 0);

    moe_imbalance_compute(&l, MOE_PREFILL, -1, &m); /* every layer: (2 + 1) / 2 */
    assert_int_equal(m.samples, 2);
    assert_near(m.ratio_mean, 1.5);
    assert_near(m.ratio_max, 2.0);
    assert_near(m.block_ratio_mean, 1.25);
    assert_int_equal(m.rows, 16);
    assert_int_equal(m.hottest_layer, 0);
    assert_int_equal(m.hottest_expert, 0);
    assert_int_equal(moe_worst_layer(&l, MOE_PREFILL), 0);
}

static void test_decode(void **state) {
    (void)state;
    moe_load l = sample_load(3);
    moe_imbalance m;
    moe_imbalance_compute(&l, MOE_DECODE, 0, &m); /* totals [1 2 1 0] */
    assert_int_equal(m.samples, 2);
    assert_near(m.ratio_mean, 2.0);
    assert_near(m.block_ratio_mean, 1.5);
    assert_int_equal(m.hottest_expert, 1);
    assert_near(m.hottest_share, 0.5);

    moe_imbalance_compute(&l, MOE_DECODE, 1, &m); /* step 2 routed nothing: one sample */
    assert_int_equal(m.samples, 1);
    assert_near(m.block_ratio_mean, 2.0);
    assert_int_equal(m.hottest_expert, 2); /* a tie goes to the lower expert */
    assert_int_equal(m.hottest_block, 1);

    moe_imbalance_compute(&l, MOE_DECODE, -1, &m);
    assert_int_equal(m.samples, 3);
    assert_near(m.ratio_mean, 2.0);
    assert_int_equal(m.rows, 6);
    assert_int_equal(m.hottest_layer, 0);
    assert_int_equal(m.hottest_expert, 1);

    l.steps_run = 2; /* a generation that stopped after step 1: step 2 is not read */
    moe_imbalance_compute(&l, MOE_DECODE, 0, &m);
    assert_int_equal(m.samples, 1);
    assert_near(m.block_ratio_mean, 2.0);
}

static void test_nothing_routed(void **state) {
    (void)state;
    moe_load l = sample_load(1); /* prefill only: no decode step ran */
    moe_imbalance m;
    moe_imbalance_compute(&l, MOE_DECODE, -1, &m);
    assert_int_equal(m.samples, 0);
    assert_true(isnan(m.ratio_mean) && isnan(m.hottest_share));
    assert_int_equal(m.hottest_expert, -1);
    assert_int_equal(moe_worst_layer(&l, MOE_DECODE), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_nothing_routed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
