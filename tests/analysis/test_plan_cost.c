/* The planner's cost model (src/analysis/plan_cost.c) on hand-computed cases: the collective
 * equations of docs/planner.md, the bubble, rank placement on nodes, tripar's mesh rules, the
 * memory of a known shape (GPT-2 124M counted by hand; activations and KV cache equal to the
 * engine's own arena table), and a prediction whose parts add up to its latency. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "analysis/plan_cost.h"

static void assert_close(double got, double want) {
    if (fabs(got - want) > 1e-12 + 1e-9 * fabs(want)) fail_msg("got %.12g, want %.12g", got, want);
}

static plan_tier tier(double alpha, double beta, double eff) {
    return (plan_tier){.present = 1, .alpha = alpha, .beta = beta, .efficiency = eff};
}

/* 2 nodes x 4 devices: intra 1 us at 100 GB/s, inter 10 us at 10 GB/s, both at efficiency 1. */
static plan_cluster two_nodes(void) {
    plan_cluster c;
    memset(&c, 0, sizeof c);
    c.nodes = 2, c.devices_per_node = 4;
    c.device_memory = 16e9, c.peak_flops = 100e12, c.mem_bw = 1e12;
    c.tier[PLAN_TIER_INTRA] = tier(1e-6, 100e9, 1);
    c.tier[PLAN_TIER_INTER] = tier(10e-6, 10e9, 1);
    c.tier[PLAN_TIER_INTER2] = c.tier[PLAN_TIER_INTER];
    return c;
}

static void test_ring_allreduce(void **state) {
    (void)state;
    plan_tier t = tier(1e-5, 1e9, 0.5);
    /* 2 (p-1) alpha + 2 (p-1)/p n / (beta eff) = 6e-5 + 1.5 * 1e6 / 5e8 = 6e-5 + 3e-3 */
    assert_close(plan_allreduce_ring(4, 1e6, &t), 3.06e-3);
    assert_close(plan_allreduce_ring(1, 1e6, &t), 0);
}

static void test_tree_allreduce(void **state) {
    (void)state;
    plan_tier t = tier(1e-5, 1e9, 0.5);
    /* 2 ceil(log2 p) alpha + 2 n / (beta eff): p = 5 has depth 3: 6e-5 + 2e6 / 5e8 = 4.06e-3 */
    assert_close(plan_allreduce_tree(5, 1e6, &t), 4.06e-3);
    assert_close(plan_allreduce_tree(8, 1e6, &t), 4.06e-3);
}

static void test_p2p_and_allgather(void **state) {
    (void)state;
    plan_tier t = tier(2e-6, 1e9, 0.5);
    assert_close(plan_p2p(1e6, &t), 2e-6 + 2e-3);
    /* (p-1) alpha + (p-1)/p n / (beta eff) */
    assert_close(plan_allgather_ring(4, 1e6, &t), 6e-6 + 0.75e6 / 5e8);
}

/* All-to-all on two_nodes (intra 1 us at 100 GB/s, inter 10 us at 10 GB/s), by hand. */
static void test_alltoall(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    plan_group one = {.size = 1, .nodes = 1, .per_node = 1, .outer = PLAN_TIER_INTRA};
    assert_close(plan_alltoall(&c, &one, 4e6, PLAN_COLL_MPI, 0), 0);
    assert_close(plan_alltoall(&c, &one, 4e6, PLAN_COLL_NCCL, 0), 0);
    /* 4 ranks in a node, 4 MB each (1 MB a peer). MPI, pairwise: 3 x (1 us + 1e6 / 100e9);
     * NCCL, every peer at once: 1 us + 3e6 / 100e9 */
    plan_group in_node = {.size = 4, .nodes = 1, .per_node = 4, .outer = PLAN_TIER_INTRA};
    assert_close(plan_alltoall(&c, &in_node, 4e6, PLAN_COLL_MPI, 4), 3 * (1e-6 + 1e-5));
    assert_close(plan_alltoall(&c, &in_node, 4e6, PLAN_COLL_NCCL, 4), 1e-6 + 3e-5);
    /* 8 ranks on 2 nodes, 8 MB each. MPI: 7 steps on the inter tier, 7 x (10 us + 1e6 / 10e9);
     * NCCL: 10 us + the larger of 3 MB inside (30 us) and 4 MB across (400 us), plus the
     * launch */
    plan_group spans = {.size = 8, .nodes = 2, .per_node = 4, .outer = PLAN_TIER_INTER};
    assert_close(plan_alltoall(&c, &spans, 8e6, PLAN_COLL_MPI, 4), 7 * (1e-5 + 1e-4));
    c.gpu.collective_launch = 5e-6;
    assert_close(plan_alltoall(&c, &spans, 8e6, PLAN_COLL_NCCL, 4), 5e-6 + 1e-5 + 4e-4);
    /* 8 ranks of a node crossing at once share its 4 links: half the inter bandwidth each */
    assert_close(plan_alltoall(&c, &spans, 8e6, PLAN_COLL_MPI, 8), 7 * (1e-5 + 2e-4));
    assert_close(plan_alltoall(&c, &spans, 8e6, PLAN_COLL_NCCL, 8), 5e-6 + 1e-5 + 8e-4);
}

static void test_bubble(void **state) {
    (void)state;
    assert_close(plan_bubble_fraction(4, 4), 3.0 / 7.0);
    assert_close(plan_bubble_fraction(8, 4), 7.0 / 11.0); /* 64% */
    assert_close(plan_bubble_fraction(1, 1), 0);
}

/* Inside one node the cheaper of ring and tree; across nodes the hierarchical all-reduce wins
 * for large messages (its network step carries 1/4 of the bytes), the tree for tiny ones. */
static void test_allreduce_choice(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    plan_group in_node = {.size = 4, .nodes = 1, .per_node = 4, .outer = PLAN_TIER_INTRA};
    plan_collective a = plan_allreduce_best(&c, &in_node, 64e6, PLAN_COLL_NCCL, 0);
    assert_int_equal(a.algo, PLAN_AR_RING);
    assert_close(a.seconds, plan_allreduce_ring(4, 64e6, &c.tier[PLAN_TIER_INTRA]));

    plan_group spans = {.size = 8, .nodes = 2, .per_node = 4, .outer = PLAN_TIER_INTER};
    const double n = 64e6;
    /* reduce-scatter and all-gather over 4 in the node: 2 x (3 us + 0.75 n / 100e9); the 2
     * nodes all-reduce n / 4 over the network: ring 2 x 10 us + n/4 / 10e9 (tree: 2 x 10 us +
     * n/2 / 10e9, slower) */
    const double hier = 2 * (3e-6 + 0.75 * n / 100e9) + (2 * 10e-6 + (n / 4) / 10e9);
    plan_collective b = plan_allreduce_best(&c, &spans, n, PLAN_COLL_NCCL, 0);
    assert_int_equal(b.algo, PLAN_AR_HIER);
    assert_close(b.seconds, hier);
    /* the flat ring: 2 ((p-k) alpha_intra + k alpha_inter) + 2 (p-1)/p n / beta_inter */
    const double ring_small = 2 * (6 * 1e-6 + 2 * 10e-6) + 2 * 7.0 / 8 * 8 / 10e9;
    const double tree_small = 2 * 3 * 10e-6 + 2 * 8 / 10e9;
    const double hier_small = 2 * (3e-6 + 0.75 * 8 / 100e9) + (2 * 10e-6 + 2.0 / 10e9);
    plan_collective s = plan_allreduce_best(&c, &spans, 8, PLAN_COLL_NCCL, 0);
    assert_close(s.seconds, fmin(ring_small, fmin(tree_small, hier_small)));
    assert_int_equal(s.algo, PLAN_AR_HIER); /* 26 us beats the ring's 52 and the tree's 60 */
}

