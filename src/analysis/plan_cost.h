/* The planner's cost model (`tripar plan`, docs/planner.md): what one dp x tp x pp strategy of
 * tripar costs on a cluster, from the model shape, per-phase rates and alpha-beta network tiers.
 * Pure arithmetic: no MPI, no files; every equation is written out in docs/planner.md. */
#pragma once
#include "metrics/phase_cost.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Network tiers, fastest first: inside a node, between nodes, between groups of nodes. */
typedef enum {
    PLAN_TIER_INTRA = 0,
    PLAN_TIER_INTER,
    PLAN_TIER_INTER2,
    PLAN_TIER_COUNT
} plan_tier_kind;

typedef struct {
    int present;
    double alpha;       /* seconds per message */
    double beta;        /* bytes/s per device and direction */
    double efficiency;  /* fraction of beta a collective achieves, (0, 1] */
    int links_per_node; /* inter tiers: the links a node's ranks share; 0: one per device */
} plan_tier;

/* What NCCL's tuning model needs to know of a GPU cluster beyond its tiers (the cluster file's
 * `nccl` section; docs/planner.md "NCCL's choice"). */
typedef enum {
    PLAN_GPU_VOLTA = 0,
    PLAN_GPU_AMPERE,
    PLAN_GPU_HOPPER,
    PLAN_GPU_BLACKWELL,
    PLAN_GPU_COUNT
} plan_gpu_arch;
typedef struct {
    int given;          /* 0: no nccl section, NCCL's collectives costed as the cheapest form */
    plan_gpu_arch arch; /* sets NCCL's LL bandwidth ceilings and NVLS efficiency */
    int intra_pci;      /* the GPUs of a node talk over PCIe, not NVLink (no LL128) */
    int nvls;           /* NVLink SHARP in the node's NVSwitches (NVLS, NVLS tree) */
    int cpu_amd;        /* the hosts' CPUs: AMD's set NCCL's multi-node LL ceiling and the
                           network post overhead */
} plan_nccl;

/* How far a GPU's kernels fall short of its datasheet peaks when no calibration run says
 * (the cluster file's `device.efficiency` section; docs/planner.md "GPU efficiency models";
 * plan_gpu.h computes with it). A device without the section (a CPU) keeps the plain roofline. */
typedef struct {
    int given;            /* 0: no device.efficiency section: phases at the plain roofline */
    int sms;              /* streaming multiprocessors: a wave is one tile (block) on each */
    int tile_m, tile_n;   /* the output tile of a tensor-core GEMM (cuBLAS/CUTLASS-like) */
    int split_k_max;      /* at most this many K splits when the tiles leave SMs idle */
    double gemm_ceiling;  /* fraction of peak_flops one full wave of full tiles reaches */
    double fp32_fraction; /* fp32 GEMMs' (fp32 or int8w weights: cuBLAS SGEMM) peak over the
                             bf16 tensor-core peak that peak_flops gives */
    double attn_ceiling;  /* prefill flash-attention's fraction of peak at long context */
    double attn_half_ctx; /* the context (positions) at which it reaches half that */
    double hbm_fraction;  /* memory-bound kernels' share of mem_bw */
    double launch;        /* seconds per kernel launched from the host */
    double graph_launch;  /* seconds per kernel of a replayed CUDA graph */
    double step_overhead; /* seconds of host work per forward step (the token back to the
                             host, sampled, the next step set up), on the last stage */
    /* seconds an NCCL call costs in a step beyond NCCL's tuning model, whose latencies rank
     * the algorithms: its launch and the ranks meeting, the same for each */
    double collective_launch;
} plan_gpu_efficiency;

