/* NCCL's own choice of all-reduce algorithm and protocol, and its cost, for `tripar plan` on GPU
 * clusters: the tuning model NCCL picks with (NVIDIA/nccl src/graph/tuning.cc,
 * ncclTopoTuneModel and ncclTopoGetAlgoTime, as of NCCL 2.2x). Each algorithm (ring, tree, NVLS,
 * NVLS tree) and protocol (LL, LL128, Simple) has a latency, a base plus one per hop by link
 * kind, and a bus bandwidth, the link's scaled by the protocol's efficiency; NCCL runs the one of
 * least latency + bytes / bandwidth. The constants are NCCL's, restated in docs/planner.md
 * "NCCL's choice" with what tripar leaves out (channel counts and their per-channel ceilings). */
#include <math.h>

#include "analysis/plan_cost.h"

enum { ALGO_TREE = 0, ALGO_RING, ALGO_NVLS, ALGO_NVLS_TREE, N_ALGO };
enum { PROTO_LL = 0, PROTO_LL128, PROTO_SIMPLE, N_PROTO };
enum { HW_NVLINK = 0, HW_PCI, HW_NET, N_HW };

/* Latencies in microseconds: one per operation, and one per hop by the link it crosses. */
static const double BASE_LAT_US[N_ALGO][N_PROTO] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}};
static const double HW_LAT_US[N_HW][N_ALGO][N_PROTO] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}},   /* NVLink */
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}, {0, 0, 0}},      /* PCIe */
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 20.9}}}; /* network */

/* LL's bus bandwidth ceiling in GB/s, by [row][nodes: 1, 2, more]: on one node the row of the GPU
 * (Volta, Ampere, Hopper, Blackwell); across nodes NCCL takes the row of the hosts' CPU,
 * Intel's the first and AMD's the second (LL's flags cross host memory there). */