/* NCCL's own choice (plan_nccl.c, NCCL's tuning model) on a cluster file that says what NCCL
 * runs on: LL for small messages, LL128 in between and Simple for large, on a ring inside a
 * node; NVLS where the switches have NVLink SHARP; no LL128 over PCIe; the tree's LL across
 * nodes for the smallest. Times by hand from NCCL's constants (microseconds, GB/s). */
static plan_collective nccl_pick(const plan_cluster *c, int p, int nodes, double bytes) {
    return plan_nccl_allreduce(c, p, nodes, p / nodes, bytes, &c->tier[PLAN_TIER_INTRA],
                               &c->tier[PLAN_TIER_INTER]);
}

static void test_nccl_choice(void **state) {
    (void)state;
    plan_cluster c = two_nodes(); /* 8 a node here: NVLink 450 GB/s, 50 GB/s NICs */
    c.devices_per_node = 8;
    c.tier[PLAN_TIER_INTRA] = tier(1e-6, 450e9, 1);
    c.tier[PLAN_TIER_INTER] = tier(5e-6, 50e9, 1);
    c.nccl = (plan_nccl){.given = 1, .arch = PLAN_GPU_HOPPER};
    /* 8 KiB on one node: ring/LL, 6.6 + 14 hops x 0.6 us, at LL's Hopper ceiling of 141 GB/s
     * bus (half the link would be 225), 8/14 of it algorithm bandwidth */
    plan_collective r = nccl_pick(&c, 8, 1, 8192);
    assert_int_equal(r.algo, PLAN_AR_RING);
    assert_int_equal(r.proto, PLAN_PROTO_LL);
    assert_close(r.seconds, 1e-6 * (6.6 + 14 * 0.6 + 8192 / (1000 * 141.0 * 8 / 14)));
    /* 16 MiB: LL128, 14 + 14 x 1.9 us at 0.92 of the link */
    r = nccl_pick(&c, 8, 1, 16777216);
    assert_int_equal(r.algo, PLAN_AR_RING);
    assert_int_equal(r.proto, PLAN_PROTO_LL128);
    assert_close(r.seconds, 1e-6 * (14 + 14 * 1.9 + 16777216 / (1000 * 0.92 * 450 * 8 / 14)));
    /* 1 GiB: Simple, 8.4 + 14 x 3.4 us at the whole link */
    r = nccl_pick(&c, 8, 1, 1073741824);
    assert_int_equal(r.algo, PLAN_AR_RING);
    assert_int_equal(r.proto, PLAN_PROTO_SIMPLE);
    assert_close(r.seconds, 1e-6 * (8.4 + 14 * 3.4 + 1073741824 / (1000 * 450.0 * 8 / 14)));
    /* the same node with NVLink SHARP: NVLS for large messages, 25 us at the link (the switch's
     * 2 x 0.85 of it is more), LL still for small ones */
    c.nccl.nvls = 1;
    r = nccl_pick(&c, 8, 1, 1073741824);
    assert_int_equal(r.algo, PLAN_AR_NVLS);
    assert_int_equal(r.proto, PLAN_PROTO_SIMPLE);
    assert_close(r.seconds, 1e-6 * (25 + 1073741824 / (1000 * 450.0 * 8 / 14)));
    assert_int_equal(nccl_pick(&c, 8, 1, 8192).proto, PLAN_PROTO_LL);
    /* over PCIe: never LL128, and the PCIe hop latencies (ring/LL: 6.6 + 6 x 1.0 on 4 GPUs) */
    c.nccl = (plan_nccl){.given = 1, .arch = PLAN_GPU_AMPERE, .intra_pci = 1};
    for (double bytes = 64; bytes <= 1e9; bytes *= 2)
        assert_int_not_equal(nccl_pick(&c, 4, 1, bytes).proto, PLAN_PROTO_LL128);
    r = nccl_pick(&c, 4, 1, 64);
    assert_int_equal(r.proto, PLAN_PROTO_LL);
    assert_close(r.seconds, 1e-6 * (6.6 + 6 * 1.0 + 64 / (1000 * 87.7 * 4 / 6)));
    /* 16 GPUs on 2 nodes (Ampere, AMD hosts): 64 B goes by the tree in LL, 6.8 + 2 x (7 x 0.6
     * + 1 x 5.0) us; the tree's bus rate 0.92 of the 50 GB/s NIC, LL's 1/3.8 of that (under
     * AMD's 2-node LL ceiling of 22.5), the algorithm bandwidth half the bus's, and NCCL's tree
     * correction at 64 B 1.0 */
    c.nccl = (plan_nccl){.given = 1, .arch = PLAN_GPU_AMPERE, .cpu_amd = 1};
    r = nccl_pick(&c, 16, 2, 64);
    assert_int_equal(r.algo, PLAN_AR_TREE);
    assert_int_equal(r.proto, PLAN_PROTO_LL);
    assert_close(r.seconds,
                 1e-6 * (6.8 + 2 * (7 * 0.6 + 5.0) + 64 / (1000 * 50 * 0.92 / 3.8 * 0.5)));
    /* a GPU's collective_launch (device.efficiency) adds to the time of NCCL's pick, the same
     * for every algorithm, so the pick stands: 64 B still by tree/LL, 20 us later */
    c.gpu.collective_launch = 20e-6;
    const plan_collective late = nccl_pick(&c, 16, 2, 64);
    assert_int_equal(late.algo, PLAN_AR_TREE);
    assert_int_equal(late.proto, PLAN_PROTO_LL);
    assert_close(late.seconds, r.seconds + 20e-6);
    c.gpu.collective_launch = 0;
    /* 1 GiB across them: the ring in Simple, on the NIC's 50 GB/s */
    r = nccl_pick(&c, 16, 2, 1073741824);
    assert_int_equal(r.algo, PLAN_AR_RING);
    assert_int_equal(r.proto, PLAN_PROTO_SIMPLE);
    /* and plan_allreduce_best defers to it for a group on such a cluster */
    plan_group spans = {.size = 16, .nodes = 2, .per_node = 8, .outer = PLAN_TIER_INTER};
    plan_collective b = plan_allreduce_best(&c, &spans, 64, PLAN_COLL_NCCL, 0);
    assert_int_equal(b.algo, PLAN_AR_TREE);
    assert_int_equal(b.proto, PLAN_PROTO_LL);
    char label[32];
    assert_string_equal(plan_collective_label(b.algo, b.proto, label, sizeof label), "tree/LL");
}

/* MPI: the algorithm Open MPI 4.1's coll/tuned picks by group size and bytes, each recursive
 * step on the tier of the pairs it joins. */
