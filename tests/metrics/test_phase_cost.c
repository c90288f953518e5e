/* The FLOPs and bytes of each phase (src/metrics/phase_cost.c) against hand counts for a small
 * GPT-2 shape and a small Llama GQA shape. Each expected value is written out as the arithmetic
 * of docs/benchmarks.md "Per-phase rooflines", from the shape alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "metrics/phase_cost.h"

/* GPT-2: C = 16, 2 heads of hd = 8 (A = 16), M = 64, V = 64, 2 layers, Pre-LN, tied head. */
static model_config gpt2_shape(void) {
    return (model_config){.layers = 2,
                          .heads = 2,
                          .embd = 16,
                          .vocab = 64,
                          .ctx = 32,
                          .mlp = 64,
                          .norm = NORM_PRE,
                          .arch = ARCH_GPT2,
                          .kv_heads = 2,
                          .tie_embeddings = 1};
}

/* Llama: C = 32, 4 query heads over 2 kv heads of hd = 8, M = 48, V = 64, 2 layers, untied. */
static model_config llama_shape(void) {
    return (model_config){.layers = 2,
                          .heads = 4,
                          .embd = 32,
                          .vocab = 64,
                          .ctx = 32,
                          .mlp = 48,
                          .norm = NORM_PRE,
                          .arch = ARCH_LLAMA,
                          .kv_heads = 2,
                          .tie_embeddings = 0,
                          .quantize_head = 1};
}

/* 2 sequences, prefill of 4 positions on one rank holding every layer. */
static phase_step prefill(void) {
    return (phase_step){.tp = 1,
                        .pp = 1,
                        .weight_dtype = PRECISION_FP32,
                        .kv_cache = KV_CONTIGUOUS,
                        .kv_block = 16,
                        .seqs = 2,
                        .new_positions = 4,
                        .past_positions = 0};
}

static phase_cost cost(const model_config *cfg, const phase_step *s, phase p) {
    phase_cost c;
    phase_cost_compute(cfg, s, p, &c);
    assert_true(c.bytes == c.weight_bytes + c.kv_bytes + c.act_bytes);
    return c;
}

