/* The generation engine of one rank: its model shard, its activation arena and KV cache, and
 * the pipeline schedule that runs prefill and decode over micro-batches. The engine computes:
 * it opens no file and calls MPI only through comm_ops. What the caller must do mid-run
 * (flushing timings) it does in the step callback; what it records afterwards (tokens,
 * activations) it reads from the engine's host buffers. */
#pragma once
#include <signal.h>
#include <stdint.h>

#include "engine/moe.h"
#include "metrics/nano_batch.h"
#include "metrics/timing.h"
#include "model/model.h"
#include "parallel/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENGINE_MAX_MICRO 64
#define ENGINE_MAX_CHUNKS 64

/* Called after every step (prefill = step 0, then each decode step) of a generation, on every
 * rank, before the ranks vote on stopping. */
typedef void (*engine_step_fn)(void *user, int step);

/* Everything the engine needs to know of a run. Pointers are borrowed and must outlive it. */
typedef struct {
    /* what runs, and where */
    model *model;
    const backend *be;
    const mesh *mesh;    /* coordinates and world rank; comms are passed below */
    timer *tm;
    comm *tp, *pp;       /* backend buffers: the forward pass's collectives and stage messages */
    comm *pp_host;       /* host buffers over the PP axis (tokens from the last stage) */
    comm *world;         /* host buffers over every rank (the stop vote, the arrival stream) */
    comm *ep;            /* parallel.ep > tp: the EP group across replicas (mesh_ep_split), over
                            which a mixture of experts' rows move; NULL otherwise */

    /* the batch: global prompts, split over the dp replicas by the engine */
    const int32_t *prompts; /* (batch, prompt_len) */
    int batch, prompt_len, new_tokens;

    /* the schedule */
    int microbatches;
    int overlap, chunks; /* TP all-reduces in `chunks` pieces overlapped with compute, and
                            a prefill's in two nano-batches (forward.c) */
    kv_cache_kind kv_cache;
    int kv_block;           /* positions per KV block when paged */
    dtype kv_dtype;         /* of the cached keys and values (kv_view.type); 0 is DTYPE_F32 */
    int cuda_graphs;        /* replay decode steps from captured graphs when the backend can */

    /* sampling */
    sampling_kind sampling;
    float temperature;
    int top_k;
    uint64_t sample_seed;
    /* stop_at_eos (0 = off, so a zeroed config runs new_tokens steps): eos_id ends a sequence.
     * A sequence that picked it records nothing more but keeps its place in the batch (its
     * rows are computed and ignored), so every step has the same shapes and the decode loop
     * allocates nothing; the generation ends once no sequence of any replica is running. */
    int stop_at_eos;
    int32_t eos_id;

    /* what to capture: activation point names ("embed", "layer.3.mlp", "all", ...) */
    const char *const *activations;
    int n_activations;

    /* perplexity (engine/nll.c): 0 = off; else, at prefill, the teacher-forced negative
     * log-likelihood of every prompt's token at position j + 1 under the logits at position j,
     * for j in [nll_first, prompt_len - 1), as llama-perplexity scores a window */
    int nll_first;

    /* the caller's hooks */
    engine_step_fn on_step;
    void *on_step_user;
    volatile sig_atomic_t *stop_flag; /* polled between steps; NULL: never stop early */
} engine_config;

/* Points the comm fields of cfg at the mesh's comms (the ones comm_setup or mesh_attach_mpi
 * attached). */
void engine_config_use_mesh(engine_config *cfg, mesh *m);

/* How a replica's sequences split into micro-batches: at most `microbatches`, balanced. The one
 * rule every user of the split shares (the engine, the comm plan, --dry-run's memory plan). */
typedef struct {
    int n_micro;
    int begin[ENGINE_MAX_MICRO], size[ENGINE_MAX_MICRO];
    int max_size;
} microbatch_split;

void microbatch_split_init(microbatch_split *s, int sequences, int microbatches);
/* The sequences of the largest of dp replicas (the last: balanced splits put the remainder
 * there). */