static void test_allreduce_mpi(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    const plan_tier *intra = &c.tier[PLAN_TIER_INTRA], *inter = &c.tier[PLAN_TIER_INTER];
    const double n = 1e6, hop_in = 1e-6 + n / 100e9, hop_out = 10e-6 + n / 10e9;
    /* recursive doubling, 8 ranks, 4 a node: distances 1 and 2 stay inside, 4 crosses */
    assert_close(plan_allreduce_recursive_doubling(8, 4, n, intra, inter), 2 * hop_in + hop_out);
    /* 3 ranks, 2 then 1: 0 folds into 1 inside node 0 and back; 1 and 2 exchange across */
    assert_close(plan_allreduce_recursive_doubling(3, 2, n, intra, inter), 2 * hop_in + hop_out);
    /* 3 ranks, 1 a node: the fold crosses too */
    assert_close(plan_allreduce_recursive_doubling(3, 1, n, intra, inter), 3 * hop_out);
    assert_close(plan_allreduce_recursive_doubling(1, 1, n, intra, inter), 0);
    /* Rabenseifner, 8 ranks, 4 a node: halving at distance 4 (n/2, across), 2 (n/4) and 1
     * (n/8) inside, and the all-gather back the same way */
    const double raben =
        2 * (10e-6 + n / 2 / 10e9) + 2 * (1e-6 + n / 4 / 100e9) + 2 * (1e-6 + n / 8 / 100e9);
    assert_close(plan_allreduce_rabenseifner(8, 4, n, intra, inter), raben);
    plan_group spans = {.size = 8, .nodes = 2, .per_node = 4, .outer = PLAN_TIER_INTER};
    /* 8 to 15 ranks: recursive doubling under 8 KiB, Rabenseifner from there */
    plan_collective s = plan_allreduce_best(&c, &spans, 8, PLAN_COLL_MPI, 0);
    assert_int_equal(s.algo, PLAN_AR_RECURSIVE_DOUBLING);
    assert_close(s.seconds, 2 * (1e-6 + 8 / 100e9) + 10e-6 + 8 / 10e9);
    plan_collective b = plan_allreduce_best(&c, &spans, n, PLAN_COLL_MPI, 0);
    assert_int_equal(b.algo, PLAN_AR_RABENSEIFNER);
    assert_close(b.seconds, raben);
    /* 2 or 3 ranks: the ring between 4 and 8 KiB, and between 16 and 256 KiB */
    plan_group pair = {.size = 2, .nodes = 2, .per_node = 1, .outer = PLAN_TIER_INTER};
    plan_collective r = plan_allreduce_best(&c, &pair, 5000, PLAN_COLL_MPI, 0);
    assert_int_equal(r.algo, PLAN_AR_RING);
    assert_close(r.seconds, plan_allreduce_ring(2, 5000, inter));
    assert_int_equal(plan_allreduce_best(&c, &pair, 12288, PLAN_COLL_MPI, 0).algo,
                     PLAN_AR_RECURSIVE_DOUBLING);
    /* libnbc's in-place iallreduce: a binomial tree, up and down, whatever the size; 8 ranks
     * 4 a node: distances 1 and 2 inside, 4 across */
    const double binomial = 2 * (2 * hop_in + hop_out);
    assert_close(plan_allreduce_binomial(8, 4, n, intra, inter), binomial);
    /* 3 ranks, 2 then 1: the round at distance 1 joins 0-1 (inside), at 2 joins 0-2 (across) */
    assert_close(plan_allreduce_binomial(3, 2, n, intra, inter), 2 * (hop_in + hop_out));
    plan_collective nb = plan_iallreduce(&c, &spans, n, PLAN_COLL_MPI, 0);
    assert_int_equal(nb.algo, PLAN_AR_BINOMIAL);
    assert_close(nb.seconds, binomial);
    /* NCCL's non-blocking all-reduce is its blocking one */
    assert_close(plan_iallreduce(&c, &spans, n, PLAN_COLL_NCCL, 0).seconds,
                 plan_allreduce_best(&c, &spans, n, PLAN_COLL_NCCL, 0).seconds);
    /* inside a node: the intra tier, one exchange for 2 ranks */
    plan_group in_node = {.size = 2, .nodes = 1, .per_node = 2, .outer = PLAN_TIER_INTRA};
    plan_collective d = plan_allreduce_best(&c, &in_node, 8, PLAN_COLL_MPI, 0);
    assert_int_equal(d.algo, PLAN_AR_RECURSIVE_DOUBLING);
    assert_close(d.seconds, 1e-6 + 8 / 100e9);
}

/* One link per node shared by the flows crossing at once. Two TP pairs across 2 nodes, one
 * member of each on a node (node_busy 2): a ring sends one flow a group, so two, and each gets
 * half the link; with a link per device (the default), or one pair busy, the whole of it. A
 * group of 4, 2 a node, sends one ring flow but two recursive ones. */
static void test_links_shared(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    c.devices_per_node = 2;
    const plan_tier *inter = &c.tier[PLAN_TIER_INTER];
    plan_group pair = {.size = 2, .nodes = 2, .per_node = 1, .outer = PLAN_TIER_INTER};
    const double ring = plan_allreduce_ring(2, 5000, inter);
    assert_close(plan_allreduce_best(&c, &pair, 5000, PLAN_COLL_MPI, 2).seconds, ring);
    c.tier[PLAN_TIER_INTER].links_per_node = 1;
    plan_tier half = *inter;
    half.beta /= 2;
    assert_close(plan_allreduce_best(&c, &pair, 5000, PLAN_COLL_MPI, 2).seconds,
                 plan_allreduce_ring(2, 5000, &half));
    assert_close(plan_allreduce_best(&c, &pair, 5000, PLAN_COLL_MPI, 1).seconds, ring);
    plan_group four = {.size = 4, .nodes = 2, .per_node = 2, .outer = PLAN_TIER_INTER};
    const double n = 64e6;
    plan_collective r = plan_allreduce_best(&c, &four, n, PLAN_COLL_MPI, 2);
    assert_int_equal(r.algo, PLAN_AR_RABENSEIFNER);
    assert_close(r.seconds, plan_allreduce_rabenseifner(4, 2, n, &c.tier[PLAN_TIER_INTRA], &half));
    /* the NCCL ring on the same group: one flow a node, the whole link */
    plan_group nccl_pair = pair;
    assert_close(plan_allreduce_best(&c, &nccl_pair, n, PLAN_COLL_NCCL, 1).seconds,
                 fmin(2 * 2 * 10e-6 + n / 10e9, plan_allreduce_tree(2, n, inter)));
}

/* Block placement on 2 nodes x 4: tp=8 spans both nodes; tp=2 x pp=4 (auto) puts stages 0,1 on
 * node 0 and 2,3 on node 1, so the chain crosses the network once and wraps back over it. */
