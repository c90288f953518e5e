/* The planner's GPU efficiency models: tile and wave quantization of tensor-core GEMMs,
 * flash-attention and split-KV decode, HBM's achievable share and launch overhead, used for a
 * phase no calibration run covers (docs/planner.md "GPU efficiency models"; the constants and
 * their sources are the cluster file's device.efficiency). */
#include "analysis/plan_gpu.h"

#include <math.h>

/* The GEMV path of kernels/cuda/matmul.cu (GEMV_MAX_ROWS): up to this many rows a product
 * streams its weights with CUDA cores, no tensor-core tiles. */
enum { GPU_GEMV_MAX_ROWS = 8 };
/* The split rule of kernels/cuda/attention.cu (attention_splits), mirrored. */
enum { ATTN_SPLIT_MIN_CHUNK = 64, ATTN_SPLIT_MAX_CHUNK = 4096 };

static double ceil_div(double a, double b) { return ceil(a / b); }

double plan_gpu_gemm_efficiency(const plan_gpu_efficiency *e, double M, double N, double K) {
    if (M <= 0 || N <= 0 || K <= 0 || e->sms <= 0) return e->gemm_ceiling;
    const double tm = e->tile_m, tn = e->tile_n, sms = e->sms;
    const double tiles = ceil_div(M, tm) * ceil_div(N, tn);
    double best = 0;
    /* each (tile, split) is one block of tm x tn x K/s at the per-SM rate; the wave count
     * rounds up, so useful work / (waves x SMs x tile work) is the share of the peak kept */
    for (int s = 1; s <= (e->split_k_max > 0 ? e->split_k_max : 1); s++) {
        if (s > 1 && (tiles >= sms || K / s < PLAN_GPU_SPLIT_K_MIN)) break;
        const double waves = ceil_div(tiles * s, sms);
        const double eff = M * N * s / (waves * sms * tm * tn);
        if (eff > best) best = eff;
    }
    return e->gemm_ceiling * best;
}

/* The share of the SMs `blocks` blocks keep busy over whole waves. */
static double wave_fill(double blocks, int sms) {
    if (sms <= 0 || blocks <= 0) return 1;
    return blocks / (ceil_div(blocks, sms) * sms);
}

double plan_gpu_attention_efficiency(const plan_gpu_efficiency *e, int seqs, int heads, int n_new,
                                     int ctx) {
    const double rise = ctx / (ctx + e->attn_half_ctx);
    const double blocks = (double)seqs * heads * ceil_div(n_new, e->tile_m > 0 ? e->tile_m : 1);
    return e->attn_ceiling * rise * wave_fill(blocks, e->sms);
}

double plan_gpu_decode_fill(const plan_gpu_efficiency *e, int seqs, int kv_heads, int ctx) {
    const int sms = e->sms > 0 ? e->sms : 1;
    const double grid = (double)seqs * kv_heads;
    double splits = fmin(ceil_div(2.0 * sms, grid), ceil_div(ctx, ATTN_SPLIT_MIN_CHUNK));
    splits = fmax(fmax(splits, ceil_div(ctx, ATTN_SPLIT_MAX_CHUNK)), 1);
    return fmin(1.0, grid * splits / sms);
}

/* matmul_forward's launches: one GEMV up to 8 rows (bias and scales fused); else bf16/fp16
 * convert the input and call cuBLAS, fp32 calls cuBLAS, int8w expands the weights first and
 * always scales after; a bias is one more kernel. */
static int matmul_kernels(double rows, precision_kind dtype, int bias) {
    if (rows <= GPU_GEMV_MAX_ROWS) return 1;
    switch (dtype) {
    case PRECISION_BF16:
    case PRECISION_FP16: return 2 + (bias != 0);
    case PRECISION_INT8W:
    case PRECISION_Q8_0: /* no cuda kernels yet (the job refuses them): int8w's path */
    case PRECISION_Q4_0:
    case PRECISION_Q4_1:
    case PRECISION_Q4_K: return 3;
    case PRECISION_FP32: break;
    }
    return 1 + (bias != 0);
}

