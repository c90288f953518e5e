/* The GPT-2-family model: hyperparameters, this rank's shard geometry, and the weight
 * tensors carved from one allocation driven by a size table that is already sharded. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/rope.h"
#include "parallel/comm.h"
#include "job/job.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int layers, heads, embd, vocab, ctx, mlp; /* mlp: Llama's intermediate_size */
    float ln_eps;                             /* LayerNorm eps, or Llama's rms_norm_eps */
    norm_kind norm;
    arch_kind arch;
    int kv_heads;       /* = heads for GPT-2 */
    int tie_embeddings; /* LM head = wte (always for GPT-2) */
    double rope_theta;  /* Llama */
    int rope_scaled;    /* Llama 3.1's rope_scaling applies */
    rope_llama3 rope_scaling;
    int attention_bias; /* Llama: q/k/v biases (Qwen2), tensor qkv_b; GPT-2 always has them */
    int head_dim;       /* Llama: HF's head_dim; 0 = embd / heads (always for GPT-2) */
    /* How the weights are stored, beyond their dtype (docs/kernels.md, "int8"): */
    int int8_group;    /* int8: weight columns per scale, 0 = one scale per row */
    int quantize_head; /* the LM head in the weight dtype; a tied one as a copy of wte */
    int mlp_unit;      /* MLP columns move between TP ranks in units of this many */
    /* Mixture of experts (arch mixtral, qwen2_moe; all 0 for a dense model). mlp is then each
     * routed expert's intermediate size. */
    int experts;        /* routed experts per layer */
    int experts_top_k;  /* experts each token goes to */
    int shared_mlp;     /* qwen2_moe: the shared expert's intermediate size, 0 = none */
    int norm_topk_prob; /* the top-k weights renormalised to sum 1; else softmax over all */
} model_config;

/* The dtype of the weight matrices a model.precision stores (vectors are always fp32). */
static inline dtype model_weight_dtype(precision_kind p) {
    switch (p) {
    case PRECISION_INT8W: return DTYPE_INT8;
    case PRECISION_BF16: return DTYPE_BF16;
    case PRECISION_FP16: return DTYPE_F16;
    case PRECISION_Q8_0: return DTYPE_Q8_0;
    case PRECISION_Q4_0: return DTYPE_Q4_0;
    case PRECISION_Q4_1: return DTYPE_Q4_1;
    case PRECISION_Q4_K: return DTYPE_Q4_K;
    case PRECISION_FP32: break;
    }
    return DTYPE_F32;
}

/* The kernels' dtype of a model.kv_dtype (kv_view.type). */
static inline dtype model_kv_dtype(kv_dtype_kind k) {
    switch (k) {
    case KV_DTYPE_BF16: return DTYPE_BF16;
    case KV_DTYPE_FP16: return DTYPE_F16;
    case KV_DTYPE_INT8: return DTYPE_INT8;
    case KV_DTYPE_FP32: break;
    }
    return DTYPE_F32;
}

/* What splits a matrix's input dimension across TP ranks, which decides how its int8 weights
 * may be grouped and its activations blocked. */
typedef enum {
    MATRIX_INPUT_WHOLE = 0, /* never split: qkv, fc1 / gate_up, the head (input embd) */
    MATRIX_INPUT_HEADS,     /* split between heads: the attention output (proj / o_proj) */
    MATRIX_INPUT_MLP,       /* split in units of mlp_unit: fc2 / down_proj */
    MATRIX_INPUT_KINDS
} matrix_input;

/* An int8 matrix's layout: weight columns per scale (0: one per row) and activation values
 * per int8 block on the cpu (0: fp32 activations). Neither a group nor a block ever straddles
 * a boundary that any tp could place between ranks, so every factorization quantises exactly
 * as one rank does (docs/kernels.md, "int8"). */
typedef struct {
    int group;
    int act_block;
} int8_layout;
int8_layout model_int8_layout(const model_config *cfg, matrix_input input);

/* A head's width: Llama may set it apart from embd / heads (Mistral-Nemo: heads * head_dim =
 * 4096 < embd = 5120), so attention's width heads * head_dim need not equal embd. */
static inline int model_head_dim(const model_config *cfg) {
    return cfg->head_dim > 0 ? cfg->head_dim : cfg->embd / cfg->heads;
}

/* Which part of the model this rank holds. Uneven splits are balanced: part i of n items over
 * k parts is [i*n/k, (i+1)*n/k). */
