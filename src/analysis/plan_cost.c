/* The planner's cost model: the validity of a strategy, the memory per rank, the latency of
 * one strategy from per-phase rooflines, and the enumeration of strategies (docs/planner.md
 * gives each equation and assumption; collectives are plan_collectives.c, placement and shared
 * nodes plan_placement.c). Compute phases are costed with metrics/phase_cost.c, the same
 * analytic FLOPs and bytes `tripar report --roofline` reads measured runs against. */
#include "analysis/plan_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "engine/engine.h"
#include "analysis/plan_gpu.h"
#include "analysis/plan_internal.h"

enum { F32 = 4, I32 = 4 };

/* ---- validity ------------------------------------------------------------------------- */

/* Whether tripar takes parallel.ep (job_validate_ep): 1, or blocks of a mixture's experts
 * inside the TP group (ep divides tp) or across ep / tp replicas (tp divides ep, ep / tp divides
 * dp), ep dividing the experts. */
static int ep_fits(const model_config *cfg, int dp, int tp, int ep) {
    if (ep <= 1) return 1;
    if (cfg->experts <= 0 || cfg->experts % ep) return 0;
    return ep <= tp ? tp % ep == 0 : ep % tp == 0 && dp % (ep / tp) == 0;
}

int plan_strategy_valid(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                        const plan_strategy *s, char *why, int why_len) {
    const model_config *cfg = &m->cfg;
    const int kv = cfg->kv_heads > 0 ? cfg->kv_heads : cfg->heads;
    const int world = s->dp * s->tp * s->pp;
    if (cfg->heads % s->tp) {
        snprintf(why, (size_t)why_len, "tp=%d does not divide heads=%d", s->tp, cfg->heads);
        return 0;
    }
    if (kv % s->tp && s->tp % kv) {
        snprintf(why, (size_t)why_len, "tp=%d neither divides nor is a multiple of kv_heads=%d",
                 s->tp, kv);
        return 0;
    }
    if (!ep_fits(cfg, s->dp, s->tp, s->ep)) {
        snprintf(why, (size_t)why_len,
                 "ep=%d neither divides tp=%d nor is tp times a divisor of dp=%d, or does not "
                 "divide experts=%d",
                 s->ep, s->tp, s->dp, cfg->experts);
        return 0;
    }
    if (s->pp > cfg->layers) {
        snprintf(why, (size_t)why_len, "pp=%d > layers=%d", s->pp, cfg->layers);
        return 0;
    }
    if (w->batch < s->dp) {
        snprintf(why, (size_t)why_len, "dp=%d > batch=%d", s->dp, w->batch);
        return 0;
    }
    const int smallest = w->batch / s->dp; /* balanced: the first replica has the fewest */
    if (s->microbatches > smallest || s->microbatches > ENGINE_MAX_MICRO) {
        snprintf(why, (size_t)why_len, "%d micro-batches > %d sequences per replica",
                 s->microbatches, smallest);
        return 0;
    }
    if (s->order == 0) { /* auto: tp divides every node's rank count (mesh_layout_auto) */
        const int D = c->devices_per_node, last = world % D ? world % D : D;
        if ((world > D && D % s->tp) || last % s->tp) {
            snprintf(why, (size_t)why_len, "auto: tp=%d does not fit the %d ranks of a node", s->tp,
                     world > D ? D : world);
            return 0;
        }
    }
    return 1;
}

/* ---- memory --------------------------------------------------------------------------- */

/* The share of the model the rank at (tp_rank, pp_rank) of s holds, expert blocks included. */
static void strategy_geom(const model_config *cfg, const plan_strategy *s, int tp_rank,
                          int pp_rank, shard_geom *g) {
    shard_geom_init(g, cfg, s->tp, tp_rank, s->pp, pp_rank);
    shard_geom_set_ep(g, cfg, s->ep, 0); /* ep > tp: replica 0's block, E / ep like any other */
}