static void test_groups(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    plan_group tp, pp, dp;
    plan_strategy s = {.dp = 1, .tp = 8, .pp = 1, .microbatches = 1, .order = 1}; /* tp-pp-dp */
    plan_groups(&c, &s, &tp, &pp, &dp);
    assert_int_equal(tp.nodes, 2);
    assert_int_equal(tp.per_node, 4);
    assert_int_equal(tp.outer, PLAN_TIER_INTER);
    s = (plan_strategy){.dp = 1, .tp = 2, .pp = 4, .microbatches = 1, .order = 0};
    plan_groups(&c, &s, &tp, &pp, &dp);
    assert_int_equal(tp.nodes, 1);
    assert_int_equal(pp.nodes, 2);
    assert_int_equal(pp.hops[PLAN_TIER_INTRA], 2);
    assert_int_equal(pp.hops[PLAN_TIER_INTER], 1);
    assert_int_equal(pp.wrap, PLAN_TIER_INTER);
    /* dp-tp-pp with dp=2, tp=2, pp=2: tp members are ranks r, r+2 (same node), pp members r,
     * r+4 (the other node) */
    s = (plan_strategy){.dp = 2, .tp = 2, .pp = 2, .microbatches = 1, .order = 5};
    plan_groups(&c, &s, &tp, &pp, &dp);
    assert_int_equal(tp.nodes, 1);
    assert_int_equal(pp.nodes, 2);
    assert_int_equal(dp.nodes, 1);
}

static model_config gpt2_124m(void) {
    return (model_config){.layers = 12,
                          .heads = 12,
                          .embd = 768,
                          .vocab = 50257,
                          .ctx = 1024,
                          .mlp = 3072,
                          .norm = NORM_PRE,
                          .arch = ARCH_GPT2,
                          .kv_heads = 12,
                          .tie_embeddings = 1};
}

/* Llama with GQA: 4 layers, 8 heads over 2 kv heads of 16, C = 128, M = 256, V = 512. */
static model_config llama_small(void) {
    return (model_config){.layers = 4,
                          .heads = 8,
                          .embd = 128,
                          .vocab = 512,
                          .ctx = 256,
                          .mlp = 256,
                          .norm = NORM_PRE,
                          .arch = ARCH_LLAMA,
                          .kv_heads = 2,
                          .tie_embeddings = 0,
                          .rope_theta = 10000};
}

static void test_valid(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    plan_model m = {.cfg = llama_small(), .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 4, .prompt = 16, .new_tokens = 8};
    char why[160];
    plan_strategy s = {.dp = 1, .tp = 4, .pp = 2, .microbatches = 1, .order = 0};
    assert_true(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why)); /* tp % kv == 0 */
    s.tp = 8, s.pp = 1, s.order = 1;
    assert_true(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    s.order = 0; /* auto: tp 8 does not fit a node of 4 */
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    assert_non_null(strstr(why, "auto"));
    m.cfg.heads = 6, m.cfg.kv_heads = 3; /* heads % tp */
    s = (plan_strategy){.dp = 2, .tp = 4, .pp = 1, .microbatches = 1, .order = 0};
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    m.cfg = llama_small();
    m.cfg.heads = 12, m.cfg.kv_heads = 4; /* tp = 3: 4 % 3 and 3 % 4 */
    s = (plan_strategy){.dp = 1, .tp = 3, .pp = 1, .microbatches = 1, .order = 0};
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    m.cfg = llama_small();
    s = (plan_strategy){.dp = 1, .tp = 1, .pp = 8, .microbatches = 1, .order = 0}; /* > layers */
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    s = (plan_strategy){.dp = 8, .tp = 1, .pp = 1, .microbatches = 1, .order = 0}; /* > batch */
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    s = (plan_strategy){.dp = 2, .tp = 1, .pp = 4, .microbatches = 4, .order = 0}; /* 2 each */
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    s.microbatches = 2;
    assert_true(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
}

/* GPT-2 124M on one rank in fp32: 124,439,808 parameters (wte 50257 x 768, wpe 1024 x 768,
 * 12 layers of 7,087,872, the final LayerNorm 1536), 4 bytes each; every tensor is already a
 * multiple of 64 bytes. KV cache: 2 x 12 layers x 4 sequences x 80 positions x 768 x 4 B. */
static void test_memory_known_shape(void **state) {
    (void)state;
    plan_model m = {.cfg = gpt2_124m(), .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 4, .prompt = 64, .new_tokens = 16};
    plan_strategy s = {.dp = 1, .tp = 1, .pp = 1, .microbatches = 1};
    double weights, act, kv;
    plan_rank_memory(&m, &w, &s, 0, 0, &weights, &act, &kv);
    assert_close(weights, 124439808.0 * 4);
    assert_close(kv, 2.0 * 12 * 4 * 80 * 768 * 4);
    /* bf16 halves the matrices only: the 12 layers' 4 matrices (7,077,888 each layer) */
    m.weight_dtype = PRECISION_BF16;
    plan_rank_memory(&m, &w, &s, 0, 0, &weights, &act, &kv);
    assert_close(weights, 124439808.0 * 4 - 12 * 7077888.0 * 2);
}

/* Activations and KV cache equal engine_arena_plan's, the table engine_init carves, for GPT-2
 * and Llama GQA, contiguous and paged, over meshes and micro-batches. */
static void test_memory_matches_engine(void **state) {
    (void)state;
    const model_config shapes[] = {gpt2_124m(), llama_small()};
    const int meshes[][4] = {{1, 1, 1, 1}, {2, 2, 1, 2}, {1, 4, 2, 3}, {3, 1, 4, 1}, {1, 8, 1, 4}};
    for (int k = 0; k < 2; k++)
        for (int paged = 0; paged < 2; paged++)
            for (size_t i = 0; i < sizeof meshes / sizeof meshes[0]; i++) {
                const int dp = meshes[i][0], tp = meshes[i][1], pp = meshes[i][2],
                          micro = meshes[i][3];
                plan_model m = {.cfg = shapes[k],
                                .weight_dtype = PRECISION_FP32,
                                .kv_cache = paged ? KV_PAGED : KV_CONTIGUOUS,
                                .kv_block = 16};
                if (m.cfg.heads % tp) continue;
                plan_workload w = {.batch = 7, .prompt = 20, .new_tokens = 9};
                plan_strategy s = {.dp = dp, .tp = tp, .pp = pp, .microbatches = micro};
                engine_config ec;
                memset(&ec, 0, sizeof ec);
                ec.batch = w.batch, ec.prompt_len = w.prompt, ec.new_tokens = w.new_tokens;
                ec.microbatches = micro, ec.kv_cache = m.kv_cache, ec.kv_block = m.kv_block;
                for (int pr = 0; pr < pp; pr++) {
                    shard_geom g;
                    shard_geom_init(&g, &m.cfg, tp, tp - 1, pp, pr);
                    size_t act_e, kv_e;
                    engine_arena_plan(&ec, &g, &m.cfg, dp, dp - 1, &act_e, &kv_e);
                    double weights, act, kv;
                    plan_rank_memory(&m, &w, &s, tp - 1, pr, &weights, &act, &kv);
                    assert_close(act, (double)act_e);
                    assert_close(kv, (double)kv_e);
                }
            }
}

/* The sum of one unsharded rank's phase rooflines max(F / P, B / W): a prefill of seqs x prompt
 * and a decode step at the mean context of new_tokens - 1 steps. */
static void roofline_sums(const model_config *cfg, int seqs, int prompt, int new_tokens, double P,
                          double W, double *ttft, double *tpot) {
    static const phase phases[] = {PHASE_EMBED,     PHASE_NORM,          PHASE_QKV_GEMM,
                                   PHASE_ATTENTION, PHASE_ATTN_OUT_GEMM, PHASE_MLP_GEMM,
                                   PHASE_HEAD,      PHASE_SAMPLE};
    *ttft = *tpot = 0;
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        phase_step st = {.tp = 1,
                         .pp = 1,
                         .weight_dtype = PRECISION_FP32,
                         .kv_cache = KV_CONTIGUOUS,
                         .kv_block = 16,
                         .seqs = seqs,
                         .new_positions = prompt,
                         .past_positions = 0};
        phase_cost pc;
        phase_cost_compute(cfg, &st, phases[i], &pc);
        *ttft += fmax(pc.flops / P, pc.bytes / W);
        st.new_positions = 1, st.past_positions = prompt + (new_tokens - 2) / 2;
        phase_cost_compute(cfg, &st, phases[i], &pc);
        *tpot += fmax(pc.flops / P, pc.bytes / W);
    }
}

