/* The mixture-of-experts MLP's FLOPs and bytes (src/metrics/phase_cost.c, moe_cost) against
 * hand counts: the experts a step reads under uniform routing (k of E at one row, all E for many
 * rows), the replicated fp32 router, the shared expert, and Mixtral 8x7B's decode MLP against a
 * dense model of the same attention. Each expected value is arithmetic from the shape alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>

#include "metrics/phase_cost.h"

/* A Mixtral of the given shape: top 2 of `experts` experts of width `mlp`, renormalised. */
static model_config mixtral(int layers, int heads, int kv_heads, int embd, int mlp, int experts,
                            int vocab) {
    return (model_config){.layers = layers,
                          .heads = heads,
                          .kv_heads = kv_heads,
                          .embd = embd,
                          .mlp = mlp,
                          .vocab = vocab,
                          .ctx = 32768,
                          .norm = NORM_PRE,
                          .arch = ARCH_MIXTRAL,
                          .experts = experts,
                          .experts_top_k = 2,
                          .norm_topk_prob = 1};
}

/* A tiny Mixtral: C = 32, 4 query heads over 2 kv heads, each expert's mlp M = 16, E = 4
 * experts, top k = 2, 2 layers. */
static model_config tiny_mixtral(void) { return mixtral(2, 4, 2, 32, 16, 4, 64); }

static phase_step step(int seqs, int new_positions, int past) {
    return (phase_step){.tp = 1,
                        .pp = 1,
                        .weight_dtype = PRECISION_FP32,
                        .kv_cache = KV_CONTIGUOUS,
                        .kv_block = 16,
                        .seqs = seqs,
                        .new_positions = new_positions,
                        .past_positions = past};
}

static phase_cost mlp_cost(const model_config *cfg, const phase_step *s) {
    phase_cost c;
    phase_cost_compute(cfg, s, PHASE_MLP_GEMM, &c);
    assert_true(c.bytes == c.weight_bytes + c.kv_bytes + c.act_bytes);
    assert_true(c.kv_bytes == 0);
    return c;
}

/* E (1 - (1 - k/E)^rows) experts touched, rows k / touched rows each. */
static void test_expected_experts(void **state) {
    (void)state;
    model_config cfg = tiny_mixtral();
    cfg.experts = 8;
    phase_moe_load l = phase_moe_load_expect(&cfg, 1, 1);
    assert_true(l.touched == 2 && l.rows_per_expert == 1); /* one row: its k experts */
    l = phase_moe_load_expect(&cfg, 2, 1); /* 8 (1 - 0.75^2) = 3.5; 4 routed rows over them */
    assert_true(l.touched == 3.5);
    assert_true(l.rows_per_expert == 4 / 3.5);
    l = phase_moe_load_expect(&cfg, 4096, 1); /* a prefill: every expert, 1024 rows each */
    assert_true(fabs(l.touched - 8) < 1e-9);
    assert_true(fabs(l.rows_per_expert - 1024) < 1e-6);
    l = phase_moe_load_expect(&cfg, 0, 1);
    assert_true(l.touched == 0 && l.rows_per_expert == 0);
    cfg.experts = 0; /* dense */
    l = phase_moe_load_expect(&cfg, 4, 1);
    assert_true(l.touched == 0 && l.rows_per_expert == 0);
}

/* One expert's matrices per layer: gate|up (2M x C) and down (C x M), fp32. */
static const double EXPERT_BYTES = (2 * 16 * 32 + 32 * 16) * 4.0; /* 6144 */
static const double ROUTER_BYTES = 4 * 32 * 4.0;                  /* (E, C) fp32: 512 */

