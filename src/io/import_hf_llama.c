/* The Llama family of the Hugging Face importer: LlamaForCausalLM, MistralForCausalLM and
 * Qwen2ForCausalLM share one layout (RMSNorm, RoPE, GQA, SwiGLU); config.json is read into a
 * Llama model_config, and everything tripar does not run is refused by key and value before
 * a byte is written (docs/checkpoint.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/import_hf_internal.h"

static const char *const llama_archs[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                          "Qwen2ForCausalLM", "MixtralForCausalLM",
                                          "Qwen2MoeForCausalLM"};

int hf_llama_architecture(const char *arch) {
    for (size_t i = 0; i < sizeof llama_archs / sizeof llama_archs[0]; i++)
        if (strcmp(arch, llama_archs[i]) == 0) return 1;
    return 0;
}

/* A key's value as JSON text for a message ("gelu", 4096, true). */
static void json_value_text(json_t *v, char *out, size_t len) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(out, len, "%s", s ? s : "?");
    free(s);
}

/* A positive integer key; absent gives *out = dflt when dflt > 0, else an error. */
static int llama_int(json_t *root, const char *path, const char *key, int dflt, int *out) {
    json_t *v = json_object_get(root, key);
    if ((!v || json_is_null(v)) && dflt > 0) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > (1 << 30)) {
        error_set("%s: '%s' must be a positive integer", path, key);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

/* A positive number key (integers accepted: rope_theta is often 500000). */
static int llama_number(json_t *root, const char *path, const char *key, double dflt, double *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_number(v) || !(json_number_value(v) > 0)) {
        error_set("%s: '%s' must be a positive number", path, key);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

/* A boolean key; absent or null gives dflt. */
static int llama_bool(json_t *root, const char *path, const char *key, int dflt, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) {
        error_set("%s: '%s' must be true or false", path, key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* rope_scaling: absent, null or rope_type "default" is none; "llama3" takes its four keys;
 * anything else is refused by name. */
static int llama_rope_scaling(json_t *root, const char *path, model_config *cfg) {
    json_t *rs = json_object_get(root, "rope_scaling");
    cfg->rope_scaled = 0;
    if (!rs || json_is_null(rs)) return 0;
    if (!json_is_object(rs)) {
        error_set("%s: 'rope_scaling' must be an object or null", path);
        return -1;
    }
    json_t *type = json_object_get(rs, "rope_type");
    if (!type) type = json_object_get(rs, "type"); /* the older name of the key */
    if (!json_is_string(type)) {
        error_set("%s: 'rope_scaling' has no string 'rope_type'; tripar supports \"llama3\"", path);
        return -1;
    }
    const char *t = json_string_value(type);
    if (strcmp(t, "default") == 0) return 0;
    if (strcmp(t, "llama3") != 0) {
        error_set("%s: rope_scaling.rope_type = \"%s\" is not supported; tripar supports "
                  "\"llama3\" (or no rope_scaling)",
                  path, t);
        return -1;
    }
    static const char *const keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings"};
    double v[4];
    for (int i = 0; i < 4; i++) {
        json_t *x = json_object_get(rs, keys[i]);
        if (!json_is_number(x)) {
            error_set("%s: rope_scaling.%s must be a number (rope_type \"llama3\")", path, keys[i]);
            return -1;
        }
        v[i] = json_number_value(x);
    }
    cfg->rope_scaling = (rope_llama3){.factor = v[0],
                                      .low_freq_factor = v[1],
                                      .high_freq_factor = v[2],
                                      .original_max_position_embeddings = (long)v[3]};
    const char *bad = rope_llama3_problem(&cfg->rope_scaling);
    if (bad) {
        error_set("%s: %s", path, bad);
        return -1;
    }
    cfg->rope_scaled = 1;
    return 0;
}

/* What tripar does not run, refused by key and value: another activation, sliding-window
 * attention, mixture-of-experts layers in a dense architecture, and biases beyond q/k/v. */
static int llama_refusals(json_t *root, const char *path, const char *arch, int ctx, int moe) {
    char val[128];
    json_t *act = json_object_get(root, "hidden_act");
    if (act && !(json_is_string(act) && strcmp(json_string_value(act), "silu") == 0)) {
        json_value_text(act, val, sizeof val);
        error_set("%s: hidden_act = %s is not supported; tripar's SwiGLU needs \"silu\"", path,
                  val);
        return -1;
    }
    /* use_sliding_window true always slides; when it says false (Qwen2) sliding_window is
     * ignored, as in transformers; otherwise a window shorter than the context slides. */
    json_t *use = json_object_get(root, "use_sliding_window");
    if (json_is_true(use)) {
        error_set("%s: use_sliding_window = true is not supported; tripar attends over the "
                  "whole context",
                  path);
        return -1;
    }
    json_t *win = json_object_get(root, "sliding_window");
    if (!json_is_false(use) && win && !json_is_null(win) &&
        !(json_is_integer(win) && json_integer_value(win) >= ctx)) {
        json_value_text(win, val, sizeof val);
        error_set("%s: sliding_window = %s is not supported (shorter than "
                  "max_position_embeddings = %d); tripar attends over the whole context",
                  path, val, ctx);
        return -1;
    }
    static const char *const moe_keys[] = {"num_local_experts",     "num_experts",
                                      "num_experts_per_tok",   "n_routed_experts",
                                      "moe_intermediate_size", "n_shared_experts"};
    for (size_t i = 0; !moe && i < sizeof moe_keys / sizeof moe_keys[0]; i++) {
        json_t *v = json_object_get(root, moe_keys[i]);
        if (!v || json_is_null(v) || (json_is_integer(v) && json_integer_value(v) == 0)) continue;
        json_value_text(v, val, sizeof val);
        error_set("%s: %s = %s: mixture-of-experts layers are not supported for %s; tripar "
                  "imports them as MixtralForCausalLM and Qwen2MoeForCausalLM",
                  path, moe_keys[i], val, arch);
        return -1;
    }
    json_t *mlp_bias = json_object_get(root, "mlp_bias");
    if (json_is_true(mlp_bias)) {
        error_set("%s: mlp_bias = true is not supported; tripar's SwiGLU has no biases", path);
        return -1;
    }
    /* Llama's and Mistral's attention_bias puts a bias on o_proj too; Qwen2's are q/k/v only */
    if (strcmp(arch, "Qwen2ForCausalLM") != 0 && strcmp(arch, "Qwen2MoeForCausalLM") != 0 &&
        json_is_true(json_object_get(root, "attention_bias"))) {
        error_set("%s: attention_bias = true for %s (biases on q, k, v and o_proj) is not "
                  "supported; tripar takes q/k/v biases only (Qwen2ForCausalLM)",
                  path, arch);
        return -1;
    }
    return 0;
}

/* The routing of MixtralForCausalLM (num_local_experts, num_experts_per_tok, intermediate_size
 * per expert, always renormalised) and Qwen2MoeForCausalLM (num_experts, num_experts_per_tok,
 * moe_intermediate_size, shared_expert_intermediate_size, norm_topk_prob), refusing the
 * Qwen2-MoE layouts with dense layers (decoder_sparse_step, mlp_only_layers) by key. */
static int moe_config(json_t *root, const char *path, model_config *cfg) {
    if (cfg->arch == ARCH_MIXTRAL) {
        cfg->norm_topk_prob = 1;
        if (llama_int(root, path, "num_local_experts", 0, &cfg->experts) ||
            llama_int(root, path, "num_experts_per_tok", 0, &cfg->experts_top_k))
            return STATUS_BAD_INPUT;
    } else {
        int step = 1;
        if (llama_int(root, path, "num_experts", 0, &cfg->experts) ||
            llama_int(root, path, "num_experts_per_tok", 0, &cfg->experts_top_k) ||
            llama_int(root, path, "moe_intermediate_size", 0, &cfg->mlp) ||
            llama_bool(root, path, "norm_topk_prob", 0, &cfg->norm_topk_prob) ||
            llama_int(root, path, "decoder_sparse_step", 1, &step))
            return STATUS_BAD_INPUT;
        if (step != 1) {
            error_set("%s: decoder_sparse_step = %d is not supported (dense layers between the "
                      "sparse ones); tripar imports every layer sparse: 1",
                      path, step);
            return STATUS_BAD_INPUT;
        }
        json_t *dense = json_object_get(root, "mlp_only_layers");
        if (dense && !json_is_null(dense) && !(json_is_array(dense) && json_array_size(dense) == 0)) {
            char val[128];
            json_value_text(dense, val, sizeof val);
            error_set("%s: mlp_only_layers = %s is not supported (dense layers among the sparse "
                      "ones); tripar imports every layer sparse: []",
                      path, val);
            return STATUS_BAD_INPUT;
        }
        /* absent or 0: no shared expert */
        json_t *sh = json_object_get(root, "shared_expert_intermediate_size");
        if (sh && !json_is_null(sh) && !(json_is_integer(sh) && json_integer_value(sh) == 0) &&
            llama_int(root, path, "shared_expert_intermediate_size", 0, &cfg->shared_mlp))
            return STATUS_BAD_INPUT;
    }
    if (cfg->experts_top_k > cfg->experts) {
        error_set("%s: num_experts_per_tok = %d is more than the %d experts", path,
                  cfg->experts_top_k, cfg->experts);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

int hf_llama_config(json_t *root, const char *path, const char *arch, model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->arch = strcmp(arch, "MixtralForCausalLM") == 0    ? ARCH_MIXTRAL
                : strcmp(arch, "Qwen2MoeForCausalLM") == 0 ? ARCH_QWEN2_MOE
                                                            : ARCH_LLAMA;
    cfg->norm = NORM_PRE;
    if (llama_int(root, path, "num_hidden_layers", 0, &cfg->layers) ||
        llama_int(root, path, "num_attention_heads", 0, &cfg->heads) ||
        llama_int(root, path, "hidden_size", 0, &cfg->embd) ||
        llama_int(root, path, "intermediate_size", 0, &cfg->mlp) ||
        llama_int(root, path, "vocab_size", 0, &cfg->vocab) ||
        llama_int(root, path, "max_position_embeddings", 0, &cfg->ctx) ||
        llama_int(root, path, "num_key_value_heads", cfg->heads, &cfg->kv_heads))
        return STATUS_BAD_INPUT;
    if (cfg->heads % cfg->kv_heads != 0) {
        error_set("%s: num_key_value_heads = %d does not divide num_attention_heads = %d", path,
                  cfg->kv_heads, cfg->heads);
        return STATUS_BAD_INPUT;
    }
    /* head_dim may differ from hidden_size / num_attention_heads (Mistral-Nemo: 128 with 5120 /
     * 32 = 160): attention is then heads * head_dim wide, o_proj maps it back to hidden_size */
    const int have_hd = json_object_get(root, "head_dim") != NULL &&
                        !json_is_null(json_object_get(root, "head_dim"));
    if (!have_hd && cfg->embd % cfg->heads != 0) {
        error_set("%s: num_attention_heads = %d does not divide hidden_size = %d (and no head_dim "
                  "is given)",
                  path, cfg->heads, cfg->embd);
        return STATUS_BAD_INPUT;
    }
    int head_dim = cfg->embd / cfg->heads;
    if (llama_int(root, path, "head_dim", head_dim, &head_dim)) return STATUS_BAD_INPUT;
    if (head_dim % 2) {
        error_set("%s: the head dimension %s = %d is odd (RoPE rotates pairs)", path,
                  have_hd ? "head_dim" : "hidden_size / num_attention_heads", head_dim);
        return STATUS_BAD_INPUT;
    }
    /* 0 = embd / heads, so a config that spells out the usual value writes the old layout */
    const int usual = cfg->embd % cfg->heads == 0 && head_dim == cfg->embd / cfg->heads;
    cfg->head_dim = usual ? 0 : head_dim;
    double eps = 0;
    if (llama_number(root, path, "rms_norm_eps", 1e-6, &eps) ||
        llama_number(root, path, "rope_theta", 10000.0, &cfg->rope_theta))
        return STATUS_BAD_INPUT;
    if (!(eps < 1)) {
        error_set("%s: 'rms_norm_eps' must be a number in (0, 1)", path);
        return STATUS_BAD_INPUT;
    }
    cfg->ln_eps = (float)eps;
    int bias = 0;
    if (llama_bool(root, path, "tie_word_embeddings", 0, &cfg->tie_embeddings) ||
        llama_bool(root, path, "attention_bias", 0, &bias) ||
        llama_refusals(root, path, arch, cfg->ctx, arch_is_moe(cfg->arch)) ||
        llama_rope_scaling(root, path, cfg))
        return STATUS_BAD_INPUT;
    if (arch_is_moe(cfg->arch) && moe_config(root, path, cfg) != STATUS_OK)
        return STATUS_BAD_INPUT;
    /* Qwen2's (and Qwen2-MoE's) q/k/v biases are implicit: the config has no attention_bias */
    cfg->attention_bias = cfg->arch == ARCH_QWEN2_MOE || strcmp(arch, "Qwen2ForCausalLM") == 0 || bias;
    return STATUS_OK;
}

int hf_llama_tensor_list(const model_config *cfg, hf_tensor *out) {
    const long C = cfg->embd, M = cfg->mlp, hd = model_head_dim(cfg);
    const long Q = cfg->heads * hd, KV = cfg->kv_heads * hd;
    int n = 0;
#define ADD(dst_, layer_, off_, nd_, a_, b_, ...)                                                  \
    do {                                                                                           \
        hf_tensor *h = &out[n++];                                                                  \
        snprintf(h->name, sizeof h->name, __VA_ARGS__);                                            \
        h->dst = dst_;                                                                             \
        h->layer = layer_;                                                                         \
        h->transpose = 0; /* nn.Linear is (out, in) already */                                     \
        h->row_offset = off_;                                                                      \
        h->ndims = nd_;                                                                            \
        h->shape[0] = a_;                                                                          \
        h->shape[1] = b_;                                                                          \
    } while (0)
    ADD("wte", -1, 0, 2, cfg->vocab, C, "model.embed_tokens.weight");
    for (int i = 0; i < cfg->layers; i++) {
        ADD("ln1_g", i, 0, 1, C, 0, "model.layers.%d.input_layernorm.weight", i);
        ADD("qkv_w", i, 0, 2, Q, C, "model.layers.%d.self_attn.q_proj.weight", i);
        ADD("qkv_w", i, Q, 2, KV, C, "model.layers.%d.self_attn.k_proj.weight", i);
        ADD("qkv_w", i, Q + KV, 2, KV, C, "model.layers.%d.self_attn.v_proj.weight", i);
        if (cfg->attention_bias) {
            ADD("qkv_b", i, 0, 1, Q, 0, "model.layers.%d.self_attn.q_proj.bias", i);
            ADD("qkv_b", i, Q, 1, KV, 0, "model.layers.%d.self_attn.k_proj.bias", i);
            ADD("qkv_b", i, Q + KV, 1, KV, 0, "model.layers.%d.self_attn.v_proj.bias", i);
        }
        ADD("proj_w", i, 0, 2, C, Q, "model.layers.%d.self_attn.o_proj.weight", i);
        ADD("ln2_g", i, 0, 1, C, 0, "model.layers.%d.post_attention_layernorm.weight", i);
        if (cfg->experts > 0) {
            n += hf_moe_layer_tensors(cfg, i, out + n);
            continue;
        }
        ADD("gate_up_w", i, 0, 2, M, C, "model.layers.%d.mlp.gate_proj.weight", i);
        ADD("gate_up_w", i, M, 2, M, C, "model.layers.%d.mlp.up_proj.weight", i);
        ADD("down_w", i, 0, 2, C, M, "model.layers.%d.mlp.down_proj.weight", i);
    }
    ADD("lnf_g", -1, 0, 1, C, 0, "model.norm.weight");
    if (!cfg->tie_embeddings) ADD("head_w", -1, 0, 2, cfg->vocab, C, "lm_head.weight");
#undef ADD
    return n;
}
