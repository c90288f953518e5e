/* The stage forward pass: this stage's transformer layers over one micro-batch, then (on the
 * last stage) the final norm and the LM head. Read it top to bottom: per-layer pointers are
 * computed at the top of the loop and every collective is one visible line. */
#include <math.h>
#include <string.h>

#include "base/check.h"
#include "engine/engine.h"

/* Layer l's (rows, cols) matrix of a stacked (L, rows, cols) tensor whose input is split as
 * `input` says; int8 scales are (L, rows) or, grouped, (L, rows, ceil(cols / group)). */
static weight_view layer_matrix(const model *m, const void *base, const float *scale, int l,
                                long rows, long cols, matrix_input input) {
    const int8_layout q = m->int8[input];
    weight_view v = {.type = m->weight_dtype, .group = q.group, .act_block = q.act_block};
    if (!base) return v; /* a tensor this model lacks: the dense MLP of a mixture of experts */
    v.data = (const char *)base + dtype_bytes(m->weight_dtype, (size_t)l * rows * cols);
    const long groups = q.group ? (cols + q.group - 1) / q.group : 1;
    if (scale) v.scale = scale + (size_t)l * rows * groups;
    return v;
}

/* Records into a staging tensor rows [r0, r0 + rows) of micro-batch mb's prefill (x holds
 * them) for an activation point. */
static void capture_rows(engine *e, int kind, int layer, const float *x, int mb, int r0, int rows,
                         int width) {
    if (!e->capture) return;
    for (int p = 0; p < e->n_points; p++) {
        activation_point *pt = &e->points[p];
        if (pt->kind != kind || pt->layer != layer || !pt->held) continue;
        size_t offset = ((size_t)e->split.begin[mb] * e->prompt_len + r0) * width;
        size_t bytes = (size_t)rows * width * sizeof(float);
        e->be->ops->copy_to_host(e->be->ctx, pt->host + offset, x, bytes);
    }
}

/* The same for every row of micro-batch mb. */
static void capture_point(engine *e, int kind, int layer, const float *x, int mb, int width) {
    capture_rows(e, kind, layer, x, mb, 0, e->split.size[mb] * e->prompt_len, width);
}

/* The non-finite diagnosis only (schedule.c's diagnose_step): notes `site` when rows x of
 * the residual stream hold a value that is not finite. Rows come back in pieces of mb_max
 * through a staging buffer made at start-up; sites past one already seen are not checked. */
static void check_finite(engine *e, const float *x, int rows, int site) {
    if (!e->diagnose || site >= e->diagnose_site) return;
    const size_t C = (size_t)e->m->cfg.embd;
    for (int r0 = 0; r0 < rows; r0 += e->mb_max) {
        const int n = rows - r0 < e->mb_max ? rows - r0 : e->mb_max;
        e->be->ops->copy_to_host(e->be->ctx, e->check_host, x + r0 * C, n * C * sizeof(float));
        for (size_t i = 0; i < n * C; i++)
            if (!isfinite(e->check_host[i])) {
                e->diagnose_site = site;
                return;
            }
    }
}

/* All-reduce over TP as one blocking call, timed as both total and exposed communication. */
static void tp_allreduce_blocking(engine *e, float *buf, size_t count, int step, int mb,
                                  int layer) {
    if (e->tp->size == 1) return;
    if (!e->tp->stream_ordered) e->be->ops->synchronize(e->be->ctx); /* MPI reads the buffer now */
    double t0 = timer_host_seconds();
    comm_allreduce_sum(e->tp, buf, count);
    double t1 = timer_host_seconds();
    timer_add_host(e->tm, PHASE_TP_ALLREDUCE, step, mb, layer, t0, t1);
    timer_add_host(e->tm, PHASE_TP_WAIT, step, mb, layer, t0, t1);
}

/* Drives every row-parallel all-reduce in flight (Open MPI advances a non-blocking collective
 * only inside MPI calls) and notes when each piece finished. Stream-ordered comms (NCCL)
 * progress on their own; polling them is a host round trip and is not allowed inside a
 * CUDA-graph capture. */
static void tp_progress(engine *e) {
    if (e->tp->stream_ordered) return;
    for (int n = 0; n < NANO_BATCHES_MAX; n++) {
        struct tp_inflight *f = &e->inflight[n];
        for (int i = 0; i < f->pieces; i++)
            if (f->req[i].active && comm_test(e->tp, &f->req[i]))
                f->finished[i] = timer_host_seconds();
    }
}

