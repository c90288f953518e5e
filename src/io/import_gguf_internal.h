/* Inside the GGUF importer (import_gguf.c, import_gguf_llama.c): the plan of one GGUF tensor,
 * and the llama/qwen2 reader of the metadata and tensor names (import_gguf_llama.c). */
#pragma once

#include "io/gguf.h"
#include "model/model.h"

/* One GGUF tensor and where it lands: layer slice `layer` of /weights/<dst> (-1: unstacked),
 * starting at row_offset of its row dimension, with rows x cols values (ndims 2; a GGUF
 * tensor's dims are [cols, rows], ggml's innermost first) or cols values (ndims 1).
 * unpermute_heads > 0 undoes llama.cpp's reordering of the rows of each of that many heads. */
typedef struct {
    char name[64];
    const char *dst;
    int layer;
    int ndims;
    long rows, cols;
    long row_offset;
    int unpermute_heads;
} gguf_plan_tensor;

/* Reads general.architecture and the {arch}.* hyperparameters (and Llama 3.1's rope_freqs
 * tensor) into cfg, refusing what tripar does not run by key and value. STATUS_OK or
 * STATUS_BAD_INPUT. */
int gguf_llama_config(gguf *g, model_config *cfg, char *arch, size_t arch_len);

/* The GGUF tensors of cfg's model, in checkpoint order; returns the count (at most
 * 12 * layers + 4). */
int gguf_llama_tensor_list(const model_config *cfg, const char *arch, gguf_plan_tensor *out);

/* Undoes convert_hf_to_gguf.py's permute() on rows (n_heads * hd rows of cols values): within
 * each head llama.cpp stores HF row j * hd/2 + k at row 2k + j; in gets the HF order back
 * through tmp (the same size). */
void gguf_rows_unpermute(float *rows, float *tmp, int n_heads, long hd, long cols);

/* The GGUF file's tokenizer as the text of a Hugging Face tokenizer.json (malloc'ed), for
 * tokenizer.ggml.model = "gpt2" and tokenizer.ggml.pre in {default, gpt2, llama-bpe, qwen2,
 * smollm}. Returns 1, 0 when the file has no tokenizer.ggml.model (*json_text NULL), or -1
 * with error_message() naming the key and value it refuses. vocab: token_embd's rows. */
int gguf_tokenizer_json(const gguf *g, int vocab, char **json_text);
