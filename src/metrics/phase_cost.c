/* FLOPs and bytes of each compute phase, counted from what src/engine/forward.c, schedule.c and
 * kernels/ do for one step of one micro-batch on one rank. Conventions (docs/benchmarks.md):
 * a GEMM is 2 R K N FLOPs; elementwise work counts one FLOP per add, multiply, divide or exp;
 * bytes are the minimum traffic of each op (inputs read once, outputs written once), so where
 * a kernel re-reads (an fp32 tile of dequantised weights, the scores of prefill attention, an
 * output initialised to its bias) the count is a lower bound on the bytes the kernel really
 * moves. Activations, the KV cache and fp32 vectors are 4 B per element. */
#include "metrics/phase_cost.h"

#include <math.h>
#include <string.h>

enum { F32 = 4, TOKEN_ID = 4, BLOCK_ID = 4 };

/* FLOPs per element of the elementwise kernels (kernels/cpu/). */
enum {
    LAYERNORM_FLOPS = 8, /* mean 1, variance 3 (sub, square, add), normalise 4 (sub, 2 mul, add) */
    RMSNORM_FLOPS = 4,   /* square and add, then 2 multiplies */
    GELU_FLOPS = 10,     /* bias add, v^3 (2), 0.044715 v^3 + v (2), x -2k (1), exp, 1 +, divide */
    SWIGLU_FLOPS = 5,    /* negate, exp, 1 +, divide, multiply by up */
    ROPE_FLOPS_PER_PAIR = 6 /* a 2x2 rotation: 4 multiplies, 2 adds */
};

double phase_weight_elem_bytes(precision_kind p) {
    switch (p) {
    case PRECISION_INT8W: return 1;
    case PRECISION_BF16:
    case PRECISION_FP16: return 2;
    /* ggml's blocks of 32 weights, their fp16 scale (and q4_1's min) included; q4_k's 256
     * with d, dmin and 12 bytes of 6-bit scales and mins */
    case PRECISION_Q8_0: return 34.0 / 32;
    case PRECISION_Q4_0: return 18.0 / 32;
    case PRECISION_Q4_1: return 20.0 / 32;
    case PRECISION_Q4_K: return 144.0 / 256;
    case PRECISION_FP32: break;
    }
    return 4;
}

int phase_cost_modelled(phase p) {
    switch (p) {
    case PHASE_EMBED:
    case PHASE_NORM:
    case PHASE_QKV_GEMM:
    case PHASE_ATTENTION:
    case PHASE_ATTN_OUT_GEMM:
    case PHASE_MLP_GEMM:
    case PHASE_HEAD:
    case PHASE_SAMPLE:
    case PHASE_EP_EXPERT: return 1;
    default: return 0;
    }
}

static void cost_add(phase_cost *c, double flops, double weight, double kv, double act) {
    c->flops += flops;
    c->weight_bytes += weight;
    c->kv_bytes += kv;
    c->act_bytes += act;
}

/* The fp32 scales an int8 matrix of input width k keeps per output row: one, or one per group
 * (model_int8_layout); 0 when the weights are not int8. */
static double int8_scales(const model_config *cfg, int int8, matrix_input input, double k) {
    if (!int8) return 0;
    const int group = model_int8_layout(cfg, input).group;
    return group ? ceil(k / group) : 1;
}

/* out (rows, n) = in (rows, k) @ W^T (+ bias), W (n, k) in elem-byte elements plus `scales`
 * fp32 scales per row (int8), as cpu_matmul computes it, its weights read `reads` times: once
 * per piece of the rows (the overlap of row-parallel products: each piece reads the whole
 * matrix), or once per expert whose rows it multiplies (the same shape for every expert). */
static void matmul_cost_pieces(phase_cost *c, double rows, double k, double n, double elem,
                               double scales, int bias, double reads) {
    double weight = (k * n * elem + n * scales * F32 + (bias ? n * F32 : 0)) * reads;
    cost_add(c, 2 * rows * k * n, weight, 0, rows * (k + n) * F32);
}