/* A row-parallel product followed by its all-reduce, started: rows of out as nano-batch `nano`
 * (0 when there is one). With overlap on, the rows are cut into pieces and piece i's
 * all-reduce is in flight while piece i+1 multiplies; between pieces every all-reduce in flight
 * is driven, this one's earlier pieces and the other nano-batch's. The all-reduce ends in
 * tp_finish, which the nano-batch calls before it reads out; without overlap it ends here, as
 * one blocking call. The bias is added by TP rank 0 only, so it is counted once. */
static void row_parallel_start(engine *e, int nano, int nanos, float *out, const float *in,
                               weight_view w, const float *bias, int rows, int in_dim, int out_dim,
                               phase gemm_phase, int step, int mb, int layer) {
    const backend_ops *ops = e->be->ops;
    const float *bias_once = e->tp->rank == 0 ? bias : NULL;
    const int pieces = e->chunks < rows ? e->chunks : rows;
    /* one piece of the only nano-batch has nothing to overlap: the blocking call */
    if (!e->cfg.overlap || e->tp->size == 1 || (pieces <= 1 && nanos == 1)) {
        TIMER_SCOPE(e->tm, gemm_phase, step, mb, layer)
            ops->matmul(e->be->ctx, out, in, w, bias_once, rows, in_dim, out_dim);
        tp_allreduce_blocking(e, out, (size_t)rows * out_dim, step, mb, layer);
        return;
    }
    struct tp_inflight *f = &e->inflight[nano];
    CHECK(f->pieces == 0, "engine: nano-batch %d started an all-reduce with one in flight", nano);
    for (int i = 0; i < pieces; i++) {
        int r0 = split_begin(rows, pieces, i), rn = split_count(rows, pieces, i);
        TIMER_SCOPE(e->tm, gemm_phase, step, mb, layer)
            ops->matmul(e->be->ctx, out + (size_t)r0 * out_dim, in + (size_t)r0 * in_dim, w,
                        bias_once, rn, in_dim, out_dim);
        if (!e->tp->stream_ordered) ops->synchronize(e->be->ctx); /* MPI reads the rows now */
        f->started[i] = timer_host_seconds();
        comm_iallreduce_sum(e->tp, out + (size_t)r0 * out_dim, (size_t)rn * out_dim, &f->req[i]);
        f->pieces = i + 1; /* tp_progress tests this piece from now on */
        tp_progress(e);
    }
    f->step = step, f->mb = mb, f->layer = layer;
}

/* Ends nano-batch `nano`'s all-reduce in flight, if any: the time blocked here is the exposed
 * part (tp_wait), and each piece's span from its start to its end is its all-reduce. */
static void tp_finish(engine *e, int nano) {
    struct tp_inflight *f = &e->inflight[nano];
    for (int i = 0; i < f->pieces; i++) {
        if (f->req[i].active) {
            double w0 = timer_host_seconds();
            comm_wait(e->tp, &f->req[i]);
            f->finished[i] = timer_host_seconds();
            timer_add_host(e->tm, PHASE_TP_WAIT, f->step, f->mb, f->layer, w0, f->finished[i]);
        }
        timer_add_host(e->tm, PHASE_TP_ALLREDUCE, f->step, f->mb, f->layer, f->started[i],
                       f->finished[i]);
    }
    f->pieces = 0;
}

/* How a micro-batch's rows split into nano-batches (nano_batch_split), and how many. With
 * overlap on a prefill runs as two: each block of a layer (attention, then MLP) runs for one
 * and then the other, so one's all-reduce is in flight while the other computes, and every op
 * that follows it (residual, norm, the next products) waits only for its own rows' (as
 * NanoFlow's nano-batches do). One sequence splits by positions, its second half attending to
 * the first's keys, which are in the cache by then. Decode keeps one: two would stream every
 * weight twice for rows that are latency-bound anyway. A mixture of experts keeps one (its
 * layer all-reduces once after the experts), and so do stream-ordered comms (NCCL), which
 * overlap on their own stream. */
static int nano_split(const engine *e, nano_batch *n, int nb, int n_new, int pos0) {
    const int split =
        e->cfg.overlap && e->tp->size > 1 && !e->tp->stream_ordered && e->m->cfg.experts == 0;
    return nano_batch_split(n, split, nb, n_new, pos0);
}

/* A nano-batch's rows of the activation buffers: each nano-batch works in its own rows, so the
 * other's work never touches rows whose all-reduce is in flight. qkv_width and f_width are the
 * widths of the qkv and f rows (the architecture's); act is NULL where the model has none. */
typedef struct {
    float *x, *h, *o, *qkv, *att, *f, *act;
} nano_rows;

