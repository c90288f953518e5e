/* Analytic cost of each compute phase: the FLOPs and bytes one step of one micro-batch moves
 * on one rank, from the model shape, the weight dtype, the KV cache layout and the TP/PP share,
 * counted the way src/engine/forward.c and kernels/ compute (per-phase rooflines,
 * docs/benchmarks.md "Per-phase rooflines"). */
#pragma once
#include "metrics/nano_batch.h"
#include "metrics/timing.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one rank does in one step of one micro-batch. */
typedef struct {
    int tp, tp_rank; /* the TP share, split as shard_geom_init splits it */
    int ep;          /* parallel.ep: a MoE layer's experts in ep blocks of the TP group
                      * (shard_geom_set_ep); 0 or 1: every TP rank holds a share of each */
    int pp, pp_rank; /* the stage: its layers, and whether it embeds / holds the head */
    precision_kind weight_dtype;
    kv_cache_kind kv_cache;
    int kv_block;       /* positions per block when paged */
    kv_dtype_kind kv_dtype; /* the cache's element type (its int8 rows carry an fp32 scale) */
    int seqs;           /* sequences in the micro-batch */
    int new_positions;  /* positions each sequence adds: prompt length in prefill, 1 in decode */
    int past_positions; /* positions already cached before the step: 0 in prefill */
    int row_pieces;     /* pieces the row-parallel products (attention out, fc2 / down) are cut
                         * into with parallel.overlap at tp > 1 (min(chunks, rows)); each reads
                         * the whole weight matrix. 0 or 1: one product */
    int nano_chunks;    /* > 0: the step runs as nano-batches (nano_batch_split), each a step of
                         * its own whose row-parallel products are cut into min(nano_chunks,
                         * its rows) pieces (row_pieces is then unused); 0: one */
    const float *expert_share; /* a mixture of experts' routing as runs recorded it: (layers,
                                * experts) of the model, each layer's share of its routed rows
                                * per expert, summing to 1 (phase_moe_load_shares). NULL:
                                * uniform routing (phase_moe_load_expect) */
} phase_step;

/* One phase's cost summed over the rank's layers (or once, for phases outside layers). */
typedef struct {
    double flops;
    double weight_bytes; /* weights read: matrices in their dtype, int8 scales, fp32 vectors */
    double kv_bytes;     /* KV cache read and written (paged: whole blocks, plus the table) */
    double act_bytes;    /* activations read and written */
    double bytes;        /* weight_bytes + kv_bytes + act_bytes */
} phase_cost;

/* The expected routing of one mixture-of-experts layer over `rows` token rows, under uniform,
 * independent top-k choices (each row picks k of the E experts, every k-subset alike; a trained
 * router's skew is not modelled until expert load is calibrated from runs): an expert is missed
 * by one row with probability 1 - k/E, so the experts at least one row reaches number
 *   touched = E (1 - (1 - k/E)^rows)
 * (k at one row, all E for many rows), and each of them multiplies rows k / touched rows (the
 * rows of its GEMMs: the k rows x E / touched, at least one). Zeros for a dense model.
 * With the experts in ep blocks of E / ep (parallel.ep), a step waits for the most loaded
 * block: its touched experts and its routed rows are each the expected maximum over the ep
 * blocks, mean + z_ep sd (z_ep: the expected maximum of ep standard normals, 0.564 for 2,
 * 1.029 for 4, 1.424 for 8), where a block's touched experts count as E / ep independent
 * draws of p = 1 - (1 - k/E)^rows, and its routed rows as the sum over the rows of the
 * hypergeometric share of a row's k choices that fall in the block; each at most what the
 * block can take, and the experts at most the rows. docs/planner.md "Mixture of experts" writes it out. */
typedef struct {
    double touched;         /* experts whose weights the (most loaded) block reads */
    double routed;          /* the rows x k routed rows that block gathers (all at ep 1) */
    double rows_per_expert; /* rows each touched expert's products multiply */
} phase_moe_load;
phase_moe_load phase_moe_load_expect(const model_config *cfg, double rows, int ep);

/* The same for one layer whose router sends a share share[e] of its routed rows to expert e
 * (summing to 1), as a run recorded it: a row picks expert e with probability q_e = min(1,
 * k share[e]), so the experts it reaches number sum_e 1 - (1 - q_e)^rows. With ep blocks of
 * adjacent experts the blocks differ in mean as well as by chance: block b's routed rows have
 * mean rows sum_b q_e and variance rows sum_b q_e (1 - q_e) (E - n) / (E - 1) (a row's k
 * choices are distinct experts), its touched experts mean sum_b t_e and variance sum_b t_e (1 - t_e)
 * with t_e = 1 - (1 - q_e)^rows, and the step waits for the expected maximum over the blocks of
 * each (phase_expected_max_normals), capped as above. Uniform shares give
 * phase_moe_load_expect's figures. */
phase_moe_load phase_moe_load_shares(const model_config *cfg, const float *share, double rows,
                                     int ep);

/* The mean load of a layer of the step's stage (g: phase_step_geom): phase_moe_load_shares
 * over its layers when the step carries expert_share, else phase_moe_load_expect. */
phase_moe_load phase_moe_stage_load(const model_config *cfg, const phase_step *s,
                                    const shard_geom *g, double rows);

/* The expected maximum of n independent standard normal draws (0 for n <= 1). */
double phase_expected_max_normal(int n);

/* The expected maximum of n independent normal draws of means mean[i] and standard deviations
 * sd[i] >= 0 (an sd of 0 is the constant mean[i]), by quadrature of P(max > x). */
double phase_expected_max_normals(const double *mean, const double *sd, int n);

/* This rank's share of the model in step s: shard_geom_init, then the expert blocks of
 * s->ep (shard_geom_set_ep) for a mixture of experts. */
void phase_step_geom(const model_config *cfg, const phase_step *s, shard_geom *g);

/* Bytes of one weight matrix element in a dtype: fp32 4, bf16/fp16 2, int8w 1 (its fp32
 * per-row scales are counted separately). */
double phase_weight_elem_bytes(precision_kind p);

/* Whether phase_cost_compute models phase p: embed, norm, qkv_gemm, attention, attn_out_gemm,
 * mlp_gemm, head, sample. */
int phase_cost_modelled(phase p);

/* The cost of phase p for one step of one micro-batch on one rank. Phases it does not model
 * (communication, step, iteration, weight_init) and phases this stage does not run (embed
 * off the first stage, head and sample off the last) get all zeros. */
void phase_cost_compute(const model_config *cfg, const phase_step *s, phase p, phase_cost *out);

#ifdef __cplusplus
}
#endif
