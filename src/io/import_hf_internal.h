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
 * MistralForCausalLM, Qwen2ForCausalLM). */
int hf_llama_architecture(const char *arch);

/* Reads a Llama-family config.json (root, read from path) into cfg, refusing what tripar does
 * not run. Returns STATUS_OK or STATUS_BAD_INPUT with error_message() naming key and value. */
int hf_llama_config(json_t *root, const char *path, const char *arch, model_config *cfg);

/* The HF tensors a Llama-family model of cfg must have, in checkpoint order; returns the count
 * (at most 12 * layers + 4). */
int hf_llama_tensor_list(const model_config *cfg, hf_tensor *out);