/* Batch 1 decode: one row, routed to k = 2 of 4 experts, whose weights alone are read. */
static void test_decode_one_row(void **state) {
    (void)state;
    const model_config cfg = tiny_mixtral();
    const phase_step s = step(1, 1, 7);
    const double L = 2, routed = 2; /* rows x k */
    const phase_cost c = mlp_cost(&cfg, &s);
    /* router 2 x 1 x 32 x 4; per routed row gate|up 2 x 32 x 32, SwiGLU 16 x 5, down
     * 2 x 16 x 32, the weighted add 2 x 32 */
    assert_true(c.flops ==
                L * (2 * 32 * 4 + routed * (2 * 32 * 32 + 16 * 5 + 2 * 16 * 32 + 2 * 32)));
    /* the router's fp32 rows and 2 of the 4 experts: k / E of all expert weights */
    assert_true(c.weight_bytes == L * (ROUTER_BYTES + 2 * EXPERT_BYTES));
    assert_true(c.weight_bytes - L * ROUTER_BYTES == L * 4 * EXPERT_BYTES * 2 / 4);
    /* router: the row in, 4 logits out; o zeroed; gather: an id, the row read and written;
     * gate|up: in 32, out 32; SwiGLU: 3 x 16; down: in 16, out 32; scatter: an id, a weight,
     * the expert's row and o's row read, o's written */
    const double act = (32 + 4) * 4 + 32 * 4 +
                       routed * ((4 + 2 * 32 * 4) + (32 + 32) * 4 + 3 * 16 * 4 + (16 + 32) * 4 +
                                 (4 + 4 + 3 * 32 * 4));
    assert_true(c.act_bytes == L * act);
}

/* A prefill of 4 x 64 rows reaches every expert: all 4 experts' weights, once each. */
static void test_prefill_all_experts(void **state) {
    (void)state;
    const model_config cfg = tiny_mixtral();
    const phase_step s = step(4, 64, 0);
    const double L = 2, rows = 256, routed = 512;
    const phase_cost c = mlp_cost(&cfg, &s);
    assert_true(c.flops == L * (2 * rows * 32 * 4 +
                                routed * (2 * 32 * 32 + 16 * 5 + 2 * 16 * 32 + 2 * 32)));
    assert_true(c.weight_bytes == L * (ROUTER_BYTES + 4 * EXPERT_BYTES));
}

/* TP splits each expert's columns; the router stays whole on every rank. bf16 experts. */
static void test_tp2_router_replicated(void **state) {
    (void)state;
    const model_config cfg = tiny_mixtral();
    phase_step s = step(1, 1, 7);
    s.tp = 2, s.tp_rank = 1, s.weight_dtype = PRECISION_BF16;
    const double L = 2, routed = 2, M = 8; /* this rank's 8 of each expert's 16 columns */
    const phase_cost c = mlp_cost(&cfg, &s);
    assert_true(c.flops ==
                L * (2 * 32 * 4 + routed * (2 * 32 * 2 * M + M * 5 + 2 * M * 32 + 2 * 32)));
    assert_true(c.weight_bytes == L * (ROUTER_BYTES + 2 * (2 * M * 32 + 32 * M) * 2));
}

/* Qwen2-MoE: the router's E rows plus the shared expert's gate row, and the shared expert (a
 * dense SwiGLU of width 24) on every row, added back weighted. */
static void test_shared_expert(void **state) {
    (void)state;
    model_config cfg = tiny_mixtral();
    cfg.arch = ARCH_QWEN2_MOE, cfg.shared_mlp = 24, cfg.norm_topk_prob = 0;
    const phase_step s = step(1, 1, 7);
    const double L = 2, routed = 2, S = 24;
    const phase_cost c = mlp_cost(&cfg, &s);
    const double per_row = 2 * 32 * 32 + 16 * 5 + 2 * 16 * 32 + 2 * 32;
    const double shared = 2 * 32 * 2 * S + S * 5 + 2 * S * 32 + 2 * 32;
    assert_true(c.flops == L * (2 * 32 * 5 + routed * per_row + shared));
    assert_true(c.weight_bytes ==
                L * (5 * 32 * 4 + 2 * EXPERT_BYTES + (2 * S * 32 + 32 * S) * 4));
}

/* Mixtral 8x7B (C 4096, each expert's mlp 14336, 8 experts, top 2) against a dense Llama of the
 * same attention and one expert's MLP: a batch-1 decode reads 2 of the 8 experts, twice the
 * dense MLP's weights (plus the router), a quarter of all the experts; attention is the same. */
