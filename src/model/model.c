/* The model's shard geometry, its size table, the one weight allocation, and the path by
 * which host fp32 values (synthetic or from a checkpoint) become stored weights. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/intmath.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "parallel/agree.h"

int8_layout model_int8_layout(const model_config *cfg, matrix_input input) {
    const int group = cfg->int8_group, hd = model_head_dim(cfg), unit = cfg->mlp_unit;
    switch (input) {
    case MATRIX_INPUT_HEADS: { /* heads never split: groups and blocks stay inside one */
        const int g = group ? int_gcd(group, hd) : 0;
        const int block_fits = hd % 32 == 0 && g % 32 == 0; /* g 0 (per row) counts */
        return (int8_layout){.group = g, .act_block = block_fits ? 32 : 0};
    }
    case MATRIX_INPUT_MLP:
        if (unit % 32 != 0) return (int8_layout){.group = 0, .act_block = 0};
        return (int8_layout){.group = group ? int_gcd(group, unit) : 0, .act_block = 32};
    case MATRIX_INPUT_WHOLE:
    case MATRIX_INPUT_KINDS: break;
    }
    return (int8_layout){.group = group, .act_block = 32};
}

void model_config_set_precision(model_config *cfg, precision_kind p, int int8_group,
                                int quantize_head) {
    cfg->int8_group = p == PRECISION_INT8W ? int8_group : 0;
    /* auto: an untied head takes the weight precision, a tied one (wte, also the embedding)
     * stays fp32 unless asked; in fp32 there is nothing to quantise */
    cfg->quantize_head =
        p != PRECISION_FP32 && (quantize_head >= 0 ? quantize_head : !cfg->tie_embeddings);
    cfg->mlp_unit = mlp_split_unit(cfg->mlp, cfg->shared_mlp, p, cfg->int8_group);
}

void model_config_from_job(model_config *cfg, const job *j) {
    cfg->layers = j->layers;
    cfg->heads = j->heads;
    cfg->embd = j->embd;
    cfg->vocab = j->vocab;
    cfg->ctx = j->ctx;
    cfg->mlp = j->mlp > 0 ? j->mlp : 4 * j->embd;
    cfg->ln_eps = j->ln_eps;
    cfg->norm = j->norm;
    cfg->arch = j->arch;
    cfg->kv_heads = j->kv_heads > 0 ? j->kv_heads : j->heads;
    cfg->head_dim = arch_is_llama(j->arch) && j->head_dim > 0 ? j->head_dim : 0;
    cfg->tie_embeddings = j->arch == ARCH_GPT2 || j->tie_embeddings;
    cfg->rope_theta = j->rope_theta;
    const int moe = arch_is_moe(j->arch);
    cfg->experts = moe ? j->experts : 0;
    cfg->experts_top_k = moe ? j->experts_top_k : 0;
    cfg->shared_mlp = moe ? j->shared_expert_mlp : 0;
    cfg->norm_topk_prob = moe && j->norm_topk_prob;
    cfg->attention_bias = arch_is_llama(j->arch) && j->attention_bias; /* from a checkpoint */
    cfg->rope_scaled = arch_is_llama(j->arch) && j->rope_scaling;
    model_config_set_precision(cfg, j->precision, j->int8_group, j->quantize_head);
    cfg->rope_scaling = (rope_llama3){.factor = j->rope_factor,
                                      .low_freq_factor = j->rope_low_freq_factor,
                                      .high_freq_factor = j->rope_high_freq_factor,
                                      .original_max_position_embeddings = j->rope_original_ctx};
}

