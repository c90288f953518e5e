/* The generation schedule of one rank: the arena and KV cache set up once, then prefill and
 * decode steps over micro-batches, with pipeline receives posted early and sends in flight
 * while the next micro-batch computes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/prompt.h"
#include "engine/engine.h"
#include "io/runfile.h"
#include "engine/sample.h"

enum { TAG_TOKENS = 1000 };

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Parses an activation name into (kind, layer); returns 0 on success. */
static int point_parse(const char *name, int *kind, int *layer) {
    *layer = -1;
    if (!strcmp(name, "embed"))
        *kind = ACT_EMBED;
    else if (!strcmp(name, "final"))
        *kind = ACT_FINAL;
    else if (!strcmp(name, "logits"))
        *kind = ACT_LOGITS;
    else {
        char sub[16];
        if (sscanf(name, "layer.%d.%15s", layer, sub) != 2) return -1;
        if (!strcmp(sub, "attn"))
            *kind = ACT_ATTN;
        else if (!strcmp(sub, "mlp"))
            *kind = ACT_MLP;
        else
            return -1;
    }
    return 0;
}

static void add_point(engine *e, const char *name, int kind, int layer) {
    const shard_geom *g = &e->m->geom;
    activation_point *pt = &e->points[e->n_points++];
    memset(pt, 0, sizeof *pt);
    snprintf(pt->name, sizeof pt->name, "%s", name);
    pt->kind = kind;
    pt->layer = layer;
    long width = kind == ACT_LOGITS ? e->m->cfg.vocab : e->m->cfg.embd;
    int on_stage = kind == ACT_EMBED ? g->first_stage
                   : (kind == ACT_FINAL || kind == ACT_LOGITS)
                       ? g->last_stage
                       : (layer >= g->layer_begin && layer < g->layer_end);
    /* The residual stream is replicated across TP, so TP rank 0 writes it; logits are split
     * by vocabulary, so every TP rank writes its columns. */
    pt->held = on_stage && (kind == ACT_LOGITS || g->tp_rank == 0);
    long dims[3] = {e->j->batch, e->prompt_len, width};
    memcpy(pt->dims, dims, sizeof dims);
    pt->start[0] = e->seq_global_begin;
    pt->count[0] = e->batch_local;
    pt->count[1] = e->prompt_len;
    pt->start[2] = kind == ACT_LOGITS ? g->vocab_begin : 0;
    pt->count[2] = kind == ACT_LOGITS ? g->vocab_local : width;
    if (!pt->held)
        memset(pt->count, 0, sizeof pt->count);
    else
        pt->host = xcalloc((size_t)(pt->count[0] * pt->count[1] * pt->count[2]), sizeof(float));
}

static void points_init(engine *e) {
    const job *j = e->j;
    int all = 0;
    for (int i = 0; i < j->n_activations; i++)
        all |= !strcmp(j->activations[i], "all");
    int max_points = all ? 3 + 2 * e->m->cfg.layers : j->n_activations;
    e->points = xcalloc((size_t)(max_points ? max_points : 1), sizeof *e->points);
    if (all) {
        char name[48];
        add_point(e, "embed", ACT_EMBED, -1);
        for (int l = 0; l < e->m->cfg.layers; l++) {
            snprintf(name, sizeof name, "layer.%d.attn", l);
            add_point(e, name, ACT_ATTN, l);
            snprintf(name, sizeof name, "layer.%d.mlp", l);
            add_point(e, name, ACT_MLP, l);
        }
        add_point(e, "final", ACT_FINAL, -1);
        add_point(e, "logits", ACT_LOGITS, -1);
        return;
    }
    for (int i = 0; i < j->n_activations; i++) {
        int kind, layer;
        CHECK(point_parse(j->activations[i], &kind, &layer) == 0, "bad activation name '%s'",
              j->activations[i]);
        add_point(e, j->activations[i], kind, layer);
    }
}

