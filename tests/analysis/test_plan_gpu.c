/* The planner's GPU efficiency models (src/analysis/plan_gpu.c) on hand-computed cases: a GEMM
 * that fills exactly one wave against one that spills a tile into a second, tile quantization
 * of an M off the tile, split-K on a small grid, flash-attention's rise and wave fill, split-KV
 * decode's SM fill, tripar's kernels per layer, and a calibration's precedence over them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "analysis/plan_gpu.h"

static void assert_close(double got, double want) {
    if (fabs(got - want) > 1e-12 + 1e-9 * fabs(want)) fail_msg("got %.12g, want %.12g", got, want);
}

/* An H100-like device: 132 SMs, 128 x 128 tiles, ceiling 0.75. */
static plan_gpu_efficiency h100(int split_k_max) {
    return (plan_gpu_efficiency){.given = 1,
                                 .sms = 132,
                                 .tile_m = 128,
                                 .tile_n = 128,
                                 .split_k_max = split_k_max,
                                 .gemm_ceiling = 0.75,
                                 .fp32_fraction = 0.0625,
                                 .attn_ceiling = 0.7,
                                 .attn_half_ctx = 256,
                                 .hbm_fraction = 0.85,
                                 .launch = 4.5e-6,
                                 .graph_launch = 1.5e-6};
}

/* A cluster of such GPUs, costed at 1e15 FLOP/s and 3e12 B/s. */
static plan_cluster gpu_node(void) {
    plan_cluster c;
    memset(&c, 0, sizeof c);
    c.gpu = h100(4);
    return c;
}
#define GPU_CEILINGS ((plan_ceilings){.flops = 1e15, .bw = 3e12, .share = 1})

/* A Llama of the given shape (pre-norm, no biases). */
static model_config llama(int layers, int heads, int kv_heads, int embd, int mlp, int ctx) {
    return (model_config){.layers = layers,
                          .heads = heads,
                          .kv_heads = kv_heads,
                          .embd = embd,
                          .mlp = mlp,
                          .vocab = 512,
                          .ctx = ctx,
                          .norm = NORM_PRE,
                          .arch = ARCH_LLAMA};
}

/* 12 x 11 = 132 tiles: one full wave at the ceiling. 7 x 19 = 133 tiles: the 133rd runs alone
 * in a second wave, so 264 tile-slots hold 133 tiles' work: 0.75 x 133 / 264, about half. */
static void test_gemm_one_wave_against_two(void **state) {
    (void)state;
    const plan_gpu_efficiency e = h100(4);
    const double one = plan_gpu_gemm_efficiency(&e, 12 * 128, 11 * 128, 4096);
    const double two = plan_gpu_gemm_efficiency(&e, 7 * 128, 19 * 128, 4096);
    assert_close(one, 0.75);
    assert_close(two, 0.75 * 133 / 264);
    assert_true(two / one > 0.5 && two / one < 0.51);
}

/* M = 64 on 128-row tiles: half of each tile is padding (132 tiles, one wave): 0.375. M = 129:
 * two tile rows of 132 tiles each, two waves: 0.75 x 129 / 256. */
static void test_gemm_tile_quantization(void **state) {
    (void)state;
    const plan_gpu_efficiency e = h100(4);
    assert_close(plan_gpu_gemm_efficiency(&e, 128, 132 * 128, 4096), 0.75);
    assert_close(plan_gpu_gemm_efficiency(&e, 64, 132 * 128, 4096), 0.375);
    assert_close(plan_gpu_gemm_efficiency(&e, 129, 132 * 128, 4096), 0.75 * 129 / 256);
}

/* 33 tiles leave 99 of 132 SMs idle: 0.75 x 33 / 132 without split-K; 4 splits of K = 4096 fill
 * one wave exactly (0.75); K = 512 allows only 2 splits of at least 256 (0.75 x 66 / 132). */
static void test_gemm_split_k(void **state) {
    (void)state;
    const plan_gpu_efficiency none = h100(1), four = h100(4);
    assert_close(plan_gpu_gemm_efficiency(&none, 128, 33 * 128, 4096), 0.75 * 33 / 132);
    assert_close(plan_gpu_gemm_efficiency(&four, 128, 33 * 128, 4096), 0.75);
    assert_close(plan_gpu_gemm_efficiency(&four, 128, 33 * 128, 512), 0.75 * 66 / 132);
}

