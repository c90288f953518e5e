/* The goodput model (src/analysis/plan_goodput.c) on hand-computed cases: tripar's serve loop
 * simulated on a few arrivals worked through by hand, the loop's bound, a rate far below
 * capacity (goodput = rate), a rate far above it (goodput within the capacity), and the
 * per-generation costs read from the cost model at the sizes it predicts, linear between. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/serve.h"
#include "analysis/plan_goodput.h"

static void assert_close(double got, double want) {
    if (fabs(got - want) > 1e-12 + 1e-9 * fabs(want)) fail_msg("got %.12g, want %.12g", got, want);
}

/* Batch 2, 6 new tokens: one request takes 0.1 s to its first token and 0.5 s in all (TPOT
 * 0.4 / 5 = 0.08 s), two take 0.15 and 0.6 s (TPOT 0.09 s). */
static const double TTFT2[] = {0, 0.1, 0.15}, E2E2[] = {0, 0.5, 0.6};
static const plan_serve_costs COSTS2 = {2, 6, TTFT2, E2E2};

/* Arrivals 0, 0.1, 0.2, 0.3 and 2.0. By hand: at 0 the first alone (TTFT 0.1, ends 0.5); at
 * 0.5 three wait and the two oldest go (TTFT 0.5 + 0.15 - 0.1 = 0.55 and 0.45, ends 1.1); at
 * 1.1 the fourth (TTFT 1.1 + 0.1 - 0.3 = 0.9, ends 1.6); idle until 2.0, then the fifth (0.1).
 * Within TTFT 0.5 s and TPOT 0.085 s: the first and the fifth (the second batch's TPOT 0.09
 * misses). */
static void test_simulate_by_hand(void **state) {
    (void)state;
    const double arrival[] = {0, 0.1, 0.2, 0.3, 2.0};
    const plan_load load = {.rate = 2.5, .duration = 10, .ttft_slo = 0.5, .tpot_slo = 0.085};
    plan_served g;
    plan_serve_simulate(&COSTS2, arrival, 5, 20, &load, &g);
    assert_int_equal(g.arrived, 5);
    assert_int_equal(g.served, 5);
    assert_int_equal(g.batches, 4);
    assert_int_equal(g.met, 2);
    assert_close(g.attainment, 0.4);
    assert_close(g.goodput, 2.5 * 2 / 5);
    assert_close(g.mean_batch, 5.0 / 4);
    assert_close(g.capacity, 2 / 0.6);
    /* TTFTs 0.1 0.1 0.45 0.55 0.9: p50 0.45, p90 at rank 3.6 = 0.55 + 0.6 x 0.35 */
    assert_close(g.ttft_p50, 0.45);
    assert_close(g.ttft_p90, 0.55 + 0.6 * 0.35);
    /* TPOTs 0.08 0.09 0.09 0.08 0.08 */
    assert_close(g.tpot_p50, 0.08);
    assert_close(g.tpot_p90, 0.09);
}

/* The loop starts nothing at or after its bound: with the bound at 1.0 the batches at 0 and
 * 0.5 run, the one that would start at 1.1 does not, and its requests are unserved. */
static void test_simulate_bound(void **state) {
    (void)state;
    const double arrival[] = {0, 0.1, 0.2, 0.3, 2.0};
    const plan_load load = {.rate = 2.5, .duration = 0.5, .ttft_slo = 1, .tpot_slo = 1};
    plan_served g;
    plan_serve_simulate(&COSTS2, arrival, 5, 1.0, &load, &g);
    assert_int_equal(g.served, 3);
    assert_int_equal(g.batches, 2);
    assert_int_equal(g.met, 3);
    assert_close(g.goodput, 2.5 * 3 / 5);
}

/* Batch 4, 16 new tokens, a generation of n requests 0.1 + 0.02 n s to its first token and
 * 0.3 + 0.05 n s in all (at most 0.5 s). */
static double ttft4[5], e2e4[5];
static plan_serve_costs costs4(void) {
    for (int n = 1; n <= 4; n++)
        ttft4[n] = 0.1 + 0.02 * n, e2e4[n] = 0.3 + 0.05 * n;
    return (plan_serve_costs){4, 16, ttft4, e2e4};
}

static plan_served stream(const plan_serve_costs *k, const plan_load *load) {
    const long max = serve_arrivals_max(load->rate, load->duration);
    double *arrival = calloc((size_t)max, sizeof *arrival);
    const long n = serve_arrivals(load->rate, load->duration, load->seed, arrival, max);
    plan_served g;
    plan_serve_simulate(k, arrival, n, 2 * load->duration, load, &g);
    free(arrival);
    return g;
}