/* Splits this replica's first `active` sequences into at most parallel.microbatches
 * micro-batches of balanced size. */
static void split_microbatches(engine *e, int active) {
    e->n_micro = e->j->microbatches < active ? e->j->microbatches : active;
    CHECK(e->n_micro <= ENGINE_MAX_MICRO, "at most %d micro-batches", ENGINE_MAX_MICRO);
    for (int i = 0; i < e->n_micro; i++) {
        e->mb_begin[i] = split_begin(active, e->n_micro, i);
        e->mb_size[i] = split_count(active, e->n_micro, i);
    }
}

void engine_set_active(engine *e, int global_active) {
    const int dp = MESH_DP(e->mesh), dp_rank = e->mesh->coord[AXIS_DP];
    CHECK(global_active >= 0 && global_active <= e->j->batch, "active sequences %d out of [0, %d]",
          global_active, e->j->batch);
    int local = split_count(global_active, dp, dp_rank);
    split_microbatches(e, local < e->batch_local ? local : e->batch_local);
}

void engine_init(engine *e, const job *j, model *m, const backend *be, mesh *mesh, timer *tm) {
    memset(e, 0, sizeof *e);
    e->j = j;
    e->m = m;
    e->be = be;
    e->mesh = mesh;
    e->tm = tm;
    e->tp = &mesh->axis[AXIS_TP];
    e->pp = &mesh->axis[AXIS_PP];
    e->dp = &mesh->axis[AXIS_DP];
    const shard_geom *g = &m->geom;
    const int dp = MESH_DP(mesh), dp_rank = mesh->coord[AXIS_DP];

    e->seq_global_begin = split_begin(j->batch, dp, dp_rank);
    e->batch_local = split_count(j->batch, dp, dp_rank);
    CHECK(e->batch_local >= 1, "replica %d has no prompts", dp_rank);
    split_microbatches(e, e->batch_local);
    for (int i = 0; i < e->n_micro; i++)
        if (e->mb_size[i] > e->mb_max) e->mb_max = e->mb_size[i];
    e->prompt_len = j->prompt_len;
    e->new_tokens = j->new_tokens;
    e->total_len = j->prompt_len + j->new_tokens;
    e->kv_capacity = e->total_len;
    e->chunks = j->chunks < 64 ? j->chunks : 64;
    points_init(e);

    int want_full_head = 0;
    for (int p = 0; p < e->n_points; p++)
        want_full_head |= e->points[p].held &&
                          (e->points[p].kind == ACT_FINAL || e->points[p].kind == ACT_LOGITS);
    const size_t C = m->cfg.embd, A = g->attn_dim, M = g->mlp_local, V = g->vocab_local;
    const size_t R = (size_t)e->mb_max * e->prompt_len;
    e->head_rows_max = want_full_head ? (int)R : e->mb_max;
    const size_t kv_heads = (size_t)g->n_heads * g->head_dim;
    size_t kv_elems;
    if (j->kv_cache == KV_PAGED) {
        e->blocks_per_seq = (e->kv_capacity + j->kv_block - 1) / j->kv_block;
        kv_elems =
            (size_t)g->n_layers * e->batch_local * e->blocks_per_seq * j->kv_block * kv_heads;
    } else {
        kv_elems = (size_t)g->n_layers * e->batch_local * e->kv_capacity * kv_heads;
    }

    /* One arena: carve every activation buffer and the KV cache from a single allocation. */
    struct {
        void **slot;
        size_t bytes;
    } parts[2 * ENGINE_MAX_MICRO + 16];
    int n = 0;
    for (int i = 0; i < e->n_micro; i++)
        for (int s = 0; s < 2; s++)
            parts[n++] = (typeof(parts[0])){(void **)&e->stage_buf[i][s], R * C * sizeof(float)};
    parts[n++] = (typeof(parts[0])){(void **)&e->h, R * C * sizeof(float)};
    parts[n++] = (typeof(parts[0])){(void **)&e->qkv, R * 3 * A * sizeof(float)};
    parts[n++] = (typeof(parts[0])){(void **)&e->att, R * A * sizeof(float)};
    parts[n++] = (typeof(parts[0])){(void **)&e->o, R * C * sizeof(float)};
    parts[n++] = (typeof(parts[0])){(void **)&e->f, R * M * sizeof(float)};
    parts[n++] =
        (typeof(parts[0])){(void **)&e->head_in, (size_t)e->head_rows_max * C * sizeof(float)};
    parts[n++] =
        (typeof(parts[0])){(void **)&e->logits, (size_t)e->head_rows_max * V * sizeof(float)};
    parts[n++] = (typeof(parts[0])){(void **)&e->max_val, (size_t)e->mb_max * sizeof(float)};
    parts[n++] = (typeof(parts[0])){(void **)&e->max_idx, (size_t)e->mb_max * sizeof(int32_t)};
    parts[n++] = (typeof(parts[0])){(void **)&e->tok_dev, R * sizeof(int32_t)};
    parts[n++] = (typeof(parts[0])){(void **)&e->pos_dev, R * sizeof(int32_t)};
    parts[n++] = (typeof(parts[0])){(void **)&e->kv_k, kv_elems * sizeof(float)};
    parts[n++] = (typeof(parts[0])){(void **)&e->kv_v, kv_elems * sizeof(float)};
    if (j->kv_cache == KV_PAGED)
        parts[n++] = (typeof(parts[0])){
            (void **)&e->block_table, (size_t)e->batch_local * e->blocks_per_seq * sizeof(int32_t)};
    e->arena_bytes = 0;
    for (int i = 0; i < n; i++)
        e->arena_bytes += align64(parts[i].bytes);
    e->arena = be->ops->alloc(be->ctx, e->arena_bytes);
    char *p = e->arena;
    for (int i = 0; i < n; i++) {
        *parts[i].slot = p;
        p += align64(parts[i].bytes);
    }

    if (j->kv_cache == KV_PAGED) {
        /* Interleave the sequences' blocks, as a block allocator serving a running batch
         * would, so one sequence's keys are never contiguous beyond a block. */
        size_t entries = (size_t)e->batch_local * e->blocks_per_seq;
        int32_t *table = xmalloc(entries * sizeof(int32_t));
        for (int s = 0; s < e->batch_local; s++)
            for (int b = 0; b < e->blocks_per_seq; b++)
                table[(size_t)s * e->blocks_per_seq + b] = b * e->batch_local + s;
        be->ops->copy_to_device(be->ctx, e->block_table, table, entries * sizeof(int32_t));
        free(table);
    }

    e->tokens = xcalloc((size_t)e->batch_local * e->total_len, sizeof(int32_t));
    for (int s = 0; s < e->batch_local; s++)
        memcpy(e->tokens + (size_t)s * e->total_len,
               j->tokens + (size_t)(e->seq_global_begin + s) * j->prompt_len,
               (size_t)j->prompt_len * sizeof(int32_t));
    e->tok_host = xmalloc(R * sizeof(int32_t));
    e->pos_host = xmalloc(R * sizeof(int32_t));
    e->logits_host = xmalloc((size_t)e->mb_max * m->cfg.vocab * sizeof(float));
    e->sample_scratch = xmalloc((size_t)m->cfg.vocab * sizeof(float));
    e->logits_shard_host = xmalloc((size_t)e->mb_max * V * sizeof(float) + sizeof(float));
    e->maxloc_host =
        xmalloc((size_t)e->mb_max * 2 * sizeof(float) + (size_t)e->mb_max * sizeof(int));
    e->vocab_counts = xmalloc((size_t)g->tp * sizeof(int));
    e->vocab_displs = xmalloc((size_t)g->tp * sizeof(int));
    for (int r = 0; r < g->tp; r++) {
        e->vocab_counts[r] = split_count(m->cfg.vocab, g->tp, r);
        e->vocab_displs[r] = split_begin(m->cfg.vocab, g->tp, r);
    }
    for (int i = 0; i < e->n_micro; i++) {
        e->tok_send[i] = xmalloc((size_t)e->mb_max * sizeof(int32_t));
        e->tok_recv[i] = xmalloc((size_t)e->mb_max * sizeof(int32_t));
    }
}

