/* The Hugging Face importer: a GPT-2 or Llama-family directory (config.json, model.safetensors
 * or a sharded index, the tokenizer files) into a tripar checkpoint (docs/checkpoint.md).
 * `tripar import-hf` (src/cli/import_hf.c) is its command line. */
#pragma once

#include "io/import_write.h"
#include "model/model.h"

/* What an import read and wrote, for the command's summary. */
typedef struct {
    model_config cfg;
    int n_tensors;      /* HF tensors converted */
    int n_files;        /* safetensors files read */
    int dtype_count[3]; /* tensors read as F32, F16, BF16 */
    int has_tokenizer;  /* tokenizer.json, or vocab.json and merges.txt, stored */
} import_hf_summary;

/* Converts the HF directory dir into the checkpoint out, its weights stored as o asks. config.json,
 * every tensor's presence, shape and finiteness, the tokenizer files and the output path are
 * checked before the first byte is written; warnings (a GELU other than tanh, an lm_head that
 * differs from the tied wte) go to stderr. Returns STATUS_OK with *summary filled, or
 * STATUS_BAD_INPUT with error_message() set. */
int import_hf_convert(const char *dir, const char *out, const import_options *o,
                      import_hf_summary *summary);