double plan_rank_weight_bytes(const model_config *cfg, precision_kind weight_dtype,
                              const plan_strategy *s, int tp_rank, int pp_rank) {
    shard_geom g;
    strategy_geom(cfg, s, tp_rank, pp_rank, &g);
    model table;
    model_tensor_table(&table, cfg, &g, model_weight_dtype(weight_dtype));
    return (double)model_weight_bytes(&table);
}

void plan_rank_memory(const plan_model *m, const plan_workload *w, const plan_strategy *s,
                      int tp_rank, int pp_rank, double *weights, double *activations, double *kv) {
    shard_geom g;
    strategy_geom(&m->cfg, s, tp_rank, pp_rank, &g);
    *weights = plan_rank_weight_bytes(&m->cfg, m->weight_dtype, s, tp_rank, pp_rank);
    /* the engine's own arena table, for the largest replica (the last) and no captured
     * activations (so the LM head runs on each sequence's last row only) */
    engine_config ec;
    memset(&ec, 0, sizeof ec);
    ec.batch = w->batch, ec.prompt_len = w->prompt, ec.new_tokens = w->new_tokens;
    ec.microbatches = s->microbatches;
    ec.kv_cache = m->kv_cache, ec.kv_block = m->kv_block;
    ec.kv_dtype = model_kv_dtype(m->kv_dtype);
    size_t act_bytes, kv_bytes;
    engine_arena_plan(&ec, &g, &m->cfg, s->dp, s->dp - 1, &act_bytes, &kv_bytes);
    *activations = (double)act_bytes;
    *kv = (double)kv_bytes;
}

/* ---- latency -------------------------------------------------------------------------- */

void plan_rates_default(plan_rates *r) {
    memset(r, 0, sizeof *r);
    r->mixed_cost[0] = r->mixed_cost[1] = 1.0;
    for (int shared = 0; shared < 2; shared++)
        r->comm_cost[shared][0] = r->comm_cost[shared][1] = 1.0;
    r->overlap_efficiency = -1; /* not calibrated: by library (plan_rates, docs/planner.md) */
}

double plan_rate_efficiency(const plan_rates *r, int period, phase p, double intensity) {
    const plan_rate_curve *k = &r->curve[period][p];
    if (k->n == 0) return 1.0;
    if (!(intensity > k->intensity[0])) return k->efficiency[0];
    for (int i = 1; i < k->n; i++)
        if (intensity < k->intensity[i]) {
            const double x0 = log(k->intensity[i - 1]), x1 = log(k->intensity[i]);
            const double f = (log(intensity) - x0) / (x1 - x0);
            return k->efficiency[i - 1] + f * (k->efficiency[i] - k->efficiency[i - 1]);
        }
    return k->efficiency[k->n - 1];
}

double plan_phase_roofline(const plan_cluster *c, const plan_ceilings *k, double flops,
                           double bytes, double weight_bytes, double rank_weights,
                           int *memory_bound) {
    /* a CPU node's cores share one cache, and its busy ranks each keep their weights there */
    const int sharers = c->cores_per_node > 0 && k->busy > 1 ? k->busy : 1;
    const int cached = c->llc_bytes > 0 && sharers * rank_weights <= c->llc_bytes;
    const double t_flops = flops / k->flops;
    const double t_bytes =
        cached ? weight_bytes / (c->llc_bw / k->share) + (bytes - weight_bytes) / k->bw
               : bytes / k->bw;
    if (memory_bound) *memory_bound = t_bytes > t_flops;
    return fmax(t_flops, t_bytes);
}

static const phase COMPUTE_PHASES[] = {PHASE_EMBED,     PHASE_NORM,          PHASE_QKV_GEMM,
                                       PHASE_ATTENTION, PHASE_ATTN_OUT_GEMM, PHASE_MLP_GEMM,
                                       PHASE_EP_EXPERT, PHASE_HEAD,          PHASE_SAMPLE};
enum { N_COMPUTE = sizeof COMPUTE_PHASES / sizeof COMPUTE_PHASES[0] };

