/* The planner's cost model: collective costs on alpha-beta tiers, rank placement, memory per
 * rank, and the latency of one strategy from per-phase rooflines (docs/planner.md gives each
 * equation and assumption). Compute phases are costed with metrics/phase_cost.c, the same
 * analytic FLOPs and bytes `tripar report --roofline` reads measured runs against. */
#include "metrics/plan_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"

enum { F32 = 4, I32 = 4 };
/* engine.h's ENGINE_MAX_MICRO: the engine refuses more micro-batches (a layer above us);
 * ENGINE_MAX_CHUNKS: it cuts a product into at most this many pieces */
enum { PLAN_MAX_MICRO = 64, PLAN_MAX_CHUNKS = 64 };

const char *const plan_order_names[PLAN_ORDER_COUNT] = {
    "auto", "tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp", "dp-tp-pp", "dp-pp-tp"};

const char *plan_allreduce_algo_name(plan_allreduce_algo a) {
    static const char *const names[] = {
        "-", "ring", "tree", "hierarchical", "recursive-doubling", "rabenseifner"};
    return names[a];
}

const char *plan_tier_name(plan_tier_kind t) {
    static const char *const names[] = {"intra", "inter", "inter2"};
    return names[t];
}

/* ---- collectives on one tier ---------------------------------------------------------- */

static double link_rate(const plan_tier *t) { return t->beta * t->efficiency; }

/* Ring all-reduce (reduce-scatter then all-gather): 2 (p-1) steps of alpha, and each rank sends
 * 2 (p-1)/p of the message. */
double plan_allreduce_ring(int p, double bytes, const plan_tier *t) {
    if (p <= 1) return 0;
    return 2.0 * (p - 1) * t->alpha + 2.0 * (p - 1) / p * bytes / link_rate(t);
}

/* NCCL's double binary tree: a reduce up and a broadcast down a tree of depth log2(p), each
 * rank sending the whole message once each way (the two trees carry half each, every rank
 * being a leaf in one and an inner node in the other). */
double plan_allreduce_tree(int p, double bytes, const plan_tier *t) {
    if (p <= 1) return 0;
    return 2.0 * ceil(log2((double)p)) * t->alpha + 2.0 * bytes / link_rate(t);
}

/* Ring all-gather of p blocks of bytes / p each: (p-1) steps, (p-1)/p of the result sent. */
double plan_allgather_ring(int p, double bytes, const plan_tier *t) {
    if (p <= 1) return 0;
    return (p - 1) * t->alpha + (double)(p - 1) / p * bytes / link_rate(t);
}

/* Open MPI's recursive algorithms run on the largest power of two p2 <= p: the p - p2 extra
 * ranks fold into a neighbour first (ranks 2i and 2i+1, i < extra) and get the result back
 * last. Survivor j is rank 2j+1 (j < extra) or j + extra. A step joining survivors at
 * distance `mask` is on `outer` when any pair it joins sits on two nodes (per_node ranks a
 * node, in order). */
typedef struct {
    int p2, extra, per_node;
} recursive_group;

static recursive_group recursive_group_of(int p, int per_node) {
    recursive_group g = {1, 0, per_node};
    while (2 * g.p2 <= p)
        g.p2 *= 2;
    g.extra = p - g.p2;
    return g;
}

static int survivor_rank(const recursive_group *g, int j) {
    return j < g->extra ? 2 * j + 1 : j + g->extra;
}

static const plan_tier *recursive_step_tier(const recursive_group *g, int mask,
                                            const plan_tier *intra, const plan_tier *outer) {
    for (int j = 0; j < g->p2; j++)
        if (survivor_rank(g, j) / g->per_node != survivor_rank(g, j ^ mask) / g->per_node)
            return outer;
    return intra;
}

/* The fold of the extra ranks and its unfold: two exchanges of the whole message. */
static double recursive_fold(const recursive_group *g, double bytes, const plan_tier *intra,
                             const plan_tier *outer) {
    if (!g->extra) return 0;
    int crosses = 0;
    for (int i = 0; i < g->extra; i++)
        crosses |= 2 * i / g->per_node != (2 * i + 1) / g->per_node;
    const plan_tier *t = crosses ? outer : intra;
    return 2 * (t->alpha + bytes / link_rate(t));
}

