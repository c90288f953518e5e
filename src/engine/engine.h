/* The generation engine of one rank: its model shard, its activation arena and KV cache, and
 * the pipeline schedule that runs prefill and decode over micro-batches. */
#pragma once
#include <signal.h>
#include <stdint.h>

#include "job/job.h"
#include "parallel/mesh.h"
#include "model/model.h"
#include "metrics/timing.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENGINE_MAX_MICRO 64

/* Where one recorded activation point lands: a host staging tensor holding this rank's
 * block of the global tensor, written to the run file after generation. */
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
    const job *j;
    model *m;
    const backend *be;
    mesh *mesh;
    timer *tm;
    comm *tp, *pp, *dp;

    /* this replica's share of the batch */
    int batch_local, seq_global_begin;
    int n_micro;
    int mb_begin[ENGINE_MAX_MICRO], mb_size[ENGINE_MAX_MICRO];
    int mb_max;
    int prompt_len, new_tokens, total_len, kv_capacity;
    int chunks;

    /* arena (backend memory), sized for the largest micro-batch prefill */
    void *arena;
    size_t arena_bytes;
    float *stage_buf[ENGINE_MAX_MICRO][2]; // (mb_max * T, C) ping-pong per micro-batch
    float *h;        // (R, C) normalised activations
    float *qkv;      // (R, 3*A)
    float *att;      // (R, A)
    float *o;        // (R, C) row-parallel partial sums, all-reduced
    float *f;        // (R, M_local)
    float *head_in;  // (R_head, C) final-normed rows fed to the LM head
    float *logits;   // (R_head, V_local)
    float *max_val;  // (mb_max)
    int32_t *max_idx;// (mb_max)
    int32_t *tok_dev;// (R) tokens for the embedding
    int32_t *pos_dev;// (R) positions
    float *kv_k, *kv_v;     // contiguous: (L, batch, H, cap, hd); paged: (L, blocks, H, blk, hd)
    int32_t *block_table;   // (batch, blocks_per_seq) paged only
    int blocks_per_seq;
    int head_rows_max;

    /* host state */
    int32_t *tokens;        /* (batch_local, total_len): prompt then generated */
    int32_t *tok_host;      /* (R) staging for tokens/positions */
    int32_t *pos_host;
    float *logits_host;     /* (mb_max, vocab) full rows for sampling */
    float *logits_shard_host; /* (mb_max, V_local) */
    float *sample_scratch;  /* (vocab) top-k selection */
    int *vocab_counts, *vocab_displs; /* (tp) */
    float *maxloc_host;     /* (mb_max) pairs for MAXLOC */
    int32_t *tok_send[ENGINE_MAX_MICRO], *tok_recv[ENGINE_MAX_MICRO];
    comm_req send_req[ENGINE_MAX_MICRO], recv_req[ENGINE_MAX_MICRO];
    comm_req tok_send_req[ENGINE_MAX_MICRO], tok_recv_req[ENGINE_MAX_MICRO];
    float *deferred_recv[ENGINE_MAX_MICRO]; /* stream-ordered receives not yet enqueued */
    size_t deferred_count[ENGINE_MAX_MICRO];
    comm_req chunk_req[64];

    activation_point *points;
    int n_points;
    int capture;            /* record activations during this prefill */

    /* run file for periodic timing flushes, and the signal flag polled between steps */
    struct runfile *rf;
    const struct tokenizer *tok; /* decodes /output/text when the checkpoint has one */
    volatile sig_atomic_t *stop_flag;
    int stop_local, stop_global;
    MPI_Request stop_req;

    /* CUDA-graph executables of decode steps (graph.c); NULL until the first capture */
    struct graph_cache *graphs;

    /* per-iteration results on this rank */
    double first_token_time, end_time;
} engine;

/* Collective over the world. Allocates the arena and KV cache once; nothing is allocated
 * after this returns. */
void engine_init(engine *e, const job *j, model *m, const backend *be, mesh *mesh, timer *tm);
void engine_free(engine *e);

/* One full generation (prefill + decode) of this replica's prompts. iteration tags the timing
 * events; capture records the requested activations. Returns 1 when every rank agreed to stop
 * early because a stop signal arrived (the agreement is a non-blocking all-reduce started
 * after each step and completed after the next, so all ranks leave at the same step). */
int engine_generate(engine *e, int iteration, int capture);

/* The stage forward of one micro-batch: this stage's layers over x (rows, C) in place, then
 * (last stage) final norm and head. Exposed for tests. */
void engine_stage_forward(engine *e, float *x, int mb, int step, int n_new, int pos0);

/* Limits the following generations to the first global_active prompts of the batch, split
 * over the replicas (arrival-rate mode forms batches from the requests that have arrived).
 * engine_init starts with the whole batch active. Collective in effect: every rank must set
 * the same value. */
void engine_set_active(engine *e, int global_active);

/* The stage forward as the schedule runs it: engine_stage_forward directly, or on the CUDA
 * backend with backend.cuda_graphs a decode step replayed from a captured graph (graph.c). */
void engine_step_forward(engine *e, float *x, int mb, int step, int n_new, int pos0);
/* Destroys the captured graphs (call before engine_free and before the backend is freed). */
void engine_graphs_free(engine *e);

/* The comm for host-side pipeline messages (tokens sent from the last stage to the first):
 * plain MPI over the PP axis even when e->pp is NCCL or staged, which take backend buffers.
 * Meshes set up without comm_setup (tests: MPI only) use pp itself. */
static inline comm *engine_pp_host(engine *e) {
    return e->mesh->pp_host.ops ? &e->mesh->pp_host : e->pp;
}

/* Writes outputs and activations to the run file (collective). */
struct runfile;
void engine_write_outputs(engine *e, struct runfile *rf);

#ifdef __cplusplus
}
#endif