static void test_gpt2_prefill(void **state) {
    (void)state;
    const model_config cfg = gpt2_shape();
    const phase_step s = prefill();
    const double L = 2, R = 2 * 4; /* layers, rows = sequences x new positions */

    phase_cost qkv = cost(&cfg, &s, PHASE_QKV_GEMM); /* (8, 16) @ (48, 16)^T + bias */
    assert_true(qkv.flops == L * 2 * R * 16 * 48);
    assert_true(qkv.weight_bytes == L * (16 * 48 * 4 + 48 * 4));
    assert_true(qkv.act_bytes == L * R * (16 + 48) * 4);
    assert_true(qkv.kv_bytes == 0);

    /* causal: query i of 4 attends i + 1 positions, 1 + 2 + 3 + 4 = 10 per sequence and head,
     * QK^T and PV 2 x hd FLOPs each per attended position */
    phase_cost att = cost(&cfg, &s, PHASE_ATTENTION);
    assert_true(att.flops == L * 2 /* seqs */ * 2 /* heads */ * 4 * 8 * 10);
    /* reads k and v of 4 positions per (sequence, head), writes the 8 new rows' k and v */
    assert_true(att.kv_bytes == L * (2 * 2 * 2 * 4 * 8 * 4 + R * 2 * 2 * 8 * 4));
    /* reads the qkv rows (48 wide), writes the output rows (16 wide) */
    assert_true(att.act_bytes == L * R * (48 + 16) * 4);

    phase_cost out = cost(&cfg, &s, PHASE_ATTN_OUT_GEMM); /* (8, 16) @ (16, 16)^T + proj_b */
    assert_true(out.flops == L * 2 * R * 16 * 16);
    assert_true(out.weight_bytes == L * (16 * 16 * 4 + 16 * 4));

    /* fc1 (64 x 16), bias + GELU at 10 FLOPs per element, fc2 (16 x 64) + fc2_b */
    phase_cost mlp = cost(&cfg, &s, PHASE_MLP_GEMM);
    assert_true(mlp.flops == L * (2 * R * 16 * 64 + R * 64 * 10 + 2 * R * 64 * 16));
    assert_true(mlp.weight_bytes == L * (16 * 64 * 4 + 64 * 4 + 64 * 16 * 4 + 16 * 4));
    assert_true(mlp.act_bytes == L * (R * (16 + 64) * 4 + R * 2 * 64 * 4 + R * (64 + 16) * 4));

    /* norms: 1 plain LN (8 FLOPs/elem; read x, write h), 2L - 1 = 3 residual adds fused with LN
     * (9 FLOPs/elem; read x, delta, write x, h), 1 add only (read x, delta, write x) */
    phase_cost norm = cost(&cfg, &s, PHASE_NORM);
    assert_true(norm.flops == R * 16 * 8 + 3 * R * 16 * 9 + R * 16);
    assert_true(norm.weight_bytes == 4 * (2 * 16 * 4));
    assert_true(norm.act_bytes == R * 16 * 4 * (2 + 3 * 4 + 3));

    /* embed: every row's wte row (tp 1 holds the whole vocab) and wpe row, one add each */
    phase_cost emb = cost(&cfg, &s, PHASE_EMBED);
    assert_true(emb.flops == R * 16);
    assert_true(emb.weight_bytes == R * 16 * 4 * 2);
    assert_true(emb.act_bytes == R * (4 + 16 * 4));

    /* head: only the 2 sequences' last positions: LN, then (2, 16) @ wte (64, 16)^T in fp32 */
    phase_cost head = cost(&cfg, &s, PHASE_HEAD);
    assert_true(head.flops == 2 * 16 * 8 + 2 * 2 * 16 * 64);
    assert_true(head.weight_bytes == 2 * 16 * 4 + 16 * 64 * 4);

    phase_cost smp = cost(&cfg, &s, PHASE_SAMPLE); /* argmax over 2 rows of 64 logits */
    assert_true(smp.flops == 2 * 64);
    assert_true(smp.act_bytes == 2 * 64 * 4);

    /* overlap: the row-parallel products in 2 pieces read their weights twice, same FLOPs */
    phase_step cut = s;
    cut.row_pieces = 2;
    phase_cost out2 = cost(&cfg, &cut, PHASE_ATTN_OUT_GEMM);
    assert_true(out2.flops == out.flops);
    assert_true(out2.weight_bytes == L * 2 * (16 * 16 * 4 + 16 * 4));
    phase_cost mlp2 = cost(&cfg, &cut, PHASE_MLP_GEMM); /* fc1 once, fc2 and its bias twice */
    assert_true(mlp2.weight_bytes == L * (16 * 64 * 4 + 64 * 4 + 2 * (64 * 16 * 4 + 16 * 4)));
    assert_true(mlp2.act_bytes == mlp.act_bytes);

    phase_cost none = cost(&cfg, &s, PHASE_TP_WAIT);
    assert_true(none.flops == 0 && none.bytes == 0);
}

static void test_gpt2_decode_paged(void **state) {
    (void)state;
    const model_config cfg = gpt2_shape();
    phase_step s = prefill();
    s.new_positions = 1;
    s.past_positions = 4; /* the first decode step: attends 4 + 1 = 5 positions */
    const double L = 2, R = 2;
    phase_cost att = cost(&cfg, &s, PHASE_ATTENTION);
    assert_true(att.flops == L * 2 * 2 * 4 * 8 * 5);
    assert_true(att.kv_bytes == L * (2 * 2 * 2 * 5 * 8 * 4 + R * 2 * 2 * 8 * 4));

    /* paged, blocks of 4: 5 positions span 2 blocks, read whole (8 positions), and each
     * (sequence, head) looks up 2 block ids for k and 2 for v */
    s.kv_cache = KV_PAGED;
    s.kv_block = 4;
    phase_cost paged = cost(&cfg, &s, PHASE_ATTENTION);
    assert_true(paged.flops == att.flops);
    assert_true(paged.kv_bytes ==
                L * (2 * 2 * 2 * 8 * 8 * 4 + R * 2 * 2 * 8 * 4 + 2 * 2 * 2 * 2 * 4));

    /* int8 weights: 1 B per element plus one fp32 scale per output row; vectors stay fp32 */
    s.weight_dtype = PRECISION_INT8W;
    phase_cost qkv = cost(&cfg, &s, PHASE_QKV_GEMM);
    assert_true(qkv.weight_bytes == L * (16 * 48 * 1 + 48 * 4 + 48 * 4));
    phase_cost head = cost(&cfg, &s, PHASE_HEAD); /* the tied head stays fp32 wte */
    assert_true(head.weight_bytes == 2 * 16 * 4 + 16 * 64 * 4);
}