double plan_allreduce_recursive_doubling(int p, int per_node, double bytes, const plan_tier *intra,
                                         const plan_tier *outer) {
    if (p <= 1) return 0;
    const recursive_group g = recursive_group_of(p, per_node);
    double t = recursive_fold(&g, bytes, intra, outer);
    for (int mask = 1; mask < g.p2; mask <<= 1) { /* the whole message each step */
        const plan_tier *step = recursive_step_tier(&g, mask, intra, outer);
        t += step->alpha + bytes / link_rate(step);
    }
    return t;
}

double plan_allreduce_rabenseifner(int p, int per_node, double bytes, const plan_tier *intra,
                                   const plan_tier *outer) {
    if (p <= 1) return 0;
    const recursive_group g = recursive_group_of(p, per_node);
    double t = recursive_fold(&g, bytes, intra, outer);
    /* reduce-scatter by recursive halving (distance p2/2 first, half the message), then the
     * all-gather by recursive doubling back: each distance twice, with the same bytes */
    double piece = bytes;
    for (int mask = g.p2 / 2; mask >= 1; mask /= 2) {
        piece /= 2;
        const plan_tier *step = recursive_step_tier(&g, mask, intra, outer);
        t += 2 * (step->alpha + piece / link_rate(step));
    }
    return t;
}

double plan_allreduce_binomial(int p, int per_node, double bytes, const plan_tier *intra,
                               const plan_tier *outer) {
    double t = 0;
    for (int mask = 1; mask < p; mask <<= 1) { /* pairs (j, j + mask), j a multiple of 2 mask */
        int crosses = 0;
        for (int j = 0; j + mask < p && !crosses; j += 2 * mask)
            crosses = j / per_node != (j + mask) / per_node;
        const plan_tier *round = crosses ? outer : intra;
        t += 2 * (round->alpha + bytes / link_rate(round)); /* up the tree, and down */
    }
    return t;
}

/* Open MPI 4.1's fixed decision for a commutative all-reduce (coll/tuned,
 * ompi_coll_tuned_allreduce_intra_dec_fixed), by communicator size and message bytes. */
static plan_allreduce_algo mpi_allreduce_algo(int p, double bytes) {
    if (p < 4) {
        if (bytes < 8) return PLAN_AR_RING;
        if (bytes < 4096) return PLAN_AR_RECURSIVE_DOUBLING;
        if (bytes < 8192) return PLAN_AR_RING;
        if (bytes < 16384) return PLAN_AR_RECURSIVE_DOUBLING;
        if (bytes < 262144) return PLAN_AR_RING; /* and the segmented ring: the same cost */
        return PLAN_AR_RABENSEIFNER;
    }
    if (p < 8) {
        if (bytes < 16) return PLAN_AR_RING;
        return bytes < 8192 ? PLAN_AR_RECURSIVE_DOUBLING : PLAN_AR_RABENSEIFNER;
    }
    if (p < 16) return bytes < 8192 ? PLAN_AR_RECURSIVE_DOUBLING : PLAN_AR_RABENSEIFNER;
    if (p < 32) {
        if (bytes < 64) return PLAN_AR_RING;
        return bytes < 4096 ? PLAN_AR_RECURSIVE_DOUBLING : PLAN_AR_RABENSEIFNER;
    }
    if (p < 64) return bytes < 128 ? PLAN_AR_RING : PLAN_AR_RABENSEIFNER;
    if (p < 128) return bytes < 262144 ? PLAN_AR_RECURSIVE_DOUBLING : PLAN_AR_RABENSEIFNER;
    /* larger communicators: reduce + broadcast for the smallest messages there, costed as
     * recursive doubling; Rabenseifner past a few KiB */
    return bytes < 16384 ? PLAN_AR_RECURSIVE_DOUBLING : PLAN_AR_RABENSEIFNER;
}

double plan_p2p(double bytes, const plan_tier *t) { return t->alpha + bytes / link_rate(t); }

double plan_bubble_fraction(int pp, int microbatches) {
    return (double)(pp - 1) / (microbatches + pp - 1);
}

static plan_collective collective_pick(plan_collective best, double seconds,
                                       plan_allreduce_algo algo) {
    if (best.algo == PLAN_AR_NONE || seconds < best.seconds)
        best = (plan_collective){seconds, algo};
    return best;
}

/* The outer tier as `flows` crossing flows of one node see it (plan_allreduce_best). */
static plan_tier tier_shared(const plan_cluster *c, plan_tier_kind kind, int flows) {
    plan_tier t = c->tier[kind];
    const int links = t.links_per_node > 0 ? t.links_per_node : c->devices_per_node;
    if (kind != PLAN_TIER_INTRA && flows > links) t.beta *= (double)links / flows;
    return t;
}