static nano_rows nano_rows_of(const engine *e, float *x, const nano_batch *nb, int qkv_width,
                              int f_width) {
    const size_t r0 = (size_t)nb->r0, C = (size_t)e->m->cfg.embd;
    const size_t A = (size_t)e->m->geom.attn_dim, M = (size_t)e->m->geom.mlp_local;
    return (nano_rows){.x = x + r0 * C,
                       .h = e->h + r0 * C,
                       .o = e->o + r0 * C,
                       .qkv = e->qkv + r0 * (size_t)qkv_width,
                       .att = e->att + r0 * A,
                       .f = e->f + r0 * (size_t)f_width,
                       .act = e->act ? e->act + r0 * M : NULL};
}

/* The final norm: LayerNorm (GPT-2) or RMSNorm (Llama). */
static void final_norm(engine *e, float *out, const float *x, int rows) {
    const model *m = e->m;
    if (arch_is_llama(m->cfg.arch))
        e->be->ops->rmsnorm(e->be->ctx, out, x, m->w.lnf_g, rows, m->cfg.embd, m->cfg.ln_eps);
    else
        e->be->ops->layernorm(e->be->ctx, out, x, m->w.lnf_g, m->w.lnf_b, rows, m->cfg.embd,
                              m->cfg.ln_eps);
}

static void final_norm_rows(engine *e, float *out, const float *x, int nb, int n_new) {
    const int C = e->m->cfg.embd;
    if (n_new == 1) {
        final_norm(e, out, x, nb);
        return;
    }
    for (int b = 0; b < nb; b++) /* only each sequence's last position is sampled */
        final_norm(e, out + (size_t)b * C, x + ((size_t)b * n_new + n_new - 1) * C, 1);
}

/* The LM head's vocab shard: head_w (an untied head, or a tied one's copy) in the weight
 * dtype when quantize_head, in fp32 when not; else the tied fp32 wte. */
static weight_view head_view(const model *m) {
    if (!m->w.head_w) return (weight_view){.type = DTYPE_F32, .data = m->w.wte};
    if (!m->cfg.quantize_head) return (weight_view){.type = DTYPE_F32, .data = m->w.head_w};
    const int8_layout q = m->int8[MATRIX_INPUT_WHOLE];
    return (weight_view){.type = m->weight_dtype,
                         .data = m->w.head_w,
                         .scale = m->w.head_s,
                         .group = q.group,
                         .act_block = q.act_block};
}

void engine_head_rows(engine *e, float *logits, float *head_in, const float *x, int rows) {
    final_norm(e, head_in, x, rows);
    e->be->ops->matmul(e->be->ctx, logits, head_in, head_view(e->m), NULL, rows, e->m->cfg.embd,
                       e->m->geom.vocab_local);
}

/* The KV cache of this stage's layer l, contiguous or paged, holding kv_heads heads. */
static kv_view layer_kv_cache(const engine *e, int l, int kv_heads) {
    const shard_geom *g = &e->m->geom;
    return (kv_view){.k = (char *)e->kv_k + l * e->kv_layer_bytes,
                     .v = (char *)e->kv_v + l * e->kv_layer_bytes,
                     .block_table = e->block_table,
                     .block_size = e->cfg.kv_block,
                     .blocks_per_seq = e->blocks_per_seq,
                     .max_ctx = e->kv_capacity,
                     .heads = g->n_heads,
                     .kv_heads = kv_heads,
                     .head_dim = g->head_dim,
                     .type = e->cfg.kv_dtype};
}

/* One expert's SwiGLU MLP over n rows: out (n, C) = down(silu(gate(in)) * up(in)), this rank's
 * partial sums (its columns of the intermediate). f and act are the shared scratch. Between
 * products it drives an EP dispatch in flight (moe_ep_poll: none in flight, nothing done). */
static void expert_mlp(engine *e, float *out, const float *in, weight_view gate_up,
                       weight_view down, int n, int width) {
    const backend_ops *ops = e->be->ops;
    const int C = e->m->cfg.embd;
    ops->matmul(e->be->ctx, e->f, in, gate_up, NULL, n, C, 2 * width);
    if (e->ep) moe_ep_poll(e);
    ops->swiglu(e->be->ctx, e->act, e->f, n, width);
    ops->matmul(e->be->ctx, out, e->act, down, NULL, n, width, C);
    if (e->ep) moe_ep_poll(e);
}

/* The router's logits of rows of h, routed on the host (engine/moe.c), the expert lists copied
 * to the backend, and o zeroed for the experts' weighted sums. */