void shard_geom_init(shard_geom *g, const model_config *cfg, int tp, int tp_rank, int pp,
                     int pp_rank) {
    memset(g, 0, sizeof *g);
    g->tp = tp;
    g->tp_rank = tp_rank;
    g->pp = pp;
    g->pp_rank = pp_rank;
    g->layer_begin = split_begin(cfg->layers, pp, pp_rank);
    g->n_layers = split_count(cfg->layers, pp, pp_rank);
    g->layer_end = g->layer_begin + g->n_layers;
    g->head_dim = model_head_dim(cfg);
    g->head_begin = split_begin(cfg->heads, tp, tp_rank);
    g->n_heads = split_count(cfg->heads, tp, tp_rank);
    g->attn_dim = g->n_heads * g->head_dim;
    /* GQA: with kv_heads % tp == 0 each rank holds kv_heads / tp kv heads; with tp % kv_heads
     * == 0 one, replicated on tp / kv_heads ranks: the kv head of its query heads. */
    const int kv = cfg->kv_heads > 0 ? cfg->kv_heads : cfg->heads, group = cfg->heads / kv;
    g->kv_head_begin = g->head_begin / group;
    g->n_kv_heads = g->n_heads / group > 0 ? g->n_heads / group : 1;
    const int unit = cfg->mlp_unit > 0 && cfg->mlp % cfg->mlp_unit == 0 ? cfg->mlp_unit : 1;
    g->mlp_begin = unit * split_begin(cfg->mlp / unit, tp, tp_rank);
    g->mlp_local = unit * split_count(cfg->mlp / unit, tp, tp_rank);
    if (cfg->shared_mlp > 0) { /* the same units as mlp (model_config_set_precision) */
        const int su = cfg->shared_mlp % unit == 0 ? unit : 1;
        g->shared_begin = su * split_begin(cfg->shared_mlp / su, tp, tp_rank);
        g->shared_local = su * split_count(cfg->shared_mlp / su, tp, tp_rank);
    }
    g->ep = 1, g->expert_begin = 0, g->experts_local = cfg->experts;
    g->vocab_begin = split_begin(cfg->vocab, tp, tp_rank);
    g->vocab_local = split_count(cfg->vocab, tp, tp_rank);
    g->first_stage = pp_rank == 0;
    g->last_stage = pp_rank == pp - 1;
}

void shard_geom_set_ep(shard_geom *g, const model_config *cfg, int ep, int replica) {
    if (ep <= 1) return; /* no blocks: shard_geom_init's split, every expert held */
    if (ep > g->tp) { /* across replicas: whole experts, block (replica, tp_rank) */
        const int replicas = ep / g->tp;
        CHECK(cfg->experts > 0 && ep % g->tp == 0 && cfg->experts % ep == 0 && replica >= 0 &&
                  replica < replicas,
              "ep %d must be a multiple of tp %d dividing the %d experts (replica %d)", ep, g->tp,
              cfg->experts, replica);
        g->ep = ep;
        g->experts_local = cfg->experts / ep;
        g->expert_begin = (replica * g->tp + g->tp_rank) * g->experts_local;
        g->mlp_begin = 0, g->mlp_local = cfg->mlp;
        return;
    }
    CHECK(cfg->experts > 0 && g->tp % ep == 0 && cfg->experts % ep == 0,
          "ep %d must divide tp %d and the %d experts", ep, g->tp, cfg->experts);
    const int etp = g->tp / ep, block = g->tp_rank / etp, etp_rank = g->tp_rank % etp;
    g->ep = ep;
    g->experts_local = cfg->experts / ep;
    g->expert_begin = block * g->experts_local;
    /* the expert columns over the block's tp / ep ranks, in the units shard_geom_init used */
    const int unit = cfg->mlp_unit > 0 && cfg->mlp % cfg->mlp_unit == 0 ? cfg->mlp_unit : 1;
    g->mlp_begin = unit * split_begin(cfg->mlp / unit, etp, etp_rank);
    g->mlp_local = unit * split_count(cfg->mlp / unit, etp, etp_rank);
}

/* This rank's heads inside each of the q, k and v row groups of a fused QKV tensor. */
static dim_slice slice_qkv(const model_config *cfg, const shard_geom *g) {
    dim_slice s = {.nblocks = 3};
    for (int k = 0; k < 3; k++) {
        s.start[k] = (long)k * cfg->embd + (long)g->head_begin * g->head_dim;
        s.count[k] = g->attn_dim;
    }
    return s;
}