/* Far below capacity (0.1 requests/s against 8): no five requests of this stream arrive within
 * 0.5 s, so each waits at most the one generation running when it came (0.5 s) and its own
 * takes at most 0.18 s to the first token, under the 1 s target; its TPOT is at most
 * 0.32 / 15 s, under 0.05 s. So every one meets both: goodput = the rate, exactly. */
static void test_light_load(void **state) {
    (void)state;
    const plan_serve_costs k = costs4();
    const plan_load load = {.rate = 0.1, .duration = 2000, .seed = 1, .ttft_slo = 1, .tpot_slo = 0.05};
    plan_served g = stream(&k, &load);
    assert_true(g.arrived > 100);
    assert_int_equal(g.served, g.arrived);
    assert_int_equal(g.met, g.arrived);
    assert_close(g.goodput, 0.1);
    assert_close(g.capacity, 4 / 0.5);
}

/* Far above capacity (100 requests/s against 8): the loop serves at most 8 a second for the
 * 2 x duration it runs, most requests are unserved, and the goodput stays within the capacity
 * (only the first requests of the backlog wait less than the target). */
static void test_overload(void **state) {
    (void)state;
    const plan_serve_costs k = costs4();
    const plan_load load = {.rate = 100, .duration = 20, .seed = 1, .ttft_slo = 1, .tpot_slo = 0.05};
    plan_served g = stream(&k, &load);
    assert_true(g.arrived > 1000);
    assert_true(g.served <= 4 * (2 * 20 / 0.5 + 1));
    assert_true(g.served < g.arrived);
    assert_true(g.mean_batch > 3.9); /* full batches, but the first */
    assert_true(g.goodput <= g.capacity);
    assert_true(g.met < 20); /* within 1 s of a backlog growing at 92 a second */
    assert_true(g.ttft_p50 > 10);
}

/* A one-rank GPT-2 124M on a made-up device: the costs at 1..8 and 16 are the cost model's own
 * predictions for that many requests, 9..15 linear between 8 and 16, and batch 20's last entry
 * (past 16) its own; a dp=2 strategy costs one request as one on each replica. */
static void test_costs_fill(void **state) {
    (void)state;
    plan_cluster c = {.nodes = 1, .devices_per_node = 2, .device_memory = 16e9,
                      .peak_flops = 100e12, .mem_bw = 1e12};
    c.tier[PLAN_TIER_INTRA] = (plan_tier){.present = 1, .alpha = 1e-6, .beta = 100e9, .efficiency = 1};
    const model_config cfg = {.layers = 12, .heads = 12, .embd = 768, .vocab = 50257, .ctx = 1024,
                              .mlp = 3072, .norm = NORM_PRE, .arch = ARCH_GPT2, .kv_heads = 12,
                              .tie_embeddings = 1};
    plan_model m = {.cfg = cfg, .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 20, .prompt = 32, .new_tokens = 9};
    plan_rates r;
    plan_rates_default(&r);
    plan_strategy s = {.dp = 1, .tp = 1, .pp = 1, .microbatches = 1};
    double ttft[21], e2e[21];
    plan_serve_costs_fill(&m, &w, &c, &r, &s, ttft, e2e);
    plan_prediction p;
    const int exact[] = {1, 2, 5, 8, 16, 20};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        plan_workload wn = w;
        wn.batch = exact[i];
        plan_predict(&m, &wn, &c, &r, &s, &p);
        assert_close(ttft[exact[i]], p.ttft);
        assert_close(e2e[exact[i]], p.e2e);
    }
    assert_close(ttft[12], ttft[8] + 0.5 * (ttft[16] - ttft[8]));
    assert_close(e2e[10], e2e[8] + 0.25 * (e2e[16] - e2e[8]));
    assert_true(e2e[20] > e2e[1]);

    s.dp = 2;
    plan_workload w4 = {.batch = 4, .prompt = 32, .new_tokens = 9};
    plan_serve_costs_fill(&m, &w4, &c, &r, &s, ttft, e2e);
    w4.batch = 2;
    plan_predict(&m, &w4, &c, &r, &s, &p);
    assert_close(e2e[1], p.e2e);
    assert_close(e2e[2], p.e2e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simulate_by_hand), cmocka_unit_test(test_simulate_bound),
        cmocka_unit_test(test_light_load),       cmocka_unit_test(test_overload),
        cmocka_unit_test(test_costs_fill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