int replica_sequences_max(int batch, int dp);

/* Where one recorded activation point lands: a host staging tensor holding this rank's
 * block of the global tensor, which the caller writes out after generation. */
typedef struct {
    char name[48];
    int layer;          /* -1 for embed/final/logits */
    int kind;           /* ACT_EMBED, ACT_ATTN, ACT_MLP, ACT_FINAL, ACT_LOGITS */
    int held;           /* this rank writes it (right stage, tp rank 0 unless logits) */
    long dims[3];       /* global (batch, seq, width) */
    long start[3];      /* this rank's block */
    long count[3];
    float *host;        /* (count[0], count[1], count[2]) */
} activation_point;

enum { ACT_EMBED = 0, ACT_ATTN, ACT_MLP, ACT_FINAL, ACT_LOGITS };

typedef struct {
    engine_config cfg;
    model *m;
    const backend *be;
    timer *tm;
    comm *tp, *pp, *pp_host, *world;
    comm *ep; /* the EP group across replicas (engine/moe_ep.c); NULL when ep <= tp */

    /* this replica's share of the batch */
    int batch_local, seq_global_begin;
    microbatch_split split; /* of the active sequences (engine_set_active) */
    int ep_micro;           /* the most micro-batches of any replica of the EP group (ep > tp;
                               else split.n_micro): a replica with fewer takes part in the
                               others' all-to-alls after its own (engine_ep_idle) */
    int mb_max;             /* largest micro-batch of the whole share: sizes the arena */
    int prompt_len, new_tokens, total_len, kv_capacity;
    int chunks;

    /* arena (backend memory), sized for the largest micro-batch prefill (engine.c's table) */
    void *arena;
    size_t arena_bytes;
    float *stage_buf[ENGINE_MAX_MICRO][2]; // (mb_max * T, C) ping-pong per micro-batch
    float *h;        // (R, C) normalised activations
    float *qkv;      // (R, A + 2*KVA) [q | k | v]; KVA = the rank's kv heads * hd (3*A for GPT-2)
    float *att;      // (R, A)
    float *o;        // (R, C) row-parallel partial sums, all-reduced
    float *f;        // (R, M_local); Llama: (R, 2*M_local) the gate|up GEMM's output
    float *act;      // (R, M_local) Llama: silu(gate) * up; empty for GPT-2
    /* mixture of experts (engine/moe.c); NULL for a dense model. K = experts_top_k,
     * RL = E + (shared expert ? 1 : 0) router rows */
    float *moe_logits; // (R, RL) router logits, then the shared expert's gate logit
    int32_t *moe_idx;  // (R * (K + 1)) the routed tokens by expert, then 0 .. rows-1 (shared)
    float *moe_wts;    // (R * (K + 1)) their weights, then sigmoid(shared gate)
    float *moe_in;     // (R, C) one expert's gathered input rows
    float *moe_out;    // (R, C) one expert's output rows (this rank's partial sums)
    /* expert parallelism across replicas (engine/moe_ep.c), NULL without an EP group:
     * K' = min(K, experts per block), P = the group's replicas, Rg = the largest micro-batch's
     * rows of any replica */
    float *ep_send;    // (Rmax, C) the rows this rank dispatches, by peer; then the outputs of
                       // its experts, laid out as ep_recv's rows (Rmax: max(R K, Rs), Rs =
                       // P Rg K' rows served)
    float *ep_recv;    // (Rmax, C) the rows its experts serve, by source, then expert; then
                       // the outputs of the rows it dispatched, laid out as they were sent
    int32_t *ep_perm;  // (Rs) where in ep_recv each served row is, expert by expert
    float *ep_ones;    // (R) 1.0: the scatter that puts outputs back in place
    float *rope_inv_freq; // (hd/2) Llama's RoPE table, made once at set-up; NULL for GPT-2
    float *head_in;  // (R_head, C) final-normed rows fed to the LM head
    float *logits;   // (R_head, V_local)
    float *max_val;  // (mb_max)
    int32_t *max_idx;// (mb_max)
    int32_t *tok_dev;// (R) tokens for the embedding, copied from the host
    int32_t *next_tok;// (batch_local) greedy argmax ids kept for the next step's embedding
    void *kv_k, *kv_v;      // contiguous: (L, batch, KV, cap) rows; paged: (L, blocks, KV, blk)
                            // rows, KV the rank's kv heads (= its heads for GPT-2), each row
                            // kv_row_bytes(cfg.kv_dtype, hd) bytes
    int32_t *block_table;   // (batch, blocks_per_seq) paged only
    int blocks_per_seq;
    size_t kv_layer_bytes;  // one layer's share of kv_k / kv_v
    int head_rows_max;

    /* host state */
    int32_t *tokens;        /* (batch_local, total_len): prompt then generated */
    int32_t *tok_host;      /* (R) staging for tokens */
    float *logits_host;     /* (mb_max, vocab) full rows for sampling */
    float *logits_shard_host; /* (mb_max, V_local) */
    float *sample_scratch;  /* (vocab) top-k selection */
    int *vocab_counts, *vocab_displs; /* (tp) */
    comm_maxloc_pair *maxloc_host;    /* (mb_max) */
    unsigned char *row_finite;        /* (mb_max) whether each row's logits were finite */
    float *check_host;      /* (mb_max, C) rows copied back by the non-finite diagnosis */
    moe_routing moe_host;   /* the routing's host buffers (engine/moe.h), made at set-up */
    /* the EP all-to-alls' counts and displacements (engine/moe_ep.c), with an EP group: (6 P)
     * floats sent and received per peer with their displacements, then the expert counts'
     * (P each way, the same for both); ep_experts (2 P El) the rows per local expert sent to
     * each peer, then those received from each */
    size_t *ep_counts;
    int32_t *ep_experts;
    int32_t *ep_perm_host;  /* (Rs) ep_perm, built here */
    size_t ep_served;       /* Rs: the most rows this rank's experts serve in one layer */
    comm_req ep_req;        /* the rows' all-to-all in flight (moe_ep_dispatch_start) */
    double ep_t0, ep_t1;    /* when the dispatch started, and its counts' exchange ended */
    int32_t *tok_send[ENGINE_MAX_MICRO], *tok_recv[ENGINE_MAX_MICRO];
    int slot[ENGINE_MAX_MICRO];       /* which stage_buf of the micro-batch the step uses */
    comm_req send_req[ENGINE_MAX_MICRO][2], recv_req[ENGINE_MAX_MICRO];
    comm_req tok_send_req[ENGINE_MAX_MICRO], tok_recv_req[ENGINE_MAX_MICRO];
    float *deferred_recv[ENGINE_MAX_MICRO]; /* stream-ordered receives not yet enqueued */
    size_t deferred_count[ENGINE_MAX_MICRO];
    /* the row-parallel all-reduce of each nano-batch (forward.c) in flight: its pieces, when
     * each started and finished, and the step, micro-batch and layer they are timed at */
    struct tp_inflight {
        int pieces, step, mb, layer;
        comm_req req[ENGINE_MAX_CHUNKS];
        double started[ENGINE_MAX_CHUNKS], finished[ENGINE_MAX_CHUNKS];
    } inflight[NANO_BATCHES_MAX];

    activation_point *points;
    int n_points;
    int capture;            /* record activations during this prefill */

    /* the stop vote: a non-blocking sum over the world of each rank's stop flag (0), of
     * whether its logits went non-finite (1) at step vote_step, and of its sequences still
     * running (2: last stage, with an eos id) */
    float stop_vote[3];
    comm_req stop_req;
    int vote_open;          /* a vote was started and not yet finished (a world of one rank
                               has no request in flight, so stop_req cannot tell) */
    int vote_step;
    int step_nonfinite;     /* this rank saw non-finite logits in the current step */
    int diagnose;           /* the forward checks its outputs (the non-finite diagnosis) */
    int diagnose_site;      /* the first non-finite site this rank saw while diagnosing */

    /* perplexity (engine/nll.c), when cfg.nll_first > 0; host buffers made at set-up */
    double *nll;            /* (batch_local, prompt_len) last stage: [s][t] the NLL of token t
                               given tokens 0..t-1, for t in (nll_first, prompt_len); NaN
                               elsewhere */
    float *nll_rows_host;   /* (nll_rows, V_local) one sequence's scored logit rows */
    double *nll_part;       /* (nll_rows, 3) this TP rank's (max, sum of exp, target logit) */
    double *nll_parts;      /* (tp, nll_rows, 3) every TP rank's, gathered */
    int *nll_counts, *nll_displs; /* (tp) of the gather */
    double *nll_seq_sum;    /* (batch) per global sequence, summed over the world */
    /* after each generation, the same on every rank: the sum of every scored NLL, how many,
     * and exp(sum / count) */
    double nll_sum, perplexity;
    long nll_count;

    /* CUDA-graph executables of decode steps (graph_replay.c); NULL until the first capture */
    struct graph_cache *graphs;

    /* per-iteration results on this rank */
    double first_token_time, end_time;
    /* (max(new_tokens, 1)) when this rank, a last stage, had step s's tokens of its last
     * micro-batch on the host: the gaps between steps are the inter-token latency (ITL) of
     * its sequences, which in lockstep batches all receive a step's token together */
    double *token_time;
    /* (batch_local) new tokens each sequence produced in the last generation, on the last
     * stage: a stop ends them early, and a sequence stops counting at its first step with
     * non-finite logits. Its tokens past prompt_len + generated[s] are -1 in `tokens`. */
    int32_t *generated;
    /* (batch_local) 1 once the sequence picked cfg.eos_id with stop_at_eos (last stage) */
    unsigned char *finished;
    /* Steps the last generation ran (prefill = 1), the same on every rank: new_tokens, or fewer
     * when every sequence reached eos (one step after the last did: the vote lags a step). */
    int steps_run;
    /* Why the last generation stopped, the same on every rank: -1, or the first step whose
     * logits were non-finite on some rank, and the first site whose output was non-finite in
     * that step (engine_site_describe). */
    int nonfinite_step, nonfinite_site;
} engine;