static void test_mixtral_8x7b_against_dense(void **state) {
    (void)state;
    const model_config moe = mixtral(32, 32, 8, 4096, 14336, 8, 32000);
    model_config dense = moe;
    dense.arch = ARCH_LLAMA, dense.experts = dense.experts_top_k = dense.norm_topk_prob = 0;
    phase_step s = step(1, 1, 511);
    s.weight_dtype = PRECISION_BF16;
    const double L = 32, router = 8 * 4096 * 4.0, expert = 3.0 * 4096 * 14336 * 2;
    const phase_cost m = mlp_cost(&moe, &s), d = mlp_cost(&dense, &s);
    assert_true(d.weight_bytes == L * expert);
    assert_true(m.weight_bytes == L * (router + 2 * expert));
    assert_true(m.weight_bytes - L * router == 2.0 / 8 * (L * 8 * expert));
    phase_cost ma, da;
    phase_cost_compute(&moe, &s, PHASE_ATTENTION, &ma);
    phase_cost_compute(&dense, &s, PHASE_ATTENTION, &da);
    assert_true(ma.flops == da.flops && ma.bytes == da.bytes);
    /* a batch of 32 rows: 8 (1 - 0.75^32) = 7.992 experts expected, nearly all */
    s.seqs = 32;
    const phase_cost m32 = mlp_cost(&moe, &s);
    const double touched = 8 * (1 - pow(0.75, 32));
    assert_true(fabs(m32.weight_bytes - L * (router + touched * expert)) < 1e-6 * m32.weight_bytes);
}

/* The expected maximum of n standard normals: 1/sqrt(pi) for 2 (exact), the table to 8, the
 * quadrature past it against values computed apart (numpy, a 200001-point rule on [-10, 10]:
 * 9: 1.48501, 16: 1.76599, 32: 2.06967). */
static void test_expected_max_normal(void **state) {
    (void)state;
    assert_true(phase_expected_max_normal(1) == 0 && phase_expected_max_normal(0) == 0);
    assert_true(fabs(phase_expected_max_normal(2) - 1 / sqrt(M_PI)) < 1e-7);
    assert_true(fabs(phase_expected_max_normal(9) - 1.48501) < 1e-4);
    assert_true(fabs(phase_expected_max_normal(16) - 1.76599) < 1e-4);
    assert_true(fabs(phase_expected_max_normal(32) - 2.06967) < 1e-4);
}

/* Expert blocks (parallel.ep): the most loaded block's experts and rows, mean + z sd, by hand.
 * E = 8, k = 2, ep = 2 (blocks of n = 4). One row: a block's rows have mean 2 x 4/8 = 1 and
 * variance 2 (1/2)(1/2)(6/7) = 3/7, so 1 + 0.5641896 sqrt(3/7); its experts, mean 4 x 0.25 = 1
 * and sd sqrt(4 x 0.25 x 0.75), would be 1.4886, capped at the rows. A prefill of 4096 rows:
 * all 4 experts, rows 4096 + z sqrt(4096 x 3/7). ep 1 keeps the mean. */
static void test_expected_experts_ep(void **state) {
    (void)state;
    model_config cfg = tiny_mixtral();
    cfg.experts = 8;
    const double z2 = 0.5641896;
    phase_moe_load l = phase_moe_load_expect(&cfg, 1, 2);
    const double rows1 = 1 + z2 * sqrt(3.0 / 7);
    assert_true(fabs(l.routed - rows1) < 1e-6 && fabs(l.touched - rows1) < 1e-6);
    assert_true(fabs(l.rows_per_expert - 1) < 1e-12);
    l = phase_moe_load_expect(&cfg, 4096, 2);
    assert_true(fabs(l.touched - 4) < 1e-9);
    assert_true(fabs(l.routed - (4096 + z2 * sqrt(4096 * 3.0 / 7))) < 1e-6);
    /* four rows: experts 4 p + z sqrt(4 p (1 - p)), p = 1 - 0.75^4; rows 4 + z sqrt(12/7) */
    l = phase_moe_load_expect(&cfg, 4, 2);
    const double p = 1 - pow(0.75, 4);
    assert_true(fabs(l.touched - (4 * p + z2 * sqrt(4 * p * (1 - p)))) < 1e-6);
    assert_true(fabs(l.routed - (4 + z2 * sqrt(12.0 / 7))) < 1e-6);
    /* the busier block reads more than half the mean over all 8: the price of the blocks */
    const phase_moe_load all = phase_moe_load_expect(&cfg, 4, 1);
    assert_true(l.touched > all.touched / 2 && l.routed > all.routed / 2);
    /* one expert per block (ep 8): a row's 2 choices put at most 1 in a block */
    l = phase_moe_load_expect(&cfg, 1, 8);
    assert_true(l.routed <= 1 && l.touched <= l.routed);
}

