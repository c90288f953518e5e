/* The GGUF importer: a llama.cpp model file (architectures llama, with Mixtral's experts, qwen2,
 * qwen2moe and gpt2) into a tripar checkpoint (docs/checkpoint.md, "GGUF import").
 * `tripar import-gguf` (src/cli/import_gguf.c) is its command line. */
#pragma once

#include "io/import_write.h"
#include "model/model.h"

/* What an import read and wrote, for the command's summary. */
typedef struct {
    model_config cfg;
    char arch[32];     /* general.architecture */
    int n_tensors;     /* GGUF tensors converted */
    int n_quantized;   /* of them, stored in a type other than F32, F16, BF16 */
    int has_tokenizer; /* tokenizer.ggml.* stored as /tokenizer/json */
    precision_kind precision; /* how the matrices were stored (--precision keep's choice) */
    int n_kept;               /* matrices whose blocks were stored as they are, no fp32 copy */
    int n_requantized;        /* under keep: matrices of another type, requantised into it */
    char requantized[64];     /* their GGUF types, e.g. "Q6_K, F16" */
} import_gguf_summary;

/* Converts the GGUF file path into the checkpoint out, its weights stored as o asks. The metadata,
 * every tensor's presence, type and shape, and the output path are checked before the first byte is
 * written; tensors are then read, dequantized and written one at a time. Returns STATUS_OK with
 * *summary filled, or STATUS_BAD_INPUT with error_message() naming the key or tensor and its value
 * (a tensor found truncated or non-finite while writing removes the partial checkpoint). */
/* With o->keep, the matrices take the block format (Q8_0, Q4_0, Q4_1 or Q4_K) that holds most of
 * their weights in the file: those blocks are stored as they are, the others dequantised and
 * quantised into it; a file with no matrix in those formats is refused. */
int import_gguf_convert(const char *path, const char *out, const import_options *o,
                        import_gguf_summary *summary);