/* Tokens not generated (after a stop, or from non-finite logits) read -1 in engine.tokens and
 * in the run file. */
#define ENGINE_NOT_GENERATED (-1)

/* Collective over the world. Allocates the arena and KV cache once; nothing is allocated
 * after this returns. */
void engine_init(engine *e, const engine_config *cfg);
/* Frees everything, the captured graphs included (call before the backend is freed). */
void engine_free(engine *e);

/* Bytes of the arena a rank at these coordinates would allocate, activations and KV cache
 * apart: the same size table engine_init carves, for --dry-run's memory plan. */
void engine_arena_plan(const engine_config *cfg, const shard_geom *g, const model_config *mc,
                       int dp, int dp_rank, size_t *activation_bytes, size_t *kv_bytes);

/* One full generation (prefill + decode) of this replica's prompts. iteration tags the timing
 * events; capture records the requested activations. Returns 1 when every rank agreed to stop
 * early: a stop signal arrived, or some sequence's logits went non-finite (then
 * e->nonfinite_step >= 0 and e->nonfinite_site says where). The agreement is a non-blocking
 * all-reduce started after each step and completed after the next, so all ranks leave at the
 * same step. Non-finite logits are caught by the sampler's own reduction (the argmax maximum,
 * which NaN wins, or the gathered rows); only then is the failing step run once more with a
 * finiteness check after every layer, to find where it began. */
