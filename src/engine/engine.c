/* The engine's set-up: the replica's share of the batch and its micro-batch split, the
 * activation points to capture, and one arena for every activation buffer and the KV cache,
 * carved from one size table. Nothing here runs after engine_init returns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "engine/engine.h"
#include "engine/sample.h"

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

void engine_config_use_mesh(engine_config *cfg, mesh *m) {
    cfg->mesh = m;
    cfg->tp = &m->axis[AXIS_TP];
    cfg->pp = &m->axis[AXIS_PP];
    cfg->pp_host = m->pp_host.ops ? &m->pp_host : &m->axis[AXIS_PP];
    cfg->world = &m->world_host;
    cfg->ep = m->ep.ops && m->ep.size > 1 ? &m->ep : NULL;
}

void microbatch_split_init(microbatch_split *s, int sequences, int microbatches) {
    s->n_micro = microbatches < sequences ? microbatches : sequences;
    CHECK(s->n_micro <= ENGINE_MAX_MICRO, "at most %d micro-batches", ENGINE_MAX_MICRO);
    s->max_size = 0;
    for (int i = 0; i < s->n_micro; i++) {
        s->begin[i] = split_begin(sequences, s->n_micro, i);
        s->size[i] = split_count(sequences, s->n_micro, i);
        if (s->size[i] > s->max_size) s->max_size = s->size[i];
    }
}

/* Balanced splits put the remainder on the last parts, so the last replica is the largest. */
int replica_sequences_max(int batch, int dp) { return split_count(batch, dp, dp - 1); }

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

/* Whether this rank holds a point of this kind and layer: the residual stream is replicated
 * across TP, so TP rank 0 writes it; logits are split by vocabulary, so every TP rank writes
 * its columns. */
static int point_held(const shard_geom *g, int kind, int layer) {
    int on_stage = kind == ACT_EMBED ? g->first_stage
                   : (kind == ACT_FINAL || kind == ACT_LOGITS)
                       ? g->last_stage
                       : (layer >= g->layer_begin && layer < g->layer_end);
    return on_stage && (kind == ACT_LOGITS || g->tp_rank == 0);
}

static int captures_all(const engine_config *cfg) {
    for (int i = 0; i < cfg->n_activations; i++)
        if (!strcmp(cfg->activations[i], "all")) return 1;
    return 0;
}

/* Activation capture at the final norm or the logits needs the head over every prompt
 * position, not only each sequence's last one. */