void engine_free(engine *e) {
    if (e->arena) e->be->ops->release(e->be->ctx, e->arena);
    for (int p = 0; p < e->n_points; p++)
        free(e->points[p].host);
    free(e->points);
    free(e->tokens);
    free(e->tok_host);
    free(e->pos_host);
    free(e->logits_host);
    free(e->logits_shard_host);
    free(e->sample_scratch);
    free(e->maxloc_host);
    free(e->vocab_counts);
    free(e->vocab_displs);
    for (int i = 0; i < e->n_micro; i++) {
        free(e->tok_send[i]);
        free(e->tok_recv[i]);
    }
    memset(e, 0, sizeof *e);
}

/* Next token of each sequence of micro-batch mb from the logits on the backend; identical on
 * every TP rank. Greedy uses a distributed argmax (local max, then MAXLOC across TP, which
 * breaks ties to the lowest index like a single rank); sampling assembles the full rows. */
static void select_tokens(engine *e, int mb, int position, int32_t *out) {
    const shard_geom *g = &e->m->geom;
    const backend_ops *ops = e->be->ops;
    const int nb = e->mb_size[mb], V = e->m->cfg.vocab, VL = g->vocab_local;
    if (e->j->sampling == SAMPLING_GREEDY) {
        struct {
            float value;
            int index;
        } *pairs = (void *)e->maxloc_host;
        float *vals = e->logits_shard_host;
        ops->argmax(e->be->ctx, e->max_val, e->max_idx, e->logits, nb, VL);
        ops->copy_to_host(e->be->ctx, vals, e->max_val, (size_t)nb * sizeof(float));
        ops->copy_to_host(e->be->ctx, e->tok_host, e->max_idx, (size_t)nb * sizeof(int32_t));
        for (int b = 0; b < nb; b++) {
            pairs[b].value = vals[b];
            pairs[b].index = e->tok_host[b] + g->vocab_begin;
        }
        if (e->tp->size > 1)
            MPI_CHECK(
                MPI_Allreduce(MPI_IN_PLACE, pairs, nb, MPI_FLOAT_INT, MPI_MAXLOC, e->tp->mpi));
        for (int b = 0; b < nb; b++)
            out[b] = pairs[b].index;
        return;
    }
    ops->copy_to_host(e->be->ctx, e->logits_shard_host, e->logits, (size_t)nb * VL * sizeof(float));
    for (int b = 0; b < nb; b++) {
        float *row = e->logits_host + (size_t)b * V;
        if (e->tp->size > 1)
            MPI_CHECK(MPI_Allgatherv(e->logits_shard_host + (size_t)b * VL, VL, MPI_FLOAT, row,
                                     e->vocab_counts, e->vocab_displs, MPI_FLOAT, e->tp->mpi));
        else
            memcpy(row, e->logits_shard_host + (size_t)b * VL, (size_t)V * sizeof(float));
    }
    for (int b = 0; b < nb; b++) {
        long seq = e->seq_global_begin + e->mb_begin[mb] + b;
        double u = sample_uniform(e->j->sample_seed, seq, position);
        float *row = e->logits_host + (size_t)b * V;
        out[b] = sample_top_k(row, V, e->j->temperature, e->j->top_k, u, e->sample_scratch);
    }
}