typedef struct {
    char name[64];
    int nodes, devices_per_node; /* devices_per_node: the ranks a node may hold */
    int cores_per_node;          /* cores the ranks of a node time-share; 0: one core per device */
    double device_memory;        /* bytes per device */
    double peak_flops;           /* FLOP/s per device */
    double mem_bw;               /* bytes/s per device, streaming alone */
    double node_bw;   /* bytes/s the running ranks of a node draw together; 0: no limit */
    double llc_bytes; /* the last-level cache a device's weights may stay in (a CPU node's
                         cores share it); 0: no cache term, weights stream from memory */
    double llc_bw;    /* bytes/s one rank reads weights at from that cache */
    plan_tier tier[PLAN_TIER_COUNT];
    int inter2_group_nodes; /* nodes per group joined by `inter`; 0 when there is no inter2 */
    plan_nccl nccl;
    plan_gpu_efficiency gpu;
} plan_cluster;

/* Collective costs on one tier (seconds for bytes per rank, p ranks). */
double plan_allreduce_ring(int p, double bytes, const plan_tier *t);
double plan_allreduce_tree(int p, double bytes, const plan_tier *t);
double plan_allgather_ring(int p, double bytes, const plan_tier *t);
double plan_p2p(double bytes, const plan_tier *t);
/* The pipeline bubble of a prefill: (pp - 1) / (m + pp - 1). */
double plan_bubble_fraction(int pp, int microbatches);

/* Where a group of ranks (one TP, PP or DP group) sits: how many nodes it spans, its most
 * ranks on one node, and the slowest tier any two of its members cross. */
typedef struct {
    int size, nodes, per_node;
    plan_tier_kind outer;
    /* PP only: the stage boundaries of the worst group that cross each tier, in stage order,
     * and the tier of the hop from the last stage back to the first (the sampled tokens) */
    int hops[PLAN_TIER_COUNT];
    plan_tier_kind wrap;
} plan_group;

typedef enum {
    PLAN_AR_NONE = 0,
    PLAN_AR_RING,
    PLAN_AR_TREE,
    PLAN_AR_HIER,
    PLAN_AR_RECURSIVE_DOUBLING,
    PLAN_AR_RABENSEIFNER,
    PLAN_AR_BINOMIAL,
    PLAN_AR_NVLS,     /* NCCL's NVLink SHARP all-reduce, in the switch (one node) */
    PLAN_AR_NVLS_TREE /* NVLS inside the nodes, a tree between them */
} plan_allreduce_algo;
/* NCCL's protocols (LL: 8-byte flag-and-data stores, half the bandwidth, least latency;
 * LL128: 128-byte lines on NVLink; Simple: bulk copies with fences); NONE for MPI's
 * algorithms and the alpha-beta forms. */
typedef enum { PLAN_PROTO_NONE = 0, PLAN_PROTO_LL, PLAN_PROTO_LL128, PLAN_PROTO_SIMPLE } plan_proto;
/* The library the collectives go through: NCCL on GPUs, MPI on CPUs (tripar's comm backends). */
typedef enum { PLAN_COLL_NCCL = 0, PLAN_COLL_MPI } plan_collectives;
const char *plan_allreduce_algo_name(plan_allreduce_algo a);
const char *plan_tier_name(plan_tier_kind t);

typedef struct {
    double seconds;
    plan_allreduce_algo algo;
    plan_proto proto;
} plan_collective;
/* "ring", or with NCCL's protocol "ring/LL128", into buf. */
const char *plan_collective_label(plan_allreduce_algo a, plan_proto p, char *buf, int len);

/* NCCL's own choice and cost of an all-reduce (its tuning model, src/graph/tuning.cc of NCCL
 * 2.2x: per algorithm and protocol a latency, base plus per hop, and a bus bandwidth from the
 * link's with the protocol's efficiency; the least time wins) of bytes over p ranks on `nodes`
 * nodes, per_node of them on a node, the links' bandwidth from the tiers (intra inside one
 * node, outer across). c->nccl says which algorithms and protocols the hardware has. */
plan_collective plan_nccl_allreduce(const plan_cluster *c, int p, int nodes, int per_node,
                                    double bytes, const plan_tier *intra, const plan_tier *outer);