static void matmul_cost(phase_cost *c, double rows, double k, double n, double elem, double scales,
                        int bias) {
    matmul_cost_pieces(c, rows, k, n, elem, scales, bias, 1);
}

/* The stage's norm kernels (forward.c): Pre-LN GPT-2 and Llama run one plain norm (the first
 * layer's), then per layer two residual adds each fused with the next norm, except the last
 * add of the stage, which only adds. Post-LN runs 2 fused residual + LN per layer. */
static void norms_cost(phase_cost *c, const model_config *cfg, double rows, int layers) {
    if (layers == 0) return;
    const double C = cfg->embd;
    const int llama = arch_is_llama(cfg->arch);
    const double norm_flops = llama ? RMSNORM_FLOPS : LAYERNORM_FLOPS;
    const double params = (llama ? 1 : 2) * C * F32; /* gain (and LayerNorm's bias) */
    int plain = 1, fused = 2 * layers - 1, add_only = 1;
    if (!llama && cfg->norm == NORM_POST) plain = 0, fused = 2 * layers, add_only = 0;
    /* plain: read x, write h */
    cost_add(c, plain * rows * C * norm_flops, plain * params, 0, plain * rows * C * 2 * F32);
    /* fused: read x and the delta, write x and h */
    cost_add(c, fused * rows * C * (1 + norm_flops), fused * params, 0, fused * rows * C * 4 * F32);
    /* add only: read x and the delta, write x */
    cost_add(c, add_only * rows * C, 0, 0, add_only * rows * C * 3 * F32);
}

/* rows through a SwiGLU MLP of width `width` (this rank's share), C -> 2 width -> C, as
 * forward.c runs Llama's MLP and each expert (expert_mlp): stacked gate|up, SwiGLU, down. Its
 * weights are read once per set (sets: the experts whose matrices of this shape the rows go
 * through), down's again per piece of an overlapped row-parallel product. */
static void swiglu_mlp_cost(phase_cost *c, const model_config *cfg, double rows, double width,
                            double elem, int int8, double sets, int pieces) {
    const double C = cfg->embd;
    matmul_cost_pieces(c, rows, C, 2 * width, elem, int8_scales(cfg, int8, MATRIX_INPUT_WHOLE, C),
                       0, sets);
    cost_add(c, rows * width * SWIGLU_FLOPS, 0, 0, rows * 3 * width * F32);
    matmul_cost_pieces(c, rows, width, C, elem, int8_scales(cfg, int8, MATRIX_INPUT_MLP, width), 0,
                       sets * pieces);
}

double phase_expected_max_normal(int n) {
    /* exact to the digits shown for the ep a Mixtral or Qwen2-MoE TP group takes */
    static const double table[] = {0, 0, 0.5641896, 0.8462844, 1.0293754,
                                   1.1629645, 1.2672064, 1.3521784, 1.4236003};
    if (n <= 0) return 0;
    if (n < (int)(sizeof table / sizeof table[0])) return table[n];
    /* E max = integral of x n phi(x) Phi(x)^(n-1) dx, by the midpoint rule on [-8, 8] */
    const int steps = 16 * 256;
    const double h = 16.0 / steps, inv_sqrt_2pi = 0.3989422804014327;
    double sum = 0;
    for (int i = 0; i < steps; i++) {
        const double x = -8 + (i + 0.5) * h;
        const double phi = inv_sqrt_2pi * exp(-x * x / 2), cdf = 0.5 * erfc(-x / sqrt(2));
        sum += x * n * phi * pow(cdf, n - 1) * h;
    }
    return sum;
}