static int wants_full_head(const engine_config *cfg, const shard_geom *g) {
    if (captures_all(cfg)) return point_held(g, ACT_FINAL, -1) || point_held(g, ACT_LOGITS, -1);
    for (int i = 0; i < cfg->n_activations; i++) {
        int kind, layer;
        if (point_parse(cfg->activations[i], &kind, &layer) == 0 &&
            (kind == ACT_FINAL || kind == ACT_LOGITS) && point_held(g, kind, layer))
            return 1;
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
    pt->held = point_held(g, kind, layer);
    long dims[3] = {e->cfg.batch, e->prompt_len, width};
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
    const engine_config *cfg = &e->cfg;
    const int all = captures_all(cfg);
    int max_points = all ? 3 + 2 * e->m->cfg.layers : cfg->n_activations;
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
    for (int i = 0; i < cfg->n_activations; i++) {
        int kind, layer;
        CHECK(point_parse(cfg->activations[i], &kind, &layer) == 0, "bad activation name '%s'",
              cfg->activations[i]);
        add_point(e, cfg->activations[i], kind, layer);
    }
}

/* The shapes the arena is sized from, for one rank. */
typedef struct {
    int batch_local, n_micro, mb_max, prompt_len, kv_capacity, blocks_per_seq, head_rows_max;
    size_t C, A, KVA, M, V, rope; /* KVA: the rank's kv heads * hd; rope: the RoPE table */
    size_t moe_rl, moe_entries;   /* router rows, and routed entries per token row (K + 1) */
    size_t ep_rows; /* EP across replicas: the most rows dispatched or served (arena_shape_ep) */
    size_t ep_served;
    int llama;
    size_t kv_layer_bytes; /* one layer's keys (or values) for the replica's sequences */
    int n_layers;
} arena_shape;

/* Expert parallelism across replicas (g->ep > tp): the most rows a rank dispatches (each of
 * its rows routed to K experts, all of them its peers') or serves (every row of the group's
 * largest micro-batch sending it min(K, its experts) rows, from each of ep / tp replicas); the
 * dispatch and combine buffers each hold one and then the other (moe_ep.c). */
static void arena_shape_ep(arena_shape *s, const engine_config *cfg, const shard_geom *g,
                           const model_config *mc, int dp) {
    if (mc->experts <= 0 || g->ep <= g->tp || g->n_layers <= 0) return;
    microbatch_split widest;
    microbatch_split_init(&widest, replica_sequences_max(cfg->batch, dp), cfg->microbatches);
    const size_t K = (size_t)mc->experts_top_k, El = (size_t)g->experts_local;
    const size_t rows_max = (size_t)widest.max_size * cfg->prompt_len;
    const size_t sent = (size_t)s->mb_max * s->prompt_len * K;
    s->ep_served = (size_t)(g->ep / g->tp) * rows_max * (K < El ? K : El);
    s->ep_rows = sent > s->ep_served ? sent : s->ep_served;
}

static void arena_shape_init(arena_shape *s, const engine_config *cfg, const shard_geom *g,
                             const model_config *mc, int batch_local, int dp) {
    memset(s, 0, sizeof *s);
    microbatch_split split;
    microbatch_split_init(&split, batch_local, cfg->microbatches);
    s->batch_local = batch_local;
    s->n_micro = split.n_micro;
    s->mb_max = split.max_size;
    s->prompt_len = cfg->prompt_len;
    s->kv_capacity = cfg->prompt_len + cfg->new_tokens;
    s->C = (size_t)mc->embd;
    s->A = (size_t)g->attn_dim;
    s->KVA = (size_t)g->n_kv_heads * g->head_dim;
    s->llama = arch_is_llama(mc->arch);
    s->rope = s->llama ? (size_t)g->head_dim / 2 : 0;
    /* f and act serve the dense MLP, each routed expert and the shared expert in turn */
    s->M = (size_t)(g->shared_local > g->mlp_local ? g->shared_local : g->mlp_local);
    if (mc->experts > 0 && g->n_layers > 0) {
        s->moe_rl = (size_t)mc->experts + (mc->shared_mlp > 0);
        s->moe_entries = (size_t)mc->experts_top_k + (mc->shared_mlp > 0);
    }
    arena_shape_ep(s, cfg, g, mc, dp);
    s->V = (size_t)g->vocab_local;
    s->n_layers = g->n_layers;
    const size_t R = (size_t)s->mb_max * s->prompt_len;
    s->head_rows_max = wants_full_head(cfg, g) ? (int)R : s->mb_max;
    /* perplexity scores one sequence's rows at a time, after the sampler's mb_max rows, which
     * it leaves as they are (nll.c) */
    if (cfg->nll_first > 0 && g->last_stage) {
        const int scored = s->mb_max + cfg->prompt_len - 1 - cfg->nll_first;
        if (scored > s->head_rows_max) s->head_rows_max = scored;
    }
    /* the cache holds kv heads only (GQA), each position's row in the cache's dtype */
    const size_t kv_width = (size_t)g->n_kv_heads * kv_row_bytes(cfg->kv_dtype, g->head_dim);
    if (cfg->kv_cache == KV_PAGED) {
        s->blocks_per_seq = (s->kv_capacity + cfg->kv_block - 1) / cfg->kv_block;
        s->kv_layer_bytes = (size_t)batch_local * s->blocks_per_seq * cfg->kv_block * kv_width;
    } else {
        s->kv_layer_bytes = (size_t)batch_local * s->kv_capacity * kv_width;
    }
}

/* One row of the arena's size table: a buffer's bytes and, when carving, where its pointer
 * goes. kv marks the KV cache rows, which --dry-run reports apart. */
typedef struct {
    void **slot;
    size_t bytes;
    int kv;
} arena_row;

enum { ARENA_MAX_ROWS = 2 * ENGINE_MAX_MICRO + 28 };

/* The size table. With e NULL the slots are NULL (planning only). Returns the row count. */
static int arena_table(const arena_shape *s, engine *e, int paged, arena_row rows[]) {
    const size_t R = (size_t)s->mb_max * s->prompt_len, F = sizeof(float), I = sizeof(int32_t);
    const size_t head = (size_t)s->head_rows_max, kv = (size_t)s->n_layers * s->kv_layer_bytes;
#define ROW(field, nbytes, is_kv) rows[n++] = (arena_row){e ? (void **)&e->field : NULL, (nbytes), (is_kv)}
    int n = 0;
    for (int i = 0; i < s->n_micro; i++) {
        ROW(stage_buf[i][0], R * s->C * F, 0);
        ROW(stage_buf[i][1], R * s->C * F, 0);
    }
    ROW(h, R * s->C * F, 0);
    ROW(qkv, R * (s->A + 2 * s->KVA) * F, 0);
    ROW(att, R * s->A * F, 0);
    ROW(o, R * s->C * F, 0);
    ROW(f, R * (s->llama ? 2 : 1) * s->M * F, 0);
    ROW(act, s->llama ? R * s->M * F : 0, 0);
    ROW(moe_logits, R * s->moe_rl * F, 0);
    ROW(moe_idx, R * s->moe_entries * I, 0);
    ROW(moe_wts, R * s->moe_entries * F, 0);
    ROW(moe_in, s->moe_rl ? R * s->C * F : 0, 0);
    ROW(moe_out, s->moe_rl ? R * s->C * F : 0, 0);
    ROW(ep_send, s->ep_rows * s->C * F, 0);
    ROW(ep_recv, s->ep_rows * s->C * F, 0);
    ROW(ep_perm, s->ep_served * I, 0);
    ROW(ep_ones, s->ep_served ? R * F : 0, 0);
    ROW(rope_inv_freq, s->rope * F, 0);
    ROW(head_in, head * s->C * F, 0);
    ROW(logits, head * s->V * F, 0);
    ROW(max_val, (size_t)s->mb_max * F, 0);
    ROW(max_idx, (size_t)s->mb_max * I, 0);
    ROW(tok_dev, R * I, 0);
    ROW(next_tok, (size_t)s->batch_local * I, 0);
    ROW(kv_k, kv, 1);
    ROW(kv_v, kv, 1);
    if (paged) ROW(block_table, (size_t)s->batch_local * s->blocks_per_seq * I, 1);
#undef ROW
    return n;
}

void engine_arena_plan(const engine_config *cfg, const shard_geom *g, const model_config *mc,
                       int dp, int dp_rank, size_t *activation_bytes, size_t *kv_bytes) {
    arena_shape s;
    arena_shape_init(&s, cfg, g, mc, split_count(cfg->batch, dp, dp_rank), dp);
    arena_row rows[ARENA_MAX_ROWS];
    int n = arena_table(&s, NULL, cfg->kv_cache == KV_PAGED, rows);
    *activation_bytes = *kv_bytes = 0;
    for (int i = 0; i < n; i++)
        *(rows[i].kv ? kv_bytes : activation_bytes) += align64(rows[i].bytes);
}

/* Interleaves the sequences' blocks, as a block allocator serving a running batch would, so
 * one sequence's keys are never contiguous beyond a block. */
static void block_table_fill(engine *e) {
    size_t entries = (size_t)e->batch_local * e->blocks_per_seq;
    int32_t *table = xmalloc(entries * sizeof(int32_t));
    for (int s = 0; s < e->batch_local; s++)
        for (int b = 0; b < e->blocks_per_seq; b++)
            table[(size_t)s * e->blocks_per_seq + b] = b * e->batch_local + s;
    e->be->ops->copy_to_device(e->be->ctx, e->block_table, table, entries * sizeof(int32_t));
    free(table);
}

/* Llama's RoPE table, once: the attention op rotates q and k with it at every step. */
static void rope_table_fill(engine *e, size_t n) {
    const model_config *mc = &e->m->cfg;
    float *table = xmalloc(n * sizeof(float));
    rope_inv_freq_fill(table, e->m->geom.head_dim, mc->rope_theta,
                       mc->rope_scaled ? &mc->rope_scaling : NULL);
    e->be->ops->copy_to_device(e->be->ctx, e->rope_inv_freq, table, n * sizeof(float));
    free(table);
}

static void arena_init(engine *e) {
    arena_shape s;
    arena_shape_init(&s, &e->cfg, &e->m->geom, &e->m->cfg, e->batch_local, MESH_DP(e->cfg.mesh));
    e->mb_max = s.mb_max;
    e->kv_capacity = s.kv_capacity;
    e->blocks_per_seq = s.blocks_per_seq;
    e->head_rows_max = s.head_rows_max;
    e->kv_layer_bytes = s.kv_layer_bytes;
    arena_row rows[ARENA_MAX_ROWS];
    int n = arena_table(&s, e, e->cfg.kv_cache == KV_PAGED, rows);
    e->arena_bytes = 0;
    for (int i = 0; i < n; i++)
        e->arena_bytes += align64(rows[i].bytes);
    e->arena = e->be->ops->alloc(e->be->ctx, e->arena_bytes);
    char *p = e->arena;
    for (int i = 0; i < n; i++) {
        *rows[i].slot = p;
        p += align64(rows[i].bytes);
    }
    if (e->cfg.kv_cache == KV_PAGED) block_table_fill(e);
    e->ep_served = s.ep_served;
    if (s.ep_served) { /* the weights of the experts' outputs put back in place: 1 exactly */
        const size_t R = (size_t)s.mb_max * s.prompt_len;
        float *ones = xmalloc(R * sizeof(float));
        for (size_t i = 0; i < R; i++) ones[i] = 1.0f;
        e->be->ops->copy_to_device(e->be->ctx, e->ep_ones, ones, R * sizeof(float));
        free(ones);
    }
    if (s.rope) rope_table_fill(e, s.rope);
    else e->rope_inv_freq = NULL, e->act = NULL;
}

/* Host buffers of the sampler and the pipeline's token messages. */
static void host_buffers_init(engine *e) {
    const shard_geom *g = &e->m->geom;
    const int V = e->m->cfg.vocab, VL = g->vocab_local;
    const size_t R = (size_t)e->mb_max * e->prompt_len;
    e->tokens = xcalloc((size_t)e->batch_local * e->total_len, sizeof(int32_t));
    for (int s = 0; s < e->batch_local; s++)
        memcpy(e->tokens + (size_t)s * e->total_len,
               e->cfg.prompts + (size_t)(e->seq_global_begin + s) * e->prompt_len,
               (size_t)e->prompt_len * sizeof(int32_t));
    e->tok_host = xmalloc(R * sizeof(int32_t));
    e->logits_host = xmalloc((size_t)e->mb_max * V * sizeof(float));
    e->sample_scratch = xmalloc((size_t)V * sizeof(float));
    e->logits_shard_host = xmalloc((size_t)e->mb_max * VL * sizeof(float) + sizeof(float));
    e->maxloc_host = xmalloc((size_t)e->mb_max * sizeof *e->maxloc_host);
    e->row_finite = xmalloc((size_t)e->mb_max);
    e->check_host = xmalloc((size_t)e->mb_max * e->m->cfg.embd * sizeof(float));
    moe_routing_init(&e->moe_host, &e->m->cfg, e->m->geom.n_layers > 0 ? (int)R : 0,
                     e->new_tokens > 0 ? e->new_tokens : 1, e->m->geom.n_layers);
    e->generated = xcalloc((size_t)e->batch_local, sizeof(int32_t));
    e->token_time = xcalloc((size_t)(e->new_tokens > 0 ? e->new_tokens : 1), sizeof(double));
    e->finished = xcalloc((size_t)(e->batch_local > 0 ? e->batch_local : 1), 1);
    e->vocab_counts = xmalloc((size_t)g->tp * sizeof(int));
    e->vocab_displs = xmalloc((size_t)g->tp * sizeof(int));
    for (int r = 0; r < g->tp; r++) {
        e->vocab_counts[r] = split_count(V, g->tp, r);
        e->vocab_displs[r] = split_begin(V, g->tp, r);
    }
    if (e->ep) { /* the EP all-to-alls' counts (moe_ep.c) */
        const size_t P = (size_t)e->ep->size;
        e->ep_counts = xcalloc(6 * P, sizeof(size_t));
        e->ep_experts = xcalloc(2 * P * (size_t)g->experts_local, sizeof(int32_t));
        e->ep_perm_host = xcalloc(e->ep_served + 1, sizeof(int32_t));
    }
    for (int i = 0; i < e->split.n_micro; i++) {
        e->tok_send[i] = xmalloc((size_t)e->mb_max * sizeof(int32_t));
        e->tok_recv[i] = xmalloc((size_t)e->mb_max * sizeof(int32_t));
    }
}

/* The micro-batches of replica dp_rank when global_active prompts are split over the dp
 * replicas: at most cfg.microbatches, at most its sequences. */
static int replica_micro(const engine *e, int global_active, int dp_rank) {
    const int dp = MESH_DP(e->cfg.mesh);
    const int local = split_count(global_active, dp, dp_rank);
    const int most = split_count(e->cfg.batch, dp, dp_rank);
    const int seqs = local < most ? local : most;
    return e->cfg.microbatches < seqs ? e->cfg.microbatches : seqs;
}

void engine_set_active(engine *e, int global_active) {
    const mesh *mesh = e->cfg.mesh;
    CHECK(global_active >= 0 && global_active <= e->cfg.batch, "active sequences %d out of [0, %d]",
          global_active, e->cfg.batch);
    int local = split_count(global_active, MESH_DP(mesh), mesh->coord[AXIS_DP]);
    microbatch_split_init(&e->split, local < e->batch_local ? local : e->batch_local,
                          e->cfg.microbatches);
    /* the EP group is ep_replicas adjacent dp coordinates (mesh_ep_split): the widest sets the
     * all-to-alls every one of them takes part in */
    e->ep_micro = e->split.n_micro;
    if (!e->ep) return;
    const int first = mesh->coord[AXIS_DP] / e->ep->size * e->ep->size;
    for (int i = first; i < first + e->ep->size; i++) {
        const int n = replica_micro(e, global_active, i);
        if (n > e->ep_micro) e->ep_micro = n;
    }
}

void engine_init(engine *e, const engine_config *cfg) {
    memset(e, 0, sizeof *e);
    e->cfg = *cfg;
    e->m = cfg->model;
    e->be = cfg->be;
    e->tm = cfg->tm;
    e->tp = cfg->tp;
    e->pp = cfg->pp;
    e->pp_host = cfg->pp_host ? cfg->pp_host : cfg->pp;
    e->world = cfg->world;
    /* an EP group across replicas: only when this rank's experts are one block of it */
    e->ep = cfg->ep && cfg->ep->size > 1 && e->m->cfg.experts > 0 && e->m->geom.ep > e->m->geom.tp
                ? cfg->ep
                : NULL;
    CHECK(!cfg->ep || cfg->ep->size <= 1 || e->ep, "an EP group of %d without ep > tp experts",
          cfg->ep ? cfg->ep->size : 0);
    const int dp = MESH_DP(cfg->mesh), dp_rank = cfg->mesh->coord[AXIS_DP];

    e->seq_global_begin = split_begin(cfg->batch, dp, dp_rank);
    e->batch_local = split_count(cfg->batch, dp, dp_rank);
    CHECK(e->batch_local >= 1, "replica %d has no prompts", dp_rank);
    e->prompt_len = cfg->prompt_len;
    e->new_tokens = cfg->new_tokens;
    e->total_len = cfg->prompt_len + cfg->new_tokens;
    e->chunks = cfg->chunks < ENGINE_MAX_CHUNKS ? cfg->chunks : ENGINE_MAX_CHUNKS;
    /* Below SAMPLE_GREEDY_TEMPERATURE softmax sampling is the argmax up to near-ties (and a
     * tiny temperature rounds to 0 in float): such a run takes the greedy path itself, so its
     * tokens are exactly greedy's (docs/jobs.md). */
    if (e->cfg.sampling == SAMPLING_SAMPLE && sample_is_greedy(e->cfg.temperature))
        e->cfg.sampling = SAMPLING_GREEDY;
    e->nonfinite_step = -1;
    engine_set_active(e, cfg->batch);
    points_init(e);
    arena_init(e);
    host_buffers_init(e);
    engine_nll_init(e);
}

void engine_free(engine *e) {
    engine_graphs_free(e);
    engine_nll_free(e);
    if (e->arena) e->be->ops->release(e->be->ctx, e->arena);
    for (int p = 0; p < e->n_points; p++)
        free(e->points[p].host);
    free(e->points);
    free(e->tokens);
    free(e->tok_host);
    free(e->logits_host);
    free(e->logits_shard_host);
    free(e->sample_scratch);
    free(e->maxloc_host);
    free(e->row_finite);
    free(e->check_host);
    moe_routing_free(&e->moe_host);
    free(e->ep_counts);
    free(e->ep_experts);
    free(e->ep_perm_host);
    free(e->generated);
    free(e->token_time);
    free(e->finished);
    free(e->vocab_counts);
    free(e->vocab_displs);
    for (int i = 0; i < ENGINE_MAX_MICRO; i++) {
        free(e->tok_send[i]);
        free(e->tok_recv[i]);
    }
    memset(e, 0, sizeof *e);
}

void engine_site_describe(const engine *e, int site, char *buf, size_t len) {
    const int layers = e->m->cfg.layers;
    if (site == ENGINE_SITE_EMBED)
        snprintf(buf, len, "the embedding");
    else if (site > 0 && site <= 2 * layers)
        snprintf(buf, len, "layer %d (%s)", (site - 1) / 2, site % 2 ? "attention" : "mlp");
    else
        snprintf(buf, len, "the final norm or LM head");
}