/* tp 2 with ep 2: each block holds 2 of the 4 experts whole (16 columns), and the rank prices
 * its block's expected maximum load; memory-wise the same bytes per expert as full width. */
static void test_tp2_ep2_block(void **state) {
    (void)state;
    const model_config cfg = tiny_mixtral();
    phase_step s = step(4, 64, 0); /* a prefill: every expert of the block is read */
    s.tp = 2, s.tp_rank = 1, s.ep = 2;
    const phase_cost c = mlp_cost(&cfg, &s);
    const double L = 2;
    assert_true(c.weight_bytes == L * (ROUTER_BYTES + 2 * EXPERT_BYTES));
    /* rows: 256 x 2 x 1/2 mean, variance 256 x 2 (1/2)(1/2)(2/3) */
    const phase_moe_load l = phase_moe_load_expect(&cfg, 256, 2);
    assert_true(fabs(l.routed - (256 + 0.5641896 * sqrt(256 * 2 * 0.25 * 2.0 / 3))) < 1e-6);
    assert_true(c.flops == L * (2 * 256 * 32 * 4 + l.routed * (2 * 32 * 32 + 16 * 5 +
                                                               2 * 16 * 32 + 2 * 32)));
}

/* The expected maximum of normals of unequal means and sds: two, by Clark's closed form
 * E max(X, Y) = m1 F(a) + m2 F(-a) + t f(a), t = sqrt(s1^2 + s2^2), a = (m1 - m2) / t; equal
 * ones, as mean + sd phase_expected_max_normal(n); constants, as their maximum. */
static void test_expected_max_normals(void **state) {
    (void)state;
    const double mean[] = {3.0, 1.0}, sd[] = {1.0, 2.0};
    const double t = sqrt(5.0), a = 2 / t;
    const double clark = 3 * 0.5 * erfc(-a / sqrt(2.0)) + 1 * 0.5 * erfc(a / sqrt(2.0)) +
                         t * exp(-a * a / 2) / sqrt(2 * M_PI);
    assert_true(fabs(phase_expected_max_normals(mean, sd, 2) - clark) < 1e-4);
    const double same_mean[] = {5, 5, 5, 5}, same_sd[] = {2, 2, 2, 2};
    assert_true(fabs(phase_expected_max_normals(same_mean, same_sd, 4) -
                     (5 + 2 * phase_expected_max_normal(4))) < 1e-4);
    const double fixed[] = {2, 7, 4}, none[] = {0, 0, 0};
    assert_true(phase_expected_max_normals(fixed, none, 3) == 7);
    assert_true(phase_expected_max_normals(fixed, none, 0) == 0);
}

/* Routing as a run recorded it (phase_moe_load_shares), by hand. E = 4, k = 1, one expert
 * takes 70% of the rows: at 100 rows it is reached almost surely, the others each with
 * 1 - 0.9^100; with ep 2 the block holding it gets 80 rows (mean 100 (0.7 + 0.1), sd sqrt(30))
 * against the other's 20 (sd sqrt(18)), far apart, so the step waits for 80, not the uniform
 * 50 + z sd. Uniform shares give the uniform expectation of the experts touched exactly, and
 * the block maxima as phase_moe_load_expect's mean + z sd. */