/* Prefill attention: 0.7 x ctx / (ctx + 256) times the wave fill of (seq, head, 128 rows)
 * blocks. 33 heads x 4 row blocks of a 512-token prompt = 132 blocks: 0.7 x 512 / 768. 32
 * heads x 16 blocks of 2048 = 512 blocks in 4 waves of 132: 0.7 x 2048 / 2304 x 512 / 528. */
static void test_attention_prefill(void **state) {
    (void)state;
    const plan_gpu_efficiency e = h100(4);
    assert_close(plan_gpu_attention_efficiency(&e, 1, 33, 512, 512), 0.7 * 512 / 768);
    assert_close(plan_gpu_attention_efficiency(&e, 1, 32, 2048, 2048),
                 0.7 * 2048 / 2304 * 512 / 528);
    /* the same heads at a longer context reach more of the peak */
    assert_true(plan_gpu_attention_efficiency(&e, 1, 33, 512, 4096) >
                plan_gpu_attention_efficiency(&e, 1, 33, 512, 512));
}

/* Split-KV decode (kernels/cuda/attention.cu's rule): splits = min(ceil(2 x 132 / (seqs x kv)),
 * ceil(ctx / 64)), at least ceil(ctx / 4096). 32 kv heads at ctx 160: min(9, 3) = 3 splits, 96
 * blocks of 132 SMs. 8 kv heads at ctx 100: min(33, 2) = 2, 16 of 132. 8 at ctx 8192: 33
 * splits, 264 blocks, every SM busy. */
static void test_decode_fill(void **state) {
    (void)state;
    const plan_gpu_efficiency e = h100(4);
    assert_close(plan_gpu_decode_fill(&e, 1, 32, 160), 96.0 / 132);
    assert_close(plan_gpu_decode_fill(&e, 1, 8, 100), 16.0 / 132);
    assert_close(plan_gpu_decode_fill(&e, 1, 8, 8192), 1);
}

/* Llama, 2 layers, on one rank (forward.c with kernels/cuda): prefill of 128 rows in fp16 is,
 * per layer, qkv convert + GEMM (2), KV append + attention (2), o (2), gate|up (2) + SwiGLU + down
 * (2), and the norms 2 per layer + 1; decode is one GEMV per product and append + split +
 * combine. */
static void test_kernels_per_layer(void **state) {
    (void)state;
    const model_config cfg = llama(2, 8, 2, 128, 256, 256);
    phase_step s = {
        .tp = 1, .pp = 1, .weight_dtype = PRECISION_FP16, .seqs = 1, .new_positions = 128};
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_NORM), 5);
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_QKV_GEMM), 4);
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_ATTENTION), 4);
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_ATTN_OUT_GEMM), 4);
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_MLP_GEMM), 10);
    s.new_positions = 1, s.past_positions = 128;
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_QKV_GEMM), 2);
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_ATTENTION), 6);
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_MLP_GEMM), 6);
}

/* A one-layer phase by hand: a 7 x 19-tile GEMM product (M = 896 rows, in 4096, out 2432) in
 * fp16 on 1e15 FLOP/s: its FLOPs at 0.75 x 133 / 264, above its bytes at 0.85 of 3e12 B/s,
 * plus 2 launches. Decode attention's bytes at 0.85 x the SM fill, plus 3 launches (no graph). */
static void test_phase_time(void **state) {
    (void)state;
    plan_cluster c = gpu_node();
    const plan_ceilings k = GPU_CEILINGS;
    const model_config cfg = llama(1, 32, 8, 4096, 1216, 8192);
    plan_model m = {.cfg = cfg, .weight_dtype = PRECISION_FP16};
    phase_step s = {
        .tp = 1, .pp = 1, .weight_dtype = PRECISION_FP16, .seqs = 1, .new_positions = 896};
    phase_cost pc;
    phase_cost_compute(&cfg, &s, PHASE_MLP_GEMM, &pc);
    /* gate|up: out 2 x 1216 = 2432 (19 tiles) over 7 row tiles; down: out 4096 (32 tiles),
     * 224 tiles in 2 waves of 132 */
    const double up = 2.0 * 896 * 4096 * 2432 / (1e15 * 0.75 * 133 / 264);
    const double down = 2.0 * 896 * 1216 * 4096 / (1e15 * 0.75 * 896 * 4096 / (2 * 132 * 16384.0));
    int bound = -1;
    const double t = plan_gpu_phase_time(&c, &k, &m, &s, PHASE_MLP_GEMM, &pc, &bound);
    assert_true(up + down > pc.bytes / (0.85 * 3e12));
    assert_close(t, up + down + 5 * 4.5e-6);
    assert_int_equal(bound, 0);

    s.new_positions = 1, s.past_positions = 99; /* ctx 100: 2 splits x 8 kv heads */
    phase_cost_compute(&cfg, &s, PHASE_ATTENTION, &pc);
    const double fill = 16.0 / 132;
    assert_close(plan_gpu_phase_time(&c, &k, &m, &s, PHASE_ATTENTION, &pc, &bound),
                 pc.bytes / (0.85 * fill * 3e12) + 3 * 4.5e-6);
    assert_int_equal(bound, 1);
    m.cuda_graphs = 1; /* a replayed decode graph launches each kernel for less */
    assert_close(plan_gpu_phase_time(&c, &k, &m, &s, PHASE_ATTENTION, &pc, &bound),
                 pc.bytes / (0.85 * fill * 3e12) + 3 * 1.5e-6);
}