static void moe_route_rows(engine *e, float *o, const float *h, int l, int rows, int step) {
    const model *m = e->m;
    const backend_ops *ops = e->be->ops;
    void *ctx = e->be->ctx;
    moe_routing *r = &e->moe_host;
    const int C = m->cfg.embd, RL = m->cfg.experts + r->shared;
    const weight_view router = {.type = DTYPE_F32, .data = m->w.router_w + (size_t)l * RL * C};
    ops->matmul(ctx, e->moe_logits, h, router, NULL, rows, C, RL);
    ops->copy_to_host(ctx, r->logits, e->moe_logits, (size_t)rows * RL * sizeof(float));
    const int entries = moe_route(r, rows);
    if (!e->diagnose) moe_routing_load_add(r, step, l); /* a diagnosis re-run counts once */
    ops->copy_to_device(ctx, e->moe_idx, r->idx, (size_t)entries * sizeof(int32_t));
    ops->copy_to_device(ctx, e->moe_wts, r->wts, (size_t)entries * sizeof(float));
    ops->memset_zero(ctx, o, (size_t)rows * C * sizeof(float));
}

/* Layer l's local expert x (of this rank's experts_local) over n rows of in into out; in and
 * out may be one buffer (expert_mlp reads in only before it writes out). At most R rows go
 * through the scratch at a time. */
static void local_expert(engine *e, float *out, const float *in, int l, int x, int n) {
    const model *m = e->m;
    const weights *w = &m->w;
    const int C = m->cfg.embd, M = m->geom.mlp_local, El = m->geom.experts_local;
    const int row = l * El + x; /* layer l's local experts are rows [l*El, (l+1)*El) */
    const weight_view gate_up =
        layer_matrix(m, w->exp_gate_up_w, w->exp_gate_up_s, row, 2 * M, C, MATRIX_INPUT_WHOLE);
    const weight_view down =
        layer_matrix(m, w->exp_down_w, w->exp_down_s, row, C, M, MATRIX_INPUT_MLP);
    const int most = e->mb_max * e->prompt_len;
    for (int r0 = 0; r0 < n; r0 += most) {
        const int rn = n - r0 < most ? n - r0 : most;
        expert_mlp(e, out + (size_t)r0 * C, in + (size_t)r0 * C, gate_up, down, rn, M);
    }
}

/* The shared expert of layer l on every row of h, added into o scaled by its sigmoid gate. */
static void moe_shared(engine *e, float *o, const float *h, int l, int rows) {
    const model *m = e->m;
    const weights *w = &m->w;
    const int C = m->cfg.embd, K = m->cfg.experts_top_k, S = m->geom.shared_local;
    if (!e->moe_host.shared) return;
    const weight_view sh_gate_up =
        layer_matrix(m, w->sh_gate_up_w, w->sh_gate_up_s, l, 2 * S, C, MATRIX_INPUT_WHOLE);
    const weight_view sh_down = layer_matrix(m, w->sh_down_w, w->sh_down_s, l, C, S, MATRIX_INPUT_MLP);
    expert_mlp(e, e->moe_out, h, sh_gate_up, sh_down, rows, S);
    e->be->ops->scatter_add_rows(e->be->ctx, o, e->moe_out, e->moe_idx + (size_t)rows * K,
                                 e->moe_wts + (size_t)rows * K, rows, C);
}

/* Expert parallelism across replicas: this rank's experts over the rows its EP group sent,
 * each expert over all of its rows at once (every source's together: one wide product instead
 * of one per source), in pieces of at most R rows through moe_in and moe_out; the outputs go to
 * ep_send at the rows' places in ep_recv, for the combine. */
static void moe_ep_experts(engine *e, int l) {
    const backend_ops *ops = e->be->ops;
    void *ctx = e->be->ctx;
    const int P = e->ep->size, El = e->m->geom.experts_local, C = e->m->cfg.embd;
    const int most = e->mb_max * e->prompt_len;
    const int32_t *from = e->ep_experts + (size_t)P * El;
    const int total = moe_ep_order(e);
    if (total == 0) return;
    ops->memset_zero(ctx, e->ep_send, (size_t)total * C * sizeof(float));
    int at = 0;
    for (int x = 0; x < El; x++) {
        int n = 0;
        for (int p = 0; p < P; p++) n += from[(size_t)p * El + x];
        for (int r0 = 0; r0 < n; r0 += most) {
            const int rn = n - r0 < most ? n - r0 : most;
            const int32_t *rows = e->ep_perm + at + r0;
            ops->gather_rows(ctx, e->moe_in, e->ep_recv, rows, rn, C);
            local_expert(e, e->moe_out, e->moe_in, l, x, rn);
            ops->scatter_add_rows(ctx, e->ep_send, e->moe_out, rows, e->ep_ones, rn, C);
        }
        at += n;
    }
}