plan_collective plan_iallreduce(const plan_cluster *c, const plan_group *g, double bytes,
                                plan_collectives lib, int node_busy) {
    if (lib != PLAN_COLL_MPI || g->size <= 1)
        return plan_allreduce_best(c, g, bytes, lib, node_busy);
    const plan_tier *intra = &c->tier[PLAN_TIER_INTRA];
    const int groups = node_busy > g->per_node ? node_busy / g->per_node : 1;
    const plan_tier per_group = tier_shared(c, g->outer, groups);
    const int l = g->nodes <= 1 ? g->size : g->per_node;
    const plan_tier *outer = g->nodes <= 1 ? intra : &per_group;
    return (plan_collective){plan_allreduce_binomial(g->size, l, bytes, intra, outer),
                             PLAN_AR_BINOMIAL};
}

plan_collective plan_allreduce_best(const plan_cluster *c, const plan_group *g, double bytes,
                                    plan_collectives lib, int node_busy) {
    plan_collective best = {0, PLAN_AR_NONE};
    if (g->size <= 1) return best;
    const plan_tier *intra = &c->tier[PLAN_TIER_INTRA];
    const int groups = node_busy > g->per_node ? node_busy / g->per_node : 1;
    const plan_tier per_group = tier_shared(c, g->outer, groups);
    const plan_tier per_rank = tier_shared(c, g->outer, node_busy);
    if (lib == PLAN_COLL_MPI) {
        /* the algorithm Open MPI picks, not the cheapest: the ring has one flow a group leave
         * a node per step, the recursive ones one per member */
        const int l = g->nodes <= 1 ? g->size : g->per_node;
        const plan_tier *ring_t = g->nodes <= 1 ? intra : &per_group;
        const plan_tier *rank_t = g->nodes <= 1 ? intra : &per_rank;
        const plan_allreduce_algo algo = mpi_allreduce_algo(g->size, bytes);
        const double seconds =
            algo == PLAN_AR_RING ? plan_allreduce_ring(g->size, bytes, ring_t)
            : algo == PLAN_AR_RECURSIVE_DOUBLING
                ? plan_allreduce_recursive_doubling(g->size, l, bytes, intra, rank_t)
                : plan_allreduce_rabenseifner(g->size, l, bytes, intra, rank_t);
        return (plan_collective){seconds, algo};
    }
    if (g->nodes <= 1) {
        best = collective_pick(best, plan_allreduce_ring(g->size, bytes, intra), PLAN_AR_RING);
        return collective_pick(best, plan_allreduce_tree(g->size, bytes, intra), PLAN_AR_TREE);
    }
    /* A flat ring crosses the network once per node and the node's own links elsewhere: its
     * latency mixes both tiers, its bandwidth is the slowest link's. */
    const plan_tier *outer = &per_group;
    const int p = g->size, k = g->nodes;
    double ring = 2.0 * ((p - k) * intra->alpha + k * outer->alpha) +
                  2.0 * (p - 1) / p * bytes / link_rate(outer);
    best = collective_pick(best, ring, PLAN_AR_RING);
    best = collective_pick(best, plan_allreduce_tree(p, bytes, outer), PLAN_AR_TREE);
    /* Hierarchical: reduce-scatter inside the node (l ranks), each rank all-reduces its 1/l
     * shard with its peers on the other nodes over its own link, all-gather inside. */
    const int l = g->per_node;
    if (l > 1) {
        double inside = 2.0 * plan_allgather_ring(l, bytes, intra); /* RS and AG cost the same */
        double across = fmin(plan_allreduce_ring(k, bytes / l, &per_rank),
                             plan_allreduce_tree(k, bytes / l, &per_rank));
        best = collective_pick(best, inside + across, PLAN_AR_HIER);
    }
    return best;
}

/* ---- placement ------------------------------------------------------------------------ */

/* Ranks go onto nodes in blocks of devices_per_node (mpirun --map-by slot, srun's block
 * distribution); the last node may hold fewer. */
static int node_of(const plan_cluster *c, int rank) { return rank / c->devices_per_node; }

static plan_tier_kind tier_between(const plan_cluster *c, int node_a, int node_b) {
    if (node_a == node_b) return PLAN_TIER_INTRA;
    const int g = c->inter2_group_nodes;
    if (g > 0 && c->tier[PLAN_TIER_INTER2].present && node_a / g != node_b / g)
        return PLAN_TIER_INTER2;
    return PLAN_TIER_INTER;
}

