/* The planner's placement: which node and core each rank of a strategy sits on, the groups
 * its axes form over the nodes, and what a rank of a CPU node whose ranks time-share its cores
 * reaches (docs/planner.md "Placement and valid strategies", "Shared nodes"). */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "analysis/plan_cost.h"

const char *const plan_order_names[PLAN_ORDER_COUNT] = {
    "auto", "tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp", "dp-tp-pp", "dp-pp-tp"};

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

int plan_node_time_shared(const plan_cluster *c, int world) {
    return c->cores_per_node > 0 && plan_node_ranks(c, world) > c->cores_per_node;
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
    const int shared = plan_node_time_shared(c, s->dp * s->tp * s->pp);
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
                       int n, int world, plan_group *out) {
    /* n: the group's members along the axis, all of it or (an EP group) adjacent runs of n */
    memset(out, 0, sizeof *out);
    out->size = n;
    out->nodes = out->per_node = 1;
    out->outer = out->wrap = PLAN_TIER_INTRA;
    int stride = 1;
    for (int i = 0; axes[i] != axis; i++)
        stride *= size[axes[i]];
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
    axis_group(c, size, axes, AXIS_TP_, s->tp, world, tp);
    axis_group(c, size, axes, AXIS_PP_, s->pp, world, pp);
    axis_group(c, size, axes, AXIS_DP_, s->dp, world, dp);
}

void plan_ep_group(const plan_cluster *c, const plan_strategy *s, plan_group *ep) {
    int axes[3], size[3];
    size[AXIS_TP_] = s->tp, size[AXIS_PP_] = s->pp, size[AXIS_DP_] = s->dp;
    order_axes(s->order, axes);
    const int r = s->ep > s->tp ? s->ep / s->tp : 1;
    axis_group(c, size, axes, AXIS_DP_, r, s->dp * s->tp * s->pp, ep);
}
