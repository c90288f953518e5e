/* Inside the GGUF importer (import_gguf.c, import_gguf_llama.c): the plan of one GGUF tensor,
 * the llama/qwen2 reader of the metadata and tensor names (import_gguf_llama.c) and the
 * mixtures of experts' (import_gguf_moe.c). */
#pragma once

#include "io/gguf.h"
#include "model/model.h"

/* One GGUF tensor and where it lands: layer slice `layer` of /weights/<dst> (-1: unstacked),
 * starting at row_offset of its row dimension, with rows x cols values (ndims 2; a GGUF
 * tensor's dims are [cols, rows], ggml's innermost first) or cols values (ndims 1).
 * unpermute_heads > 0 undoes llama.cpp's reordering of the rows of each of that many heads.
 * experts > 0: the GGUF tensor is llama.cpp's stack of that many experts' matrices (dims
 * [cols, rows, experts]), of which this entry is slice `expert`; one expert is read at a time. */
typedef struct {
    char name[64];
    const char *dst;
    int layer;
    int ndims;
    long rows, cols;
    long row_offset;
    int unpermute_heads;
    int experts, expert;
} gguf_plan_tensor;

/* Reads the {arch}.* hyperparameters of arch "llama", "qwen2" or "qwen2moe" (and Llama 3.1's
 * rope_freqs tensor) into cfg, refusing what tripar does not run by key and value; a llama with
 * llama.expert_count is Mixtral. STATUS_OK or STATUS_BAD_INPUT. */
int gguf_llama_config(gguf *g, const char *arch, model_config *cfg);
/* The same for arch "gpt2" (import_gguf_gpt2.c), and its tensors in checkpoint order. */
int gguf_gpt2_config(const gguf *g, model_config *cfg);
int gguf_gpt2_tensor_list(const model_config *cfg, gguf_plan_tensor *out);

/* Metadata helpers of every architecture (import_gguf_plan.c): an integer key {arch}.suffix
 * in [1, 2^30], or a positive number one; absent gives dflt when dflt > 0, else a refusal
 * naming the key. The vocabulary is token_embd.weight's row count. */
int gguf_meta_int(const gguf *g, const char *arch, const char *suffix, int dflt, int *out);
int gguf_meta_float(const gguf *g, const char *arch, const char *suffix, double dflt, double *out);
int gguf_vocab_rows(const gguf *g, int *vocab);
/* Appends one planned tensor, its name printed from fmt, to out[*n]. */
void gguf_plan_add(gguf_plan_tensor *out, int *n, const char *dst, int layer, long row_offset,
                   int ndims, long rows, long cols, int unpermute_heads, const char *fmt, ...)
    __attribute__((format(printf, 10, 11)));

/* The GGUF tensors of cfg's model, in checkpoint order; returns the count (at most
 * gguf_plan_capacity(cfg)). */
int gguf_llama_tensor_list(const gguf *g, const model_config *cfg, const char *arch,
                           gguf_plan_tensor *out);

/* The mixture-of-experts hyperparameters (import_gguf_moe.c) of a llama with expert_count
 * (Mixtral) or a qwen2moe: experts, top k, the expert and shared-expert widths and whether the
 * top-k weights are renormalised, into cfg (whose Llama part is read); refusals by key. */
int gguf_moe_config(const gguf *g, const char *arch, model_config *cfg);
/* One layer's router, experts and shared expert, in checkpoint order: from the 3-D stacks
 * ffn_{gate,up,down}_exps, or from an older file's per-expert ffn_{gate,up,down}.E when the
 * layer has no stack; returns the count (at most 3 * experts + 5). */
int gguf_moe_layer_tensors(const gguf *g, const model_config *cfg, int layer,
                           gguf_plan_tensor *out);

/* Room for any model's plan (a layer: 12 dense entries, or 9 + 3 per expert + 5). */
static inline int gguf_plan_capacity(const model_config *cfg) {
    return (12 + 3 * cfg->experts + 5) * cfg->layers + 4;
}

/* Undoes convert_hf_to_gguf.py's permute() on rows (n_heads * hd rows of row_bytes bytes: fp32
 * values, or a row of ggml blocks): within each head llama.cpp stores HF row j * hd/2 + k at
 * row 2k + j; in gets the HF order back through tmp (the same size). */
void gguf_rows_unpermute(void *rows, void *tmp, int n_heads, long hd, size_t row_bytes);

/* The GGUF file's tokenizer as the text of a Hugging Face tokenizer.json (malloc'ed), for
 * tokenizer.ggml.model = "gpt2" with tokenizer.ggml.pre in {default, gpt2, llama-bpe, qwen2,
 * smollm}, and "llama" (SentencePiece BPE). Returns 1, 0 when the file has no tokenizer.ggml.model
 * (*json_text NULL), or -1 with error_message() naming the key and value it refuses. vocab:
 * token_embd's rows. */
int gguf_tokenizer_json(const gguf *g, int vocab, char **json_text);

/* llama.cpp's token types (tokenizer.ggml.token_type) */
enum {
    GGUF_TOKEN_NORMAL = 1,
    GGUF_TOKEN_UNKNOWN = 2,
    GGUF_TOKEN_CONTROL = 3,
    GGUF_TOKEN_USER_DEFINED = 4,
    GGUF_TOKEN_UNUSED = 5,
    GGUF_TOKEN_BYTE = 6,
};

/* The string array key, or NULL with the refusal set. */
const gguf_kv *gguf_strings(const gguf *g, const char *key);

/* SentencePiece BPE (tokenizer.ggml.model = "llama") as a tokenizer.json's root object
 * (import_gguf_spm.c), taking vocab_obj and added (token -> id, and the added tokens); NULL with
 * the refusal set. types may be NULL (every token normal). */
struct json_t;
struct json_t *gguf_spm_json(const gguf *g, const gguf_kv *tokens, const gguf_kv *types,
                             struct json_t *vocab_obj, struct json_t *added);