/* One rank, one micro-batch: TTFT is the prefill phases' rooflines, TPOT the decode ones at the
 * mean context, and the parts of E2E add up to it. */
static void test_predict_single_rank(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    plan_model m = {.cfg = gpt2_124m(), .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 2, .prompt = 32, .new_tokens = 9};
    plan_rates r;
    plan_rates_default(&r);
    plan_strategy s = {.dp = 1, .tp = 1, .pp = 1, .microbatches = 1};
    plan_prediction p;
    plan_predict(&m, &w, &c, &r, &s, &p);
    double ttft, tpot; /* 8 decode steps: mean context 32 + 3 */
    roofline_sums(&m.cfg, 2, 32, 9, c.peak_flops, c.mem_bw, &ttft, &tpot);
    assert_int_equal(p.node_ranks, 1);
    assert_close(p.time_share, 1);
    assert_close(p.ttft, ttft);
    assert_close(p.tpot, tpot);
    assert_close(p.e2e, ttft + 8 * tpot);
    assert_close(p.compute, p.e2e);
    assert_close(p.tokens_per_s, 2 * 9 / p.e2e);
    assert_true(p.fits);
}

/* A CPU node of 8 devices on 2 cores, 40 GFLOP/s and 12.8 GB/s per core alone, 16 GB/s for the
 * node; ranks bound round-robin, local rank i on core i mod 2. */
static plan_cluster cpu_node(void) {
    plan_cluster c = two_nodes();
    c.nodes = 1, c.devices_per_node = 8, c.cores_per_node = 2;
    c.peak_flops = 40e9, c.mem_bw = 12.8e9, c.node_bw = 16e9;
    return c;
}

enum { PREFILL = 0, DECODE = 1 };

static plan_ceilings stage_share(const plan_cluster *c, int dp, int tp, int pp, int m, int order,
                                 int batch, int period, int stage) {
    const plan_strategy s = {.dp = dp, .tp = tp, .pp = pp, .microbatches = m, .order = order};
    return plan_stage_ceilings(c, &s, batch, m, period, stage);
}

/* Hand-worked shares: share = the most busy ranks' work on one core over the largest rank's,
 * averaged over the windows holding the stage; bw = min(12.8, 16 / busy cores) / share. */
static void test_stage_ceilings(void **state) {
    (void)state;
    plan_cluster c = cpu_node();
    plan_ceilings k = stage_share(&c, 1, 1, 1, 1, 0, 4, PREFILL, 0); /* alone */
    assert_close(k.share, 1);
    assert_close(k.flops, 40e9);
    assert_close(k.bw, 12.8e9);
    k = stage_share(&c, 2, 1, 1, 1, 0, 4, DECODE, 0); /* a core each; 16 GB/s split in two */
    assert_close(k.share, 1);
    assert_int_equal(k.running, 2);
    assert_close(k.bw, 8e9);
    k = stage_share(&c, 1, 3, 1, 1, 0, 4, DECODE, 0); /* TP ranks 0 and 2 share core 0 */
    assert_close(k.share, 2);
    assert_close(k.flops, 20e9);
    assert_close(k.bw, 4e9);
    k = stage_share(&c, 1, 8, 1, 1, 0, 4, PREFILL, 0); /* 4 per core */
    assert_close(k.share, 4);
    assert_close(k.bw, 2e9);
    assert_int_equal(k.busy, 8);
    /* dp=4, batch 5: replicas of 1, 1, 1, 2 sequences; core 1 holds replicas 1 (1) and 3 (2):
     * prefill shares by work, (1 + 2) / 2; decode streams the same weights in each: 2 */
    assert_close(stage_share(&c, 4, 1, 1, 1, 0, 5, PREFILL, 0).share, 1.5);
    assert_close(stage_share(&c, 4, 1, 1, 1, 0, 5, DECODE, 0).share, 2);
    /* pp=8, one micro-batch: one stage computes at a time, its core-mates wait */
    for (int stage = 0; stage < 8; stage++) {
        k = stage_share(&c, 1, 1, 8, 1, 0, 4, PREFILL, stage);
        assert_close(k.share, 1);
        assert_int_equal(k.busy, 1);
    }
    /* pp=8, 2 micro-batches: windows {s-1, s} and {s, s+1}; stages s and s+1 sit on different
     * cores, so no window crowds a core */
    assert_close(stage_share(&c, 1, 1, 8, 2, 0, 4, PREFILL, 3).share, 1);
    /* pp=4, 4 micro-batches: all stages busy, 2 per core */
    assert_close(stage_share(&c, 1, 1, 4, 4, 0, 4, PREFILL, 0).share, 2);
    /* dp=2 x pp=2, order auto (rank = stage + 2 replica): both replicas' stage 0 on core 0.
     * Prefill: lock-step, 2. Decode: the replicas drift apart over the V = 2 cores each
     * visits, (2 + 2 - 1) / 2 = 1.5, above the cores' own work (2 ranks per core over 2
     * windows: 1) */
    assert_close(stage_share(&c, 2, 1, 2, 1, 0, 4, PREFILL, 0).share, 2);
    assert_true(stage_share(&c, 2, 1, 2, 1, 0, 4, PREFILL, 0).mixed);  /* two replicas a core */
    assert_false(stage_share(&c, 1, 3, 1, 1, 0, 4, PREFILL, 0).mixed); /* one replica's TP */
    assert_close(stage_share(&c, 2, 1, 2, 1, 0, 4, DECODE, 0).share, 1.5);
    assert_close(stage_share(&c, 2, 1, 2, 1, 0, 4, DECODE, 1).share, 1.5);
    /* dp=2 x tp=2 x pp=2 (rank = tp + 2 stage + 4 replica): core 0 holds TP rank 0 of every
     * stage; the drift bound (1.5) is below the cores' own work, 4 ranks over 2 windows */
    assert_close(stage_share(&c, 2, 2, 2, 1, 0, 4, DECODE, 0).share, 2);
    /* order dp-pp-tp (rank = replica + 2 stage): stage 0 of both replicas on cores 0 and 1 */
    const int dp_pp_tp = 6;
    assert_string_equal(plan_order_names[dp_pp_tp], "dp-pp-tp");
    assert_close(stage_share(&c, 2, 1, 2, 1, dp_pp_tp, 4, PREFILL, 0).share, 1);
    assert_close(stage_share(&c, 2, 1, 2, 1, dp_pp_tp, 4, DECODE, 1).share, 1);
    /* without cores_per_node or node_gbs (a GPU node): every rank has the device's ceilings */
    c.cores_per_node = 0, c.node_bw = 0;
    k = stage_share(&c, 8, 1, 1, 1, 0, 8, PREFILL, 0);
    assert_close(k.share, 1);
    assert_close(k.flops, 40e9);
    assert_close(k.bw, 12.8e9);
    /* block placement: the fullest node holds min(world, devices_per_node) ranks */
    assert_int_equal(plan_node_ranks(&c, 3), 3);
    assert_int_equal(plan_node_ranks(&c, 20), 8);
}

