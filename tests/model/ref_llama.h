/* An independent reference Llama forward for tests: double precision, plain loops over the
 * global (unsharded) weights, no KV cache, no BLAS, its own RoPE table. It shares nothing with
 * src/ but the synthetic-weight formula and the tensor names and global layouts
 * (docs/checkpoint.md). The mixture of experts routes each token by its own top-k and softmax
 * in double, and runs the experts it chose one token at a time. */
#pragma once
#include <stdint.h>

#include "model/model.h"

/* Mixture of experts (mixtral, qwen2_moe): the router (with the shared expert's gate as its
 * last row), the routed experts' gate|up and down stacked (layer * experts + expert), and the
 * shared expert's; the dense gate_up / down are then absent. */
enum {
    RL_WTE, RL_LN1, RL_QKV, RL_O, RL_LN2, RL_GATE_UP, RL_DOWN, RL_LNF, RL_HEAD,
    RL_ROUTER, RL_EXP_GU, RL_EXP_DOWN, RL_SH_GU, RL_SH_DOWN, RL_N
};

typedef struct {
    model_config cfg;
    double *t[RL_N]; /* global tensors; t[RL_HEAD] NULL when tied */
    double *inv_freq; /* (hd / 2) */
    int act_block[MATRIX_INPUT_KINDS]; /* int8w: activation blocks by input kind, else 0 */
    int head_act_block;                /* the same for the head (0 when it stays fp32) */
} ref_llama;

void ref_llama_synthetic(ref_llama *r, const model_config *cfg, uint64_t seed);
/* INT8-rounds every matrix per output row or group (qkv, o, gate|up, down and the head when
 * cfg.quantize_head, a tied one included), as model.precision int8w stores them, and rounds
 * the activations entering each the way the cpu backend does (model_int8_layout). */
void ref_llama_quantize_int8(ref_llama *r);
void ref_llama_free(ref_llama *r);
/* logits (n, vocab) of the n tokens of one sequence at positions 0..n-1. */
void ref_llama_forward(const ref_llama *r, const int32_t *tokens, int n, double *logits);
/* Greedy generation by full recomputation: writes prompt + new tokens into out. */
void ref_llama_generate(const ref_llama *r, const int32_t *prompt, int prompt_len,
                        int new_tokens, int32_t *out);