/* The mixture-of-experts MLP of stage layer l over rows of h, into o as this rank's partial
 * sums (the caller all-reduces once): the replicated router's logits come back to the host and
 * are routed there (engine/moe.c); each of this rank's experts in turn gathers its rows, runs,
 * and adds them back weighted; the shared expert runs on every row, scaled by its sigmoid gate.
 * Experts are summed in index order, then the shared one, the same order on every rank and
 * mesh. With an EP group across replicas (e->ep) the routed rows go to the ranks of their
 * experts and back by all-to-all (moe_ep.c) and this rank's experts serve the whole group's. */
static void moe_mlp(engine *e, float *o, const float *h, int l, int rows, int step, int mb,
                    int layer) {
    const moe_routing *r = &e->moe_host;
    const backend_ops *ops = e->be->ops;
    void *ctx = e->be->ctx;
    const int C = e->m->cfg.embd;
    if (e->ep) {
        /* parallel.overlap: the shared expert runs while the routed rows travel */
        const int overlapped = e->cfg.overlap && r->shared;
        TIMER_SCOPE(e->tm, PHASE_MLP_GEMM, step, mb, layer) {
            moe_route_rows(e, o, h, l, rows, step);
            moe_ep_gather(e, h);
        }
        moe_ep_dispatch_start(e);
        if (overlapped)
            TIMER_SCOPE(e->tm, PHASE_MLP_GEMM, step, mb, layer)
                moe_shared(e, o, h, l, rows);
        moe_ep_dispatch_finish(e, step, mb, layer, overlapped);
        TIMER_SCOPE(e->tm, PHASE_EP_EXPERT, step, mb, layer)
            moe_ep_experts(e, l);
        moe_ep_combine(e, step, mb, layer);
        TIMER_SCOPE(e->tm, PHASE_MLP_GEMM, step, mb, layer) {
            moe_ep_scatter(e, o);
            if (!overlapped) moe_shared(e, o, h, l, rows);
        }
        return;
    }
    TIMER_SCOPE(e->tm, PHASE_MLP_GEMM, step, mb, layer) {
        moe_route_rows(e, o, h, l, rows, step);
        /* expert parallelism inside the TP group: this rank runs only its own experts, for
         * every routed row (its TP group holds the same rows); the TP all-reduce sums the ep
         * blocks' experts */
        const int eb = e->m->geom.expert_begin, El = e->m->geom.experts_local;
        for (int x = eb; x < eb + El; x++) {
            const int n = r->offset[x + 1] - r->offset[x], at = r->offset[x];
            if (n == 0) continue;
            ops->gather_rows(ctx, e->moe_in, h, e->moe_idx + at, n, C);
            local_expert(e, e->moe_out, e->moe_in, l, x - eb, n);
            ops->scatter_add_rows(ctx, o, e->moe_out, e->moe_idx + at, e->moe_wts + at, n, C);
        }
        moe_shared(e, o, h, l, rows);
    }
}

void engine_ep_idle(engine *e, int mb, int step) {
    const shard_geom *g = &e->m->geom;
    for (int l = 0; l < g->n_layers; l++) {
        const int layer = g->layer_begin + l;
        moe_ep_gather_none(e);
        moe_ep_dispatch(e, step, mb, layer);
        TIMER_SCOPE(e->tm, PHASE_EP_EXPERT, step, mb, layer)
            moe_ep_experts(e, l);
        moe_ep_combine(e, step, mb, layer);
    }
}

/* Llama's layers (pre-norm): RMSNorm -> grouped-query QKV -> attention with RoPE -> o,
 * all-reduced -> RMSNorm -> gate|up -> SwiGLU -> down, all-reduced. h holds the normed
 * input of the next block; each residual add is fused with the next norm, which runs when the
 * nano-batch's all-reduce has ended, at the top of the next block (the last one's after the
 * loop). Each nano-batch uses its own rows of every buffer. */