/* Calibration curves: the efficiency at a calibrated intensity, linear in log intensity
 * between two, flat past the ends, 1 where nothing was measured. */
static void test_rate_curve(void **state) {
    (void)state;
    plan_rates r;
    plan_rates_default(&r);
    assert_close(plan_rate_efficiency(&r, 1, PHASE_MLP_GEMM, 2.0), 1);
    plan_rate_curve *k = &r.curve[1][PHASE_MLP_GEMM];
    k->n = 2;
    k->intensity[0] = 0.5, k->efficiency[0] = 0.9;
    k->intensity[1] = 2.0, k->efficiency[1] = 0.6;
    assert_close(plan_rate_efficiency(&r, 1, PHASE_MLP_GEMM, 0.5), 0.9);
    assert_close(plan_rate_efficiency(&r, 1, PHASE_MLP_GEMM, 1.0), 0.75); /* halfway in log */
    assert_close(plan_rate_efficiency(&r, 1, PHASE_MLP_GEMM, 0.1), 0.9);
    assert_close(plan_rate_efficiency(&r, 1, PHASE_MLP_GEMM, 8.0), 0.6);
    assert_close(plan_rate_efficiency(&r, 0, PHASE_MLP_GEMM, 1.0), 1); /* prefill: none */
}

/* dp=4 on one node of 2 cores whose bandwidth is 1.5 W for the node: each replica (one
 * sequence) is predicted at P / 2 and min(W, 1.5 W / 2) / 2 = 0.375 W; without cores_per_node
 * and node_gbs, at P and W. No TP or PP communication: TTFT and TPOT are the rooflines alone. */
static void test_predict_shared_node(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    c.nodes = 1, c.devices_per_node = 8;
    plan_model m = {.cfg = gpt2_124m(), .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 4, .prompt = 64, .new_tokens = 16};
    plan_rates r;
    plan_rates_default(&r);
    plan_strategy s = {.dp = 4, .tp = 1, .pp = 1, .microbatches = 1};
    plan_prediction alone, shared;
    plan_predict(&m, &w, &c, &r, &s, &alone);
    double ttft, tpot;
    roofline_sums(&m.cfg, 1, 64, 16, c.peak_flops, c.mem_bw, &ttft, &tpot);
    assert_close(alone.time_share, 1);
    assert_close(alone.ttft, ttft);
    assert_close(alone.tpot, tpot);
    c.cores_per_node = 2, c.node_bw = 1.5 * c.mem_bw;
    plan_predict(&m, &w, &c, &r, &s, &shared);
    roofline_sums(&m.cfg, 1, 64, 16, c.peak_flops / 2, 0.375 * c.mem_bw, &ttft, &tpot);
    assert_int_equal(shared.node_ranks, 4);
    assert_close(shared.time_share, 2);
    assert_close(shared.ttft, ttft);
    assert_close(shared.tpot, tpot);
    assert_close(shared.dp_gather, alone.dp_gather); /* communication is not time-shared */
    /* pure time-sharing (no node bandwidth limit) doubles every phase exactly */
    c.node_bw = 0;
    plan_predict(&m, &w, &c, &r, &s, &shared);
    assert_close(shared.ttft, 2 * alone.ttft);
    assert_close(shared.tpot, 2 * alone.tpot);
    /* replicas 0 and 2 share core 0: a calibrated cost of switching between them applies */
    r.mixed_cost[0] = 1.5, r.mixed_cost[1] = 1.25;
    plan_predict(&m, &w, &c, &r, &s, &shared);
    assert_close(shared.ttft, 3 * alone.ttft);
    assert_close(shared.tpot, 2.5 * alone.tpot);
    r.mixed_cost[0] = r.mixed_cost[1] = 1;
    /* pp=4 with one micro-batch on the same 4 ranks: one stage computes at a time, on a core
     * of its own: no time-sharing */
    s = (plan_strategy){.dp = 1, .tp = 1, .pp = 4, .microbatches = 1};
    plan_predict(&m, &w, &c, &r, &s, &shared);
    assert_int_equal(shared.node_ranks, 4);
    assert_int_equal(shared.busy_ranks, 1);
    assert_close(shared.time_share, 1);
}

/* The TP all-reduces' calibration (plan_rates.comm_cost, comm_wait): on a node whose ranks
 * time-share its cores a TP all-reduce costs scale x the model + wait per call; on one where
 * every rank has a core, the other pair applies. tp_period holds tp_total's prefill and
 * decode parts and tp_calls their all-reduces: per micro-batch two a layer and the sampler's
 * MAXLOC on the last stage. */
static void test_comm_calibration(void **state) {
    (void)state;
    plan_cluster c = cpu_node(); /* 8 ranks on 2 cores */
    plan_model m = {.cfg = gpt2_124m(), .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 4, .prompt = 64, .new_tokens = 16};
    plan_rates r;
    plan_rates_default(&r);
    const plan_strategy tp4 = {.dp = 1, .tp = 4, .pp = 1, .microbatches = 2};
    const plan_strategy tp2 = {.dp = 1, .tp = 2, .pp = 1, .microbatches = 1};
    plan_prediction base4, base2, p;
    plan_predict(&m, &w, &c, &r, &tp4, &base4);
    plan_predict(&m, &w, &c, &r, &tp2, &base2);
    const int layers = m.cfg.layers, steps = w.new_tokens - 1;
    assert_close(base4.tp_calls[PREFILL], 2 * (2 * layers + 1));
    assert_close(base4.tp_calls[DECODE], steps * 2 * (2 * layers + 1));
    assert_close(base2.tp_calls[DECODE], steps * (2 * layers + 1));
    assert_close(base4.tp_period[PREFILL] + base4.tp_period[DECODE], base4.tp_total);
    /* 4 ranks on 2 cores time-share them; 2 do not */
    r.comm_cost[1][PREFILL] = 2, r.comm_wait[1][PREFILL] = 1e-4;
    r.comm_cost[1][DECODE] = 3, r.comm_wait[1][DECODE] = 2e-5;
    plan_predict(&m, &w, &c, &r, &tp4, &p);
    assert_close(p.tp_period[PREFILL], 2 * base4.tp_period[PREFILL] + 1e-4 * p.tp_calls[PREFILL]);
    assert_close(p.tp_period[DECODE], 3 * base4.tp_period[DECODE] + 2e-5 * p.tp_calls[DECODE]);
    assert_close(p.tp_total, p.tp_period[PREFILL] + p.tp_period[DECODE]);
    assert_close(p.compute, base4.compute); /* only the all-reduces */
    assert_true(p.tpot > base4.tpot);
    plan_predict(&m, &w, &c, &r, &tp2, &p);
    assert_close(p.tp_total, base2.tp_total);
    r.comm_cost[0][DECODE] = 0.5;
    plan_predict(&m, &w, &c, &r, &tp2, &p);
    assert_close(p.tp_period[PREFILL], base2.tp_period[PREFILL]);
    assert_close(p.tp_period[DECODE], 0.5 * base2.tp_period[DECODE]);
}