int plan_node_ranks(const plan_cluster *c, int world) {
    return world < c->devices_per_node ? world : c->devices_per_node;
}

/* The mesh axes, in the size[] and axes[] arrays below. */
enum { AXIS_TP_ = 0, AXIS_PP_ = 1, AXIS_DP_ = 2 };

/* The axes of an order, fastest first; auto is tp-pp-dp over node-sorted ranks, which block
 * placement already is. */
static void order_axes(int order, int axes[3]) {
    const char *name = plan_order_names[order == 0 ? 1 : order];
    for (int i = 0; i < 3; i++) {
        const char *a = name + 3 * i;
        axes[i] = a[0] == 't' ? AXIS_TP_ : a[0] == 'p' ? AXIS_PP_ : AXIS_DP_;
    }
}

/* ---- shared CPU nodes ----------------------------------------------------------------- */

/* A world rank's coordinate on one axis under the order. */
static int coord_of(const plan_strategy *s, const int axes[3], int axis, int rank) {
    int size[3];
    size[AXIS_TP_] = s->tp, size[AXIS_PP_] = s->pp, size[AXIS_DP_] = s->dp;
    for (int i = 0; axes[i] != axis; i++)
        rank /= size[axes[i]];
    return rank % size[axis];
}

/* What the busy ranks load the cores with while the stages first .. first+width-1 (mod pp)
 * compute, on the node that they load most. Node n holds world ranks n*D .. n*D+D-1 (block
 * placement), its local rank i on core i mod cores. A core's load is the work of its busy
 * ranks over the largest replica's rank's (the rank a stage is costed for): a processor-shared
 * core finishes its largest job once it has done all its jobs' work. In prefill a rank's work
 * follows its replica's sequences (the products are FLOP-bound); in decode every rank streams
 * the same weights, whatever its sequences. */
typedef struct {
    double most; /* the most loaded core, in the largest replica's rank's work */
    int busy;    /* the most busy ranks on one node */
    int running; /* the most cores with a busy rank on one node */
    int mixed;   /* a core holds busy ranks of two replicas */
} window_load;

static window_load window_load_of(const plan_cluster *c, const plan_strategy *s, const int axes[3],
                                  int batch, int period, int first, int width) {
    window_load w = {0, 0, 0, 0};
    const int world = s->dp * s->tp * s->pp, per_node = c->devices_per_node;
    const int cores = c->cores_per_node > 0 ? c->cores_per_node : per_node;
    const double largest = split_count(batch, s->dp, s->dp - 1); /* the last replica */
    for (int base = 0; base < world; base += per_node) {
        const int ranks = world - base < per_node ? world - base : per_node;
        int busy = 0, running = 0;
        for (int core = 0; core < cores && core < ranks; core++) {
            double work = 0;
            int on_core = 0, replica = -1;
            for (int r = base + core; r < base + ranks; r += cores) {
                if ((coord_of(s, axes, AXIS_PP_, r) - first + s->pp) % s->pp >= width) continue;
                const int d = coord_of(s, axes, AXIS_DP_, r);
                work += period == 0 ? split_count(batch, s->dp, d) / largest : 1;
                on_core++;
                if (replica >= 0 && d != replica) w.mixed = 1;
                replica = d;
            }
            if (work > w.most) w.most = work;
            busy += on_core;
            running += on_core > 0;
        }
        if (busy > w.busy) w.busy = busy;
        if (running > w.running) w.running = running;
    }
    return w;
}

/* The cores, over all nodes, that the first replica's ranks occupy. */
static int replica_cores(const plan_cluster *c, const plan_strategy *s, const int axes[3]) {
    const int world = s->dp * s->tp * s->pp, per_node = c->devices_per_node;
    const int cores = c->cores_per_node > 0 ? c->cores_per_node : per_node;
    int n = 0;
    for (int base = 0; base < world; base += per_node) {
        const int ranks = world - base < per_node ? world - base : per_node;
        for (int core = 0; core < cores && core < ranks; core++) {
            int mine = 0;
            for (int r = base + core; r < base + ranks && !mine; r += cores)
                mine = coord_of(s, axes, AXIS_DP_, r) == 0;
            n += mine;
        }
    }
    return n;
}