typedef struct {
    int tp, tp_rank, pp, pp_rank;
    int layer_begin, layer_end, n_layers; /* this stage's layers */
    int head_begin, n_heads;              /* this TP rank's heads */
    int kv_head_begin, n_kv_heads;        /* the kv heads those query heads read (GQA) */
    int head_dim;
    int attn_dim;                 /* n_heads * head_dim */
    int mlp_begin, mlp_local;     /* this TP rank's MLP columns (of each expert for MoE) */
    int shared_begin, shared_local; /* this TP rank's columns of the shared expert (MoE) */
    int ep, expert_begin, experts_local; /* MoE: this rank's run of each layer's experts */
    int vocab_begin, vocab_local; /* this TP rank's vocab rows */
    int first_stage, last_stage;  /* holds the embedding / the final norm and head */
} shard_geom;

/* balanced split helpers */
static inline int split_begin(int n, int parts, int i) { return (int)((long)n * i / parts); }
static inline int split_count(int n, int parts, int i) {
    return split_begin(n, parts, i + 1) - split_begin(n, parts, i);
}

void shard_geom_init(shard_geom *g, const model_config *cfg, int tp, int tp_rank, int pp,
                     int pp_rank);
/* Expert parallelism (parallel.ep, docs/jobs.md): with ep <= tp the tp ranks of a TP group form
 * ep blocks of tp / ep adjacent ranks; block b holds experts [b*E/ep, (b+1)*E/ep) of every
 * layer, each tensor-split over the block's ranks (mlp_begin/mlp_local then split mlp over
 * tp / ep). With ep > tp the EP group spans ep / tp replicas (the engine's all-to-all moves
 * tokens between them): the rank at TP index t of the group's replica `replica` (its dp
 * coordinate modulo ep / tp) holds block replica * tp + t, its experts whole. Attention, the
 * shared expert and the vocab keep their tp split. ep must divide tp, or be a multiple of it,
 * and divide the experts (job_validate refuses the rest). shard_geom_init leaves ep 1: every
 * expert held; ep 0 or 1 keeps that (a dense model, or a strategy written without ep).
 * replica is read only when ep > tp. */
void shard_geom_set_ep(shard_geom *g, const model_config *cfg, int ep, int replica);

/* Weight tensors of one rank, each a pointer into one allocation. Matrices use the job's
 * weight dtype (fp32, int8 with per-row scales, bf16 or fp16); vectors are always fp32.
 * L = this stage's layers, C = embd, A = attn_dim, M = mlp_local, V = vocab_local. */
typedef struct {
    float *wte;    // (V, C) token embedding, vocab shard; tied LM head. first or last stage
    float *wpe;    // (ctx, C) position embedding. first stage
    float *ln1_g;  // (L, C)
    float *ln1_b;  // (L, C)
    void *qkv_w;   // (L, 3*A, C) rows [q heads | k heads | v heads] of this rank's heads
    float *qkv_s;  // (L, 3*A) int8 scales, else NULL
    float *qkv_b;  // (L, 3*A)
    void *proj_w;  // (L, C, A) row-parallel: this rank's input columns
    float *proj_s; // (L, C)
    float *proj_b; // (L, C) added once (by tp rank 0)
    float *ln2_g;  // (L, C)
    float *ln2_b;  // (L, C)
    void *fc1_w;   // (L, M, C)
    float *fc1_s;  // (L, M)
    float *fc1_b;  // (L, M)
    void *fc2_w;   // (L, C, M) row-parallel
    float *fc2_s;  // (L, C)
    float *fc2_b;  // (L, C) added once
    float *lnf_g;  // (C) last stage
    float *lnf_b;  // (C) last stage
    void *head_w;  // (V, C) the LM head in the weight dtype, vocab shard, last stage: Llama's
                   // untied head, or a copy of a tied wte (quantize_head); else NULL (wte)
    float *head_s; // (V) or (V, ceil(C / group)) int8 scales
    /* Mixture of experts (model/moe.c). E = experts, R = E + (shared expert ? 1 : 0),
     * S = shared_local. Each expert's matrices are contiguous, expert e of layer l at dim-0
     * row l * E + e; with expert parallelism a rank holds El = experts_local of them per layer
     * (from expert_begin), local row l * El + e - expert_begin, in place of the L*E below. */
    float *router_w;   // (L, R, C) fp32, replicated on every TP rank: the router's E rows,
                       // then the shared expert's sigmoid gate (one row) when there is one
    void *exp_gate_up_w; // (L*E, 2*M, C) column-parallel like gate_up: gate rows, up rows
    float *exp_gate_up_s;
    void *exp_down_w;  // (L*E, C, M) row-parallel like down
    float *exp_down_s;
    void *sh_gate_up_w; // (L, 2*S, C) the shared expert's gate|up
    float *sh_gate_up_s;
    void *sh_down_w;   // (L, C, S)
    float *sh_down_s;
} weights;
/* Llama reuses the slots: ln1_g/ln2_g/lnf_g are the RMSNorm gains (no _b), qkv_w is
 * (L, (H + 2*KV)*hd, C) rows [q heads | k kv heads | v kv heads], proj_w is o_proj, fc1_w the
 * stacked gate|up (L, 2*M, C) and fc2_w down_proj (L, C, M); no biases, no wpe. */