static void llama_layers(engine *e, float *x, int mb, int step, int n_new, int pos0) {
    const model *m = e->m;
    const shard_geom *g = &m->geom;
    const weights *w = &m->w;
    const backend_ops *ops = e->be->ops;
    void *ctx = e->be->ctx;
    const int C = m->cfg.embd, A = g->attn_dim, M = g->mlp_local;
    const int QKV = A + 2 * g->n_kv_heads * g->head_dim;
    const float eps = m->cfg.ln_eps;
    nano_batch nanos[NANO_BATCHES_MAX];
    nano_rows rows_of[NANO_BATCHES_MAX];
    const int n_nano = nano_split(e, nanos, e->split.size[mb], n_new, pos0);
    for (int n = 0; n < n_nano; n++)
        rows_of[n] = nano_rows_of(e, x, &nanos[n], QKV, 2 * M);

    for (int l = 0; l < g->n_layers; l++) {
        const int layer = g->layer_begin + l;
        const weight_view qkv_w =
            layer_matrix(m, w->qkv_w, w->qkv_s, l, QKV, C, MATRIX_INPUT_WHOLE);
        const weight_view o_w = layer_matrix(m, w->proj_w, w->proj_s, l, C, A, MATRIX_INPUT_HEADS);
        const weight_view gate_up_w =
            layer_matrix(m, w->fc1_w, w->fc1_s, l, 2 * M, C, MATRIX_INPUT_WHOLE);
        const weight_view down_w = layer_matrix(m, w->fc2_w, w->fc2_s, l, C, M, MATRIX_INPUT_MLP);
        /* Qwen2's q/k/v biases, when the checkpoint has them (qkv_b, this rank's rows) */
        const float *qkv_b = w->qkv_b ? w->qkv_b + (size_t)l * QKV : NULL;
        const float *ln1_g = w->ln1_g + (size_t)l * C, *ln2_g = w->ln2_g + (size_t)l * C;
        const kv_view cache = layer_kv_cache(e, l, g->n_kv_heads);

        for (int n = 0; n < n_nano; n++) { /* attention */
            const nano_batch *nb = &nanos[n];
            const int rows = nb->rows;
            float *xn = rows_of[n].x, *hn = rows_of[n].h, *on = rows_of[n].o;
            float *qkv = rows_of[n].qkv, *att = rows_of[n].att;
            tp_finish(e, n);
            if (l == 0)
                TIMER_SCOPE(e->tm, PHASE_NORM, step, mb, layer)
                    ops->rmsnorm(ctx, hn, xn, ln1_g, rows, C, eps);
            else {
                TIMER_SCOPE(e->tm, PHASE_NORM, step, mb, layer - 1) /* x += o; h = RMSNorm1(x) */
                    ops->residual_rmsnorm(ctx, xn, hn, on, ln1_g, rows, C, eps);
                capture_rows(e, ACT_MLP, layer - 1, xn, mb, nb->r0, rows, C);
                check_finite(e, xn, rows, engine_site_mlp(layer - 1));
            }

            TIMER_SCOPE(e->tm, PHASE_QKV_GEMM, step, mb, layer)
                ops->matmul(ctx, qkv, hn, qkv_w, qkv_b, rows, C, QKV);
            tp_progress(e);

            TIMER_SCOPE(e->tm, PHASE_ATTENTION, step, mb, layer) /* RoPE included */
                ops->attention(ctx, att, qkv, cache, e->rope_inv_freq, e->split.begin[mb] + nb->b0,
                               nb->nb, nb->n_new, nb->pos0);
            tp_progress(e);

            row_parallel_start(e, n, n_nano, on, att, o_w, NULL, rows, A, C, PHASE_ATTN_OUT_GEMM,
                               step, mb, layer);
        }

        for (int n = 0; n < n_nano; n++) { /* MLP */
            const nano_batch *nb = &nanos[n];
            const int rows = nb->rows;
            float *xn = rows_of[n].x, *hn = rows_of[n].h, *on = rows_of[n].o;
            tp_finish(e, n);
            TIMER_SCOPE(e->tm, PHASE_NORM, step, mb, layer) /* x += o; h = RMSNorm2(x) */
                ops->residual_rmsnorm(ctx, xn, hn, on, ln2_g, rows, C, eps);
            capture_rows(e, ACT_ATTN, layer, xn, mb, nb->r0, rows, C);
            check_finite(e, xn, rows, engine_site_attn(layer));

            if (m->cfg.experts > 0) { /* mixtral, qwen2_moe: one all-reduce over every expert */
                moe_mlp(e, on, hn, l, rows, step, mb, layer); /* timed inside */
                tp_allreduce_blocking(e, on, (size_t)rows * C, step, mb, layer);
                continue;
            }
            float *fn = rows_of[n].f, *act = rows_of[n].act;
            TIMER_SCOPE(e->tm, PHASE_MLP_GEMM, step, mb, layer) { /* SwiGLU included */
                ops->matmul(ctx, fn, hn, gate_up_w, NULL, rows, C, 2 * M);
                ops->swiglu(ctx, act, fn, rows, M);
            }
            tp_progress(e);
            row_parallel_start(e, n, n_nano, on, act, down_w, NULL, rows, M, C, PHASE_MLP_GEMM,
                               step, mb, layer);
        }
    }

    for (int n = 0; n < n_nano && g->n_layers > 0; n++) { /* the last layer's residual */
        const int layer = g->layer_begin + g->n_layers - 1, rows = nanos[n].rows;
        float *xn = rows_of[n].x, *on = rows_of[n].o;
        tp_finish(e, n);
        TIMER_SCOPE(e->tm, PHASE_NORM, step, mb, layer) /* x += o */
            ops->residual_rmsnorm(ctx, xn, NULL, on, NULL, rows, C, eps);
        capture_rows(e, ACT_MLP, layer, xn, mb, nanos[n].r0, rows, C);
        check_finite(e, xn, rows, engine_site_mlp(layer));
    }
}