/* One stage's work on one micro-batch in one period. */
typedef struct {
    double compute, layer_compute; /* all phases; the per-layer ones alone */
    double tp_total, tp_hidden;    /* its TP all-reduces, and the part overlap hides */
    double tp_calls;               /* how many all-reduces tp_total is */
    double ep_total;               /* its EP all-to-alls across replicas (blocking) */
    plan_allreduce_algo tp_algo;   /* the layers' all-reduce algorithm */
    plan_proto tp_proto;           /* and NCCL's protocol for it */
    double phase_time[N_COMPUTE];
    int memory_bound[N_COMPUTE];
    int layers;
} stage_time;

static void stage_cost(const plan_model *m, const plan_cluster *c, const plan_ceilings *k,
                       const plan_rates *r, const plan_strategy *s, const plan_group *tp,
                       int period, int pp_rank, int seqs, int new_positions, int past,
                       stage_time *out) {
    memset(out, 0, sizeof *out);
    phase_step step = {.tp = s->tp,
                       .tp_rank = s->tp - 1,
                       .ep = s->ep,
                       .pp = s->pp,
                       .pp_rank = pp_rank,
                       .weight_dtype = m->weight_dtype,
                       .kv_cache = m->kv_cache,
                       .kv_block = m->kv_block,
                       .kv_dtype = m->kv_dtype,
                       .seqs = seqs,
                       .new_positions = new_positions,
                       .past_positions = past,
                       .expert_share = r->expert_runs > 0 ? r->expert_share : NULL};
    double overlappable = 0;
    /* a mixture of experts' MLP is never cut into overlapped pieces (forward.c) */
    const int moe = m->cfg.experts > 0;
    const int chunks = m->chunks < 1                   ? 1
                       : m->chunks > ENGINE_MAX_CHUNKS ? ENGINE_MAX_CHUNKS
                                                       : m->chunks;
    /* with overlap a dense prefill runs as nano-batches, each one's all-reduces under the
     * other's compute (forward.c nano_split; NCCL's stream-ordered ones keep one) */
    nano_batch nanos[NANO_BATCHES_MAX];
    const int nano = s->overlap && s->tp > 1 && !moe && m->collectives != PLAN_COLL_NCCL;
    const int n_nano = nano_batch_split(nanos, nano, seqs, new_positions, past);
    if (n_nano > 1) step.nano_chunks = chunks;
    const double rank_weights =
        c->llc_bytes > 0 ? plan_rank_weight_bytes(&m->cfg, m->weight_dtype, s, s->tp - 1, pp_rank)
                         : 0;
    for (int i = 0; i < N_COMPUTE; i++) {
        phase_cost pc;
        phase_cost_compute(&m->cfg, &step, COMPUTE_PHASES[i], &pc);
        const double roof = plan_phase_roofline(c, k, pc.flops, pc.bytes, pc.weight_bytes,
                                                rank_weights, &out->memory_bound[i]);
        const double intensity = pc.bytes > 0 ? pc.flops / pc.bytes : 0;
        /* a core the scheduler switches between replicas costs more than its share */
        const double mixed = k->mixed && k->share > 1 ? r->mixed_cost[period] : 1.0;
        /* a GPU phase no calibration covers: the efficiency models, not the bare roofline */
        const int gpu_model = c->gpu.given && r->curve[period][COMPUTE_PHASES[i]].n == 0;
        const double t =
            gpu_model
                ? plan_gpu_phase_time(c, k, m, &step, COMPUTE_PHASES[i], &pc, &out->memory_bound[i])
                : roof * mixed / plan_rate_efficiency(r, period, COMPUTE_PHASES[i], intensity);
        out->phase_time[i] = t;
        out->compute += t;
        const phase p = COMPUTE_PHASES[i];
        if (p != PHASE_EMBED && p != PHASE_HEAD && p != PHASE_SAMPLE) out->layer_compute += t;
        /* overlap splits the row-parallel products into pieces whose all-reduces run
         * under the next piece (parallel.overlap) */
        if (p == PHASE_ATTN_OUT_GEMM || (p == PHASE_MLP_GEMM && !moe)) overlappable += t;
    }
    if (n_nano > 1) overlappable = out->layer_compute;
    shard_geom g;
    strategy_geom(&m->cfg, s, s->tp - 1, pp_rank, &g);
    out->layers = g.n_layers;
    if (s->ep > s->tp) {
        /* per layer (moe_ep.c): the rows-per-expert counts, then the routed rows this rank
         * dispatches (its TP index's share of the replica's rows x k, each row C floats) and
         * the same rows back in the combine, each an all-to-all over the EP group; blocking:
         * the shared expert under the dispatch (parallel.overlap) is not counted as hiding it */
        const double rows = (double)seqs * new_positions, E = m->cfg.experts;
        const double routed = rows * m->cfg.experts_top_k / s->tp;
        plan_group ep;
        plan_ep_group(c, s, &ep);
        const double counts = plan_alltoall(c, &ep, E * I32, m->collectives, k->busy);
        const double moved = plan_alltoall(c, &ep, routed * m->cfg.embd * F32, m->collectives,
                                           k->busy);
        out->ep_total = g.n_layers * (counts + 2 * moved);
    }
    if (s->tp > 1) {
        /* two all-reduces of the activations per layer, and the sampler's MAXLOC on the last;
         * with overlap each goes in pieces, one all-reduce of its rows per piece of each
         * nano-batch (forward.c) */
        const double rows = (double)seqs * new_positions;
        int pieces = 0;
        for (int i = 0; i < n_nano; i++)
            pieces += s->overlap ? (int)fmin(chunks, nanos[i].rows) : 1;
        const double bytes = rows * m->cfg.embd * F32 / pieces;
        const plan_collective ar = pieces > 1
                                       ? plan_iallreduce(c, tp, bytes, m->collectives, k->busy)
                                       : plan_allreduce_best(c, tp, bytes, m->collectives, k->busy);
        out->tp_algo = ar.algo, out->tp_proto = ar.proto;
        out->tp_total = 2.0 * g.n_layers * pieces * ar.seconds;
        /* the all-reduces overlap may run under a product: a mixture of experts' MLP sums
         * every expert in one blocking all-reduce of all the rows per layer (forward.c), so
         * only the attention output's are, and the MLP's is whole */
        double in_pieces = out->tp_total;
        if (moe) {
            in_pieces = g.n_layers * pieces * ar.seconds;
            const plan_collective whole =
                pieces > 1 ? plan_allreduce_best(c, tp, bytes * pieces, m->collectives, k->busy)
                           : ar;
            out->tp_total = in_pieces + g.n_layers * whole.seconds;
        }
        /* what the calibration runs measured beyond the model, on nodes like this one */
        const int shared = plan_node_time_shared(c, s->dp * s->tp * s->pp);
        const double scale = r->comm_cost[shared][period], wait = r->comm_wait[shared][period];
        const double piece_calls = (double)g.n_layers * pieces;
        out->tp_calls = moe ? piece_calls + g.n_layers : 2 * piece_calls;
        out->tp_total = scale * out->tp_total + wait * out->tp_calls;
        in_pieces = scale * in_pieces + wait * (moe ? piece_calls : out->tp_calls);
        const double hides = r->overlap_efficiency >= 0         ? r->overlap_efficiency
                             : m->collectives == PLAN_COLL_NCCL ? 0.5
                                                                : 0.0;
        if (s->overlap) out->tp_hidden = hides * fmin(in_pieces, overlappable);
        if (g.last_stage) {
            out->tp_total +=
                scale * plan_allreduce_best(c, tp, seqs * 8.0, m->collectives, k->busy).seconds +
                wait;
            out->tp_calls += 1;
        }
    }
}