/* Embedding of micro-batch mb at positions pos0.. into x; vocab-parallel, so TP all-reduces. */
static void embed_microbatch(engine *e, float *x, int mb, int step, int n_new, int pos0) {
    const shard_geom *g = &e->m->geom;
    const int nb = e->mb_size[mb], rows = nb * n_new;
    int ev = timer_begin(e->tm, PHASE_EMBED, step, mb, TIMER_NO_LAYER);
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n_new; i++) {
            int s = e->mb_begin[mb] + b;
            e->tok_host[b * n_new + i] = e->tokens[(size_t)s * e->total_len + pos0 + i];
            e->pos_host[b * n_new + i] = pos0 + i;
        }
    e->be->ops->copy_to_device(e->be->ctx, e->tok_dev, e->tok_host, (size_t)rows * sizeof(int32_t));
    e->be->ops->copy_to_device(e->be->ctx, e->pos_dev, e->pos_host, (size_t)rows * sizeof(int32_t));
    /* Position embeddings are added by TP rank 0 only, so the all-reduce counts them once. */
    e->be->ops->embed(e->be->ctx, x, e->tok_dev, e->pos_dev, e->m->w.wte,
                      g->tp_rank == 0 ? e->m->w.wpe : NULL, rows, e->m->cfg.embd, g->vocab_begin,
                      g->vocab_begin + g->vocab_local);
    timer_end(e->tm, ev);
    if (e->tp->size > 1) {
        if (!e->tp->stream_ordered) e->be->ops->synchronize(e->be->ctx);
        double t0 = timer_host_seconds();
        comm_allreduce_sum(e->tp, x, (size_t)rows * e->m->cfg.embd);
        double t1 = timer_host_seconds();
        timer_add_host(e->tm, PHASE_TP_ALLREDUCE, step, mb, TIMER_NO_LAYER, t0, t1);
        timer_add_host(e->tm, PHASE_TP_WAIT, step, mb, TIMER_NO_LAYER, t0, t1);
    }
}