/* Kinds of synthetic initialisation (GPT-2-like; see docs/design.md). */
typedef enum {
    INIT_NORMAL = 0,  /* N(0, std) */
    INIT_ONES_NOISE,  /* 1 + N(0, std): LayerNorm gains */
    INIT_ZEROS_NOISE, /* N(0, std) with a small std: biases */
} init_kind;

#define TENSOR_MAX_DIMS 3
#define TENSOR_MAX_BLOCKS 3

/* The part of one global dimension a rank holds: the union of up to three blocks, that pattern
 * repeated `repeat` times (0 or 1: once), each repetition `period` further on. The repeat is
 * how a rank of an expert-parallel mesh holds its run of experts in every layer's row block. */
typedef struct {
    long start[TENSOR_MAX_BLOCKS];
    long count[TENSOR_MAX_BLOCKS];
    int nblocks;
    int repeat;
    long period;
} dim_slice;

/* The blocks of a slice, repetitions included, in ascending order; block b's start and count. */
static inline int slice_blocks(const dim_slice *s) {
    return s->nblocks * (s->repeat > 1 ? s->repeat : 1);
}
static inline void slice_block(const dim_slice *s, int b, long *start, long *count) {
    *start = s->start[b % s->nblocks] + (long)(b / s->nblocks) * s->period;
    *count = s->count[b % s->nblocks];
}

/* One row of the size table: a global tensor, the slice this rank holds and where it goes.
 * Local elements are ordered row-major over the concatenated blocks of each dimension, which
 * is exactly the order in which HDF5 returns a union-of-hyperslabs selection. */
typedef struct {
    const char *name; /* checkpoint dataset name under /weights, e.g. "qkv_w" */
    int ndims;
    long global_shape[TENSOR_MAX_DIMS];
    dim_slice local[TENSOR_MAX_DIMS];
    int is_matrix;      /* stored in the weight dtype; others fp32 */
    matrix_input input; /* for matrices: what splits the input (last) dimension */
    int scale_rows_dim; /* for matrices: number of leading dims that index output rows */
    void **slot;        /* &weights.field */
    float **scale_slot; /* &weights.*_s for matrices */
    init_kind init;
    float init_std;
    int present; /* 0 when this rank holds none of it (e.g. wpe off the first stage) */
    int index;   /* its row in the size table (a tensor_part keeps its tensor's) */
} tensor_desc;

#define MODEL_MAX_TENSORS 28

/* One row as the size tables write it (model.c, llama.c). */
typedef struct {
    const char *name;
    void **slot;
    float **scale_slot;
    init_kind init;
    float std;
    int present;
    int ndims;
    long shape[3];
    dim_slice local[3];
} table_row;
/* The building blocks of both tables (model/table_row.c): a whole dimension, one block of it,
 * and adding a row. */
dim_slice slice_full(long n);
dim_slice slice_one(long start, long count);

struct model;
void model_add_row(struct model *m, table_row r);

typedef struct model {
    model_config cfg;
    shard_geom geom;
    dtype weight_dtype;
    weights w;
    tensor_desc tensors[MODEL_MAX_TENSORS];
    int n_tensors;
    int8_layout int8[MATRIX_INPUT_KINDS]; /* by input kind, when weight_dtype is int8 */
    void *weight_memory;                  /* the one backend allocation */
    size_t weight_bytes;
    /* The first non-finite weight model_store_tensor was given on this rank, as
     * model_nonfinite_key orders them; MODEL_FINITE when there is none. */
    long long nonfinite_key;
} model;

#define MODEL_FINITE 0x7fffffffffffffffLL

void model_config_from_job(model_config *cfg, const job *j);
/* The part of model_config_from_job that follows model.precision, model.int8_group and
 * model.quantize_head (-1: auto) for a cfg whose shape is set: int8_group, quantize_head and
 * mlp_unit. The importers call it too, so a checkpoint stored in a precision is quantised
 * exactly as a load in that precision would quantise it. */
void model_config_set_precision(model_config *cfg, precision_kind p, int int8_group,
                                int quantize_head);

