/* The mixtures of experts of the GGUF importer: Mixtral (general.architecture llama with
 * llama.expert_count) and Qwen2-MoE (qwen2moe), their {arch}.expert_* metadata read as
 * llama.cpp's loader reads it, and their tensors (ffn_gate_inp, the 3-D stacks ffn_*_exps, an
 * older file's per-expert ffn_*.E, qwen2moe's *_shexp) placed where import-hf places Hugging
 * Face's (import_hf_moe.c): the router's rows then the shared gate's in router_w, expert e of
 * layer l at dim-0 row l * experts + e of exp_gate_up_w (gate rows, then up rows) and
 * exp_down_w. llama.cpp permutes no expert's rows, so nothing is un-permuted here. */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "io/import_gguf_internal.h"

/* Whether the integer key is there and not 0 (how a dense llama.cpp file may still carry it). */
static int key_nonzero(const gguf *g, const char *key) {
    const gguf_kv *kv = gguf_kv_find(g, key);
    return kv && !(gguf_type_is_int(kv->type) && !kv->is_array && gguf_kv_int(kv, 0, NULL) == 0);
}

/* A refusal when {a}.suffix is there and not 0, naming it and saying what it asks for. */
static int key_refused(const gguf *g, const char *a, const char *suffix, const char *why) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", a, suffix);
    if (!key_nonzero(g, key)) return STATUS_OK;
    error_set("%s: key '%s' is present: %s", g->path, key, why);
    return STATUS_BAD_INPUT;
}

/* The routing keys llama.cpp's graphs for llama and qwen2moe never read (they route by softmax,
 * unscaled, every layer sparse) refused when they ask for something else, so a file made for
 * another routing is not run as this one: expert_gating_func other than softmax (1),
 * expert_weights_scale other than 1 (0 is llama.cpp's "none"), leading dense layers. */
static int routing_refusals(const gguf *g, const char *a) {
    char key[128];
    int64_t v = 0;
    snprintf(key, sizeof key, "%s.expert_gating_func", a);
    if (gguf_kv_find(g, key)) {
        if (gguf_get_int(g, key, 0, 1 << 30, &v) != STATUS_OK) return STATUS_BAD_INPUT;
        if (v != 1) {
            error_set("%s: key '%s' = %lld is not supported; tripar routes by a softmax over "
                      "the router logits (1)",
                      g->path, key, (long long)v);
            return STATUS_BAD_INPUT;
        }
    }
    snprintf(key, sizeof key, "%s.expert_weights_scale", a);
    double scale = 0;
    if (gguf_kv_find(g, key)) {
        if (gguf_get_float(g, key, &scale) != STATUS_OK) return STATUS_BAD_INPUT;
        if (scale != 0 && scale != 1) {
            error_set("%s: key '%s' = %g is not supported; tripar weights the experts unscaled "
                      "(1)",
                      g->path, key, scale);
            return STATUS_BAD_INPUT;
        }
    }
    return key_refused(g, a, "leading_dense_block_count",
                       "dense layers before the sparse ones are not supported; tripar imports "
                       "every layer sparse");
}

/* qwen2moe's widths as llama.cpp's loader takes them (src/models/qwen2moe.cpp): each expert
 * expert_feed_forward_length wide, else feed_forward_length / expert_used_count; the shared
 * expert expert_shared_feed_forward_length, else feed_forward_length (feed_forward_length is
 * Hugging Face's intermediate_size, the dense width, which the model has no use for). And
 * norm_topk_prob: llama.cpp's qwen2moe graph never renormalises the top-k weights (its
 * converter writes no key for it; every released Qwen1.5-MoE and Qwen2-MoE has it false), so
 * false, unless the file says qwen2moe.expert_weights_norm, which is then taken as written. */
static int qwen2moe_widths(const gguf *g, const char *a, model_config *cfg) {
    const int ff = cfg->mlp;
    if (gguf_meta_int(g, a, "expert_feed_forward_length", ff / cfg->experts_top_k, &cfg->mlp) ||
        gguf_meta_int(g, a, "expert_shared_feed_forward_length", ff, &cfg->shared_mlp))
        return STATUS_BAD_INPUT;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    cfg->norm_topk_prob = 0;
    if (gguf_kv_find(g, key) && gguf_get_bool(g, key, &cfg->norm_topk_prob) != STATUS_OK)
        return STATUS_BAD_INPUT;
    return STATUS_OK;
}

/* Mixtral as llama.cpp's llama graph runs it: each expert feed_forward_length wide, the top-k
 * weights always renormalised, no shared expert; a file saying otherwise is refused by key. */