/* Recursive doubling as Open MPI runs it (its small-message all-reduce) over p ranks placed
 * per_node to a node, in order: the p - p2 ranks past the largest power of two p2 <= p fold
 * into a neighbour first and get the result back last, then log2(p2) exchanges of the whole
 * message at doubling distances; a step is on `outer` when any pair it joins is on two nodes. */
double plan_allreduce_recursive_doubling(int p, int per_node, double bytes, const plan_tier *intra,
                                         const plan_tier *outer);
/* A binomial tree's all-reduce (libnbc's in-place MPI_Iallreduce): a reduce up the tree and a
 * broadcast down it, ceil(log2 p) rounds each of the whole message, the round at distance
 * 2^k on the tier of the pairs it joins (members placed per_node to a node, in order). */
double plan_allreduce_binomial(int p, int per_node, double bytes, const plan_tier *intra,
                               const plan_tier *outer);

/* Rabenseifner's all-reduce (MPI's large-message one): a reduce-scatter by recursive halving
 * (distance p2/2 first, half the message), then an all-gather by recursive doubling, after the
 * same fold of the extra ranks; each step on its pairs' tier. */
double plan_allreduce_rabenseifner(int p, int per_node, double bytes, const plan_tier *intra,
                                   const plan_tier *outer);

/* The all-reduce of bytes over the group as its library runs it. NCCL, on a cluster that says
 * what NCCL runs on (c->nccl): NCCL's own choice, plan_nccl_allreduce; else the cheapest of
 * ring or tree on its tier inside a node, and across nodes of flat ring, flat tree or
 * hierarchical (reduce-scatter inside each node, all-reduce over the nodes, all-gather
 * inside). MPI: the
 * algorithm Open MPI 4.1's coll/tuned picks by group size and bytes (ring, recursive doubling
 * or Rabenseifner), flat over the group: a ring step as slow as the slowest tier the group
 * crosses, a recursive step on the tier of the pairs it joins.
 * A node's links on an inter tier are shared by the flows that cross at once: a ring or tree
 * sends one per group on the node, recursive doubling and the hierarchical all-reduce one per
 * member. node_busy: the ranks of the fullest node communicating at once (0: not known, no
 * sharing); each flow gets beta x min(1, links_per_node / flows). */
plan_collective plan_allreduce_best(const plan_cluster *c, const plan_group *g, double bytes,
                                    plan_collectives lib, int node_busy);
/* The non-blocking all-reduce of one piece under overlap: NCCL's is its blocking one; MPI's
 * is libnbc's, a binomial tree whatever the size (tripar reduces in place), which moves only
 * when the rank calls into MPI. node_busy as for plan_allreduce_best. */
plan_collective plan_iallreduce(const plan_cluster *c, const plan_group *g, double bytes,
                                plan_collectives lib, int node_busy);

/* An all-to-all over the group (expert parallelism's dispatch and combine; docs/planner.md,
 * "All-to-all"): each rank holds bytes, bytes / p for every member, and sends the (p-1)/p of
 * them that are not its own. MPI: a pairwise exchange, p - 1 steps of one peer and bytes / p
 * each, every step on the slowest tier the group crosses (some pair of nearly every step
 * crosses it, and a step lasts as long as its slowest pair), each member its own flow on the
 * node's links. NCCL: one group of a send and a receive per peer, all in flight at once: the
 * slowest tier's latency once, then the larger of the bytes that stay in the node over the
 * intra tier and those that leave it over the outer one (the two kinds of link run side by
 * side), plus the call's launch (c->gpu.collective_launch). node_busy as for
 * plan_allreduce_best. 0 for a group of one. Prices EP across replicas (plan_cost.c). */
double plan_alltoall(const plan_cluster *c, const plan_group *g, double bytes,
                     plan_collectives lib, int node_busy);