/* GPT-2's layers of this stage: Pre-LN (LN1 of the first layer here, each later one fused
 * with the previous residual add) or Post-LN. As in llama_layers, a block's residual add and
 * norm run at the top of the next block, once the nano-batch's all-reduce has ended. */
static void gpt2_layers(engine *e, float *x, int mb, int step, int n_new, int pos0) {
    const model *m = e->m;
    const shard_geom *g = &m->geom;
    const weights *w = &m->w;
    const backend_ops *ops = e->be->ops;
    void *ctx = e->be->ctx;
    const int C = m->cfg.embd, A = g->attn_dim, M = g->mlp_local;
    const float eps = m->cfg.ln_eps;
    const int pre_norm = m->cfg.norm == NORM_PRE;
    nano_batch nanos[NANO_BATCHES_MAX];
    nano_rows rows_of[NANO_BATCHES_MAX];
    const int n_nano = nano_split(e, nanos, e->split.size[mb], n_new, pos0);
    for (int n = 0; n < n_nano; n++)
        rows_of[n] = nano_rows_of(e, x, &nanos[n], 3 * A, M);

    for (int l = 0; l < g->n_layers; l++) {
        const int layer = g->layer_begin + l;
        const weight_view qkv_w =
            layer_matrix(m, w->qkv_w, w->qkv_s, l, 3 * A, C, MATRIX_INPUT_WHOLE);
        const weight_view proj_w =
            layer_matrix(m, w->proj_w, w->proj_s, l, C, A, MATRIX_INPUT_HEADS);
        const weight_view fc1_w = layer_matrix(m, w->fc1_w, w->fc1_s, l, M, C, MATRIX_INPUT_WHOLE);
        const weight_view fc2_w = layer_matrix(m, w->fc2_w, w->fc2_s, l, C, M, MATRIX_INPUT_MLP);
        const float *qkv_b = w->qkv_b + (size_t)l * 3 * A, *proj_b = w->proj_b + (size_t)l * C;
        const float *fc1_b = w->fc1_b + (size_t)l * M, *fc2_b = w->fc2_b + (size_t)l * C;
        const float *ln1_g = w->ln1_g + (size_t)l * C, *ln1_b = w->ln1_b + (size_t)l * C;
        const float *ln2_g = w->ln2_g + (size_t)l * C, *ln2_b = w->ln2_b + (size_t)l * C;
        const kv_view cache = layer_kv_cache(e, l, g->n_heads); /* one kv head per query head */

        for (int n = 0; n < n_nano; n++) { /* attention */
            const nano_batch *nb = &nanos[n];
            const int rows = nb->rows;
            float *xn = rows_of[n].x, *hn = rows_of[n].h, *on = rows_of[n].o;
            float *qkv = rows_of[n].qkv, *att = rows_of[n].att;
            tp_finish(e, n);
            if (l > 0) {
                TIMER_SCOPE(e->tm, PHASE_NORM, step, mb, layer - 1) {
                    if (pre_norm) /* x += o; h = LN1(x) */
                        ops->residual_layernorm(ctx, xn, hn, on, ln1_g, ln1_b, rows, C, eps);
                    else /* x = LN2(x + o), computed in o then normalised back into x */
                        ops->residual_layernorm(ctx, on, xn, xn, w->ln2_g + (size_t)(l - 1) * C,
                                                w->ln2_b + (size_t)(l - 1) * C, rows, C, eps);
                }
                capture_rows(e, ACT_MLP, layer - 1, xn, mb, nb->r0, rows, C);
                check_finite(e, xn, rows, engine_site_mlp(layer - 1));
            } else if (pre_norm)
                TIMER_SCOPE(e->tm, PHASE_NORM, step, mb, layer)
                    ops->layernorm(ctx, hn, xn, ln1_g, ln1_b, rows, C, eps);

            /* Pre-LN reads h = LN1(x); Post-LN feeds x itself. */
            TIMER_SCOPE(e->tm, PHASE_QKV_GEMM, step, mb, layer)
                ops->matmul(ctx, qkv, pre_norm ? hn : xn, qkv_w, qkv_b, rows, C, 3 * A);
            tp_progress(e);

            TIMER_SCOPE(e->tm, PHASE_ATTENTION, step, mb, layer)
                ops->attention(ctx, att, qkv, cache, NULL, e->split.begin[mb] + nb->b0, nb->nb,
                               nb->n_new, nb->pos0);
            tp_progress(e);

            row_parallel_start(e, n, n_nano, on, att, proj_w, proj_b, rows, A, C,
                               PHASE_ATTN_OUT_GEMM, step, mb, layer);
        }

        for (int n = 0; n < n_nano; n++) { /* MLP */
            const nano_batch *nb = &nanos[n];
            const int rows = nb->rows;
            float *xn = rows_of[n].x, *hn = rows_of[n].h, *on = rows_of[n].o;
            float *fn = rows_of[n].f;
            tp_finish(e, n);
            TIMER_SCOPE(e->tm, PHASE_NORM, step, mb, layer) {
                if (pre_norm) /* x += o; h = LN2(x) */
                    ops->residual_layernorm(ctx, xn, hn, on, ln2_g, ln2_b, rows, C, eps);
                else /* x = LN1(x + o), computed in o then normalised back into x */
                    ops->residual_layernorm(ctx, on, xn, xn, ln1_g, ln1_b, rows, C, eps);
            }
            capture_rows(e, ACT_ATTN, layer, xn, mb, nb->r0, rows, C);
            check_finite(e, xn, rows, engine_site_attn(layer));

            TIMER_SCOPE(e->tm, PHASE_MLP_GEMM, step, mb, layer) {
                ops->matmul(ctx, fn, pre_norm ? hn : xn, fc1_w, NULL, rows, C, M);
                ops->bias_gelu(ctx, fn, fc1_b, rows, M);
            }
            tp_progress(e);

            row_parallel_start(e, n, n_nano, on, fn, fc2_w, fc2_b, rows, M, C, PHASE_MLP_GEMM, step,
                               mb, layer);
        }
    }

    for (int n = 0; n < n_nano && g->n_layers > 0; n++) { /* the last layer's residual */
        const int l = g->n_layers - 1, layer = g->layer_begin + l, rows = nanos[n].rows;
        float *xn = rows_of[n].x, *on = rows_of[n].o;
        tp_finish(e, n);
        TIMER_SCOPE(e->tm, PHASE_NORM, step, mb, layer) {
            if (pre_norm) /* x += o */
                ops->residual_layernorm(ctx, xn, NULL, on, NULL, NULL, rows, C, eps);
            else
                ops->residual_layernorm(ctx, on, xn, xn, w->ln2_g + (size_t)l * C,
                                        w->ln2_b + (size_t)l * C, rows, C, eps);
        }
        capture_rows(e, ACT_MLP, layer, xn, mb, nanos[n].r0, rows, C);
        check_finite(e, xn, rows, engine_site_mlp(layer));
    }
}

