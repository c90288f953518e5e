/* Mixture-of-experts routing on the host (src/engine/moe.c): ties go to the lower expert, the
 * weights follow norm_topk_prob, each expert's rows come in row order, and the shared expert's
 * gate is a sigmoid; the properties every factorization relies on to route alike. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine/moe.h"

static model_config moe_config(int experts, int top_k, int shared, int norm) {
    return (model_config){.experts = experts, .experts_top_k = top_k, .shared_mlp = shared,
                          .norm_topk_prob = norm};
}

/* Two rows; row 0 ties experts 1 and 3 at the top and 0 and 2 below: the lower index wins
 * each tie, so row 0 goes to 1 and 3 with k = 2 and to 1 alone with k = 1. */
static void test_ties_go_to_the_lower_expert(void **state) {
    (void)state;
    model_config cfg = moe_config(4, 1, 0, 1);
    moe_routing r;
    moe_routing_init(&r, &cfg, 2, 1, 1);
    const float logits[] = {0.5f, 2.0f, 0.5f, 2.0f, /* row 1: */ 3.0f, 1.0f, 1.0f, 3.0f};
    for (int i = 0; i < 8; i++)
        r.logits[i] = logits[i];
    assert_int_equal(moe_route(&r, 2), 2);
    assert_int_equal(r.offset[1] - r.offset[0], 1); /* row 1 to expert 0 */
    assert_int_equal(r.offset[2] - r.offset[1], 1); /* row 0 to expert 1 */
    assert_int_equal(r.idx[r.offset[0]], 1);
    assert_int_equal(r.idx[r.offset[1]], 0);
    assert_true(r.wts[0] == 1.0f && r.wts[1] == 1.0f); /* softmax over one: exactly 1 */
    moe_routing_free(&r);

    cfg = moe_config(4, 2, 0, 1);
    moe_routing_init(&r, &cfg, 2, 1, 1);
    for (int i = 0; i < 8; i++)
        r.logits[i] = logits[i];
    assert_int_equal(moe_route(&r, 2), 4);
    const int count[] = {1, 1, 0, 2}; /* row 0: 1 and 3; row 1: 0 and 3 */
    for (int x = 0; x < 4; x++)
        assert_int_equal(r.offset[x + 1] - r.offset[x], count[x]);
    assert_int_equal(r.idx[r.offset[3]], 0); /* expert 3's rows in row order */
    assert_int_equal(r.idx[r.offset[3] + 1], 1);
    for (int i = 0; i < 4; i++) /* equal logits: half each */
        assert_true(fabsf(r.wts[i] - 0.5f) < 1e-7f);
    moe_routing_free(&r);
}

/* norm_topk_prob false: the softmax over every expert, read at the chosen ones; true: those
 * renormalised to sum 1. The shared gate's sigmoid follows the routed entries. */
static void test_weights_and_shared_gate(void **state) {
    (void)state;
    const float logits[] = {1.0f, 0.0f, -1.0f, 2.0f, /* shared gate: */ 0.3f};
    const double e[] = {exp(1.0), exp(0.0), exp(-1.0), exp(2.0)};
    const double all = e[0] + e[1] + e[2] + e[3], top = e[3] + e[0];
    for (int norm = 0; norm < 2; norm++) {
        model_config cfg = moe_config(4, 2, 16, norm);
        moe_routing r;
        moe_routing_init(&r, &cfg, 1, 1, 1);
        for (int i = 0; i < 5; i++)
            r.logits[i] = logits[i];
        assert_int_equal(moe_route(&r, 1), 3);
        const double sum = norm ? top : all;
        assert_int_equal(r.idx[r.offset[0]], 0); /* experts 0 and 3 */
        assert_true(fabs(r.wts[r.offset[0]] - e[0] / sum) < 1e-7);
        assert_true(fabs(r.wts[r.offset[3]] - e[3] / sum) < 1e-7);
        assert_int_equal(r.idx[2], 0); /* the shared expert serves the row */
        assert_true(fabs(r.wts[2] - 1 / (1 + exp(-0.3))) < 1e-7);
        moe_routing_free(&r);
    }
}

/* A NaN logit is never chosen over a number, whatever its index. */
static void test_nan_logit_is_not_chosen(void **state) {
    (void)state;
    model_config cfg = moe_config(3, 2, 0, 1);
    moe_routing r;
    moe_routing_init(&r, &cfg, 1, 1, 1);
    r.logits[0] = NAN, r.logits[1] = -5.0f, r.logits[2] = 1.0f;
    moe_route(&r, 1);
    assert_int_equal(r.offset[1] - r.offset[0], 0);
    moe_routing_free(&r);
}

/* The load record: each route adds its rows per expert at (step, layer), micro-batches of one
 * step sum, the shared expert is not counted, a step outside the record is ignored, and
 * clearing zeroes it. Row 0 goes to experts 1 and 3, row 1 to 0 and 3 (as above). */
static void test_load_record(void **state) {
    (void)state;
    model_config cfg = moe_config(4, 2, 16, 1);
    moe_routing r;
    moe_routing_init(&r, &cfg, 2, 3, 2);
    assert_int_equal(r.load_steps, 3);
    assert_int_equal(r.load_layers, 2);
    const float logits[] = {0.5f, 2.0f, 0.5f, 2.0f, 0.0f, 3.0f, 1.0f, 1.0f, 3.0f, 0.0f};
    for (int i = 0; i < 10; i++)
        r.logits[i] = logits[i];
    moe_route(&r, 2);
    moe_routing_load_add(&r, 1, 1);
    moe_route(&r, 1); /* a second micro-batch of the same step: row 0 alone */
    moe_routing_load_add(&r, 1, 1);
    moe_routing_load_add(&r, 3, 0); /* past the record: ignored */
    const int32_t *row = r.load + (1 * 2 + 1) * 4;
    const int32_t want[] = {1, 2, 0, 3};
    for (int x = 0; x < 4; x++)
        assert_int_equal(row[x], want[x]);
    long total = 0;
    for (int i = 0; i < 3 * 2 * 4; i++)
        total += r.load[i];
    assert_int_equal(total, 6); /* 3 rows x top-2: the shared expert is not counted */
    moe_routing_load_clear(&r);
    for (int i = 0; i < 3 * 2 * 4; i++)
        assert_int_equal(r.load[i], 0);
    moe_routing_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ties_go_to_the_lower_expert),
        cmocka_unit_test(test_weights_and_shared_gate),
        cmocka_unit_test(test_nan_logit_is_not_chosen),
        cmocka_unit_test(test_load_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