static void wait_timed(engine *e, comm *c, comm_req *req, phase p, int step, int mb) {
    if (!req->active) return;
    double t0 = timer_host_seconds();
    comm_wait(c, req);
    timer_add_host(e->tm, p, step, mb, TIMER_NO_LAYER, t0, timer_host_seconds());
}

/* Posts the receive of micro-batch mb's activations from the previous stage. An MPI receive is
 * posted at once, so the message can land while this stage computes. A stream-ordered comm
 * (NCCL) enqueues work that cannot be cancelled, so its receive is enqueued just before it is
 * waited on: the stream still overlaps it with queued compute, and a stop leaves nothing
 * behind. */
static void post_stage_recv(engine *e, float *buf, size_t count, int prev, int mb) {
    comm *ppc = e->pp;
    if (ppc->stream_ordered) {
        e->deferred_recv[mb] = buf;
        e->deferred_count[mb] = count;
        return;
    }
    ppc->ops->irecv(ppc->ctx, buf, count, COMM_FLOAT, prev, mb, &e->recv_req[mb]);
}

static void wait_stage_recv(engine *e, int prev, int step, int mb) {
    if (e->deferred_recv[mb]) {
        e->pp->ops->irecv(e->pp->ctx, e->deferred_recv[mb], e->deferred_count[mb], COMM_FLOAT, prev,
                          mb, &e->recv_req[mb]);
        e->deferred_recv[mb] = NULL;
    }
    wait_timed(e, e->pp, &e->recv_req[mb], PHASE_PP_RECV_WAIT, step, mb);
}

/* Leaves the step loop cleanly: sends finish, receives posted for a step that will never run
 * are cancelled. */