phase_moe_load phase_moe_load_expect(const model_config *cfg, double rows, int ep) {
    phase_moe_load l = {0, 0, 0};
    if (cfg->experts <= 0 || rows <= 0) return l;
    const double E = cfg->experts, k = cfg->experts_top_k;
    const double p = 1 - pow(1 - k / E, rows);
    if (ep <= 1) {
        l.touched = E * p;
        l.routed = rows * k;
    } else {
        const double n = E / ep, z = phase_expected_max_normal(ep);
        const double share = n / E; /* of a row's k choices, the block's: hypergeometric */
        const double row_var = k * share * (1 - share) * (E - k) / (E - 1);
        l.routed = fmin(rows * fmin(k, n), rows * k * share + z * sqrt(rows * row_var));
        /* a touched expert has a row: the two maxima stay consistent at a row or two */
        l.touched = fmin(fmin(n, l.routed), n * p + z * sqrt(n * p * (1 - p)));
    }
    l.rows_per_expert = l.touched > 0 ? l.routed / l.touched : 0;
    return l;
}

double phase_expected_max_normals(const double *mean, const double *sd, int n) {
    if (n <= 0) return 0;
    double lo = INFINITY, hi = -INFINITY, top = -INFINITY;
    for (int i = 0; i < n; i++) {
        lo = fmin(lo, mean[i] - 8 * sd[i]);
        hi = fmax(hi, mean[i] + 8 * sd[i]);
        top = fmax(top, mean[i]);
    }
    if (!(hi > lo)) return top; /* every draw a constant */
    /* E max = lo + integral over [lo, hi] of P(max > x) dx; below lo the max is almost surely
     * above x, past hi almost surely below */
    const int steps = 1024;
    const double h = (hi - lo) / steps;
    double sum = 0;
    for (int j = 0; j < steps; j++) {
        const double x = lo + (j + 0.5) * h;
        double below = 1; /* P(max <= x) */
        for (int i = 0; i < n && below > 0; i++)
            below *= sd[i] > 0 ? 0.5 * erfc(-(x - mean[i]) / (sd[i] * sqrt(2.0))) : x >= mean[i];
        sum += (1 - below) * h;
    }
    return lo + sum;
}

phase_moe_load phase_moe_load_shares(const model_config *cfg, const float *share, double rows,
                                     int ep) {
    phase_moe_load l = {0, 0, 0};
    if (cfg->experts <= 0 || rows <= 0) return l;
    const int E = cfg->experts, blocks = ep > 1 ? ep : 1, n = E / blocks;
    const double k = cfg->experts_top_k;
    enum { MAX_BLOCKS = 256 }; /* ep divides the experts; more blocks are not told apart */
    double routed_mean[MAX_BLOCKS], routed_sd[MAX_BLOCKS], touched_mean[MAX_BLOCKS],
        touched_sd[MAX_BLOCKS];
    const int nb = blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
    for (int b = 0; b < nb; b++) {
        double q_sum = 0, q_var = 0, t_sum = 0, t_var = 0;
        for (int e = b * n; e < (b + 1) * n; e++) {
            const double q = fmin(1.0, k * fmax(0.0, (double)share[e]));
            const double t = 1 - pow(1 - q, rows);
            q_sum += q, q_var += q * (1 - q), t_sum += t, t_var += t * (1 - t);
        }
        /* a row's k choices are distinct experts, so the counts of a block's experts are
         * negatively correlated: the finite-population correction (E - n) / (E - 1), exact
         * for uniform shares (the hypergeometric of phase_moe_load_expect), 0 for one block */
        const double fpc = E > 1 ? (double)(E - n) / (E - 1) : 0;
        routed_mean[b] = rows * q_sum, routed_sd[b] = sqrt(rows * q_var * fpc);
        touched_mean[b] = t_sum, touched_sd[b] = sqrt(t_var);
    }
    if (blocks == 1) {
        l.touched = touched_mean[0];
        l.routed = rows * k;
    } else {
        l.routed = fmin(rows * fmin(k, n), phase_expected_max_normals(routed_mean, routed_sd, nb));
        l.touched = fmin(fmin(n, l.routed), phase_expected_max_normals(touched_mean, touched_sd, nb));
    }
    l.rows_per_expert = l.touched > 0 ? l.routed / l.touched : 0;
    return l;
}

