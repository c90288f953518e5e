/* The Llama rows of the size table: RMSNorm gains, grouped-query QKV, the stacked gate|up of
 * SwiGLU, down, and an untied vocab-parallel LM head; no position embedding, and no biases but
 * Qwen2's optional q/k/v ones (qkv_b, sharded like qkv_w's rows).
 * Global tensors keep Hugging Face's row order (q heads, then k, then v; gate rows, then up),
 * so a rank's shard is a union of blocks and a kv head replicated on several ranks is the
 * same global elements on each: synthetic values and checkpoint reads agree by construction. */
#include <math.h>

#include "model/model.h"

/* This rank's q heads, then its kv heads in the k and then the v row groups. */
static dim_slice slice_qkv_gqa(const model_config *cfg, const shard_geom *g) {
    const long hd = g->head_dim, H = cfg->heads, KV = cfg->kv_heads;
    dim_slice s = {.nblocks = 3};
    s.start[0] = (long)g->head_begin * hd;
    s.count[0] = (long)g->n_heads * hd;
    s.start[1] = H * hd + (long)g->kv_head_begin * hd;
    s.count[1] = (long)g->n_kv_heads * hd;
    s.start[2] = (H + KV) * hd + (long)g->kv_head_begin * hd;
    s.count[2] = (long)g->n_kv_heads * hd;
    return s;
}


void model_tensor_table_llama(model *m, const model_config *cfg, const shard_geom *g) {
    weights *w = &m->w;
    const long L = cfg->layers, C = cfg->embd, M = cfg->mlp, V = cfg->vocab;
    const long QKV = ((long)cfg->heads + 2L * cfg->kv_heads) * g->head_dim;
    const long A = (long)cfg->heads * g->head_dim;
    const dim_slice layers = slice_one(g->layer_begin, g->n_layers);
    const dim_slice heads_cols = slice_one((long)g->head_begin * g->head_dim, g->attn_dim);
    const dim_slice mlp = slice_one(g->mlp_begin, g->mlp_local);
    const dim_slice all_C = slice_full(C), vocab = slice_one(g->vocab_begin, g->vocab_local);
    const int has_layers = g->n_layers > 0, first = g->first_stage, last = g->last_stage;
    const int tied = cfg->tie_embeddings;
    /* The GPT-2 table's scales (model.c): fan-in init, residual branches amplified x4. */
    const float in_std = 1.0f / sqrtf((float)C);
    const float out_attn_std = 4.0f / sqrtf((float)A), out_mlp_std = 4.0f / sqrtf((float)M);
    const float emb_std = 0.3f;
    // clang-format off
    const table_row rows[] = {
        /* name        slot                 int8 scales  init             std           present              dims shape       slice */
        {"wte",       (void **)&w->wte,    NULL,        INIT_NORMAL,     emb_std,      first || (tied && last), 2, {V, C},  {vocab, all_C}},
        {"ln1_g",     (void **)&w->ln1_g,  NULL,        INIT_ONES_NOISE, 0.05f,        has_layers,          2, {L, C},       {layers, all_C}},
        {"qkv_w",     &w->qkv_w,           &w->qkv_s,   INIT_NORMAL,     in_std,       has_layers,          3, {L, QKV, C},  {layers, slice_qkv_gqa(cfg, g), all_C}},
        {"qkv_b",     (void **)&w->qkv_b,  NULL,        INIT_ZEROS_NOISE, 0.02f,       has_layers && cfg->attention_bias, 2, {L, QKV}, {layers, slice_qkv_gqa(cfg, g)}},
        {"proj_w",    &w->proj_w,          &w->proj_s,  INIT_NORMAL,     out_attn_std, has_layers,          3, {L, C, A},    {layers, all_C, heads_cols}},
        {"ln2_g",     (void **)&w->ln2_g,  NULL,        INIT_ONES_NOISE, 0.05f,        has_layers,          2, {L, C},       {layers, all_C}},
        {"gate_up_w", &w->fc1_w,           &w->fc1_s,   INIT_NORMAL,     in_std,       has_layers,          3, {L, 2 * M, C}, {layers, slice_gate_up_of(M, g->mlp_begin, g->mlp_local), all_C}},
        {"down_w",    &w->fc2_w,           &w->fc2_s,   INIT_NORMAL,     out_mlp_std,  has_layers,          3, {L, C, M},    {layers, all_C, mlp}},
        {"lnf_g",     (void **)&w->lnf_g,  NULL,        INIT_ONES_NOISE, 0.05f,        last,                1, {C},          {all_C}},
        {"head_w",    &w->head_w,          cfg->quantize_head ? &w->head_s : NULL, INIT_NORMAL, in_std, !tied && last, 2, {V, C}, {vocab, all_C}},
    };
    // clang-format on
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (tied && rows[i].slot == &w->head_w) continue; /* a tied head is wte: no tensor */
        if (!cfg->attention_bias && rows[i].slot == (void **)&w->qkv_b) continue; /* Qwen2's */
        if (cfg->experts > 0 && (rows[i].slot == &w->fc1_w || rows[i].slot == &w->fc2_w)) {
            if (rows[i].slot == &w->fc1_w) model_tensor_table_moe(m, cfg, g); /* in its place */
            continue;
        }
        model_add_row(m, rows[i]);
    }
    if (tied && cfg->quantize_head) model_add_head_copy(m, g, emb_std);
}