static void drain_pending(engine *e, comm_req send_req[][2]) {
    for (int mb = 0; mb < e->n_micro; mb++) {
        comm_wait(e->pp, &send_req[mb][0]);
        comm_wait(e->pp, &send_req[mb][1]);
        comm_wait(engine_pp_host(e), &e->tok_send_req[mb]);
        e->deferred_recv[mb] = NULL; /* never enqueued */
        comm_req *pending[2] = {&e->recv_req[mb], &e->tok_recv_req[mb]};
        for (int k = 0; k < 2; k++) /* both MPI here: stream-ordered receives are deferred */
            if (pending[k]->active) {
                MPI_CHECK(MPI_Cancel(&pending[k]->mpi));
                MPI_CHECK(MPI_Wait(&pending[k]->mpi, MPI_STATUS_IGNORE));
                pending[k]->active = 0;
            }
    }
}

/* Returns 1 when the stop vote started after the previous step says some rank was signalled;
 * then starts the vote for this step. */
static int stop_agreed(engine *e) {
    int stop = 0;
    if (e->stop_req != MPI_REQUEST_NULL) {
        MPI_CHECK(MPI_Wait(&e->stop_req, MPI_STATUS_IGNORE));
        stop = e->stop_global;
    }
    if (stop) return 1;
    e->stop_local = e->stop_flag ? (*e->stop_flag != 0) : 0;
    MPI_CHECK(MPI_Iallreduce(&e->stop_local, &e->stop_global, 1, MPI_INT, MPI_MAX, e->mesh->world,
                             &e->stop_req));
    return 0;
}