void model_tensor_table(model *m, const model_config *cfg, const shard_geom *g, dtype wtype) {
    m->cfg = *cfg;
    m->geom = *g;
    m->weight_dtype = wtype;
    m->n_tensors = 0;
    m->nonfinite_key = MODEL_FINITE;
    memset(&m->w, 0, sizeof m->w);
    for (int k = 0; k < MATRIX_INPUT_KINDS; k++)
        m->int8[k] =
            wtype == DTYPE_INT8 ? model_int8_layout(cfg, (matrix_input)k) : (int8_layout){0, 0};
    if (arch_is_llama(cfg->arch)) {
        model_tensor_table_llama(m, cfg, g);
        return;
    }
    weights *w = &m->w;
    const long L = cfg->layers, C = cfg->embd, M = cfg->mlp, V = cfg->vocab;
    const dim_slice layers = slice_one(g->layer_begin, g->n_layers);
    const dim_slice qkv = slice_qkv(cfg, g);
    const dim_slice heads_cols = slice_one((long)g->head_begin * g->head_dim, g->attn_dim);
    const dim_slice mlp = slice_one(g->mlp_begin, g->mlp_local);
    const int has_layers = g->n_layers > 0;
    /* Fan-in scaled init (not GPT-2's flat 0.02) keeps activations at unit scale for any
     * width. With a tied head, a random model whose residual stream is dominated by the token
     * embedding just repeats its input token, so the residual branches are amplified (x4) and
     * the embedding kept small: the layers, not the embedding, pick the next token, and small
     * random models generate varied sequences (docs/design.md). */
    const float in_std = 1.0f / sqrtf((float)C);
    const float branch_gain = 4.0f;
    const float out_attn_std = branch_gain / sqrtf((float)C);
    const float out_mlp_std = branch_gain / sqrtf((float)M);
    const float emb_std = 0.3f;

    const int first = g->first_stage, last = g->last_stage;
    const dim_slice all_C = slice_full(C), vocab = slice_one(g->vocab_begin, g->vocab_local);
    /* The size table: one row per tensor, global shape and this rank's slice of each dim. */
    // clang-format off
    const table_row rows[] = {
        /* name     slot                 int8 scales  init              std           present         dims shape          slice */
        {"wte",    (void **)&w->wte,    NULL,        INIT_NORMAL,      emb_std,      first || last,  2, {V, C},          {vocab, all_C}},
        {"wpe",    (void **)&w->wpe,    NULL,        INIT_NORMAL,      0.1f,         first,          2, {cfg->ctx, C},   {slice_full(cfg->ctx), all_C}},
        {"ln1_g",  (void **)&w->ln1_g,  NULL,        INIT_ONES_NOISE,  0.05f,        has_layers,     2, {L, C},          {layers, all_C}},
        {"ln1_b",  (void **)&w->ln1_b,  NULL,        INIT_ZEROS_NOISE, 0.05f,        has_layers,     2, {L, C},          {layers, all_C}},
        {"qkv_w",  &w->qkv_w,           &w->qkv_s,   INIT_NORMAL,      in_std,       has_layers,     3, {L, 3 * C, C},   {layers, qkv, all_C}},
        {"qkv_b",  (void **)&w->qkv_b,  NULL,        INIT_ZEROS_NOISE, 0.05f,        has_layers,     2, {L, 3 * C},      {layers, qkv}},
        {"proj_w", &w->proj_w,          &w->proj_s,  INIT_NORMAL,      out_attn_std, has_layers,     3, {L, C, C},       {layers, all_C, heads_cols}},
        {"proj_b", (void **)&w->proj_b, NULL,        INIT_ZEROS_NOISE, 0.05f,        has_layers,     2, {L, C},          {layers, all_C}},
        {"ln2_g",  (void **)&w->ln2_g,  NULL,        INIT_ONES_NOISE,  0.05f,        has_layers,     2, {L, C},          {layers, all_C}},
        {"ln2_b",  (void **)&w->ln2_b,  NULL,        INIT_ZEROS_NOISE, 0.05f,        has_layers,     2, {L, C},          {layers, all_C}},
        {"fc1_w",  &w->fc1_w,           &w->fc1_s,   INIT_NORMAL,      in_std,       has_layers,     3, {L, M, C},       {layers, mlp, all_C}},
        {"fc1_b",  (void **)&w->fc1_b,  NULL,        INIT_ZEROS_NOISE, 0.05f,        has_layers,     2, {L, M},          {layers, mlp}},
        {"fc2_w",  &w->fc2_w,           &w->fc2_s,   INIT_NORMAL,      out_mlp_std,  has_layers,     3, {L, C, M},       {layers, all_C, mlp}},
        {"fc2_b",  (void **)&w->fc2_b,  NULL,        INIT_ZEROS_NOISE, 0.05f,        has_layers,     2, {L, C},          {layers, all_C}},
        {"lnf_g",  (void **)&w->lnf_g,  NULL,        INIT_ONES_NOISE,  0.05f,        last,           1, {C},             {all_C}},
        {"lnf_b",  (void **)&w->lnf_b,  NULL,        INIT_ZEROS_NOISE, 0.05f,        last,           1, {C},             {all_C}},
    };
    // clang-format on
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        model_add_row(m, rows[i]);
    if (cfg->quantize_head) model_add_head_copy(m, g, emb_std);
}