static double stage_busy(const stage_time *t) {
    return t->compute + t->tp_total - t->tp_hidden + t->ep_total;
}

/* One period: the first and last stage exactly, the middle ones from the last stage's
 * per-layer time; the bottleneck (the busier of the first and last: a middle stage holds no
 * more layers than the last and no embedding) and the sum of every stage's busy time. */
typedef struct {
    stage_time first, last;
    double t_max, sum_stages, comp_max, tp_exposed_max, tp_total_max, tp_hidden_max, ep_max;
    double tp_calls_max;
    double share_last, share_max; /* the last stage's time-sharing, and the most of any stage */
    int busy;                     /* the first stage's busy ranks on a node (plan_ceilings) */
    const stage_time *bottleneck;
} period_time;

/* The mean time-sharing factor of the middle stages 1 .. pp-2; 1 when every rank of the node
 * has a core of its own (no need to look at each stage). */
static double middle_share(const plan_cluster *c, const plan_strategy *s, int batch,
                           int microbatches, int period) {
    if (s->pp <= 2 || !plan_node_time_shared(c, s->dp * s->tp * s->pp)) return 1;
    double sum = 0;
    for (int stage = 1; stage < s->pp - 1; stage++)
        sum += plan_stage_ceilings(c, s, batch, microbatches, period, stage).share;
    return sum / (s->pp - 2);
}