int engine_generate(engine *e, int iteration, int capture);

/* Sites of the forward pass, in order, for the non-finite diagnosis: the embedding, each
 * layer's attention and MLP residual adds, the final norm and head. */
enum { ENGINE_SITE_EMBED = 0 };
static inline int engine_site_attn(int layer) { return 1 + 2 * layer; }
static inline int engine_site_mlp(int layer) { return 2 + 2 * layer; }
/* "the embedding", "layer 3 (attention)", "layer 3 (mlp)", "the final norm or LM head". */
void engine_site_describe(const engine *e, int site, char *buf, size_t len);

/* The stage forward of one micro-batch: this stage's layers over x (rows, C) in place, then
 * (last stage) final norm and head. Exposed for tests. */
void engine_stage_forward(engine *e, float *x, int mb, int step, int n_new, int pos0);

/* Limits the following generations to the first global_active prompts of the batch, split
 * over the replicas (arrival-rate mode forms batches from the requests that have arrived).
 * engine_init starts with the whole batch active. Collective in effect: every rank must set
 * the same value. */
void engine_set_active(engine *e, int global_active);

/* The stage forward as the schedule runs it: engine_stage_forward directly, or, when the
 * backend can capture graphs and the run asks for them, a decode step replayed from a captured
 * graph (graph_replay.c). */