/* A mixture-of-experts layer (8 experts of mlp 8192, top 2, C 4096, fp16) by hand. A prefill
 * of 4096 rows reaches all 8 experts, 1024 rows each: an expert's gate|up (8 x 128 tiles) takes
 * 8 waves of 132 for 1024 tiles and its down (8 x 32 tiles) 2 waves for 256, both 0.75 x
 * 1024 / 1056; the router (out 8: 32 tiles padded from 8 columns to 128, 4 K splits) runs as
 * SGEMM at 1/16 of the peak. Launches: the router, the zeroing, and per expert a gather,
 * convert + GEMM twice, SwiGLU and a scatter-add: 2 + 8 x 7. At batch-1 decode the row's 2
 * experts are GEMVs that stream their weights: 2 + 2 x 5 launches. */
static void test_moe_phase_time(void **state) {
    (void)state;
    plan_cluster c = gpu_node();
    const plan_ceilings k = GPU_CEILINGS;
    model_config cfg = llama(1, 32, 8, 4096, 8192, 8192);
    cfg.arch = ARCH_MIXTRAL, cfg.experts = 8, cfg.experts_top_k = 2, cfg.norm_topk_prob = 1;
    plan_model m = {.cfg = cfg, .weight_dtype = PRECISION_FP16};
    phase_step s = {
        .tp = 1, .pp = 1, .weight_dtype = PRECISION_FP16, .seqs = 1, .new_positions = 4096};
    phase_cost pc;
    phase_cost_compute(&cfg, &s, PHASE_MLP_GEMM, &pc);
    const double expert_eff = 0.75 * 1024 / 1056;
    const double router = 2.0 * 4096 * 4096 * 8 /
                          (1e15 * 0.0625 * 0.75 * 4096 * 8 * 4 / (132 * 128 * 128.0));
    const double gate_up = 2.0 * 1024 * 4096 * 16384 / (1e15 * expert_eff);
    const double down = 2.0 * 1024 * 8192 * 4096 / (1e15 * expert_eff);
    const double flops = router + 8 * (gate_up + down);
    assert_true(flops > pc.bytes / (0.85 * 3e12));
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_MLP_GEMM), 58);
    int bound = -1;
    assert_close(plan_gpu_phase_time(&c, &k, &m, &s, PHASE_MLP_GEMM, &pc, &bound),
                 flops + 58 * 4.5e-6);
    assert_int_equal(bound, 0);

    s.new_positions = 1, s.past_positions = 511;
    phase_cost_compute(&cfg, &s, PHASE_MLP_GEMM, &pc);
    assert_int_equal(plan_gpu_phase_kernels(&cfg, &s, PHASE_MLP_GEMM), 12);
    assert_close(plan_gpu_phase_time(&c, &k, &m, &s, PHASE_MLP_GEMM, &pc, &bound),
                 pc.bytes / (0.85 * 3e12) + 12 * 4.5e-6);
    assert_int_equal(bound, 1);
}

/* The host's turn between steps (device.efficiency.step_overhead) is paid once per step, with
 * the sampling on the last stage: not by another phase, not by an earlier stage. */