static const double LL_MAX_BW[PLAN_GPU_COUNT][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
/* The share of the link NVLink SHARP reaches, by GPU. */
static const double NVLS_EFFICIENCY[PLAN_GPU_COUNT] = {0, 0, 0.85, 0.74};
/* NCCL's correction of the tree's bandwidth for medium sizes, by protocol, at message sizes
 * 64 B x 2^i (i = 0 .. 23; 1 past them). */
static const double TREE_CORRECTION[N_PROTO][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6,  .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6,  .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
     .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

static int log2_floor(double x) {
    int n = 0;
    while (x >= 2)
        x /= 2, n++;
    return n;
}

/* Whether the hardware has the algorithm and protocol: NVLS only with NVLink SHARP (Hopper on),
 * in Simple, on one node (NVLS tree across nodes); LL128 only over NVLink. */
static int nccl_enabled(const plan_nccl *n, int algo, int proto, int p, int nodes) {
    if (algo == ALGO_NVLS || algo == ALGO_NVLS_TREE)
        return n->nvls && n->arch >= PLAN_GPU_HOPPER && proto == PROTO_SIMPLE && p > 1 &&
               (algo == ALGO_NVLS ? nodes == 1 : nodes > 1);
    return proto != PROTO_LL128 || !n->intra_pci;
}

/* The operation's latency in microseconds over p ranks on `nodes` nodes. */
static double nccl_latency_us(const plan_nccl *n, int algo, int proto, int p, int nodes) {
    const int ppn = p / nodes;
    double intra = HW_LAT_US[n->intra_pci ? HW_PCI : HW_NVLINK][algo][proto];
    /* one GPU a node exposes every network hop: NCCL takes the tree's network latency */
    const double inter = HW_LAT_US[HW_NET][ppn == 1 ? ALGO_TREE : algo][proto];
    const double base = BASE_LAT_US[algo][proto];
    switch (algo) {
    case ALGO_RING: {
        const int steps = 2 * (p - 1), inter_steps = nodes > 1 ? 2 * (nodes - 1) : 0;
        if (nodes > 1) { /* a ring across nodes posts a network send at every step */
            const double post = (n->cpu_amd ? 2.0 : 1.0) * (proto == PROTO_SIMPLE ? 3 : 1);
            intra = fmax(intra, post);
        }
        return base + (steps - inter_steps) * intra + inter_steps * inter;
    }
    case ALGO_TREE: return base + 2 * ((ppn - 1) * intra + log2_floor(nodes) * inter);
    case ALGO_NVLS: return intra; /* one node */
    default: return base + intra + 2 * log2_floor(nodes) * inter;
    }
}

/* The algorithm bandwidth in GB/s: the bus bandwidth the protocol reaches on links of
 * link_gbs (intra_gbs inside a node, for NVLS), converted to bytes of the message per second. */
static double nccl_algo_gbs(const plan_nccl *n, int algo, int proto, int p, int nodes,
                            double link_gbs, double intra_gbs) {
    const int col = nodes <= 2 ? nodes - 1 : 2;
    const double ll_max = LL_MAX_BW[nodes == 1 ? n->arch : n->cpu_amd ? 1 : 0][col];
    double bus = link_gbs;
    if (algo == ALGO_RING) {
        if (proto == PROTO_LL) bus = fmin(ll_max, bus * 0.5);
        if (proto == PROTO_LL128) bus *= 0.92;
    } else if (algo == ALGO_TREE) {
        bus *= 0.92;
        if (proto == PROTO_LL) bus = fmin(bus / 3.8, ll_max);
        if (proto == PROTO_LL128) bus *= nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0;
    } else {
        /* the switch reduces: both halves of the all-reduce pipelined at NVLS's share of the
         * link, no more than the link (inside the node) or the network (a tree across two
         * nodes carries twice) gives */
        const double in_switch = 2.0 * NVLS_EFFICIENCY[n->arch] * intra_gbs;
        const double out = algo == ALGO_NVLS ? intra_gbs : link_gbs * (nodes <= 2 ? 2 : 1);
        bus = fmin(in_switch, out);
    }
    /* a ring (and NVLS) moves 2 (p-1) / p of the message per rank, a tree the whole of it twice */
    return algo == ALGO_TREE ? bus * 0.5 : bus * p / (2.0 * (p - 1));
}

static double nccl_time(const plan_nccl *n, int algo, int proto, int p, int nodes, double bytes,
                        double link_gbs, double intra_gbs) {
    double lat = nccl_latency_us(n, algo, proto, p, nodes);
    double gbs = nccl_algo_gbs(n, algo, proto, p, nodes, link_gbs, intra_gbs);
    const int size_class = bytes >= 64 ? log2_floor(bytes / 64) : -1;
    if (algo == ALGO_TREE && size_class >= 0 && size_class < 23)
        gbs *= TREE_CORRECTION[proto][size_class];
    /* the ring's plateau across nodes (NCCL assumes its channels each carry 64 B a rank) */
    if (algo == ALGO_RING && proto == PROTO_SIMPLE && nodes > 1 && bytes / p >= 64)
        lat *= n->arch >= PLAN_GPU_AMPERE ? 1.4 : 1.9;
    return 1e-6 * (lat + bytes / (1000.0 * gbs));
}

plan_collective plan_nccl_allreduce(const plan_cluster *c, int p, int nodes, int per_node,
                                    double bytes, const plan_tier *intra, const plan_tier *outer) {
    (void)per_node; /* NCCL reasons with ranks over nodes, as here: p / nodes */
    plan_collective best = {0, PLAN_AR_NONE, PLAN_PROTO_NONE};
    if (p <= 1) return best;
    const double intra_gbs = intra->beta * intra->efficiency / 1e9;
    const double link_gbs =
        nodes > 1 ? fmin(intra_gbs, outer->beta * outer->efficiency / 1e9) : intra_gbs;
    static const plan_allreduce_algo ALGOS[N_ALGO] = {PLAN_AR_TREE, PLAN_AR_RING, PLAN_AR_NVLS,
                                                      PLAN_AR_NVLS_TREE};
    static const plan_proto PROTOS[N_PROTO] = {PLAN_PROTO_LL, PLAN_PROTO_LL128, PLAN_PROTO_SIMPLE};
    for (int a = 0; a < N_ALGO; a++)
        for (int q = 0; q < N_PROTO; q++) {
            if (!nccl_enabled(&c->nccl, a, q, p, nodes)) continue;
            const double t = nccl_time(&c->nccl, a, q, p, nodes, bytes, link_gbs, intra_gbs);
            if (best.algo == PLAN_AR_NONE || t < best.seconds)
                best = (plan_collective){t, ALGOS[a], PROTOS[q]};
        }
    /* NCCL chooses by its model; the call costs its launch and the ranks' meeting on top, the
     * same whatever the algorithm, so the choice stands (0 without device.efficiency) */
    best.seconds += c->gpu.collective_launch;
    return best;
}