static long slice_elems(const dim_slice *s) {
    long n = 0;
    for (int b = 0; b < s->nblocks; b++)
        n += s->count[b];
    return n * (s->repeat > 1 ? s->repeat : 1);
}

long tensor_local_elems(const tensor_desc *t) {
    long n = 1;
    for (int d = 0; d < t->ndims; d++)
        n *= slice_elems(&t->local[d]);
    return n;
}

long tensor_global_elems(const tensor_desc *t) {
    long n = 1;
    for (int d = 0; d < t->ndims; d++)
        n *= t->global_shape[d];
    return n;
}

/* Local coordinate -> global coordinate within one dimension's union of blocks. */
static long slice_to_global(const dim_slice *s, long local) {
    for (int b = 0, n = slice_blocks(s); b < n; b++) {
        long start, count;
        slice_block(s, b, &start, &count);
        if (local < count) return start + local;
        local -= count;
    }
    return -1;
}

long tensor_global_index(const tensor_desc *t, long local_index) {
    long coord[TENSOR_MAX_DIMS];
    for (int d = t->ndims - 1; d >= 0; d--) {
        long n = slice_elems(&t->local[d]);
        coord[d] = local_index % n;
        local_index /= n;
    }
    long global = 0;
    for (int d = 0; d < t->ndims; d++)
        global = global * t->global_shape[d] + slice_to_global(&t->local[d], coord[d]);
    return global;
}

void tensor_part_init(tensor_part *p, const model *m, const tensor_desc *t, long first,
                      long count) {
    const long n0 = slice_elems(&t->local[0]);
    CHECK(first >= 0 && count >= 0 && first + count <= n0, "tensor %s: part [%ld, %ld) of %ld",
          t->name, first, first + count, n0);
    p->d = *t;
    /* the pieces of dim 0's blocks that local entries [first, first + count) cover; a part
     * of experts spans at most two layers' runs (the reader's parts are no longer than one) */
    dim_slice *part = &p->d.local[0];
    *part = (dim_slice){.nblocks = 0};
    long at = 0;
    for (int b = 0, n = slice_blocks(&t->local[0]); b < n && at < first + count; b++) {
        long start, len;
        slice_block(&t->local[0], b, &start, &len);
        const long lo = first > at ? first - at : 0,
                   hi = first + count - at < len ? first + count - at : len;
        if (hi > lo) {
            CHECK(part->nblocks < TENSOR_MAX_BLOCKS,
                  "tensor %s: part [%ld, %ld) in too many blocks", t->name, first, first + count);
            part->start[part->nblocks] = start + lo;
            part->count[part->nblocks++] = hi - lo;
        }
        at += len;
    }
    if (part->nblocks == 0) *part = slice_one(t->local[0].start[0], 0);
    /* dim 0 is outermost, so a run of its entries is one contiguous run of values and, for an
     * int8 matrix, of scales (rows, then groups) */
    const long inner = n0 ? tensor_local_elems(t) / n0 : 0;
    const size_t offset = t->is_matrix ? dtype_bytes(m->weight_dtype, (size_t)(first * inner))
                                       : (size_t)(first * inner) * sizeof(float);
    p->slot = *t->slot ? (char *)*t->slot + offset : NULL;
    p->scale = NULL;
    if (t->is_matrix && m->weight_dtype == DTYPE_INT8 && *t->scale_slot)
        p->scale = *t->scale_slot + first * (tensor_scale_count(m, t) / n0);
    p->d.slot = &p->slot;
    p->d.scale_slot = t->scale_slot ? &p->scale : NULL;
}