plan_ceilings plan_stage_ceilings(const plan_cluster *c, const plan_strategy *s, int batch,
                                  int microbatches, int period, int stage) {
    plan_ceilings k = {.flops = c->peak_flops, .bw = c->mem_bw, .share = 1};
    const int node_ranks = plan_node_ranks(c, s->dp * s->tp * s->pp);
    const int shared = c->cores_per_node > 0 && node_ranks > c->cores_per_node;
    int links_shared = 0; /* a node's ranks share its links on an inter tier */
    for (int t = PLAN_TIER_INTER; t < PLAN_TIER_COUNT; t++)
        links_shared |=
            c->tier[t].links_per_node > 0 && c->tier[t].links_per_node < c->devices_per_node;
    /* a core (or a GPU) per rank, a link per rank, no node limit: nothing is shared */
    if (!shared && !(c->node_bw > 0) && !links_shared) return k;
    const int width = microbatches < s->pp ? microbatches : s->pp;
    int axes[3];
    order_axes(s->order, axes);
    /* the windows holding the stage start at stage-width+1 .. stage; all stages are one */
    const int windows = width < s->pp ? width : 1;
    k.share = 0;
    for (int i = 0; i < windows; i++) {
        const int first = width < s->pp ? (stage - i + s->pp) % s->pp : 0;
        const window_load w = window_load_of(c, s, axes, batch, period, first, width);
        k.share += fmax(1.0, w.most) / windows;
        if (w.busy > k.busy) k.busy = w.busy;
        if (w.running > k.running) k.running = w.running;
        k.mixed |= w.mixed;
    }
    /* In decode the micro-batches circulate, and with more than one of them the lock-step
     * window is an upper bound. The lower bound is the cores' own work: the load of all stages
     * at once, spread over the pp / width windows of a lap. A pipeline's ranks take its
     * micro-batches in order, one at a time, and settle there. Replicas are separate processes
     * the scheduler shares out, and sharing a core keeps them in step; they drift apart only as
     * L jobs circulating over the V cores a replica visits would, (L + V - 1) / V (mean value
     * analysis of a closed network of equal processor-shared stations), and no further than
     * the bound. One replica of one micro-batch is alone: its window is exact. */
    if (period == 1 && width < s->pp && k.share > 1 && (s->dp > 1 || width > 1)) {
        const window_load all = window_load_of(c, s, axes, batch, period, 0, s->pp);
        const double bound = fmax(1.0, all.most * width / s->pp);
        if (s->dp == 1)
            k.share = bound;
        else {
            const int visited = replica_cores(c, s, axes);
            k.share = fmax(bound, (k.share + visited - 1) / visited);
        }
    }
    if (c->node_bw > 0 && k.running > 0 && c->node_bw / k.running < k.bw)
        k.bw = c->node_bw / k.running;
    k.flops /= k.share;
    k.bw /= k.share;
    return k;
}

/* The worst group of one axis: most nodes spanned, most ranks on a node, slowest tier; for PP
 * also the group whose chain of boundaries crosses the slowest tiers most often. */
static void axis_group(const plan_cluster *c, const int size[3], const int axes[3], int axis,
                       int world, plan_group *out) {
    memset(out, 0, sizeof *out);
    out->size = size[axis];
    out->nodes = out->per_node = 1;
    out->outer = out->wrap = PLAN_TIER_INTRA;
    int stride = 1;
    for (int i = 0; axes[i] != axis; i++)
        stride *= size[axes[i]];
    const int n = size[axis];
    double worst_chain = -1;
    for (int base = 0; base < world; base++) {
        if ((base / stride) % n != 0) continue; /* a group's first member has coordinate 0 */
        int nodes = 1, run = 1, per_node = 1, hops[PLAN_TIER_COUNT] = {0};
        plan_tier_kind outer = PLAN_TIER_INTRA;
        const int first_node = node_of(c, base);
        for (int k = 1; k < n; k++) {
            const int prev = node_of(c, base + (k - 1) * stride),
                      here = node_of(c, base + k * stride);
            const plan_tier_kind t = tier_between(c, prev, here),
                                 t0 = tier_between(c, first_node, here);
            hops[t]++;
            if (t0 > outer) outer = t0;
            if (here != prev)
                nodes++, run = 1; /* members ascend, so a node's members are a run */
            else if (++run > per_node)
                per_node = run;
        }
        if (nodes > out->nodes) out->nodes = nodes;
        if (per_node > out->per_node) out->per_node = per_node;
        if (outer > out->outer) out->outer = outer;
        /* the chain crossing the slowest tiers most often: inter2 hops first, then inter */
        const double chain = hops[PLAN_TIER_INTER] * 1e3 + hops[PLAN_TIER_INTER2] * 1e6;
        if (chain > worst_chain) {
            worst_chain = chain;
            memcpy(out->hops, hops, sizeof hops);
            out->wrap = tier_between(c, node_of(c, base + (n - 1) * stride), first_node);
        }
    }
}

