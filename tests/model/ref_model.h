/* An independent reference GPT-2 forward for tests: double precision, plain loops over the
 * global (unsharded) weights, no KV cache, no BLAS. It shares nothing with src/ but the
 * synthetic-weight formula and the checkpoint's dataset names. */
#pragma once
#include <stdint.h>

#include "model/model.h"

enum {
    REF_WTE, REF_WPE, REF_LN1_G, REF_LN1_B, REF_QKV_W, REF_QKV_B, REF_PROJ_W, REF_PROJ_B,
    REF_LN2_G, REF_LN2_B, REF_FC1_W, REF_FC1_B, REF_FC2_W, REF_FC2_B, REF_LNF_G, REF_LNF_B,
    REF_N_TENSORS
};

typedef struct {
    model_config cfg;
    float *t[REF_N_TENSORS]; /* global tensors, shapes as in docs/checkpoint.md */
    float *head;             /* (V, C) the head's int8 copy of wte (quantize_head), else NULL */
    int act_block[MATRIX_INPUT_KINDS]; /* int8w: activation blocks by input kind, else 0 */
} ref_model;

extern const char *const ref_tensor_names[REF_N_TENSORS];

/* Global weights from the synthetic formula (seed), or from a tripar checkpoint. */
void ref_model_synthetic(ref_model *r, const model_config *cfg, uint64_t seed);
int ref_model_checkpoint(ref_model *r, const char *path);
/* INT8-rounds the four matrices per output row or group (and a copy of wte for the head when
 * cfg.quantize_head), as model.precision int8w stores them, and rounds the activations
 * entering each the way the cpu backend does (model_int8_layout). */
void ref_model_quantize_int8(ref_model *r);
void ref_model_free(ref_model *r);

/* logits (n, vocab) for the n tokens of one sequence at positions 0..n-1. */
void ref_model_forward(const ref_model *r, const int32_t *tokens, int n, double *logits);

/* Greedy generation by full recomputation: writes prompt + new tokens into out. */
void ref_model_generate(const ref_model *r, const int32_t *prompt, int prompt_len, int new_tokens,
                        int32_t *out);