static void test_step_overhead(void **state) {
    (void)state;
    plan_cluster c = gpu_node();
    const plan_ceilings k = GPU_CEILINGS;
    const model_config cfg = llama(2, 32, 8, 4096, 1216, 8192);
    plan_model m = {.cfg = cfg, .weight_dtype = PRECISION_FP16};
    phase_step s = {.tp = 1,
                    .pp = 2,
                    .pp_rank = 1,
                    .weight_dtype = PRECISION_FP16,
                    .seqs = 1,
                    .new_positions = 1,
                    .past_positions = 128};
    phase_cost pc, pn;
    phase_cost_compute(&cfg, &s, PHASE_SAMPLE, &pc);
    phase_cost_compute(&cfg, &s, PHASE_NORM, &pn);
    const double sample = plan_gpu_phase_time(&c, &k, &m, &s, PHASE_SAMPLE, &pc, NULL);
    const double norm = plan_gpu_phase_time(&c, &k, &m, &s, PHASE_NORM, &pn, NULL);
    c.gpu.step_overhead = 1.5e-3;
    assert_close(plan_gpu_phase_time(&c, &k, &m, &s, PHASE_SAMPLE, &pc, NULL), sample + 1.5e-3);
    assert_close(plan_gpu_phase_time(&c, &k, &m, &s, PHASE_NORM, &pn, NULL), norm);
    s.pp_rank = 0; /* the first of two stages samples nothing */
    phase_cost_compute(&cfg, &s, PHASE_SAMPLE, &pc);
    assert_true(plan_gpu_phase_time(&c, &k, &m, &s, PHASE_SAMPLE, &pc, NULL) < 1e-3);
}

/* The models apply only to a GPU device and only where no calibration covers the phase: with
 * every phase calibrated at efficiency 1 a GPU predicts its roofline, as a CPU (no models)
 * does; uncalibrated, the models make it slower. */
static void test_calibration_first(void **state) {
    (void)state;
    plan_cluster cpu;
    memset(&cpu, 0, sizeof cpu);
    cpu.nodes = 1, cpu.devices_per_node = 1;
    cpu.device_memory = 80e9, cpu.peak_flops = 1e15, cpu.mem_bw = 3e12;
    cpu.tier[PLAN_TIER_INTRA] =
        (plan_tier){.present = 1, .alpha = 1e-6, .beta = 1e11, .efficiency = 1};
    cpu.tier[PLAN_TIER_INTER] = cpu.tier[PLAN_TIER_INTER2] = cpu.tier[PLAN_TIER_INTRA];
    plan_cluster gpu = cpu;
    gpu.gpu = h100(4);
    const model_config cfg = llama(2, 8, 2, 1024, 2048, 1024);
    const plan_model m = {.cfg = cfg, .weight_dtype = PRECISION_BF16, .kv_block = 16};
    const plan_workload w = {.batch = 1, .prompt = 256, .new_tokens = 8};
    const plan_strategy s = {.dp = 1, .tp = 1, .pp = 1, .microbatches = 1};
    plan_rates calibrated;
    plan_rates_default(&calibrated);
    for (int period = 0; period < 2; period++)
        for (int p = 0; p < PHASE_COUNT; p++) {
            calibrated.curve[period][p].n = 1;
            calibrated.curve[period][p].intensity[0] = 1;
            calibrated.curve[period][p].efficiency[0] = 1;
        }
    plan_prediction a, b, u, v;
    plan_predict(&m, &w, &cpu, &calibrated, &s, &a);
    plan_predict(&m, &w, &gpu, &calibrated, &s, &b);
    assert_close(b.ttft, a.ttft);
    assert_close(b.tpot, a.tpot);
    plan_rates none;
    plan_rates_default(&none);
    plan_predict(&m, &w, &cpu, &none, &s, &u);
    plan_predict(&m, &w, &gpu, &none, &s, &v);
    assert_close(u.ttft, a.ttft); /* a CPU's uncalibrated plan: the roofline, as before */
    assert_true(v.ttft > u.ttft);
    assert_true(v.tpot > u.tpot);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_one_wave_against_two),
        cmocka_unit_test(test_gemm_tile_quantization),
        cmocka_unit_test(test_gemm_split_k),
        cmocka_unit_test(test_attention_prefill),
        cmocka_unit_test(test_decode_fill),
        cmocka_unit_test(test_kernels_per_layer),
        cmocka_unit_test(test_phase_time),
        cmocka_unit_test(test_step_overhead),
        cmocka_unit_test(test_moe_phase_time),
        cmocka_unit_test(test_calibration_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