phase_moe_load phase_moe_stage_load(const model_config *cfg, const phase_step *s,
                                    const shard_geom *g, double rows) {
    if (!s->expert_share || g->n_layers <= 0) return phase_moe_load_expect(cfg, rows, g->ep);
    /* the costs are linear in the experts read and the rows routed, so the stage's layers sum
     * as their mean load does */
    phase_moe_load load = {0, 0, 0};
    for (int l = g->layer_begin; l < g->layer_end; l++) {
        const phase_moe_load one = phase_moe_load_shares(
            cfg, s->expert_share + (size_t)l * (size_t)cfg->experts, rows, g->ep);
        load.touched += one.touched / g->n_layers;
        load.routed += one.routed / g->n_layers;
    }
    load.rows_per_expert = load.touched > 0 ? load.routed / load.touched : 0;
    return load;
}

void phase_step_geom(const model_config *cfg, const phase_step *s, shard_geom *g) {
    shard_geom_init(g, cfg, s->tp, s->tp_rank, s->pp, s->pp_rank);
    shard_geom_set_ep(g, cfg, s->ep, 0); /* ep > tp: every replica's block has E / ep experts */
}

/* One mixture-of-experts layer's MLP (forward.c moe_mlp) over rows: the router's product (fp32,
 * replicated: every TP rank computes all E [+ the shared gate] logits on all C), the output
 * zeroed, then each touched expert gathers its rows, runs its SwiGLU MLP (this rank's mlp_local
 * columns) and adds them back weighted (read the rows and the output, write the output: a
 * multiply and an add per element); then the shared expert on every row, added back the same
 * way. The rows x k routed rows are exact; the experts read are the expectation under uniform
 * routing (phase_moe_load_expect), or as runs recorded it (phase_moe_load_shares over the
 * stage's layers, when the step carries expert_share). The host's top-k and the copies of
 * logits and routes are not counted. With expert parallelism across replicas (ep > tp) the
 * experts' products are ep_expert's (moe_ep_cost), not mlp_gemm's. */
static void moe_cost(phase_cost *c, const model_config *cfg, const shard_geom *g,
                     const phase_step *s, double rows, double elem, int int8) {
    const double C = cfg->embd, R = cfg->experts + (cfg->shared_mlp > 0);
    matmul_cost(c, rows, C, R, F32, 0, 0);
    cost_add(c, 0, 0, 0, rows * C * F32); /* o zeroed */
    const phase_moe_load load = phase_moe_stage_load(cfg, s, g, rows);
    const double routed = load.routed;
    /* gather: the row ids read, the rows read and written; scatter: the ids and weights read,
     * the expert's rows and o's read, o written */
    cost_add(c, 0, 0, 0, routed * (TOKEN_ID + 2 * C * F32));
    if (g->ep <= g->tp) swiglu_mlp_cost(c, cfg, routed, g->mlp_local, elem, int8, load.touched, 1);
    cost_add(c, routed * 2 * C, 0, 0, routed * (TOKEN_ID + F32 + 3 * C * F32));
    if (g->shared_local > 0) {
        swiglu_mlp_cost(c, cfg, rows, g->shared_local, elem, int8, 1, 1);
        cost_add(c, rows * 2 * C, 0, 0, rows * (TOKEN_ID + F32 + 3 * C * F32));
    }
}

/* ep_expert (ep > tp): this rank's whole experts over the rows the ep / tp replicas of its EP
 * group sent, each replica as many rows as this one, routed over the ep blocks uniformly or as
 * runs recorded it (phase_moe_stage_load: the busiest block's load). */
static void moe_ep_cost(phase_cost *c, const model_config *cfg, const shard_geom *g,
                        const phase_step *s, double rows, double elem, int int8) {
    if (cfg->experts <= 0 || g->ep <= g->tp) return;
    const phase_moe_load load = phase_moe_stage_load(cfg, s, g, rows * (g->ep / g->tp));
    swiglu_mlp_cost(c, cfg, load.routed, g->mlp_local, elem, int8, load.touched, 1);
}