static void test_llama_gqa_tp2(void **state) {
    (void)state;
    const model_config cfg = llama_shape();
    phase_step s = prefill();
    s.tp = 2;
    s.tp_rank = 1; /* 2 query heads (A = 16) over 1 kv head, mlp 24, vocab rows 32 */
    s.weight_dtype = PRECISION_BF16;
    const double L = 2, R = 8;

    /* QKV rows: 2 q heads + k and v of 1 kv head, (2 + 2) x 8 = 32; no biases */
    phase_cost qkv = cost(&cfg, &s, PHASE_QKV_GEMM);
    assert_true(qkv.flops == L * 2 * R * 32 * 32);
    assert_true(qkv.weight_bytes == L * 32 * 32 * 2);
    assert_true(qkv.act_bytes == L * R * (32 + 32) * 4);

    /* 10 attended positions per (sequence, query head), plus RoPE: 3 query/key rows of hd/2 =
     * 4 pairs at 6 FLOPs per row position; the one kv head's 4 positions read per sequence */
    phase_cost att = cost(&cfg, &s, PHASE_ATTENTION);
    assert_true(att.flops == L * (2 * 2 * 4 * 8 * 10 + R * (2 + 1) * 4 * 6));
    assert_true(att.kv_bytes == L * (2 * 1 * 2 * 4 * 8 * 4 + R * 1 * 2 * 8 * 4));
    assert_true(att.act_bytes == L * R * (32 + 16) * 4);

    /* o_proj (32 x 16), no bias on any rank */
    phase_cost out = cost(&cfg, &s, PHASE_ATTN_OUT_GEMM);
    assert_true(out.flops == L * 2 * R * 16 * 32);
    assert_true(out.weight_bytes == L * 16 * 32 * 2);

    /* stacked gate|up (48 x 32), SwiGLU over 24 at 5 FLOPs (reads 48, writes 24), down (32 x 24) */
    phase_cost mlp = cost(&cfg, &s, PHASE_MLP_GEMM);
    assert_true(mlp.flops == L * (2 * R * 32 * 48 + R * 24 * 5 + 2 * R * 24 * 32));
    assert_true(mlp.weight_bytes == L * (32 * 48 * 2 + 24 * 32 * 2));
    assert_true(mlp.act_bytes == L * (R * (32 + 48) * 4 + R * 72 * 4 + R * (24 + 32) * 4));

    /* RMSNorm: 4 FLOPs/elem, gain only */
    phase_cost norm = cost(&cfg, &s, PHASE_NORM);
    assert_true(norm.flops == R * 32 * 4 + 3 * R * 32 * 5 + R * 32);
    assert_true(norm.weight_bytes == 4 * 32 * 4);

    /* embed: half the rows fall in this rank's vocab half; no position table */
    phase_cost emb = cost(&cfg, &s, PHASE_EMBED);
    assert_true(emb.flops == 0);
    assert_true(emb.weight_bytes == R * 0.5 * 32 * 4);

    /* untied head in bf16, this rank's 32 vocab rows */
    phase_cost head = cost(&cfg, &s, PHASE_HEAD);
    assert_true(head.flops == 2 * 32 * 4 + 2 * 2 * 32 * 32);
    assert_true(head.weight_bytes == 32 * 4 + 32 * 32 * 2);

    /* int8: 1 B per element plus a scale per output row, head included */
    s.weight_dtype = PRECISION_INT8W;
    mlp = cost(&cfg, &s, PHASE_MLP_GEMM);
    assert_true(mlp.weight_bytes == L * (32 * 48 + 48 * 4 + 24 * 32 + 32 * 4));
    head = cost(&cfg, &s, PHASE_HEAD);
    assert_true(head.weight_bytes == 32 * 4 + 32 * 32 + 32 * 4);
}

/* A pipeline splits the layers; embed runs on the first stage only, head and sample on the
 * last. */
static void test_pipeline_stages(void **state) {
    (void)state;
    model_config cfg = gpt2_shape();
    cfg.layers = 3;
    phase_step s = prefill();
    s.pp = 2;
    phase_cost whole_mlp_l1 = cost(&cfg, &s, PHASE_MLP_GEMM); /* stage 0 holds layer 0 */
    assert_true(cost(&cfg, &s, PHASE_EMBED).bytes > 0);
    assert_true(cost(&cfg, &s, PHASE_HEAD).bytes == 0);
    s.pp_rank = 1; /* layers 1 and 2 */
    phase_cost mlp_l2 = cost(&cfg, &s, PHASE_MLP_GEMM);
    assert_true(mlp_l2.flops == 2 * whole_mlp_l1.flops);
    assert_true(cost(&cfg, &s, PHASE_EMBED).bytes == 0);
    assert_true(cost(&cfg, &s, PHASE_SAMPLE).bytes > 0);
}

/* The nano-batch split (the engine's and the rooflines' one rule), and a step's cost as the sum
 * of its nano-batches'. */