/* A mixture-of-experts layer's launches (forward.c moe_mlp): the router's fp32 product and the
 * output's zeroing, then per touched expert (the expectation, rounded) a gather, its gate|up,
 * SwiGLU, down and a scatter-add, and the same four plus the scatter for the shared expert. */
static int moe_kernels(const model_config *cfg, const phase_step *s, const shard_geom *g,
                       double rows, precision_kind d) {
    const phase_moe_load load = phase_moe_stage_load(cfg, s, g, rows);
    const int expert = 3 + 2 * matmul_kernels(load.rows_per_expert, d, 0);
    const int shared = g->shared_local > 0 ? 3 + 2 * matmul_kernels(rows, d, 0) : 0;
    return matmul_kernels(rows, PRECISION_FP32, 0) + 1 + (int)lround(load.touched) * expert +
           shared;
}

int plan_gpu_phase_kernels(const model_config *cfg, const phase_step *s, phase p) {
    shard_geom g;
    phase_step_geom(cfg, s, &g);
    const int llama = arch_is_llama(cfg->arch), L = g.n_layers;
    const double rows = (double)s->seqs * s->new_positions;
    const int pieces = s->row_pieces > 1 ? s->row_pieces : 1;
    const precision_kind d = s->weight_dtype;
    switch (p) {
    case PHASE_EMBED: return g.first_stage;
    case PHASE_NORM: /* the first norm, two fused residual + norms per layer (phase_cost.c) */
        return L == 0 ? 0 : !llama && cfg->norm == NORM_POST ? 2 * L : 2 * L + 1;
    case PHASE_QKV_GEMM: return L * matmul_kernels(rows, d, !llama || cfg->attention_bias);
    case PHASE_ATTENTION: return L * (s->new_positions == 1 ? 3 : 2);
    case PHASE_ATTN_OUT_GEMM:
        return L * pieces * matmul_kernels(rows / pieces, d, !llama && s->tp_rank == 0);
    case PHASE_MLP_GEMM: /* gate|up or fc1, SwiGLU or bias + GELU, down or fc2 */
        if (cfg->experts > 0) return L * moe_kernels(cfg, s, &g, rows, d);
        return L * (matmul_kernels(rows, d, 0) + 1 +
                    pieces * matmul_kernels(rows / pieces, d, !llama && s->tp_rank == 0));
    case PHASE_HEAD: /* the final norm and the head's product, on the last rows only */
        return g.last_stage
                   ? 1 + matmul_kernels(s->seqs, cfg->quantize_head ? d : PRECISION_FP32, 0)
                   : 0;
    case PHASE_SAMPLE: return g.last_stage;
    default: return 0;
    }
}

/* The seconds of one product's FLOPs: tensor-core tiles in bf16/fp16, cuBLAS SGEMM for fp32
 * and the expanded int8w weights, the weights streamed by a GEMV up to 8 rows (its FLOPs never
 * bound it; the caller's bytes term does). */
static double gemm_seconds(const plan_cluster *c, const plan_ceilings *k, precision_kind dtype,
                           double rows, double in, double out) {
    if (rows <= 0) return 0;
    const double flops = 2 * rows * in * out;
    if (rows <= GPU_GEMV_MAX_ROWS) return flops / k->flops;
    const int half = dtype == PRECISION_BF16 || dtype == PRECISION_FP16;
    const double peak = half ? k->flops : k->flops * c->gpu.fp32_fraction;
    return flops / (peak * plan_gpu_gemm_efficiency(&c->gpu, rows, out, in));
}

/* One mixture-of-experts layer's products: the router's in fp32 (SGEMM) on every row, each
 * touched expert's gate|up and down on its rows_per_expert rows (phase_moe_stage_load: the
 * tiles of a product of a few rows are mostly padding, which is what makes batched experts
 * slow), and the shared expert's on every row. */