/* Fills the size table for this rank's shard (no allocation). */
void model_tensor_table(model *m, const model_config *cfg, const shard_geom *g, dtype wtype);
/* The Llama rows of the size table (model/llama.c). */
void model_tensor_table_llama(model *m, const model_config *cfg, const shard_geom *g);
/* The mixture-of-experts rows that replace Llama's dense gate_up_w and down_w (model/moe.c). */
void model_tensor_table_moe(model *m, const model_config *cfg, const shard_geom *g);
/* This rank's columns of an intermediate of width n, in units of unit, as a gate rows then up
 * rows slice of a stacked (2 * n) gate|up tensor (model/table_row.c). */
dim_slice slice_gate_up_of(long n, long begin, long count);
/* Adds the LM head of a tied model in the weight dtype (cfg.quantize_head): a copy of wte's
 * vocab shard on the last stage, in head_w / head_s (model/table_row.c). */
void model_add_head_copy(model *m, const shard_geom *g, float wte_std);
/* Scales of an int8 matrix tensor: rows x groups (1 group when scaled per row); of a block
 * format's: rows x blocks. */
long tensor_scale_count(const model *m, const tensor_desc *t);

/* Local dim-0 entries [first, first + count) of a table row (a stacked tensor's layers, a 2-D
 * one's rows) as a row of its own, whose slots point at their place in the row's memory: what
 * the checkpoint reader selects in the file and stores, so that it stages a few layers at a
 * time, not the whole shard. Not to be copied once made (d's slots point into it). */
typedef struct {
    tensor_desc d;
    void *slot;
    float *scale;
} tensor_part;
void tensor_part_init(tensor_part *p, const struct model *m, const tensor_desc *t, long first,
                      long count);

/* Local element count of a table row. */
long tensor_local_elems(const tensor_desc *t);
long tensor_global_elems(const tensor_desc *t);
/* Global row-major index of local element i. */
long tensor_global_index(const tensor_desc *t, long local_index);

/* Bytes the weights take on this rank, for --dry-run and the allocation. */
size_t model_weight_bytes(const model *m);

/* Allocates the one weight buffer on the backend and points every tensor into it. */
void model_alloc(model *m, const backend *be);
void model_free(model *m, const backend *be);

/* Converts this rank's fp32 values of one table row to its stored dtype and copies them to
 * the backend. Matrices in int8 get per-row or per-group scales; a row-parallel row spans
 * every TP rank, so per-row maxima are agreed over tp (may be NULL on one rank), while groups
 * never cross ranks (model_int8_layout). Used by the synthetic filler and by the checkpoint
 * reader, so both take the same path. */
void model_store_tensor(model *m, const backend *be, const tensor_desc *t, const float *host_values,
                        comm *tp);

/* Stores this rank's values of a matrix table row that are already in the weight dtype, as a
 * checkpoint stored in that precision holds them: bf16 bit patterns, or int8 values with
 * their tensor_scale_count scales in model_store_tensor's layout, or a block format's planes
 * (qblocks_unpack: int8 quants, tensor_scale_count scales and for q4_1 and q4_k as many
 * mins after them), packed into blocks. Copies them to the backend
 * as they are; non-finite bf16 values and scales are noted as model_store_tensor notes them. */
void model_store_tensor_stored(model *m, const backend *be, const tensor_desc *t,
                               const void *values, const float *scales);

/* Whether every weight stored since model_tensor_table was finite, on every rank of world
 * (collective). Otherwise STATUS_BAD_INPUT with error_message() naming the tensor, the
 * element and the value, prefixed by source (the checkpoint path), the same on every rank:
 * tripar refuses NaN and Inf weights, whose outputs are garbage that depends on the mesh. */
int model_weights_finite(const model *m, MPI_Comm world, const char *source);

/* Fills this rank's shard from the counter-based hash of (seed, tensor name, global index). */
void model_fill_synthetic(model *m, const backend *be, uint64_t seed, comm *tp);

/* The pure function behind synthetic weights (exposed for tests and docs). */
float synthetic_value(uint64_t seed, const char *tensor_name, long global_index, init_kind init,
                      float std);
uint64_t synthetic_hash64(uint64_t x);
/* The same value split in two, so a filler hashes the tensor name once per tensor:
 * synthetic_value(seed, name, i, ...) == synthetic_value_keyed(synthetic_key(seed, name), i, ...)
 */
uint64_t synthetic_key(uint64_t seed, const char *tensor_name);
float synthetic_value_keyed(uint64_t key, long global_index, init_kind init, float std);
uint64_t synthetic_name_hash(const char *name);

#ifdef __cplusplus
}
#endif
