/* The llama, qwen2 and qwen2moe architectures of the GGUF importer: the {arch}.* metadata into a
 * Llama model_config, the llama.cpp tensor names (token_embd, blk.N.attn_q, ...) mapped onto the
 * checkpoint's fused tensors as import-hf writes them, and the undoing of llama.cpp's Q/K row
 * permutation; a mixture of experts' own keys and tensors are import_gguf_moe.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/import_gguf_internal.h"
#include "kernels/rope.h"

/* What tripar does not run, refused by key: rope scaling other than Llama 3.1's (which
 * llama.cpp keeps as the rope_freqs tensor, gguf_rope_freqs), experts in a qwen2 (llama.cpp
 * writes Qwen2-MoE as qwen2moe; a llama's experts are Mixtral's, gguf_moe_config), sliding
 * windows. */
static int meta_refusals(const gguf *g, const char *arch) {
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const char *type = NULL;
    if (gguf_kv_find(g, key)) {
        if (gguf_get_string(g, key, &type) != STATUS_OK) return STATUS_BAD_INPUT;
        if (strcmp(type, "none") != 0) {
            error_set("%s: key '%s' = \"%s\" is not supported; tripar imports GGUF models "
                      "without rope scaling",
                      g->path, key, type);
            return STATUS_BAD_INPUT;
        }
    }
    static const char *const refused[] = {"expert_count", "attention.sliding_window"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (i == 0 && strcmp(arch, "qwen2") != 0) continue;
        snprintf(key, sizeof key, "%s.%s", arch, refused[i]);
        const gguf_kv *kv = gguf_kv_find(g, key);
        if (kv && !(gguf_type_is_int(kv->type) && !kv->is_array && gguf_kv_int(kv, 0, NULL) == 0)) {
            error_set("%s: key '%s' is present: %s is not supported", g->path, key,
                      i == 0 ? "a mixture of experts in a qwen2 (Qwen2-MoE is arch qwen2moe)"
                             : "sliding-window attention");
            return STATUS_BAD_INPUT;
        }
    }
    return STATUS_OK;
}

/* Llama 3.1's rope scaling, which llama.cpp's converter stores as rope_freqs.weight: the
 * factor (head_dim / 2 of them) that divides each frequency. Recovered as the llama3
 * parameters tripar runs with: factor = the largest, low_freq_factor 1 and high_freq_factor 4
 * (every Llama 3.1 and 3.2), original_max_position_embeddings from a frequency of the blended
 * band (8192 when none is there); then every factor recomputed from them must match, or the
 * tensor is refused. */
static int gguf_rope_freqs(gguf *g, model_config *cfg) {
    const gguf_tensor *t = gguf_tensor_find(g, "rope_freqs.weight");
    if (!t) return STATUS_OK;
    const int hd = model_head_dim(cfg), n = hd / 2;
    if (t->n_dims != 1 || t->dims[0] != (uint64_t)n) {
        error_set("%s: tensor 'rope_freqs.weight' must have dims [%d] (head_dim / 2)", g->path, n);
        return STATUS_BAD_INPUT;
    }
    float *fac = xmalloc((size_t)n * sizeof(float) * 3), *inv = fac + n, *scaled = inv + n;
    int rc = gguf_tensor_read_f32(g, t, fac);
    double f = 1;
    int all_one = 1;
    for (int i = 0; rc == STATUS_OK && i < n; i++) {
        if (fac[i] > f) f = fac[i];
        all_one &= fac[i] == 1.0f;
    }
    if (rc != STATUS_OK || all_one) { /* all 1: no scaling */
        free(fac);
        return rc;
    }
    rope_inv_freq_fill(inv, hd, cfg->rope_theta, NULL);
    double orig = 8192;
    for (int i = 0; i < n; i++)
        if (fac[i] > 1.0001 && fac[i] < f / 1.0001) { /* blended: 1/fac = (1-s)/f + s */
            const double s = (1.0 / fac[i] - 1.0 / f) / (1.0 - 1.0 / f);
            orig = round(2.0 * M_PI / inv[i] * (1.0 + 3.0 * s)); /* s = (orig/wavelen - 1)/3 */
            break;
        }
    cfg->rope_scaling = (rope_llama3){.factor = f,
                                      .low_freq_factor = 1,
                                      .high_freq_factor = 4,
                                      .original_max_position_embeddings = (int)orig};
    int same = orig >= 1 && orig < 1e9 && !rope_llama3_problem(&cfg->rope_scaling);
    if (same) rope_inv_freq_fill(scaled, hd, cfg->rope_theta, &cfg->rope_scaling);
    for (int i = 0; same && i < n; i++)
        same = fabs((double)inv[i] / scaled[i] - fac[i]) <= 1e-4 * fac[i];
    free(fac);
    if (!same) {
        error_set("%s: tensor 'rope_freqs.weight' holds factors that are not Llama 3.1's rope "
                  "scaling (llama3 with low_freq_factor 1, high_freq_factor 4); not supported",
                  g->path);
        return STATUS_BAD_INPUT;
    }
    cfg->rope_scaled = 1;
    return STATUS_OK;
}