/* The model as tripar runs it: its config and how weights and the KV cache are stored. */
typedef struct {
    model_config cfg;
    precision_kind weight_dtype;
    kv_cache_kind kv_cache;
    int kv_block;
    kv_dtype_kind kv_dtype; /* the cache's element type */
    int kv_dtype_auto;      /* it follows weight_dtype (kv_dtype_for) when that is chosen later */
    plan_collectives collectives;
    int chunks;      /* parallel.chunks: with overlap, a row-parallel product and its all-reduce go
                        in this many pieces (at most its rows); 0 is taken as 1 */
    int cuda_graphs; /* backend.cuda_graphs: decode steps replay a graph (launch overhead) */
} plan_model;

typedef struct {
    int batch, prompt, new_tokens;
} plan_workload;

/* How fast each compute phase runs relative to its roofline, max(flops / peak, bytes / bw)
 * on the cluster's ceilings: 1 = at the roofline (the default without calibration), 0.5 =
 * twice the roofline's time. A phase's efficiency depends on its shape: a decode product of 4
 * rows does 4x the FLOPs of 1 row on the same weights and nears the compute roof, where the
 * roofline's max() is most optimistic. So calibration keeps, per period (0 prefill, 1 decode)
 * and phase, the efficiency at each arithmetic intensity (FLOP/byte) it measured, and a
 * phase of another intensity reads the curve between them, linear in log intensity and flat
 * past its ends. */
enum { PLAN_RATE_POINTS = 16 };
/* (layer, expert) pairs whose recorded routing a calibration keeps: Qwen2-57B-A14B's 28 x 64
 * and Mixtral 8x22B's 56 x 8 fit; a larger mixture is priced under uniform routing */
enum { PLAN_EXPERT_SHARES = 4096 };
typedef struct {
    int n;                               /* 0: not calibrated, efficiency 1 */
    double intensity[PLAN_RATE_POINTS];  /* FLOP/byte, ascending */
    double efficiency[PLAN_RATE_POINTS]; /* roofline time / measured time there */
} plan_rate_curve;
typedef struct {
    plan_rate_curve curve[2][PHASE_COUNT];
    double mixed_cost[2];      /* per period: how much longer than 1/L a phase takes on a
                                  core shared by replicas (cache refills at each switch);
                                  1 until calibrated */
    double comm_cost[2][2];    /* [node time-shared][period]: a TP all-reduce costs
                                  comm_cost x the model's time + comm_wait seconds, as the
                                  calibration runs measured them (a rank also waits for
                                  peers the scheduler has not run yet); 1 and 0 until
                                  calibrated */
    double comm_wait[2][2];
    double overlap_efficiency; /* share of the overlappable TP all-reduce that overlap
                                  hides (parallel.overlap); < 0 until calibrated: then NCCL,
                                  which progresses on its own, is taken to hide half, and MPI,
                                  which progresses a non-blocking collective only inside MPI
                                  calls (Open MPI has no progress thread), nothing */
    int expert_runs; /* calibration runs of the planned mixture of experts that recorded their
                        routing; 0: experts priced under uniform routing */
    float expert_share[PLAN_EXPERT_SHARES]; /* then each layer's share of its routed rows per
                                               expert, over those runs (layers x experts;
                                               phase_step.expert_share) */
} plan_rates;
/* The efficiency of a phase of the given intensity (1 where the phase is not calibrated). */
double plan_rate_efficiency(const plan_rates *r, int period, phase p, double intensity);
void plan_rates_default(plan_rates *r);

/* Rank placement orders: auto (tp-pp-dp over node-sorted ranks) and the six explicit ones,
 * whose first axis varies fastest over world ranks placed node by node. */
#define PLAN_ORDER_COUNT 7
extern const char *const plan_order_names[PLAN_ORDER_COUNT];

typedef struct {
    int dp, tp, pp, microbatches, overlap, order; /* order: index into plan_order_names */
    int ep; /* parallel.ep: a MoE layer's experts in ep blocks of each TP group; 0 or 1: none */
} plan_strategy;
/* s->ep, 1 where it is 0 (a strategy written without it). */
static inline int plan_strategy_ep(const plan_strategy *s) { return s->ep > 1 ? s->ep : 1; }