/* Causal attention over the cache (kernels/cpu/attention.c, kernels/cuda/attention.cu): query i
 * of n new ones attends past + i + 1 positions, QK^T and PV 2 hd FLOPs each per position, for
 * every local query head. The CPU's blocked prefill also multiplies the masked tail of each
 * 64-row block, and softmax is not counted: the FLOPs are the causal lower bound. */
static void attention_cost(phase_cost *c, const model_config *cfg, const shard_geom *g,
                           const phase_step *s) {
    const double hd = g->head_dim, H = g->n_heads, KV = g->n_kv_heads;
    const double n = s->new_positions, past = s->past_positions, seqs = s->seqs;
    const double rows = seqs * n, T = past + n;
    const double attended = n * past + n * (n + 1) / 2; /* per sequence and query head */
    double flops = seqs * H * 4 * hd * attended;
    if (arch_is_llama(cfg->arch)) /* RoPE on each new query row and key row */
        flops += rows * (H + KV) * (hd / 2) * ROPE_FLOPS_PER_PAIR;
    /* each (sequence, kv head) streams its T keys and values once (its query heads reuse them
     * from cache); paged reads whole blocks and looks each block up for k and for v */
    double positions_read = T, table = 0;
    if (s->kv_cache == KV_PAGED && s->kv_block > 0) {
        const double blocks =
            (double)((s->past_positions + s->new_positions + s->kv_block - 1) / s->kv_block);
        positions_read = blocks * s->kv_block;
        table = seqs * KV * 2 * blocks * BLOCK_ID;
    }
    /* a cache row (a position of a kv head) in the cache's type, kernels/backend.h's layout */
    const double row = (double)kv_row_bytes(model_kv_dtype(s->kv_dtype), g->head_dim);
    const double kv_read = seqs * KV * 2 * positions_read * row;
    const double kv_write = rows * KV * 2 * row;
    /* reads the fused qkv rows, writes the attention output */
    const double act = rows * (H * hd + 2 * KV * hd) * F32 + rows * H * hd * F32;
    cost_add(c, flops, 0, kv_read + kv_write + table, act);
}

/* A step run as nano-batches costs what its nano-batches cost, each a step of its own rows:
 * every product reads its weights once per nano-batch, and the second half of one sequence
 * reads the first half's keys again. */
static void nano_steps_cost(const model_config *cfg, const phase_step *s, phase p,
                            phase_cost *out) {
    nano_batch nanos[NANO_BATCHES_MAX];
    const int n = nano_batch_split(nanos, 1, s->seqs, s->new_positions, s->past_positions);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++) {
        phase_step sub = *s;
        sub.nano_chunks = 0;
        sub.seqs = nanos[i].nb;
        sub.new_positions = nanos[i].n_new;
        sub.past_positions = nanos[i].pos0;
        sub.row_pieces = s->nano_chunks < nanos[i].rows ? s->nano_chunks : nanos[i].rows;
        phase_cost c;
        phase_cost_compute(cfg, &sub, p, &c);
        cost_add(out, c.flops, c.weight_bytes, c.kv_bytes, c.act_bytes);
    }
    out->bytes = out->weight_bytes + out->kv_bytes + out->act_bytes;
}