static void test_recorded_shares(void **state) {
    (void)state;
    model_config cfg = tiny_mixtral();
    cfg.experts_top_k = 1;
    const float skew[] = {0.7f, 0.1f, 0.1f, 0.1f};
    phase_moe_load l = phase_moe_load_shares(&cfg, skew, 100, 1);
    const double q0 = (double)0.7f, q1 = (double)0.1f;
    assert_true(fabs(l.touched - ((1 - pow(1 - q0, 100)) + 3 * (1 - pow(1 - q1, 100)))) < 1e-9);
    assert_true(l.routed == 100);
    l = phase_moe_load_shares(&cfg, skew, 100, 2);
    assert_true(fabs(l.routed - 100 * (q0 + q1)) < 1e-3);
    assert_true(fabs(l.touched - 2) < 1e-3); /* both experts of the busy block, all but surely */
    assert_true(l.routed > phase_moe_load_expect(&cfg, 100, 2).routed + 20);

    cfg = tiny_mixtral();
    cfg.experts = 8; /* k = 2 */
    const float uniform[] = {0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f};
    for (int rows = 1; rows <= 4096; rows *= 8) {
        const phase_moe_load u = phase_moe_load_expect(&cfg, rows, 1);
        l = phase_moe_load_shares(&cfg, uniform, rows, 1);
        assert_true(fabs(l.touched - u.touched) < 1e-9 * u.touched && l.routed == u.routed);
        const phase_moe_load u2 = phase_moe_load_expect(&cfg, rows, 2);
        l = phase_moe_load_shares(&cfg, uniform, rows, 2);
        /* the same model, by quadrature instead of the z table */
        assert_true(fabs(l.routed - u2.routed) < 1e-4 * u2.routed);
        assert_true(fabs(l.touched - u2.touched) < 1e-4 * u2.touched);
    }
}

/* A step that carries recorded shares prices each stage's layers by their own routing, summed
 * as their mean: layer 0 sends every row to expert 0 (one expert touched at any rows), layer 1
 * spreads them evenly; a stage of both reads 1 + (4 (1 - (3/4)^16)) / 2 experts' weights per
 * layer on average, and a pipeline stage of layer 1 alone reads layer 1's. */
static void test_stage_shares(void **state) {
    (void)state;
    model_config cfg = tiny_mixtral(); /* 2 layers, E = 4 */
    cfg.experts_top_k = 1;
    const float share[] = {1, 0, 0, 0, 0.25f, 0.25f, 0.25f, 0.25f};
    phase_step s = step(16, 1, 32);
    s.expert_share = share;
    shard_geom g;
    phase_step_geom(&cfg, &s, &g);
    const double spread = 4 * (1 - pow(0.75, 16));
    phase_moe_load l = phase_moe_stage_load(&cfg, &s, &g, 16);
    assert_true(fabs(l.touched - (1 + spread) / 2) < 1e-9);
    assert_true(fabs(l.routed - 16) < 1e-12);
    const phase_cost recorded = mlp_cost(&cfg, &s);
    s.expert_share = NULL; /* uniform: both layers spread */
    const phase_cost uniform = mlp_cost(&cfg, &s);
    assert_true(recorded.weight_bytes < uniform.weight_bytes);
    s.expert_share = share, s.pp = 2, s.pp_rank = 1;
    phase_step_geom(&cfg, &s, &g);
    l = phase_moe_stage_load(&cfg, &s, &g, 16);
    assert_true(fabs(l.touched - spread) < 1e-9);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expected_experts),
        cmocka_unit_test(test_expected_max_normals),
        cmocka_unit_test(test_recorded_shares),
        cmocka_unit_test(test_stage_shares),
        cmocka_unit_test(test_decode_one_row),
        cmocka_unit_test(test_prefill_all_experts),
        cmocka_unit_test(test_tp2_router_replicated),
        cmocka_unit_test(test_shared_expert),
        cmocka_unit_test(test_mixtral_8x7b_against_dense),
        cmocka_unit_test(test_expected_max_normal),
        cmocka_unit_test(test_expected_experts_ep),
        cmocka_unit_test(test_tp2_ep2_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