/* Weights in the last-level cache (docs/planner.md "Weights in the cache"): a phase reads its
 * weights at llc_bw when the rank's weights, times the busy ranks sharing a CPU node's cache,
 * fit in llc_bytes; everything else at memory bandwidth. */
static void test_weights_in_cache(void **state) {
    (void)state;
    plan_cluster c = two_nodes(); /* a GPU node: each device its own cache */
    c.llc_bytes = 50.0 * 1048576, c.llc_bw = 4e12;
    plan_ceilings k = {.flops = 100e12, .bw = 1e12, .share = 1};
    int mb = 0;
    /* 1e8 FLOPs (1 us), 8 MB of weights and 2 MB of activations; weights 40 MiB fit:
     * 8e6 / 4e12 + 2e6 / 1e12 = 4 us, memory-bound */
    assert_close(plan_phase_roofline(&c, &k, 1e8, 10e6, 8e6, 40.0 * 1048576, &mb), 4e-6);
    assert_int_equal(mb, 1);
    /* 60 MiB do not: all 10 MB at 1e12, 10 us */
    assert_close(plan_phase_roofline(&c, &k, 1e8, 10e6, 8e6, 60.0 * 1048576, &mb), 10e-6);
    /* no cache given: the same as weights that do not fit */
    c.llc_bytes = 0;
    assert_close(plan_phase_roofline(&c, &k, 1e8, 10e6, 8e6, 1.0, NULL), 10e-6);
    /* a CPU node: its busy ranks share the cache, 20 MiB each; 2 fit in 50 MiB, 3 do not; a
     * core shared by 2 busy ranks reads the cache at half its rate, as it streams at half */
    c = cpu_node();
    c.llc_bytes = 50.0 * 1048576, c.llc_bw = 40e9;
    k = (plan_ceilings){.flops = 20e9, .bw = 6.4e9, .share = 2, .busy = 2};
    assert_close(plan_phase_roofline(&c, &k, 1e6, 10e6, 8e6, 20.0 * 1048576, NULL),
                 8e6 / 20e9 + 2e6 / 6.4e9);
    k.busy = 3;
    assert_close(plan_phase_roofline(&c, &k, 1e6, 10e6, 8e6, 20.0 * 1048576, NULL), 10e6 / 6.4e9);
    /* a whole prediction: GPT-2 124M on one rank decodes faster when its 475 MiB fit, and
     * exactly as without the term when the cache is smaller than they are */
    c = two_nodes();
    plan_model m = {.cfg = gpt2_124m(), .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 1, .prompt = 32, .new_tokens = 8};
    plan_rates r;
    plan_rates_default(&r);
    plan_strategy s = {.dp = 1, .tp = 1, .pp = 1, .microbatches = 1};
    plan_prediction none, small, fits;
    plan_predict(&m, &w, &c, &r, &s, &none);
    c.llc_bw = 4e12, c.llc_bytes = 400.0 * 1048576;
    plan_predict(&m, &w, &c, &r, &s, &small);
    c.llc_bytes = 512.0 * 1048576;
    plan_predict(&m, &w, &c, &r, &s, &fits);
    assert_close(small.tpot, none.tpot);
    assert_true(fits.tpot < 0.5 * none.tpot);
}

/* Pipelines: more micro-batches shrink the prefill bubble; the parts always add up to E2E. */
static void test_predict_parts_add_up(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    plan_model m = {.cfg = gpt2_124m(), .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 8, .prompt = 64, .new_tokens = 16};
    plan_rates r;
    plan_rates_default(&r);
    plan_prediction *list = NULL;
    int n = plan_enumerate(&m, &w, &c, &r, 8, &list);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        const plan_prediction *p = &list[i];
        assert_close(p->compute + p->tp_exposed + p->ep_exposed + p->pp_exposed + p->bubble +
                         p->dp_gather,
                     p->e2e);
        assert_true(p->ep_exposed == 0); /* a dense model */
        assert_true(p->tp_hidden <= p->tp_total + 1e-15);
        assert_true(p->s.overlap || p->tp_hidden == 0);
    }
    free(list);
    /* a prompt long enough that each micro-batch's prefill is compute-bound: a memory-bound
     * one re-reads the weights per micro-batch, and splitting it does not pay (nor should) */
    w.prompt = 512;
    plan_strategy s = {.dp = 1, .tp = 1, .pp = 4, .microbatches = 1, .order = 0};
    plan_prediction one, four;
    plan_predict(&m, &w, &c, &r, &s, &one);
    s.microbatches = 4;
    plan_predict(&m, &w, &c, &r, &s, &four);
    assert_true(four.ttft < one.ttft);
    assert_close(four.prefill_bubble_fraction, 3.0 / 7.0);
    assert_true(one.bubble > 0);
}

/* A mixture of experts sums its experts in one blocking all-reduce per layer (forward.c), so
 * with overlap at tp 2 and 2 chunks only the attention output goes in 2 pieces: per layer 2
 * all-reduces of half the rows and 1 of all of them, where a dense Llama has 4 of half; the
 * sampler's MAXLOC on top; only the pieces can be hidden. A prefill alone (one new token). */
static void test_moe_allreduce_whole(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    model_config moe = llama_small();
    moe.arch = ARCH_MIXTRAL, moe.experts = 4, moe.experts_top_k = 2, moe.norm_topk_prob = 1;
    plan_model m = {.cfg = moe, .weight_dtype = PRECISION_FP32, .kv_block = 16, .chunks = 2};
    plan_workload w = {.batch = 2, .prompt = 8, .new_tokens = 1};
    plan_rates r;
    plan_rates_default(&r);
    plan_strategy s = {.dp = 1, .tp = 2, .pp = 1, .microbatches = 1, .overlap = 1};
    plan_prediction p;
    plan_predict(&m, &w, &c, &r, &s, &p);
    const double bytes = 2 * 8 * 128 * 4.0; /* rows x C x 4 */
    const double half = plan_iallreduce(&c, &p.tp_group, bytes / 2, PLAN_COLL_NCCL, 0).seconds;
    const double whole = plan_allreduce_best(&c, &p.tp_group, bytes, PLAN_COLL_NCCL, 0).seconds;
    const double maxloc = plan_allreduce_best(&c, &p.tp_group, 2 * 8.0, PLAN_COLL_NCCL, 0).seconds;
    assert_close(p.tp_total, 4 * (2 * half + whole) + maxloc);
    /* NCCL hides half of what runs under a product (uncalibrated): the attention's pieces */
    assert_true(p.tp_hidden > 0 && p.tp_hidden <= 0.5 * 4 * 2 * half * (1 + 1e-12));
    m.cfg = llama_small();
    plan_predict(&m, &w, &c, &r, &s, &p);
    assert_close(p.tp_total, 4 * 4 * half + maxloc);
}

