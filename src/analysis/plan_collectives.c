/* The planner's collectives: the cost of an all-reduce, all-gather, all-to-all or
 * point-to-point transfer on alpha-beta tiers, per algorithm, as NCCL or Open MPI would run it across the
 * nodes a group spans (docs/planner.md "Collectives"). */
#include <math.h>
#include <stdio.h>

#include "analysis/plan_cost.h"
#include "analysis/plan_internal.h"

const char *plan_allreduce_algo_name(plan_allreduce_algo a) {
    static const char *const names[] = {
        "-",        "ring", "tree",     "hierarchical", "recursive-doubling", "rabenseifner",
        "binomial", "nvls", "nvls-tree"};
    _Static_assert(sizeof names / sizeof names[0] == PLAN_AR_NVLS_TREE + 1,
                   "a name for every all-reduce algorithm");
    return names[a];
}

const char *plan_collective_label(plan_allreduce_algo a, plan_proto p, char *buf, int len) {
    static const char *const protos[] = {"", "LL", "LL128", "Simple"};
    snprintf(buf, (size_t)len, "%s%s%s", plan_allreduce_algo_name(a), p ? "/" : "", protos[p]);
    return buf;
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
        best = (plan_collective){seconds, algo, PLAN_PROTO_NONE};
    return best;
}

plan_tier plan_tier_shared(const plan_cluster *c, plan_tier_kind kind, int flows) {
    plan_tier t = c->tier[kind];
    const int links = t.links_per_node > 0 ? t.links_per_node : c->devices_per_node;
    if (kind != PLAN_TIER_INTRA && flows > links) t.beta *= (double)links / flows;
    return t;
}

/* The outer tier of a group as its flows see it: a ring or a tree sends one flow a group on
 * the node (node_busy / per_node groups), the recursive algorithms and the hierarchical one a
 * flow a busy member. A group inside one node has the intra tier as its outer one, which no
 * link sharing touches, and all its members on one node. */
typedef struct {
    plan_tier per_group, per_rank;
} group_links;

static group_links group_links_of(const plan_cluster *c, const plan_group *g, int node_busy) {
    const int groups = node_busy > g->per_node ? node_busy / g->per_node : 1;
    return (group_links){plan_tier_shared(c, g->outer, groups),
                         plan_tier_shared(c, g->outer, node_busy)};
}

plan_collective plan_iallreduce(const plan_cluster *c, const plan_group *g, double bytes,
                                plan_collectives lib, int node_busy) {
    if (lib != PLAN_COLL_MPI || g->size <= 1)
        return plan_allreduce_best(c, g, bytes, lib, node_busy);
    const group_links links = group_links_of(c, g, node_busy);
    return (plan_collective){plan_allreduce_binomial(g->size, g->per_node, bytes,
                                                     &c->tier[PLAN_TIER_INTRA], &links.per_group),
                             PLAN_AR_BINOMIAL, PLAN_PROTO_NONE};
}

plan_collective plan_allreduce_best(const plan_cluster *c, const plan_group *g, double bytes,
                                    plan_collectives lib, int node_busy) {
    plan_collective best = {0, PLAN_AR_NONE, PLAN_PROTO_NONE};
    if (g->size <= 1) return best;
    const plan_tier *intra = &c->tier[PLAN_TIER_INTRA];
    const group_links links = group_links_of(c, g, node_busy);
    if (lib == PLAN_COLL_MPI) { /* the algorithm Open MPI picks, not the cheapest */
        const plan_allreduce_algo algo = mpi_allreduce_algo(g->size, bytes);
        const int p = g->size, l = g->per_node;
        const double seconds =
            algo == PLAN_AR_RING ? plan_allreduce_ring(p, bytes, &links.per_group)
            : algo == PLAN_AR_RECURSIVE_DOUBLING
                ? plan_allreduce_recursive_doubling(p, l, bytes, intra, &links.per_rank)
                : plan_allreduce_rabenseifner(p, l, bytes, intra, &links.per_rank);
        return (plan_collective){seconds, algo, PLAN_PROTO_NONE};
    }
    /* a cluster file that says what NCCL runs on: NCCL's own choice (plan_nccl.c) */
    if (c->nccl.given)
        return plan_nccl_allreduce(c, g->size, g->nodes, g->per_node, bytes, intra,
                                   &links.per_group);
    if (g->nodes <= 1) {
        best = collective_pick(best, plan_allreduce_ring(g->size, bytes, intra), PLAN_AR_RING);
        return collective_pick(best, plan_allreduce_tree(g->size, bytes, intra), PLAN_AR_TREE);
    }
    /* A flat ring crosses the network once per node and the node's own links elsewhere: its
     * latency mixes both tiers, its bandwidth is the slowest link's. */
    const plan_tier *outer = &links.per_group;
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
        double across = fmin(plan_allreduce_ring(k, bytes / l, &links.per_rank),
                             plan_allreduce_tree(k, bytes / l, &links.per_rank));
        best = collective_pick(best, inside + across, PLAN_AR_HIER);
    }
    return best;
}

double plan_alltoall(const plan_cluster *c, const plan_group *g, double bytes,
                     plan_collectives lib, int node_busy) {
    const int p = g->size;
    if (p <= 1) return 0;
    /* the outer tier of a group inside one node is the intra tier itself */
    const plan_tier outer = group_links_of(c, g, node_busy).per_rank;
    const double block = bytes / p;
    if (lib == PLAN_COLL_MPI) return (p - 1) * (outer.alpha + block / link_rate(&outer));
    /* NCCL: the peers on this rank's node (per_node - 1 of them, the group spread evenly) over
     * the intra tier, the others over the outer one, at once */
    const int l = g->nodes > 1 ? g->per_node : p;
    const double inside = (l - 1) * block / link_rate(&c->tier[PLAN_TIER_INTRA]);
    const double across = (p - l) * block / link_rate(&outer);
    return c->gpu.collective_launch + outer.alpha + fmax(inside, across);
}