int gguf_llama_config(gguf *g, const char *a, model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->arch = ARCH_LLAMA;
    cfg->norm = NORM_PRE;
    double eps = 0;
    if (gguf_meta_int(g, a, "block_count", 0, &cfg->layers) ||
        gguf_meta_int(g, a, "embedding_length", 0, &cfg->embd) ||
        gguf_meta_int(g, a, "feed_forward_length", 0, &cfg->mlp) ||
        gguf_meta_int(g, a, "attention.head_count", 0, &cfg->heads) ||
        gguf_meta_int(g, a, "attention.head_count_kv", cfg->heads, &cfg->kv_heads) ||
        gguf_meta_int(g, a, "context_length", 0, &cfg->ctx) ||
        gguf_meta_float(g, a, "attention.layer_norm_rms_epsilon", 0, &eps) ||
        gguf_meta_float(g, a, "rope.freq_base", 10000.0, &cfg->rope_theta) || meta_refusals(g, a))
        return STATUS_BAD_INPUT;
    if (!(eps < 1)) {
        error_set("%s: key '%s.attention.layer_norm_rms_epsilon' = %g must be in (0, 1)", g->path,
                  a, eps);
        return STATUS_BAD_INPUT;
    }
    cfg->ln_eps = (float)eps;
    if (cfg->heads % cfg->kv_heads != 0) {
        error_set("%s: key '%s.attention.head_count_kv' = %d does not divide head_count = %d",
                  g->path, a, cfg->kv_heads, cfg->heads);
        return STATUS_BAD_INPUT;
    }
    /* key_length is llama.cpp's head_dim when it differs from embd / heads */
    int usual = cfg->embd % cfg->heads == 0 ? cfg->embd / cfg->heads : 0, hd = 0;
    if (gguf_meta_int(g, a, "attention.key_length", usual, &hd)) return STATUS_BAD_INPUT;
    if (hd % 2) {
        error_set("%s: the head dimension %d is odd (RoPE rotates pairs)", g->path, hd);
        return STATUS_BAD_INPUT;
    }
    cfg->head_dim = hd == usual ? 0 : hd;
    if (gguf_rope_freqs(g, cfg) != STATUS_OK) return STATUS_BAD_INPUT;
    if (gguf_vocab_rows(g, &cfg->vocab) != STATUS_OK) return STATUS_BAD_INPUT;
    cfg->tie_embeddings = gguf_tensor_find(g, "output.weight") == NULL;
    /* q/k/v biases, as Qwen2ForCausalLM and Qwen2MoeForCausalLM */
    cfg->attention_bias = strcmp(a, "qwen2") == 0 || strcmp(a, "qwen2moe") == 0;
    return gguf_moe_config(g, a, cfg);
}

int gguf_llama_tensor_list(const gguf *g, const model_config *cfg, const char *arch,
                           gguf_plan_tensor *out) {
    const long C = cfg->embd, M = cfg->mlp, hd = model_head_dim(cfg);
    const long Q = cfg->heads * hd, KV = cfg->kv_heads * hd;
    /* llama.cpp permutes llama's q and k rows for its rotary kernel, not qwen2's */
    const int perm = strcmp(arch, "llama") == 0;
    int n = 0;
#define ADD(...) gguf_plan_add(out, &n, __VA_ARGS__)
    ADD("wte", -1, 0, 2, cfg->vocab, C, 0, "token_embd.weight");
    for (int i = 0; i < cfg->layers; i++) {
        ADD("ln1_g", i, 0, 1, 1, C, 0, "blk.%d.attn_norm.weight", i);
        ADD("qkv_w", i, 0, 2, Q, C, perm ? cfg->heads : 0, "blk.%d.attn_q.weight", i);
        ADD("qkv_w", i, Q, 2, KV, C, perm ? cfg->kv_heads : 0, "blk.%d.attn_k.weight", i);
        ADD("qkv_w", i, Q + KV, 2, KV, C, 0, "blk.%d.attn_v.weight", i);
        if (cfg->attention_bias) {
            ADD("qkv_b", i, 0, 1, 1, Q, 0, "blk.%d.attn_q.bias", i);
            ADD("qkv_b", i, Q, 1, 1, KV, 0, "blk.%d.attn_k.bias", i);
            ADD("qkv_b", i, Q + KV, 1, 1, KV, 0, "blk.%d.attn_v.bias", i);
        }
        ADD("proj_w", i, 0, 2, C, Q, 0, "blk.%d.attn_output.weight", i);
        ADD("ln2_g", i, 0, 1, 1, C, 0, "blk.%d.ffn_norm.weight", i);
        if (cfg->experts > 0) {
            n += gguf_moe_layer_tensors(g, cfg, i, out + n);
            continue;
        }
        ADD("gate_up_w", i, 0, 2, M, C, 0, "blk.%d.ffn_gate.weight", i);
        ADD("gate_up_w", i, M, 2, M, C, 0, "blk.%d.ffn_up.weight", i);
        ADD("down_w", i, 0, 2, C, M, 0, "blk.%d.ffn_down.weight", i);
    }
    ADD("lnf_g", -1, 0, 1, 1, C, 0, "output_norm.weight");
    if (!cfg->tie_embeddings) ADD("head_w", -1, 0, 2, cfg->vocab, C, 0, "output.weight");
#undef ADD
    return n;
}

void gguf_rows_unpermute(void *rows, void *tmp, int n_heads, long hd, size_t row_bytes) {
    const long half = hd / 2;
    char *t = tmp;
    for (int h = 0; h < n_heads; h++) {
        char *head = (char *)rows + (size_t)h * (size_t)hd * row_bytes;
        for (long j = 0; j < 2; j++)
            for (long k = 0; k < half; k++)
                memcpy(t + (size_t)(j * half + k) * row_bytes, head + (size_t)(2 * k + j) * row_bytes,
                       row_bytes);
        memcpy(head, t, (size_t)hd * row_bytes);
    }
}