static void period_cost(const plan_model *m, const plan_cluster *c, const plan_rates *r,
                        const plan_strategy *s, const plan_group *tp, int batch, int microbatches,
                        int period, int seqs, int new_positions, int past, period_time *out) {
    const plan_ceilings k_first = plan_stage_ceilings(c, s, batch, microbatches, period, 0);
    stage_cost(m, c, &k_first, r, s, tp, period, 0, seqs, new_positions, past, &out->first);
    out->share_max = k_first.share;
    out->busy = k_first.busy;
    if (s->pp > 1) {
        const plan_ceilings k_last =
            plan_stage_ceilings(c, s, batch, microbatches, period, s->pp - 1);
        stage_cost(m, c, &k_last, r, s, tp, period, s->pp - 1, seqs, new_positions, past,
                   &out->last);
        out->share_last = k_last.share;
        out->share_max = fmax(out->share_max, k_last.share);
    } else {
        out->last = out->first;
        out->share_last = k_first.share;
    }
    const double t0 = stage_busy(&out->first), tl = stage_busy(&out->last);
    out->bottleneck = tl >= t0 ? &out->last : &out->first;
    out->t_max = fmax(t0, tl);
    out->sum_stages = s->pp > 1 ? t0 + tl : t0;
    if (s->pp > 2) {
        const int middle_layers = m->cfg.layers - out->first.layers - out->last.layers;
        /* pp <= layers, so the last stage has a layer; its sampler's MAXLOC is counted in
         * with its layers' all-reduces, a slight overestimate for the middle stages */
        const stage_time *l = &out->last;
        /* the last stage's layers at the middle stages' own time-sharing */
        const double mid = middle_share(c, s, batch, microbatches, period);
        const double per_layer = (l->layer_compute * mid / out->share_last + l->tp_total -
                                  l->tp_hidden + l->ep_total) /
                                 l->layers;
        out->sum_stages += middle_layers * per_layer;
        out->share_max = fmax(out->share_max, mid);
    }
    const stage_time *b = out->bottleneck;
    out->comp_max = b->compute;
    out->tp_total_max = b->tp_total;
    out->tp_calls_max = b->tp_calls;
    out->tp_hidden_max = b->tp_hidden;
    out->tp_exposed_max = b->tp_total - b->tp_hidden;
    out->ep_max = b->ep_total;
}

/* The stage-to-stage transfers of one micro-batch along the worst PP group, the node_busy
 * ranks of a node sending theirs at once over its links. */
static double pp_chain(const plan_cluster *c, const plan_group *pp, double bytes, int node_busy) {
    double t = 0;
    for (int k = 0; k < PLAN_TIER_COUNT; k++)
        if (pp->hops[k]) {
            const plan_tier tier = plan_tier_shared(c, (plan_tier_kind)k, node_busy);
            t += pp->hops[k] * plan_p2p(bytes, &tier);
        }
    return t;
}

