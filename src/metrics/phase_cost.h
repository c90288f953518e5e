/* Analytic cost of each compute phase: the FLOPs and bytes one step of one micro-batch moves
 * on one rank, from the model shape, the weight dtype, the KV cache layout and the TP/PP share,
 * counted the way src/engine/forward.c and kernels/ compute (per-phase rooflines,
 * docs/benchmarks.md "Per-phase rooflines"). */
#pragma once
#include "metrics/timing.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one rank does in one step of one micro-batch. */
typedef struct {
    int tp, tp_rank; /* the TP share, split as shard_geom_init splits it */
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
 * rows of its GEMMs: the k rows x E / touched, at least one). Zeros for a dense model. */
typedef struct {
    double touched;         /* experts whose weights the layer reads */
    double rows_per_expert; /* rows each touched expert's products multiply */
} phase_moe_load;
phase_moe_load phase_moe_load_expect(const model_config *cfg, double rows);

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
