/* The gpt2 architecture of the GGUF importer: the gpt2.* metadata into a GPT-2 model_config as
 * import-hf reads config.json, and llama.cpp's tensor names mapped onto the checkpoint's. The
 * converter has already transposed GPT-2's Conv1D weights into Linear's (out, in), so nothing
 * is transposed here. */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "io/import_gguf_internal.h"

int gguf_gpt2_config(const gguf *g, model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    double eps = 0;
    if (gguf_meta_int(g, "gpt2", "block_count", 0, &cfg->layers) ||
        gguf_meta_int(g, "gpt2", "embedding_length", 0, &cfg->embd) ||
        gguf_meta_int(g, "gpt2", "attention.head_count", 0, &cfg->heads) ||
        gguf_meta_int(g, "gpt2", "context_length", 0, &cfg->ctx) ||
        gguf_meta_int(g, "gpt2", "feed_forward_length", 4 * cfg->embd, &cfg->mlp) ||
        gguf_meta_float(g, "gpt2", "attention.layer_norm_epsilon", 1e-5, &eps) ||
        gguf_vocab_rows(g, &cfg->vocab))
        return STATUS_BAD_INPUT;
    if (!(eps < 1)) {
        error_set("%s: key 'gpt2.attention.layer_norm_epsilon' = %g must be in (0, 1)", g->path,
                  eps);
        return STATUS_BAD_INPUT;
    }
    if (cfg->embd % cfg->heads != 0) {
        error_set("%s: key 'gpt2.attention.head_count' = %d does not divide embedding_length = %d",
                  g->path, cfg->heads, cfg->embd);
        return STATUS_BAD_INPUT;
    }
    cfg->ln_eps = (float)eps;
    cfg->norm = NORM_PRE;
    if (gguf_tensor_find(g, "output.weight"))
        fprintf(stderr,
                "import-gguf: warning: %s: tensor 'output.weight' is not imported; "
                "tripar ties GPT-2's LM head to token_embd\n",
                g->path);
    return STATUS_OK;
}

int gguf_gpt2_tensor_list(const model_config *cfg, gguf_plan_tensor *out) {
    const long C = cfg->embd, M = cfg->mlp;
    int n = 0;
#define ADD(...) gguf_plan_add(out, &n, __VA_ARGS__)
    ADD("wte", -1, 0, 2, cfg->vocab, C, 0, "token_embd.weight");
    ADD("wpe", -1, 0, 2, cfg->ctx, C, 0, "position_embd.weight");
    for (int i = 0; i < cfg->layers; i++) {
        ADD("ln1_g", i, 0, 1, 1, C, 0, "blk.%d.attn_norm.weight", i);
        ADD("ln1_b", i, 0, 1, 1, C, 0, "blk.%d.attn_norm.bias", i);
        ADD("qkv_w", i, 0, 2, 3 * C, C, 0, "blk.%d.attn_qkv.weight", i);
        ADD("qkv_b", i, 0, 1, 1, 3 * C, 0, "blk.%d.attn_qkv.bias", i);
        ADD("proj_w", i, 0, 2, C, C, 0, "blk.%d.attn_output.weight", i);
        ADD("proj_b", i, 0, 1, 1, C, 0, "blk.%d.attn_output.bias", i);
        ADD("ln2_g", i, 0, 1, 1, C, 0, "blk.%d.ffn_norm.weight", i);
        ADD("ln2_b", i, 0, 1, 1, C, 0, "blk.%d.ffn_norm.bias", i);
        ADD("fc1_w", i, 0, 2, M, C, 0, "blk.%d.ffn_up.weight", i);
        ADD("fc1_b", i, 0, 1, 1, M, 0, "blk.%d.ffn_up.bias", i);
        ADD("fc2_w", i, 0, 2, C, M, 0, "blk.%d.ffn_down.weight", i);
        ADD("fc2_b", i, 0, 1, 1, C, 0, "blk.%d.ffn_down.bias", i);
    }
    ADD("lnf_g", -1, 0, 1, 1, C, 0, "output_norm.weight");
    ADD("lnf_b", -1, 0, 1, 1, C, 0, "output_norm.bias");
#undef ADD
    return n;
}