static double moe_gemm_seconds(const plan_cluster *c, const plan_ceilings *k, const shard_geom *g,
                               const model_config *cfg, const phase_step *s, precision_kind d,
                               double rows) {
    const double C = cfg->embd, M = g->mlp_local, S = g->shared_local;
    const phase_moe_load load = phase_moe_stage_load(cfg, s, g, rows);
    const double n = load.rows_per_expert;
    double t = gemm_seconds(c, k, PRECISION_FP32, rows, C, cfg->experts + (S > 0));
    t += load.touched * (gemm_seconds(c, k, d, n, C, 2 * M) + gemm_seconds(c, k, d, n, M, C));
    if (S > 0) t += gemm_seconds(c, k, d, rows, C, 2 * S) + gemm_seconds(c, k, d, rows, S, C);
    return t;
}

double plan_gpu_phase_time(const plan_cluster *c, const plan_ceilings *k, const plan_model *m,
                           const phase_step *s, phase p, const phase_cost *pc, int *memory_bound) {
    const model_config *cfg = &m->cfg;
    shard_geom g;
    phase_step_geom(cfg, s, &g);
    const int llama = arch_is_llama(cfg->arch);
    const precision_kind d = s->weight_dtype;
    const double rows = (double)s->seqs * s->new_positions, L = g.n_layers;
    const double C = cfg->embd, A = g.attn_dim, Mlp = g.mlp_local;
    const int pieces = s->row_pieces > 1 ? s->row_pieces : 1;
    const int ctx = s->past_positions + s->new_positions;
    double t_flops = pc->flops / k->flops; /* elementwise phases: never the bound on a GPU */
    double bw = k->bw * c->gpu.hbm_fraction;
    switch (p) {
    case PHASE_QKV_GEMM:
        t_flops =
            L * gemm_seconds(c, k, d, rows, C, llama ? A + 2.0 * g.n_kv_heads * g.head_dim : 3 * A);
        break;
    case PHASE_ATTN_OUT_GEMM:
        t_flops = L * pieces * gemm_seconds(c, k, d, rows / pieces, A, C);
        break;
    case PHASE_MLP_GEMM:
        if (cfg->experts > 0) {
            t_flops = L * moe_gemm_seconds(c, k, &g, cfg, s, d, rows);
            break;
        }
        t_flops = L * (gemm_seconds(c, k, d, rows, C, llama ? 2 * Mlp : Mlp) +
                       pieces * gemm_seconds(c, k, d, rows / pieces, Mlp, C));
        break;
    case PHASE_HEAD:
        t_flops = gemm_seconds(c, k, cfg->quantize_head ? d : PRECISION_FP32,
                               g.last_stage ? s->seqs : 0, C, g.vocab_local);
        break;
    case PHASE_ATTENTION:
        if (s->new_positions > 1)
            t_flops =
                pc->flops / (k->flops * plan_gpu_attention_efficiency(&c->gpu, s->seqs, g.n_heads,
                                                                      s->new_positions, ctx));
        else
            bw *= plan_gpu_decode_fill(&c->gpu, s->seqs, g.n_kv_heads, ctx);
        break;
    default: break;
    }
    const double t_bytes = pc->bytes / bw;
    if (memory_bound) *memory_bound = t_bytes > t_flops;
    /* tripar captures only decode steps in a graph (backend.cuda_graphs), never a prefill */
    const double launch =
        m->cuda_graphs && s->new_positions == 1 ? c->gpu.graph_launch : c->gpu.launch;
    /* the host's turn between two steps (the sampled token back, the next step set up) is
     * counted once per step, with the sampling on the last stage */
    const double host = p == PHASE_SAMPLE && g.last_stage ? c->gpu.step_overhead : 0;
    return fmax(t_flops, t_bytes) + plan_gpu_phase_kernels(cfg, s, p) * launch + host;
}