void engine_step_forward(engine *e, float *x, int mb, int step, int n_new, int pos0);
/* Expert parallelism across replicas, for micro-batch mb that this replica lacks and another of
 * its EP group runs (e->split.n_micro <= mb < e->ep_micro): the group's all-to-alls of each of
 * this stage's layers, with no rows of its own, its experts serving the others' rows. */
void engine_ep_idle(engine *e, int mb, int step);
/* The final norm and the LM head of this rank's vocab shard over rows of the residual stream x:
 * head_in (rows, C) then logits (rows, V_local). */
void engine_head_rows(engine *e, float *logits, float *head_in, const float *x, int rows);

/* Expert parallelism across replicas (moe_ep.c), from the routing of micro-batch mb's rows of
 * h in e->moe_host and e->moe_idx. In order, on every rank of the EP group once per MoE layer
 * of every micro-batch: moe_ep_gather copies, peer by peer, the rows routed to experts of
 * block (peer, this TP rank) into e->ep_send; moe_ep_dispatch sends them and receives into
 * e->ep_recv the rows this rank's experts serve, by source then expert (the counts in
 * e->ep_experts), timed as ep_dispatch and ep_wait; the caller runs the experts, writing
 * their outputs into e->ep_send at the rows' places in e->ep_recv; moe_ep_combine sends the
 * outputs back into e->ep_recv (ep_combine, ep_wait); moe_ep_scatter adds each returned row,
 * weighted, into o. The gather and scatter are the caller's to time. */
void moe_ep_gather(engine *e, const float *h);
/* moe_ep_gather for a replica with no rows in this micro-batch: it dispatches none. */
void moe_ep_gather_none(engine *e);
void moe_ep_dispatch(engine *e, int step, int mb, int layer);
/* moe_ep_dispatch in two halves, for work in between (parallel.overlap): the start exchanges
 * the counts and starts the rows' all-to-all; moe_ep_poll drives it (MPI progresses in its
 * calls); the finish waits for it and records ep_dispatch and ep_wait (two ep_wait events when
 * overlapped: the counts' exchange and the wait for the rows). */
void moe_ep_dispatch_start(engine *e);
void moe_ep_poll(engine *e);
void moe_ep_dispatch_finish(engine *e, int step, int mb, int layer, int overlapped);
/* After moe_ep_dispatch: e->ep_perm lists the rows of e->ep_recv expert by expert (each
 * expert's rows from every source together, sources in order); returns how many. */
int moe_ep_order(engine *e);
void moe_ep_combine(engine *e, int step, int mb, int layer);
void moe_ep_scatter(engine *e, float *o);

/* Perplexity (nll.c): the host buffers (engine_init), their release (engine_free), the scoring
 * of micro-batch mb's prompts from the last stage's residual stream x at prefill, and the sum
 * over the world after a generation (collective; every rank calls it). */
void engine_nll_init(engine *e);
void engine_nll_free(engine *e);
void engine_nll_score(engine *e, const float *x, int mb);
void engine_nll_finish(engine *e);

/* Destroys the captured graphs (engine_free calls it). */
void engine_graphs_free(engine *e);

#ifdef __cplusplus
}
#endif
