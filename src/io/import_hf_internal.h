/* Inside the Hugging Face importer (import_hf.c, import_hf_llama.c): the plan of one Hugging
 * Face tensor, and the Llama-family reader of config.json and tensor names (import_hf_llama.c);
 * import_hf.c does the rest. */
#pragma once
#include <jansson.h>

#include "model/model.h"

/* One HF tensor and where it lands: layer slice `layer` of /weights/<dst> (layer -1 for the
 * unstacked ones), transposed from Conv1D [in, out] when transpose is set, starting at
 * row_offset of the dataset's row dimension (the last one for a 1-D tensor): Llama's q, k and
 * v go into row blocks of qkv_w and gate and up into gate_up_w, one tensor at a time. */
typedef struct {
    char name[96];
    const char *dst;
    int layer;
    int transpose;
    int ndims;
    long shape[2]; /* as stored in the HF file */
    long row_offset;
} hf_tensor;

/* Whether architectures[0] names a Llama-family model tripar imports (LlamaForCausalLM,
 * MistralForCausalLM, Qwen2ForCausalLM, and the mixtures of experts MixtralForCausalLM and
 * Qwen2MoeForCausalLM). */
int hf_llama_architecture(const char *arch);

/* Reads a Llama-family config.json (root, read from path) into cfg, refusing what tripar does
 * not run. Returns STATUS_OK or STATUS_BAD_INPUT with error_message() naming key and value. */
int hf_llama_config(json_t *root, const char *path, const char *arch, model_config *cfg);

/* The HF tensors a Llama-family model of cfg must have, in checkpoint order; returns the count
 * (at most hf_tensor_capacity(cfg)). */
int hf_llama_tensor_list(const model_config *cfg, hf_tensor *out);

/* The mixture-of-experts tensors of one layer (import_hf_moe.c): the router, each expert's
 * three, and the shared expert's four; returns the count (at most 3 * experts + 5). */
int hf_moe_layer_tensors(const model_config *cfg, int layer, hf_tensor *out);

/* Room for any model's tensor list. */
static inline int hf_tensor_capacity(const model_config *cfg) {
    return (12 + 3 * cfg->experts + 5) * cfg->layers + 4;
}