void plan_groups(const plan_cluster *c, const plan_strategy *s, plan_group *tp, plan_group *pp,
                 plan_group *dp) {
    int axes[3], size[3];
    size[AXIS_TP_] = s->tp, size[AXIS_PP_] = s->pp, size[AXIS_DP_] = s->dp;
    order_axes(s->order, axes);
    const int world = s->dp * s->tp * s->pp;
    axis_group(c, size, axes, AXIS_TP_, world, tp);
    axis_group(c, size, axes, AXIS_PP_, world, pp);
    axis_group(c, size, axes, AXIS_DP_, world, dp);
}

/* ---- validity ------------------------------------------------------------------------- */

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
    if (s->pp > cfg->layers) {
        snprintf(why, (size_t)why_len, "pp=%d > layers=%d", s->pp, cfg->layers);
        return 0;
    }
    if (w->batch < s->dp) {
        snprintf(why, (size_t)why_len, "dp=%d > batch=%d", s->dp, w->batch);
        return 0;
    }
    const int smallest = w->batch / s->dp; /* balanced: the first replica has the fewest */
    if (s->microbatches > smallest || s->microbatches > PLAN_MAX_MICRO) {
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

static double align64(double bytes) { return ceil(bytes / 64.0) * 64.0; }

/* The largest micro-batch of a replica of `sequences`, as microbatch_split_init splits it. */
static int microbatch_max(int sequences, int microbatches) {
    const int n = microbatches < sequences ? microbatches : sequences;
    return split_count(sequences, n, n - 1);
}

void plan_rank_memory(const plan_model *m, const plan_workload *w, const plan_strategy *s,
                      int tp_rank, int pp_rank, double *weights, double *activations, double *kv) {
    shard_geom g;
    shard_geom_init(&g, &m->cfg, s->tp, tp_rank, s->pp, pp_rank);
    model table;
    model_tensor_table(&table, &m->cfg, &g, model_weight_dtype(m->weight_dtype));
    *weights = (double)model_weight_bytes(&table);
    /* engine.c's arena_table, for the largest replica (the last) and no captured logits */
    const int batch_local = split_count(w->batch, s->dp, s->dp - 1);
    const int n_micro = s->microbatches < batch_local ? s->microbatches : batch_local;
    const int mb = microbatch_max(batch_local, s->microbatches);
    const double R = (double)mb * w->prompt, C = m->cfg.embd, A = g.attn_dim;
    const double KVA = (double)g.n_kv_heads * g.head_dim, M = g.mlp_local, V = g.vocab_local;
    const int llama = m->cfg.arch == ARCH_LLAMA, cap = w->prompt + w->new_tokens;
    double act = 2.0 * n_micro * align64(R * C * F32); /* ping-pong stage buffers */
    act += align64(R * C * F32) + align64(R * (A + 2 * KVA) * F32) + align64(R * A * F32) +
           align64(R * C * F32) + align64(R * (llama ? 2 : 1) * M * F32) +
           align64(llama ? R * M * F32 : 0) + align64(llama ? g.head_dim / 2 * F32 : 0);
    act += align64(mb * C * F32) + align64(mb * V * F32) + align64(mb * F32) + align64(mb * I32) +
           align64(R * I32) + align64((double)batch_local * I32);
    *activations = act;
    double positions = cap, table_bytes = 0;
    if (m->kv_cache == KV_PAGED) {
        const int blocks = (cap + m->kv_block - 1) / m->kv_block;
        positions = (double)blocks * m->kv_block;
        table_bytes = align64((double)batch_local * blocks * I32);
    }
    /* keys and values: layers x sequences x positions x the rank's kv heads x head_dim */
    *kv = 2 * align64((double)g.n_layers * batch_local * positions * KVA * F32) + table_bytes;
}

/* ---- latency -------------------------------------------------------------------------- */

void plan_rates_default(plan_rates *r) {
    memset(r, 0, sizeof *r);
    r->mixed_cost[0] = r->mixed_cost[1] = 1.0;
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

static const phase COMPUTE_PHASES[] = {PHASE_EMBED,     PHASE_NORM,          PHASE_QKV_GEMM,
                                       PHASE_ATTENTION, PHASE_ATTN_OUT_GEMM, PHASE_MLP_GEMM,
                                       PHASE_HEAD,      PHASE_SAMPLE};
enum { N_COMPUTE = sizeof COMPUTE_PHASES / sizeof COMPUTE_PHASES[0] };

/* One stage's work on one micro-batch in one period. */
typedef struct {
    double compute, layer_compute; /* all phases; the per-layer ones alone */
    double tp_total, tp_hidden;    /* its TP all-reduces, and the part overlap hides */
    plan_allreduce_algo tp_algo;   /* the layers' all-reduce algorithm */
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
                       .pp = s->pp,
                       .pp_rank = pp_rank,
                       .weight_dtype = m->weight_dtype,
                       .kv_cache = m->kv_cache,
                       .kv_block = m->kv_block,
                       .seqs = seqs,
                       .new_positions = new_positions,
                       .past_positions = past};
    double overlappable = 0;
    for (int i = 0; i < N_COMPUTE; i++) {
        phase_cost pc;
        phase_cost_compute(&m->cfg, &step, COMPUTE_PHASES[i], &pc);
        const double t_flops = pc.flops / k->flops, t_bytes = pc.bytes / k->bw;
        const double intensity = pc.bytes > 0 ? pc.flops / pc.bytes : 0;
        /* a core the scheduler switches between replicas costs more than its share */
        const double mixed = k->mixed && k->share > 1 ? r->mixed_cost[period] : 1.0;
        const double t = fmax(t_flops, t_bytes) * mixed /
                         plan_rate_efficiency(r, period, COMPUTE_PHASES[i], intensity);
        out->phase_time[i] = t;
        out->memory_bound[i] = t_bytes > t_flops;
        out->compute += t;
        const phase p = COMPUTE_PHASES[i];
        if (p != PHASE_EMBED && p != PHASE_HEAD && p != PHASE_SAMPLE) out->layer_compute += t;
        /* overlap splits the row-parallel products into pieces whose all-reduces run
         * under the next piece (parallel.overlap) */
        if (p == PHASE_ATTN_OUT_GEMM || p == PHASE_MLP_GEMM) overlappable += t;
    }
    shard_geom g;
    shard_geom_init(&g, &m->cfg, s->tp, s->tp - 1, s->pp, pp_rank);
    out->layers = g.n_layers;
    if (s->tp > 1) {
        /* two all-reduces of the activations per layer, and the sampler's MAXLOC on the last;
         * with overlap each goes in pieces, one all-reduce of its rows per piece (forward.c) */
        const double rows = (double)seqs * new_positions;
        const int chunks = m->chunks < 1                 ? 1
                           : m->chunks > PLAN_MAX_CHUNKS ? PLAN_MAX_CHUNKS
                                                         : m->chunks;
        const int pieces = s->overlap ? (int)fmin(chunks, rows) : 1;
        const double bytes = rows * m->cfg.embd * F32 / pieces;
        const plan_collective ar = pieces > 1
                                       ? plan_iallreduce(c, tp, bytes, m->collectives, k->busy)
                                       : plan_allreduce_best(c, tp, bytes, m->collectives, k->busy);
        out->tp_algo = ar.algo;
        out->tp_total = 2.0 * g.n_layers * pieces * ar.seconds;
        const double hides = r->overlap_efficiency >= 0         ? r->overlap_efficiency
                             : m->collectives == PLAN_COLL_NCCL ? 0.5
                                                                : 0.0;
        if (s->overlap) out->tp_hidden = hides * fmin(out->tp_total, overlappable);
        if (g.last_stage)
            out->tp_total +=
                plan_allreduce_best(c, tp, seqs * 8.0, m->collectives, k->busy).seconds;
    }
}

static double stage_busy(const stage_time *t) { return t->compute + t->tp_total - t->tp_hidden; }

/* One period: the first and last stage exactly, the middle ones from the last stage's
 * per-layer time; the bottleneck (the busier of the first and last: a middle stage holds no
 * more layers than the last and no embedding) and the sum of every stage's busy time. */
typedef struct {
    stage_time first, last;
    double t_max, sum_stages, comp_max, tp_exposed_max, tp_total_max, tp_hidden_max;
    double share_last, share_max; /* the last stage's time-sharing, and the most of any stage */
    const stage_time *bottleneck;
} period_time;

/* The mean time-sharing factor of the middle stages 1 .. pp-2; 1 when every rank of the node
 * has a core of its own (no need to look at each stage). */
static double middle_share(const plan_cluster *c, const plan_strategy *s, int batch,
                           int microbatches, int period) {
    const int node_ranks = plan_node_ranks(c, s->dp * s->tp * s->pp);
    if (s->pp <= 2 || c->cores_per_node <= 0 || node_ranks <= c->cores_per_node) return 1;
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
        const double per_layer =
            (l->layer_compute * mid / out->share_last + l->tp_total - l->tp_hidden) / l->layers;
        out->sum_stages += middle_layers * per_layer;
        out->share_max = fmax(out->share_max, mid);
    }
    const stage_time *b = out->bottleneck;
    out->comp_max = b->compute;
    out->tp_total_max = b->tp_total;
    out->tp_hidden_max = b->tp_hidden;
    out->tp_exposed_max = b->tp_total - b->tp_hidden;
}