/* Every strategy of GPT-2 124M on 2 ranks, batch 4: tp=2 (m 1, 2, 4, overlap off and on: 6),
 * dp=2 (m 1, 2: 2), pp=2 (m 1, 2, 4: 3); one order each (the others place 2 ranks alike). */
static void test_enumerate_count(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    plan_model m = {.cfg = gpt2_124m(), .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 4, .prompt = 64, .new_tokens = 16};
    plan_rates r;
    plan_rates_default(&r);
    plan_prediction *list = NULL;
    assert_int_equal(plan_enumerate(&m, &w, &c, &r, 2, &list), 11);
    free(list);
}

/* llama_small as a Mixtral of 4 experts, top 2, renormalised. */
static model_config mixtral4(void) {
    model_config moe = llama_small();
    moe.arch = ARCH_MIXTRAL, moe.experts = 4, moe.experts_top_k = 2, moe.norm_topk_prob = 1;
    return moe;
}

/* Expert blocks (parallel.ep) in the enumeration: a 4-expert Mixtral on 2 ranks, batch 4, lists
 * the 11 strategies of a dense model plus tp=2 at ep 2 for each micro-batch count and overlap
 * (6 more) and dp=2 at ep 2 across the two replicas for each micro-batch count (2 more); ep
 * must divide the experts and either divide tp or be tp times a divisor of dp. A block holds
 * its 2 experts whole, the same bytes per rank as 4 half experts, and its decode is priced at
 * the busier block's load: slower than ep 1's, which spreads every expert over both ranks (its prefill may not be: a block gathers
 * and scatters only its own rows, about half). */
static void test_enumerate_ep(void **state) {
    (void)state;
    plan_cluster c = two_nodes();
    const model_config moe = mixtral4();
    plan_model m = {.cfg = moe, .weight_dtype = PRECISION_FP32, .kv_block = 16};
    plan_workload w = {.batch = 4, .prompt = 16, .new_tokens = 8};
    plan_rates r;
    plan_rates_default(&r);
    plan_prediction *list = NULL;
    const int n = plan_enumerate(&m, &w, &c, &r, 2, &list);
    assert_int_equal(n, 19);
    int inside = 0, across = 0;
    for (int i = 0; i < n; i++) {
        const plan_prediction *p = &list[i];
        if (plan_strategy_ep(&p->s) == 2 && p->s.tp == 2) inside++;
        if (plan_strategy_ep(&p->s) == 2 && p->s.dp == 2) across++, assert_true(p->ep_exposed > 0);
        if (p->s.ep <= p->s.tp) assert_true(p->ep_exposed == 0);
        assert_close(p->compute + p->tp_exposed + p->ep_exposed + p->pp_exposed + p->bubble +
                         p->dp_gather,
                     p->e2e);
    }
    assert_int_equal(inside, 6);
    assert_int_equal(across, 2);
    free(list);
    char why[160];
    plan_strategy s = {.dp = 1, .tp = 2, .pp = 1, .microbatches = 1, .ep = 4};
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why)); /* 4 / 2 > dp 1 */
    assert_non_null(strstr(why, "ep=4"));
    s.tp = 1, s.dp = 2, s.ep = 3; /* neither divides tp 1 nor the 4 experts */
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    s.dp = 1, s.tp = 2;
    m.cfg = llama_small(); /* dense: no blocks */
    s.ep = 2;
    assert_false(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    m.cfg = moe;
    plan_prediction one, two;
    s.ep = 1;
    plan_predict(&m, &w, &c, &r, &s, &one);
    s.ep = 2;
    plan_predict(&m, &w, &c, &r, &s, &two);
    assert_close(two.weight_bytes, one.weight_bytes);
    assert_true(two.tpot > one.tpot);
    /* expert parallelism across replicas, dp=2 with ep=2 on one node: a rank holds 2 of the 4
     * experts (half the expert bytes of ep 1's replica, which holds all 4), runs them in
     * ep_expert over both replicas' rows (mlp_gemm keeps the router), and per layer and
     * micro-batch pays three all-to-alls over its EP group of 2: the 4 experts' counts and,
     * twice, its routed rows (R k / tp rows of C floats): prefill R = 2 x 16, decode R = 2,
     * over 7 decode steps, one micro-batch */
    s = (plan_strategy){.dp = 2, .tp = 1, .pp = 1, .microbatches = 1, .ep = 1};
    plan_predict(&m, &w, &c, &r, &s, &one);
    s.ep = 2;
    assert_true(plan_strategy_valid(&m, &w, &c, &s, why, sizeof why));
    plan_predict(&m, &w, &c, &r, &s, &two);
    /* two experts fewer per layer: gate|up (C x 2 mlp) and down (mlp x C), fp32 */
    const double expert = (128.0 * 2 * 256 + 256.0 * 128) * 4;
    assert_true(fabs(one.weight_bytes - two.weight_bytes - 4 * 2 * expert) < 1e-3 * expert);
    plan_group ep;
    plan_ep_group(&c, &s, &ep);
    assert_int_equal(ep.size, 2);
    assert_int_equal(ep.outer, PLAN_TIER_INTRA);
    double expect = 0;
    for (int period = 0; period < 2; period++) {
        const plan_ceilings k = plan_stage_ceilings(&c, &s, w.batch, 1, period, 0);
        const double rows = period ? 2 : 2 * 16, times = period ? 7 : 1;
        expect += times * 4 *
                  (plan_alltoall(&c, &ep, 4 * 4.0, m.collectives, k.busy) +
                   2 * plan_alltoall(&c, &ep, rows * 2 * 128 * 4.0, m.collectives, k.busy));
    }
    assert_close(two.ep_exposed, expect);
    assert_true(one.ep_exposed == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_allreduce),
        cmocka_unit_test(test_tree_allreduce),
        cmocka_unit_test(test_p2p_and_allgather),
        cmocka_unit_test(test_bubble),
        cmocka_unit_test(test_allreduce_choice),
        cmocka_unit_test(test_nccl_choice),
        cmocka_unit_test(test_allreduce_mpi),
        cmocka_unit_test(test_links_shared),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_memory_known_shape),
        cmocka_unit_test(test_memory_matches_engine),
        cmocka_unit_test(test_predict_single_rank),
        cmocka_unit_test(test_stage_ceilings),
        cmocka_unit_test(test_rate_curve),
        cmocka_unit_test(test_predict_shared_node),
        cmocka_unit_test(test_weights_in_cache),
        cmocka_unit_test(test_predict_parts_add_up),
        cmocka_unit_test(test_enumerate_count),
        cmocka_unit_test(test_moe_allreduce_whole),
        cmocka_unit_test(test_enumerate_ep),
        cmocka_unit_test(test_alltoall),
        cmocka_unit_test(test_comm_calibration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