int engine_generate(engine *e, int iteration, int capture) {
    const shard_geom *g = &e->m->geom;
    const backend_ops *ops = e->be->ops;
    const int C = e->m->cfg.embd, T = e->prompt_len, pp = g->pp;
    const int steps = e->new_tokens > 0 ? e->new_tokens : 1;
    const int prev = g->pp_rank - 1, next = g->pp_rank + 1, last = pp - 1;
    comm *ppc = e->pp;
    comm *tokc = engine_pp_host(e); /* tokens are host data: plain MPI even when pp is NCCL */
    int slot[ENGINE_MAX_MICRO];
    comm_req send_req[ENGINE_MAX_MICRO][2];

    int stopped = 0;
    e->stop_req = MPI_REQUEST_NULL;
    e->tm->iteration = iteration;
    e->first_token_time = 0.0;
    memset(send_req, 0, sizeof send_req);
    for (int mb = 0; mb < e->n_micro; mb++) {
        slot[mb] = 0;
        e->tok_send_req[mb].active = e->tok_recv_req[mb].active = e->recv_req[mb].active = 0;
        /* Receives for the prefill are posted before any compute. */
        e->deferred_recv[mb] = NULL;
        if (!g->first_stage)
            post_stage_recv(e, e->stage_buf[mb][0], (size_t)e->mb_size[mb] * T * C, prev, mb);
    }

    for (int step = 0; step < steps; step++) {
        const int n_new = step == 0 ? T : 1, pos0 = step == 0 ? 0 : T + step - 1;
        e->capture = capture && step == 0; /* activations are recorded for the prefill only */
        for (int mb = 0; mb < e->n_micro; mb++) {
            const int nb = e->mb_size[mb];
            int ev_step = timer_begin(e->tm, PHASE_STEP, step, mb, TIMER_NO_LAYER);
            float *x = e->stage_buf[mb][slot[mb]];
            if (g->first_stage) {
                if (step > 0 && pp > 1) { /* this micro-batch's tokens from the last stage */
                    wait_timed(e, tokc, &e->tok_recv_req[mb], PHASE_PP_RECV_WAIT, step, mb);
                    for (int b = 0; b < nb; b++)
                        e->tokens[(size_t)(e->mb_begin[mb] + b) * e->total_len + pos0] =
                            e->tok_recv[mb][b];
                }
                wait_timed(e, ppc, &send_req[mb][slot[mb]], PHASE_PP_SEND, step, mb);
                embed_microbatch(e, x, mb, step, n_new, pos0);
            } else {
                wait_stage_recv(e, prev, step, mb);
            }

            engine_step_forward(e, x, mb, step, n_new, pos0);

            if (!g->last_stage) {
                if (!ppc->stream_ordered) ops->synchronize(e->be->ctx);
                int ev = timer_begin(e->tm, PHASE_PP_SEND, step, mb, TIMER_NO_LAYER);
                ppc->ops->isend(ppc->ctx, x, (size_t)nb * n_new * C, COMM_FLOAT, next, mb,
                                &send_req[mb][slot[mb]]);
                timer_end(e->tm, ev);
                slot[mb] = 1 - slot[mb]; /* x stays untouched while its send is in flight */
            }
            if (!g->first_stage && step + 1 < steps) { /* post the next receive now */
                wait_timed(e, ppc, &send_req[mb][slot[mb]], PHASE_PP_SEND, step, mb);
                post_stage_recv(e, e->stage_buf[mb][slot[mb]], (size_t)nb * C, prev, mb);
            }
            if (g->first_stage && pp > 1 && step + 1 < steps)
                tokc->ops->irecv(tokc->ctx, e->tok_recv[mb], (size_t)nb, COMM_INT32, last,
                                 TAG_TOKENS + mb, &e->tok_recv_req[mb]);
            if (g->last_stage) {
                int ev = timer_begin(e->tm, PHASE_SAMPLE, step, mb, TIMER_NO_LAYER);
                int32_t *chosen = e->tok_host;
                select_tokens(e, mb, T + step, chosen);
                timer_end(e->tm, ev);
                if (step < e->new_tokens)
                    for (int b = 0; b < nb; b++)
                        e->tokens[(size_t)(e->mb_begin[mb] + b) * e->total_len + T + step] =
                            chosen[b];
                if (pp > 1 && step + 1 < steps) {
                    wait_timed(e, tokc, &e->tok_send_req[mb], PHASE_PP_SEND, step, mb);
                    memcpy(e->tok_send[mb], chosen, (size_t)nb * sizeof(int32_t));
                    tokc->ops->isend(tokc->ctx, e->tok_send[mb], (size_t)nb, COMM_INT32, 0,
                                     TAG_TOKENS + mb, &e->tok_send_req[mb]);
                }
                if (step == 0 && mb == e->n_micro - 1) e->first_token_time = timer_host_seconds();
            }
            timer_end(e->tm, ev_step);
        }
        if (e->rf && e->j->flush_every > 0 && (step + 1) % e->j->flush_every == 0)
            runfile_write_events(e->rf, e->tm); /* a killed job keeps what it measured */
        if (stop_agreed(e)) {
            stopped = 1;
            break;
        }
    }
    drain_pending(e, send_req);
    if (e->stop_req != MPI_REQUEST_NULL) {
        MPI_CHECK(MPI_Wait(&e->stop_req, MPI_STATUS_IGNORE));
        stopped |= e->stop_global;
    }
    ops->synchronize(e->be->ctx);
    e->end_time = timer_host_seconds();
    return stopped;
}

void engine_write_outputs(engine *e, struct runfile *rf) {
    const shard_geom *g = &e->m->geom;
    /* The last stage of each replica knows every generated token; its TP rank 0 writes. */
    int writer = g->last_stage && g->tp_rank == 0;
    runfile_write_tokens(rf, e->tokens, e->seq_global_begin, writer ? e->batch_local : 0,
                         e->j->batch, e->total_len);
    if (e->tok) {
        long rows = writer ? e->batch_local : 0;
        char **texts = xcalloc((size_t)(rows > 0 ? rows : 1), sizeof(char *));
        prompt_decode_rows(e->tok, e->tokens, rows, e->total_len, texts);
        runfile_write_text(rf, (const char *const *)texts, e->seq_global_begin, rows, e->j->batch);
        for (long r = 0; r < rows; r++)
            free(texts[r]);
        free(texts);
    }
    for (int p = 0; p < e->n_points; p++) {
        activation_point *pt = &e->points[p];
        runfile_write_activation(rf, pt->name, 3, pt->dims, pt->start, pt->count, pt->host);
    }
}