static int mixtral_refusals(const gguf *g, const char *a) {
    if (key_refused(g, a, "expert_shared_feed_forward_length",
                    "a shared expert in a llama (without Qwen2-MoE's sigmoid gate) is not "
                    "supported; tripar imports Mixtral's experts from llama"))
        return STATUS_BAD_INPUT;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    int norm = 1;
    if (gguf_kv_find(g, key) && gguf_get_bool(g, key, &norm) != STATUS_OK) return STATUS_BAD_INPUT;
    if (!norm) {
        error_set("%s: key '%s' = false is not supported; Mixtral (and llama.cpp's llama) "
                  "renormalises the top-k weights",
                  g->path, key);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

int gguf_moe_config(const gguf *g, const char *a, model_config *cfg) {
    const int qwen = strcmp(a, "qwen2moe") == 0;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_count", a);
    if (!qwen && !key_nonzero(g, key)) return STATUS_OK; /* a dense llama */
    cfg->arch = qwen ? ARCH_QWEN2_MOE : ARCH_MIXTRAL;
    if (gguf_meta_int(g, a, "expert_count", 0, &cfg->experts) ||
        gguf_meta_int(g, a, "expert_used_count", 0, &cfg->experts_top_k))
        return STATUS_BAD_INPUT;
    if (cfg->experts_top_k > cfg->experts) {
        error_set("%s: key '%s.expert_used_count' = %d is more than %s.expert_count = %d", g->path,
                  a, cfg->experts_top_k, a, cfg->experts);
        return STATUS_BAD_INPUT;
    }
    if (routing_refusals(g, a) != STATUS_OK) return STATUS_BAD_INPUT;
    if (qwen) return qwen2moe_widths(g, a, cfg);
    cfg->norm_topk_prob = 1;
    return mixtral_refusals(g, a);
}

/* Appends slice e of the stack `what` (ffn_gate_exps, ...) of layer l. */
static void stack_add(gguf_plan_tensor *out, int *n, const char *dst, int row, long row_offset,
                      long rows, long cols, int l, const char *what, int experts, int e) {
    gguf_plan_add(out, n, dst, row, row_offset, 2, rows, cols, 0, "blk.%d.%s.weight", l, what);
    out[*n - 1].experts = experts;
    out[*n - 1].expert = e;
}

int gguf_moe_layer_tensors(const gguf *g, const model_config *cfg, int l, gguf_plan_tensor *out) {
    const long C = cfg->embd, M = cfg->mlp, S = cfg->shared_mlp;
    const int E = cfg->experts;
    int n = 0;
#define ADD(...) gguf_plan_add(out, &n, __VA_ARGS__)
    ADD("router_w", l, 0, 2, E, C, 0, "blk.%d.ffn_gate_inp.weight", l);
    /* Files converted before llama.cpp stacked the experts (April 2024) hold each expert's
     * matrices as tensors of their own, which its loader still reads: a layer without the
     * stack and with expert 0's gate is read that way, otherwise the stacks are expected. */
    char name[64];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", l);
    int split = !gguf_tensor_find(g, name);
    snprintf(name, sizeof name, "blk.%d.ffn_gate.0.weight", l);
    split = split && gguf_tensor_find(g, name);
    for (int e = 0; e < E; e++) {
        const int row = l * E + e;
        if (split) {
            ADD("exp_gate_up_w", row, 0, 2, M, C, 0, "blk.%d.ffn_gate.%d.weight", l, e);
            ADD("exp_gate_up_w", row, M, 2, M, C, 0, "blk.%d.ffn_up.%d.weight", l, e);
            ADD("exp_down_w", row, 0, 2, C, M, 0, "blk.%d.ffn_down.%d.weight", l, e);
            continue;
        }
        stack_add(out, &n, "exp_gate_up_w", row, 0, M, C, l, "ffn_gate_exps", E, e);
        stack_add(out, &n, "exp_gate_up_w", row, M, M, C, l, "ffn_up_exps", E, e);
        stack_add(out, &n, "exp_down_w", row, 0, C, M, l, "ffn_down_exps", E, e);
    }
    if (S == 0) return n;
    /* Hugging Face's shared_expert_gate is (1, C): ggml dims [C, 1], or [C] (llama.cpp's
     * loader takes either, as does gguf_plan_validate) */
    ADD("router_w", l, E, 2, 1, C, 0, "blk.%d.ffn_gate_inp_shexp.weight", l);
    ADD("sh_gate_up_w", l, 0, 2, S, C, 0, "blk.%d.ffn_gate_shexp.weight", l);
    ADD("sh_gate_up_w", l, S, 2, S, C, 0, "blk.%d.ffn_up_shexp.weight", l);
    ADD("sh_down_w", l, 0, 2, C, S, 0, "blk.%d.ffn_down_shexp.weight", l);
#undef ADD
    return n;
}