/* What one rank of a stage reaches on a CPU node that holds more ranks than cores
 * (docs/planner.md "Shared nodes"). The node's ranks are bound round-robin to its cores, local
 * rank i on core i mod cores_per_node (mpirun --map-by core --bind-to core:overload-allowed).
 * A pipeline of pp stages and m micro-batches keeps a window of min(m, pp) consecutive stages
 * busy, the window turning round the stages; a waiting rank yields its core. A core's load L
 * is its busy ranks' work over the costed rank's (prefill: their replicas' sequences over the
 * largest's; decode: 1 each), and the window waits on the most loaded core of any node (TP
 * groups, hand-offs and the replicas' lock-step tie them together). The cores busy at once
 * split node_bw:
 *   share = the mean, over the windows holding the stage, of max(1, L)
 *   flops = peak_flops / share,  bw = min(mem_bw, node_bw / cores busy) / share
 * In decode with several micro-batches in flight the share is lower: one pipeline settles at
 * the cores' own bound, and replicas drift apart as mean value analysis says. Without
 * cores_per_node, node_gbs and shared links nothing is shared (share 1). */
typedef struct {
    double flops, bw;  /* FLOP/s and bytes/s of one rank, time-sharing included */
    double share;      /* the time-sharing factor, >= 1 */
    int busy, running; /* the most ranks of one node busy in one window, and the most of its
                          cores they occupy (0 when nothing is shared) */
    int mixed;         /* a core shared by busy ranks of two replicas, which the scheduler
                          switches between inside their phases (plan_rates.mixed_cost) */
} plan_ceilings;
/* The ceilings of pipeline stage `stage` of s, whose replicas run `microbatches` micro-batches
 * (at most their sequences), on the fullest node (placed node by node). */
plan_ceilings plan_stage_ceilings(const plan_cluster *c, const plan_strategy *s, int batch,
                                  int microbatches, int period, int stage);
/* The ranks of a world of `world` on its fullest node, placed node by node. */
int plan_node_ranks(const plan_cluster *c, int world);
/* Whether a world of `world` ranks puts more ranks on a node than it has cores (cores_per_node
 * given), so that they time-share them. */
int plan_node_time_shared(const plan_cluster *c, int world);

/* A strategy under a Poisson arrival stream, served as tripar's serve loop serves it
 * (plan_goodput.h; docs/planner.md "Goodput under an arrival rate"). All 0 without --rate. */
typedef struct {
    long arrived, served, met, batches; /* met: served within both targets */
    double goodput;    /* requests/s meeting both targets: rate x met / arrived */
    double attainment; /* met / arrived */
    double ttft_p50, ttft_p90, tpot_p50, tpot_p90; /* of the served requests, seconds */
    double mean_batch; /* served / batches */
    double capacity;   /* requests/s of full batches back to back: batch / E2E */
} plan_served;

typedef struct {
    plan_strategy s;
    /* latency and throughput of one generation of the whole batch */
    double ttft, tpot, e2e, tokens_per_s, requests_per_s;
    /* memory of the fullest rank (bytes) */
    double weight_bytes, kv_bytes, act_bytes, rank_bytes;
    int fits;
    /* E2E on the critical path = compute + tp_exposed + ep_exposed + pp_exposed + bubble +
     * dp_gather (ep_exposed: the EP all-to-alls across replicas, blocking) */
    double compute, tp_exposed, ep_exposed, pp_exposed, bubble, dp_gather;
    double tp_total, tp_hidden, pp_total; /* all TP all-reduce and PP transfer time, hidden too */
    double tp_period[2]; /* tp_total's prefill and decode parts (the bottleneck stage's) */
    double tp_calls[2];  /* and the all-reduces they are made of */
    double prefill_bubble_fraction;       /* (pp-1)/(m+pp-1) */
    int node_ranks;                       /* ranks on the fullest node */
    int busy_ranks;                       /* those of them computing at once (prefill) */
    double time_share; /* the most time-sharing of its cores any stage sees in prefill, >= 1 */
    plan_group tp_group, pp_group, dp_group;
    plan_allreduce_algo tp_algo; /* the decode all-reduce's algorithm */
    plan_proto tp_proto;         /* and its NCCL protocol (NONE when not NCCL's model) */
    /* the phase of the bottleneck stage that takes the most time in decode (in prefill when
     * there is no decode step), whether bytes rather than FLOPs bound it, its compute share */
    int top_period; /* 0 prefill, 1 decode */
    phase top_phase;
    int top_memory_bound;
    double top_share;
    plan_served served; /* under --rate (plan_goodput_predict) */
} plan_prediction;