void engine_stage_forward(engine *e, float *x, int mb, int step, int n_new, int pos0) {
    const model *m = e->m;
    const shard_geom *g = &m->geom;
    const backend_ops *ops = e->be->ops;
    void *ctx = e->be->ctx;
    const int C = m->cfg.embd, nb = e->split.size[mb];
    const int rows = nb * n_new;

    if (g->first_stage) capture_point(e, ACT_EMBED, -1, x, mb, C);
    if (g->first_stage) check_finite(e, x, rows, ENGINE_SITE_EMBED);
    if (arch_is_llama(m->cfg.arch))
        llama_layers(e, x, mb, step, n_new, pos0);
    else
        gpt2_layers(e, x, mb, step, n_new, pos0);

    if (!g->last_stage) return;

    /* Activation capture needs the final norm and logits at every prompt position; sampling
     * needs only each sequence's last one. */
    int want_final = 0, want_logits = 0;
    for (int p = 0; e->capture && p < e->n_points; p++) {
        want_final |= e->points[p].kind == ACT_FINAL && e->points[p].held;
        want_logits |= e->points[p].kind == ACT_LOGITS && e->points[p].held;
    }
    if (step == 0 && (want_final || want_logits)) {
        final_norm(e, e->head_in, x, rows);
        capture_point(e, ACT_FINAL, -1, e->head_in, mb, C);
        if (want_logits) {
            ops->matmul(ctx, e->logits, e->head_in, head_view(m), NULL, rows, C, g->vocab_local);
            capture_point(e, ACT_LOGITS, -1, e->logits, mb, g->vocab_local);
        }
    }

    TIMER_SCOPE(e->tm, PHASE_HEAD, step, mb, TIMER_NO_LAYER) {
        final_norm_rows(e, e->head_in, x, nb, n_new);
        ops->matmul(ctx, e->logits, e->head_in, head_view(m), NULL, nb, C, g->vocab_local);
    }
}