/* Rows of a matrix tensor = product of all but its last local dimension. */
static long matrix_rows(const tensor_desc *t) {
    return tensor_local_elems(t) / slice_elems(&t->local[t->ndims - 1]);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

long tensor_scale_count(const model *m, const tensor_desc *t) {
    const long cols = slice_elems(&t->local[t->ndims - 1]);
    const int group = dtype_is_block(m->weight_dtype) ? QBLOCK : m->int8[t->input].group;
    return matrix_rows(t) * (group ? (cols + group - 1) / group : 1);
}

static size_t tensor_bytes(const model *m, const tensor_desc *t) {
    if (!t->present) return 0;
    size_t elems = (size_t)tensor_local_elems(t);
    if (!t->is_matrix) return align64(elems * sizeof(float));
    size_t bytes = align64(dtype_bytes(m->weight_dtype, elems));
    if (m->weight_dtype == DTYPE_INT8)
        bytes += align64((size_t)tensor_scale_count(m, t) * sizeof(float));
    return bytes;
}

size_t model_weight_bytes(const model *m) {
    size_t total = 0;
    for (int i = 0; i < m->n_tensors; i++)
        total += tensor_bytes(m, &m->tensors[i]);
    return total;
}

void model_alloc(model *m, const backend *be) {
    m->weight_bytes = model_weight_bytes(m);
    m->weight_memory = be->ops->alloc(be->ctx, m->weight_bytes);
    char *p = m->weight_memory;
    for (int i = 0; i < m->n_tensors; i++) {
        tensor_desc *t = &m->tensors[i];
        *t->slot = NULL;
        if (t->scale_slot) *t->scale_slot = NULL;
        if (!t->present) continue;
        size_t elems = (size_t)tensor_local_elems(t);
        *t->slot = p;
        p += align64(t->is_matrix ? dtype_bytes(m->weight_dtype, elems) : elems * sizeof(float));
        if (t->is_matrix && m->weight_dtype == DTYPE_INT8) {
            *t->scale_slot = (float *)p;
            p += align64((size_t)tensor_scale_count(m, t) * sizeof(float));
        }
    }
}

void model_free(model *m, const backend *be) {
    if (m->weight_memory) be->ops->release(be->ctx, m->weight_memory);
    m->weight_memory = NULL;
}

/* A row-parallel matrix holds only some columns of each output row, so its per-row int8
 * scale must be agreed with the other TP ranks or the shards would quantize differently. */
static int splits_columns(const tensor_desc *t) {
    const dim_slice *last = &t->local[t->ndims - 1];
    return last->nblocks != 1 || last->count[0] != t->global_shape[t->ndims - 1];
}

/* A non-finite weight as one number, smallest first in table order, then element order: the
 * table row, the global element index and the kind (0 NaN, 1 +Inf, 2 -Inf). */
static long long nonfinite_key(int row, long global_index, float v) {
    int kind = isnan(v) ? 0 : v > 0 ? 1 : 2;
    return ((long long)row << 46) | ((long long)global_index << 2) | kind;
}

/* Notes the non-finite value v at local element i of a table row, when it comes first. */
static void nonfinite_note(model *m, const tensor_desc *t, long i, float v) {
    long long key = nonfinite_key(t->index, tensor_global_index(t, i), v);
    if (key < m->nonfinite_key) m->nonfinite_key = key;
}

/* Notes the first non-finite value of a table row, once, as weights land in host memory. */
static void nonfinite_scan(model *m, const tensor_desc *t, const float *values, long elems) {
    for (long i = 0; i < elems; i++)
        if (!isfinite(values[i])) {
            nonfinite_note(m, t, i, values[i]);
            return;
        }
}

int model_weights_finite(const model *m, MPI_Comm world, const char *source) {
    const long long key = agree_min_long(world, m->nonfinite_key);
    if (key == MODEL_FINITE) return STATUS_OK;
    const tensor_desc *t = &m->tensors[key >> 46];
    long index = (long)((key >> 2) & ((1LL << 44) - 1)), rest = index;
    long coord[TENSOR_MAX_DIMS];
    for (int d = t->ndims - 1; d >= 0; d--) {
        coord[d] = rest % t->global_shape[d];
        rest /= t->global_shape[d];
    }
    char at[96];
    size_t used = 0;
    for (int d = 0; d < t->ndims; d++)
        used += (size_t)snprintf(at + used, sizeof at - used, "%s%ld", d ? ", " : "", coord[d]);
    static const char *const kinds[] = {"NaN", "+Inf", "-Inf"};
    error_set("%s: weight tensor '%s' holds %s at [%s] (element %ld); tripar refuses NaN and Inf "
              "weights",
              source, t->name, kinds[key & 3], at, index);
    return STATUS_BAD_INPUT;
}

/* Agrees each row's absmax with the TP ranks that hold the row's other columns. With expert
 * parallelism the ep blocks of a TP group hold different experts' rows of exp_down_w, so each
 * block agrees in its own slot of an ep-times-longer buffer (0 elsewhere: absmax is never
 * negative), and every rank reads back its block's slot: one collective over the TP group
 * serves every block without a communicator per expert-TP group. */
static void row_absmax_agree(const model *m, const tensor_desc *t, comm *tp, float *absmax,
                             long rows) {
    const int ep = m->geom.ep > 1 && m->tensors[t->index].slot == &m->w.exp_down_w ? m->geom.ep : 1;
    if (ep == 1) {
        agree_max_floats(tp->mpi, absmax, (int)rows);
        return;
    }
    const long block = m->geom.expert_begin / m->geom.experts_local;
    float *all = xcalloc((size_t)(rows * ep), sizeof *all);
    memcpy(all + block * rows, absmax, (size_t)rows * sizeof *all);
    agree_max_floats(tp->mpi, all, (int)(rows * ep));
    memcpy(absmax, all + block * rows, (size_t)rows * sizeof *all);
    free(all);
}

void model_store_tensor(model *m, const backend *be, const tensor_desc *t, const float *host_values,
                        comm *tp) {
    if (!t->present) return;
    long elems = tensor_local_elems(t);
    nonfinite_scan(m, t, host_values, elems);
    if (!t->is_matrix || m->weight_dtype == DTYPE_F32) {
        be->ops->copy_to_device(be->ctx, *t->slot, host_values, (size_t)elems * sizeof(float));
        return;
    }
    long rows = matrix_rows(t), cols = elems / rows;
    if (dtype_is_block(m->weight_dtype)) { /* job_validate_blocks: whole blocks on every rank */
        CHECK(cols % qblock_weights(m->weight_dtype) == 0,
              "tensor %s: %ld columns are not whole %s blocks", t->name, cols,
              dtype_name(m->weight_dtype));
        const size_t bytes = dtype_bytes(m->weight_dtype, (size_t)elems);
        void *blocks = xmalloc(bytes);
        qblocks_quantize(m->weight_dtype, blocks, host_values, rows, cols);
        be->ops->copy_to_device(be->ctx, *t->slot, blocks, bytes);
        free(blocks);
        return;
    }
    const int group = m->int8[t->input].group;
    if (m->weight_dtype == DTYPE_INT8 && group > 0) { /* groups never cross TP ranks */
        const long n_scales = tensor_scale_count(m, t);
        float *scale = xmalloc((size_t)n_scales * sizeof(float));
        int8_t *q = xmalloc((size_t)elems);
        quant_groups_int8(q, scale, host_values, rows, cols, group);
        be->ops->copy_to_device(be->ctx, *t->slot, q, (size_t)elems);
        be->ops->copy_to_device(be->ctx, *t->scale_slot, scale, (size_t)n_scales * sizeof(float));
        free(q);
        free(scale);
        return;
    }
    if (m->weight_dtype == DTYPE_INT8) {
        float *absmax = xmalloc((size_t)rows * sizeof(float));
        float *scale = xmalloc((size_t)rows * sizeof(float));
        int8_t *q = xmalloc((size_t)elems);
        quant_row_absmax(absmax, host_values, rows, cols);
        if (tp && tp->size > 1 && splits_columns(t)) row_absmax_agree(m, t, tp, absmax, rows);
        quant_rows_int8(q, scale, host_values, rows, cols, absmax);
        be->ops->copy_to_device(be->ctx, *t->slot, q, (size_t)elems);
        be->ops->copy_to_device(be->ctx, *t->scale_slot, scale, (size_t)rows * sizeof(float));
        free(q);
        free(scale);
        free(absmax);
        return;
    }
    uint16_t *half = xmalloc((size_t)elems * sizeof(uint16_t));
    if (m->weight_dtype == DTYPE_BF16)
        convert_f32_to_bf16(half, host_values, elems);
    else
        convert_f32_to_f16(half, host_values, elems);
    be->ops->copy_to_device(be->ctx, *t->slot, half, (size_t)elems * sizeof(uint16_t));
    free(half);
}

/* The float a bf16 bit pattern widens to (exact). */
static float bf16_value(uint16_t bits) {
    float v;
    convert_bf16_to_f32(&v, &bits, 1);
    return v;
}

void model_store_tensor_stored(model *m, const backend *be, const tensor_desc *t,
                               const void *values, const float *scales) {
    if (!t->present) return;
    const long elems = tensor_local_elems(t);
    CHECK(t->is_matrix && m->weight_dtype != DTYPE_F32 && m->weight_dtype != DTYPE_F16,
          "tensor %s: only int8, bf16 and block matrices are stored as they are held", t->name);
    if (m->weight_dtype == DTYPE_BF16) {
        const uint16_t *bits = values;
        for (long i = 0; i < elems; i++)
            if ((bits[i] & 0x7F80u) == 0x7F80u) { /* exponent all ones: Inf or NaN */
                nonfinite_note(m, t, i, bf16_value(bits[i]));
                break;
            }
        be->ops->copy_to_device(be->ctx, *t->slot, values, (size_t)elems * sizeof(uint16_t));
        return;
    }
    /* int8 values are finite; a scale that is not makes every value of its row or group so
     * (q4_1's and q4_k's mins, after its scales, likewise) */
    const int block = dtype_is_block(m->weight_dtype);
    const long n_scales = tensor_scale_count(m, t), rows = matrix_rows(t);
    const long per_row = n_scales / rows, cols = elems / rows;
    const long group = block ? QBLOCK : m->int8[t->input].group;
    const long n_checked = n_scales * (qblock_has_mins(m->weight_dtype) ? 2 : 1);
    for (long i = 0; i < n_checked; i++)
        if (!isfinite(scales[i])) {
            const long s = i % n_scales;
            nonfinite_note(m, t, (s / per_row) * cols + (s % per_row) * group, scales[i]);
            break;
        }
    if (block) { /* qblocks_unpack's planes back into blocks */
        const size_t bytes = dtype_bytes(m->weight_dtype, (size_t)elems);
        void *blocks = xmalloc(bytes);
        const float *mins = qblock_has_mins(m->weight_dtype) ? scales + n_scales : NULL;
        qblocks_pack(m->weight_dtype, blocks, values, scales, mins, rows, cols);
        be->ops->copy_to_device(be->ctx, *t->slot, blocks, bytes);
        free(blocks);
        return;
    }
    be->ops->copy_to_device(be->ctx, *t->slot, values, (size_t)elems);
    be->ops->copy_to_device(be->ctx, *t->scale_slot, scales, (size_t)n_scales * sizeof(float));
}

void model_fill_synthetic(model *m, const backend *be, uint64_t seed, comm *tp) {
    long largest = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].present && tensor_local_elems(&m->tensors[i]) > largest)
            largest = tensor_local_elems(&m->tensors[i]);
    float *host = xmalloc((size_t)(largest ? largest : 1) * sizeof(float));
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_desc *t = &m->tensors[i];
        if (!t->present) continue;
        /* Row by row: the global index of a row's start is computed once, and within each
         * block of the last dimension global indices are consecutive. */
        const uint64_t key = synthetic_key(seed, t->name);
        const dim_slice *last = &t->local[t->ndims - 1];
        const long cols = slice_elems(last);
        const long rows = cols > 0 ? tensor_local_elems(t) / cols : 0;
        long e = 0;
        for (long row = 0; row < rows; row++) {
            long row_global = tensor_global_index(t, row * cols) - last->start[0];
            for (int b = 0; b < last->nblocks; b++)
                for (long c = 0; c < last->count[b]; c++)
                    host[e++] = synthetic_value_keyed(key, row_global + last->start[b] + c, t->init,
                                                      t->init_std);
        }
        model_store_tensor(m, be, t, host, tp);
    }
    free(host);
    /* the formula is bounded, so this is a bug, not bad input */
    CHECK(m->nonfinite_key == MODEL_FINITE,
          "synthetic weights: a non-finite value (table row %lld)", m->nonfinite_key >> 46);
}