/* Whether tripar would run the strategy on n = dp*tp*pp ranks of this cluster, with its own
 * rules (job_validate_model, run_job_resolve, mesh_layout_auto): heads % tp, kv heads (GQA),
 * ep dividing the experts and either dividing tp or tp times a divisor of dp (job_validate_ep), layers >= pp, batch >= dp, micro-batches <= the smallest replica's sequences, auto's tp
 * inside a node. Returns 1, or 0 with the reason in why. */
int plan_strategy_valid(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                        const plan_strategy *s, char *why, int why_len);

/* The weights one rank at (tp_rank, pp_rank) holds, in bytes, as the runner's size table
 * counts them (model_tensor_table). */
double plan_rank_weight_bytes(const model_config *cfg, precision_kind weight_dtype,
                              const plan_strategy *s, int tp_rank, int pp_rank);

/* The roofline seconds of a phase of flops and bytes on one rank's ceilings k, weight_bytes of
 * those bytes its weights, the rank holding rank_weights in all: the FLOPs at k.flops, the
 * bytes at k.bw, except the weights, read at the cluster's cache bandwidth (llc_bw, shared
 * as k.bw is) when they stay in the last-level cache: the weights of the ranks sharing it,
 * the busy ranks of a CPU node (k.busy, the costed rank's weights each) or a device's own,
 * fit in llc_bytes. *memory_bound (may be NULL): whether the bytes bound it. The planner and
 * the calibration both read a phase's roofline here, so a measured efficiency is relative to
 * the same roof it is applied to. */
double plan_phase_roofline(const plan_cluster *c, const plan_ceilings *k, double flops,
                           double bytes, double weight_bytes, double rank_weights,
                           int *memory_bound);

/* Memory of one rank at (tp_rank, pp_rank): its weights (the size table of src/model), its
 * activation arena and KV cache (the engine's own arena table, engine_arena_plan, for the
 * largest replica with no activations captured). */
void plan_rank_memory(const plan_model *m, const plan_workload *w, const plan_strategy *s,
                      int tp_rank, int pp_rank, double *weights, double *activations, double *kv);

/* The groups of a strategy under its order, ranks placed node by node. */
void plan_groups(const plan_cluster *c, const plan_strategy *s, plan_group *tp, plan_group *pp,
                 plan_group *dp);
/* With expert parallelism across replicas (ep > tp), the EP group: the ranks of one stage and
 * TP index in ep / tp adjacent replicas (mesh_ep_split), the worst placed of them; a group of
 * one otherwise. */
void plan_ep_group(const plan_cluster *c, const plan_strategy *s, plan_group *ep);

/* Predicts one valid strategy. */
void plan_predict(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                  const plan_rates *r, const plan_strategy *s, plan_prediction *out);

/* Every valid strategy on n ranks: dp x tp x pp = n, micro-batches 1, 2, 4, ... up to the
 * smallest replica's sequences (and ENGINE_MAX_MICRO), overlap off and on (when tp > 1), and each
 * order whose groups sit on the nodes otherwise than an earlier order's (auto first), since the
 * cost depends on the groups only; every order on a node whose ranks time-share its cores
 * (the order picks which ranks share a core), and for a mixture of experts each ep that divides
 * tp and the experts (1 first). Returns the count and *out (caller frees). */
int plan_enumerate(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                   const plan_rates *r, int n, plan_prediction **out);

#ifdef __cplusplus
}
#endif