void phase_cost_compute(const model_config *cfg, const phase_step *s, phase p, phase_cost *out) {
    /* only the per-layer phases run per nano-batch; the embedding and the head see them whole */
    if (s->nano_chunks > 0 && p != PHASE_EMBED && p != PHASE_HEAD && p != PHASE_SAMPLE) {
        nano_steps_cost(cfg, s, p, out);
        return;
    }
    memset(out, 0, sizeof *out);
    shard_geom g;
    phase_step_geom(cfg, s, &g);
    const int llama = arch_is_llama(cfg->arch), int8 = s->weight_dtype == PRECISION_INT8W;
    const double elem = phase_weight_elem_bytes(s->weight_dtype);
    const double C = cfg->embd, A = g.attn_dim, M = g.mlp_local, L = g.n_layers;
    const double rows = (double)s->seqs * s->new_positions;
    /* the biases a row-parallel product adds once, on TP rank 0 (GPT-2 only) */
    const int bias_once = !llama && s->tp_rank == 0;
    const int pieces = s->row_pieces > 1 ? s->row_pieces : 1;
    phase_cost layer = {0}; /* one layer's cost, for the per-layer phases */
    switch (p) {
    case PHASE_EMBED: {
        if (!g.first_stage) break;
        /* a rank copies the rows of the tokens in its vocab shard: with tokens spread over the
         * vocabulary, that share of the rows (a lower bound for skewed text) */
        const double share = (double)g.vocab_local / cfg->vocab;
        double weight = rows * share * C * F32, flops = 0, act = rows * (TOKEN_ID + C * F32);
        if (!llama && s->tp_rank == 0) { /* GPT-2's position rows, added by TP rank 0 */
            weight += rows * C * F32;
            flops += rows * C;
        }
        cost_add(out, flops, weight, 0, act);
        break;
    }
    case PHASE_NORM: norms_cost(out, cfg, rows, g.n_layers); break;
    case PHASE_QKV_GEMM: {
        const double qkv = llama ? A + 2.0 * g.n_kv_heads * g.head_dim : 3 * A;
        matmul_cost(&layer, rows, C, qkv, elem, int8_scales(cfg, int8, MATRIX_INPUT_WHOLE, C),
                    !llama || cfg->attention_bias);
        break;
    }
    case PHASE_ATTENTION: attention_cost(&layer, cfg, &g, s); break;
    case PHASE_ATTN_OUT_GEMM:
        matmul_cost_pieces(&layer, rows, A, C, elem, int8_scales(cfg, int8, MATRIX_INPUT_HEADS, A),
                           bias_once, pieces);
        break;
    case PHASE_MLP_GEMM:
        if (cfg->experts > 0) {
            moe_cost(&layer, cfg, &g, s, rows, elem, int8);
        } else if (llama) { /* stacked gate|up, SwiGLU, down */
            swiglu_mlp_cost(&layer, cfg, rows, M, elem, int8, 1, pieces);
        } else { /* fc1, bias + GELU in place (reads fc1_b), fc2 */
            matmul_cost(&layer, rows, C, M, elem, int8_scales(cfg, int8, MATRIX_INPUT_WHOLE, C), 0);
            cost_add(&layer, rows * M * GELU_FLOPS, M * F32, 0, rows * 2 * M * F32);
            matmul_cost_pieces(&layer, rows, M, C, elem,
                               int8_scales(cfg, int8, MATRIX_INPUT_MLP, M), bias_once, pieces);
        }
        break;
    case PHASE_EP_EXPERT: moe_ep_cost(&layer, cfg, &g, s, rows, elem, int8); break;
    case PHASE_HEAD: {
        if (!g.last_stage) break;
        /* only each sequence's last position is normed and gets logits (forward.c) */
        const double seqs = s->seqs;
        cost_add(out, seqs * C * (llama ? RMSNORM_FLOPS : LAYERNORM_FLOPS),
                 (llama ? 1 : 2) * C * F32, 0, seqs * C * 2 * F32);
        /* the head in the weight dtype (quantize_head: an untied one, or a tied one's copy),
         * else fp32 (the tied wte, or an untied head kept fp32) */
        const int low = cfg->quantize_head;
        matmul_cost(out, seqs, C, g.vocab_local, low ? elem : F32,
                    int8_scales(cfg, low && int8, MATRIX_INPUT_WHOLE, C), 0);
        break;
    }
    case PHASE_SAMPLE:
        /* the argmax of the local logits (one comparison per logit); sampling also gathers and
         * sorts the full rows on the host, which this lower bound leaves out */
        if (g.last_stage)
            cost_add(out, (double)s->seqs * g.vocab_local, 0, 0,
                     (double)s->seqs * g.vocab_local * F32);
        break;
    default: break;
    }
    cost_add(out, layer.flops * L, layer.weight_bytes * L, layer.kv_bytes * L, layer.act_bytes * L);
    out->bytes = out->weight_bytes + out->kv_bytes + out->act_bytes;
}