/* The phase of the bottleneck stage that takes the most time, for the reason of a row. */
static void top_phase_set(plan_prediction *out, const stage_time *b, int period) {
    int top = 0;
    for (int i = 1; i < N_COMPUTE; i++)
        if (b->phase_time[i] > b->phase_time[top]) top = i;
    out->top_period = period;
    out->top_phase = COMPUTE_PHASES[top];
    out->top_memory_bound = b->memory_bound[top];
    out->top_share = b->compute > 0 ? b->phase_time[top] / b->compute : 0;
}

void plan_predict(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                  const plan_rates *r, const plan_strategy *s, plan_prediction *out) {
    memset(out, 0, sizeof *out);
    out->s = *s;
    plan_groups(c, s, &out->tp_group, &out->pp_group, &out->dp_group);
    microbatch_split split; /* the slowest replica's (the largest), as the engine splits it */
    microbatch_split_init(&split, replica_sequences_max(w->batch, s->dp), s->microbatches);
    const int n_micro = split.n_micro, mb = split.max_size;
    const double C = m->cfg.embd;
    /* the fullest node's busy ranks time-share its cores, stage by stage (docs/planner.md) */
    out->node_ranks = plan_node_ranks(c, s->dp * s->tp * s->pp);

    /* prefill: every micro-batch through every stage; the last leaves after the fill, its
     * own stages and the chain of transfers: sum + (m-1) max + transfers */
    period_time pf;
    period_cost(m, c, r, s, &out->tp_group, w->batch, n_micro, 0, mb, w->prompt, 0, &pf);
    out->time_share = pf.share_max;
    out->busy_ranks = pf.busy;
    const double pf_chain =
        pp_chain(c, &out->pp_group, (double)mb * w->prompt * C * F32, out->busy_ranks);
    out->ttft = pf.sum_stages + (n_micro - 1) * pf.t_max + pf_chain;
    out->prefill_bubble_fraction = plan_bubble_fraction(s->pp, n_micro);
    out->compute += n_micro * pf.comp_max;
    out->tp_exposed += n_micro * pf.tp_exposed_max;
    out->ep_exposed += n_micro * pf.ep_max;
    out->bubble += pf.sum_stages - pf.t_max;
    out->pp_exposed += pf_chain;
    out->tp_total += n_micro * pf.tp_total_max;
    out->tp_period[0] = n_micro * pf.tp_total_max;
    out->tp_calls[0] = n_micro * pf.tp_calls_max;
    out->tp_hidden += n_micro * pf.tp_hidden_max;
    out->pp_total += n_micro * pf_chain;
    out->tp_algo = pf.bottleneck->tp_algo, out->tp_proto = pf.bottleneck->tp_proto;
    top_phase_set(out, pf.bottleneck, 0);

    /* decode: micro-batches circulate through the stages and back to the first (the sampled
     * tokens), so a step takes the longer of one lap and m micro-batches on the bottleneck;
     * its context is the mean over the decode steps */
    const int steps = w->new_tokens - 1;
    if (steps > 0) {
        const int past = w->prompt + (steps - 1) / 2;
        period_time dc;
        period_cost(m, c, r, s, &out->tp_group, w->batch, n_micro, 1, mb, 1, past, &dc);
        double chain = pp_chain(c, &out->pp_group, (double)mb * C * F32, out->busy_ranks);
        if (s->pp > 1) chain += plan_p2p((double)mb * I32, &c->tier[out->pp_group.wrap]);
        const double lap = dc.sum_stages + chain, busy = n_micro * dc.t_max;
        out->tpot = fmax(lap, busy);
        const double idle = out->tpot - busy; /* the bottleneck waits on the lap */
        const double pp_part = fmin(chain, idle);
        out->compute += steps * n_micro * dc.comp_max;
        out->tp_exposed += steps * n_micro * dc.tp_exposed_max;
        out->ep_exposed += steps * n_micro * dc.ep_max;
        out->pp_exposed += steps * pp_part;
        out->bubble += steps * (idle - pp_part);
        out->tp_total += steps * n_micro * dc.tp_total_max;
        out->tp_period[1] = steps * n_micro * dc.tp_total_max;
        out->tp_calls[1] = steps * n_micro * dc.tp_calls_max;
        out->tp_hidden += steps * n_micro * dc.tp_hidden_max;
        out->pp_total += steps * n_micro * chain;
        out->tp_algo = dc.bottleneck->tp_algo, out->tp_proto = dc.bottleneck->tp_proto;
        top_phase_set(out, dc.bottleneck, 1);
    }
    /* the replicas' tokens gathered at the end (PHASE_DP_GATHER) */
    if (s->dp > 1)
        out->dp_gather =
            plan_allgather_ring(s->dp, (double)w->batch * (w->prompt + w->new_tokens) * I32,
                                &c->tier[out->dp_group.outer]);
    out->e2e = out->ttft + steps * out->tpot + out->dp_gather;
    out->tokens_per_s = (double)w->batch * w->new_tokens / out->e2e;
    out->requests_per_s = w->batch / out->e2e;

    /* memory: the fuller of the first and the last stage (the middle ones hold no more) */
    for (int k = 0; k < (s->pp > 1 ? 2 : 1); k++) {
        double wb, ab, kb;
        plan_rank_memory(m, w, s, s->tp - 1, k ? s->pp - 1 : 0, &wb, &ab, &kb);
        if (wb + ab + kb > out->rank_bytes) {
            out->rank_bytes = wb + ab + kb;
            out->weight_bytes = wb, out->act_bytes = ab, out->kv_bytes = kb;
        }
    }
    out->fits = out->rank_bytes <= c->device_memory;
}