static void test_nano_batches(void **state) {
    (void)state;
    nano_batch n[NANO_BATCHES_MAX];
    assert_int_equal(nano_batch_split(n, 0, 2, 4, 0), 1); /* not asked: the whole micro-batch */
    assert_true(n[0].r0 == 0 && n[0].rows == 8 && n[0].nb == 2 && n[0].n_new == 4);
    assert_int_equal(nano_batch_split(n, 1, 5, 1, 9), 1); /* decode: one */
    assert_true(n[0].rows == 5 && n[0].pos0 == 9);
    /* 5 sequences of 3: 2 and 3 of them */
    assert_int_equal(nano_batch_split(n, 1, 5, 3, 0), 2);
    assert_true(n[0].r0 == 0 && n[0].rows == 6 && n[0].b0 == 0 && n[0].nb == 2);
    assert_true(n[1].r0 == 6 && n[1].rows == 9 && n[1].b0 == 2 && n[1].nb == 3);
    assert_true(n[1].n_new == 3 && n[1].pos0 == 0);
    /* one sequence of 40: positions 0..19 and 20..39 */
    assert_int_equal(nano_batch_split(n, 1, 1, 40, 0), 2);
    assert_true(n[0].rows == 20 && n[0].pos0 == 0 && n[1].r0 == 20 && n[1].rows == 20);
    assert_true(n[1].b0 == 0 && n[1].nb == 1 && n[1].n_new == 20 && n[1].pos0 == 20);
    /* one of 300 after 7 cached: at 128 (a multiple of NANO_ALIGN), so 128 and 172 */
    assert_int_equal(nano_batch_split(n, 1, 1, 300, 7), 2);
    assert_true(n[0].rows == 128 && n[1].r0 == 128 && n[1].rows == 172 && n[1].pos0 == 135);

    /* GPT-2 prefill of 2 sequences of 4 as 2 nano-batches of one sequence, each's row-parallel
     * products in min(3, 4) = 3 pieces: the same FLOPs and activations, every product's
     * weights once per nano-batch (the row-parallel ones once per piece of each) */
    const model_config cfg = gpt2_shape();
    const phase_step s = prefill();
    phase_step nano = s;
    nano.nano_chunks = 3;
    const double L = 2;
    phase_cost qkv = cost(&cfg, &s, PHASE_QKV_GEMM), qkv2 = cost(&cfg, &nano, PHASE_QKV_GEMM);
    assert_true(qkv2.flops == qkv.flops && qkv2.act_bytes == qkv.act_bytes);
    assert_true(qkv2.weight_bytes == 2 * qkv.weight_bytes);
    phase_cost out2 = cost(&cfg, &nano, PHASE_ATTN_OUT_GEMM);
    assert_true(out2.flops == cost(&cfg, &s, PHASE_ATTN_OUT_GEMM).flops);
    assert_true(out2.weight_bytes == L * 2 * 3 * (16 * 16 * 4 + 16 * 4));
    /* by sequences the attention is the same; the embedding and the head see the step whole */
    phase_cost att = cost(&cfg, &s, PHASE_ATTENTION), att2 = cost(&cfg, &nano, PHASE_ATTENTION);
    assert_true(att2.flops == att.flops && att2.kv_bytes == att.kv_bytes);
    assert_true(cost(&cfg, &nano, PHASE_HEAD).bytes == cost(&cfg, &s, PHASE_HEAD).bytes);
    assert_true(cost(&cfg, &nano, PHASE_EMBED).bytes == cost(&cfg, &s, PHASE_EMBED).bytes);

    /* one sequence of 4 by positions (2 + 2): the same attended pairs, and the second half
     * reads the first's 2 positions again (4 positions, against 2 + 4) */
    phase_step one = s, one_nano = s;
    one.seqs = one_nano.seqs = 1;
    one_nano.nano_chunks = 1;
    att = cost(&cfg, &one, PHASE_ATTENTION), att2 = cost(&cfg, &one_nano, PHASE_ATTENTION);
    assert_true(att2.flops == att.flops);
    const double kv_row = 8 * 4, write = L * 4 * 2 * 2 * kv_row; /* 4 rows, k and v, 2 heads */
    assert_true(att.kv_bytes == L * 2 * 2 * 4 * kv_row + write);
    assert_true(att2.kv_bytes == L * 2 * 2 * (2 + 4) * kv_row + write);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_prefill),  cmocka_unit_test(test_gpt2_decode_paged),
        cmocka_unit_test(test_llama_gqa_tp2), cmocka_unit_test(test_pipeline_stages),
        cmocka_unit_test(test_nano_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