/* The stage-to-stage transfers of one micro-batch along the worst PP group, the node_busy
 * ranks of a node sending theirs at once over its links. */
static double pp_chain(const plan_cluster *c, const plan_group *pp, double bytes, int node_busy) {
    double t = 0;
    for (int k = 0; k < PLAN_TIER_COUNT; k++)
        if (pp->hops[k]) {
            const plan_tier tier = tier_shared(c, (plan_tier_kind)k, node_busy);
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
    const int batch_local = split_count(w->batch, s->dp, s->dp - 1); /* the slowest replica */
    const int n_micro = s->microbatches < batch_local ? s->microbatches : batch_local;
    const int mb = microbatch_max(batch_local, s->microbatches);
    const double C = m->cfg.embd;
    /* the fullest node's busy ranks time-share its cores, stage by stage (docs/planner.md) */
    out->node_ranks = plan_node_ranks(c, s->dp * s->tp * s->pp);
    out->busy_ranks = plan_stage_ceilings(c, s, w->batch, n_micro, 0, 0).busy;

    /* prefill: every micro-batch through every stage; the last leaves after the fill, its
     * own stages and the chain of transfers: sum + (m-1) max + transfers */
    period_time pf;
    period_cost(m, c, r, s, &out->tp_group, w->batch, n_micro, 0, mb, w->prompt, 0, &pf);
    out->time_share = pf.share_max;
    const double pf_chain =
        pp_chain(c, &out->pp_group, (double)mb * w->prompt * C * F32, out->busy_ranks);
    out->ttft = pf.sum_stages + (n_micro - 1) * pf.t_max + pf_chain;
    out->prefill_bubble_fraction = plan_bubble_fraction(s->pp, n_micro);
    out->compute += n_micro * pf.comp_max;
    out->tp_exposed += n_micro * pf.tp_exposed_max;
    out->bubble += pf.sum_stages - pf.t_max;
    out->pp_exposed += pf_chain;
    out->tp_total += n_micro * pf.tp_total_max;
    out->tp_hidden += n_micro * pf.tp_hidden_max;
    out->pp_total += n_micro * pf_chain;
    out->tp_algo = pf.bottleneck->tp_algo;
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
        out->pp_exposed += steps * pp_part;
        out->bubble += steps * (idle - pp_part);
        out->tp_total += steps * n_micro * dc.tp_total_max;
        out->tp_hidden += steps * n_micro * dc.tp_hidden_max;
        out->pp_total += steps * n_micro * chain;
        out->tp_algo = dc.bottleneck->tp_algo;
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
            const int node_ranks = plan_node_ranks(c, n);
            const int time_shared = c->cores_per_node > 0 && node_ranks > c->cores_per_node;
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
                for (int mb = 1; mb <= PLAN_MAX_MICRO; mb *= 2) {
                    for (int overlap = 0; overlap <= (tp > 1); overlap++) {
                        s.microbatches = mb, s.overlap = overlap;
                        if (!plan_strategy_valid(m, w, c, &s, why, sizeof why)) break;
                        if (count == cap) {
                            cap *= 2;
                            list = realloc(list, (size_t)cap * sizeof *list);
                            CHECK(list, "out of memory listing strategies");
                        }
                        plan_predict(m, w, c, r, &s, &list[count++]);
                    }
                    if (!plan_strategy_valid(m, w, c, &s, why, sizeof why)) break;
                }
            }
        }
    }
    *out = list;
    return count;
}