/* ---- enumeration ---------------------------------------------------------------------- */

int plan_enumerate(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                   const plan_rates *r, int n, plan_prediction **out) {
    int count = 0, cap = 256;
    plan_prediction *list = xmalloc((unsigned long)cap * sizeof *list);
    char why[160];
    for (int tp = 1; tp <= n; tp++) {
        if (n % tp) continue;
        for (int pp = 1; pp <= n / tp; pp++) {
            if ((n / tp) % pp) continue;
            const int dp = n / tp / pp;
            /* an order whose TP, PP and DP groups sit on the nodes as an earlier order's do
             * costs the same (the cost model sees only the groups): it is listed once; on a
             * node whose ranks time-share its cores an order also decides which ranks share a
             * core, and every order is listed */
            const int time_shared = plan_node_time_shared(c, n);
            plan_group seen[PLAN_ORDER_COUNT][3];
            int n_seen = 0;
            for (int order = 0; order < PLAN_ORDER_COUNT; order++) {
                plan_strategy s = {
                    .dp = dp, .tp = tp, .pp = pp, .microbatches = 1, .overlap = 0, .order = order};
                if (!plan_strategy_valid(m, w, c, &s, why, sizeof why)) continue;
                plan_group *g = seen[n_seen];
                plan_groups(c, &s, &g[0], &g[1], &g[2]);
                int dup = 0;
                for (int i = 0; i < n_seen && !time_shared; i++)
                    dup |= !memcmp(seen[i], g, sizeof seen[i]);
                if (dup) continue;
                n_seen++;
                for (int mb = 1; mb <= ENGINE_MAX_MICRO; mb *= 2) {
                    for (int overlap = 0; overlap <= (tp > 1); overlap++) {
                        /* ep 1, then each expert block count the TP group takes, then the
                         * multiples of tp that span ep / tp replicas */
                        for (int ep = 1; ep <= (m->cfg.experts > 0 ? tp * dp : 1); ep++) {
                            s.microbatches = mb, s.overlap = overlap, s.ep = ep;
                            if (!ep_fits(&m->cfg, dp, tp, ep)) continue;
                            if (!plan_strategy_valid(m, w, c, &s, why, sizeof why)) break;
                            if (count == cap) {
                                cap *= 2;
                                list = realloc(list, (size_t)cap * sizeof *list);
                                CHECK(list, "out of memory listing strategies");
                            }
                            plan_predict(m, w, c, r, &s, &list[count++]);
                        }
                        s.ep = 1;
                    }
                    if (!plan_strategy_valid(m, w, c, &s, why, sizeof why)) break;
                }
            }
        }
    }
    *out = list;
    return count;
}
