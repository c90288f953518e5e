/* Reference twins of every backend op: naive loops, double accumulation, no BLAS, no cache.
 * Frozen once validated; every backend (cpu, cuda) is compared against these on host memory.
 * Also the small helpers the op tests share: a seeded generator and the norm-wise error. */
#pragma once
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (rows, C) = (tok in [vocab_begin, vocab_end) ? wte[tok - vocab_begin] : 0)
 *               + (wpe ? wpe[positions[r]] : 0) */
void ref_embed(float *out, const int32_t *tokens, const int32_t *positions, const float *wte,
               const float *wpe, int rows, int C, int vocab_begin, int vocab_end);

/* out (rows, C) = (in - mean) / sqrt(var + eps) * gamma + beta; biased variance. */
void ref_layernorm(float *out, const float *in, const float *gamma, const float *beta, int rows,
                   int C, float eps);

/* residual += delta, then norm_out = LayerNorm(residual) when norm_out is not NULL. */
void ref_residual_layernorm(float *residual, float *norm_out, const float *delta,
                            const float *gamma, const float *beta, int rows, int C, float eps);

/* out (rows, out_dim) = in (rows, in_dim) @ W^T + bias; W (out_dim, in_dim) fp32; bias or NULL */
void ref_matmul(float *out, const float *in, const float *w, const float *bias, int rows,
                int in_dim, int out_dim);

/* The same with weight-only INT8: W[o][i] = q[o][i] * scale[o]. */
void ref_matmul_int8(float *out, const float *in, const int8_t *q, const float *scale,
                     const float *bias, int rows, int in_dim, int out_dim);

/* The same for any host weight_view (f32, int8, bf16, f16), via ref_weight_to_f32. */
void ref_matmul_view(float *out, const float *in, weight_view w, const float *bias, int rows,
                     int in_dim, int out_dim);

/* The CPU backend's definition of the same product (docs/kernels.md): bf16 weights meet
 * activations rounded to bf16 (to nearest even); int8 weights with act_block meet activations
 * quantised by ref_quantize_q8, with exact integer block sums; the rest as ref_matmul_view. */
void ref_matmul_cpu(float *out, const float *in, weight_view w, const float *bias, int rows,
                    int in_dim, int out_dim);

/* Rows of x (rows, k) to int8 blocks of `block` values counted from each row's start (the
 * last shorter): d = max|x| / 127, q = x * (1 / d) rounded to nearest even (0 for an all-zero
 * block). q (rows, k), d (rows, ceil(k / block)). */
void ref_quantize_q8(int8_t *q, float *d, const float *x, int rows, int k, int block);

/* n weights (a multiple of 256) of ggml's q4_k super-blocks read from their bytes in double:
 * (d * sc) * q - dmin * mn per sub-block of 32. */
void ref_q4k_dequantize(double *out, const void *blocks, long n);

/* Expands a host weight_view of (rows, cols) into fp32 (rows, cols), group scales included. */
void ref_weight_to_f32(float *out, weight_view w, long rows, long cols);

/* Independent scalar conversions (bit-level bf16, arithmetic f16) for cross-checking. */
float ref_bf16_to_f32(uint16_t h);
float ref_f16_to_f32(uint16_t h);

/* inout (rows, cols) = gelu_tanh(inout + bias); bias (cols) or NULL */
void ref_bias_gelu(float *inout, const float *bias, int rows, int cols);

/* Causal attention over a whole sequence, no cache: qkv (batch * T, 3 * heads * head_dim)
 * laid out [q | k | v] with heads contiguous in each; out (batch * T, heads * head_dim).
 * Row t of a sequence attends to positions 0..t. Compare rows pos0.. of a sequence with a
 * backend call whose new tokens start at pos0. */
void ref_attention(float *out, const float *qkv, int batch, int T, int heads, int head_dim);

/* out (rows, C) = in / sqrt(mean(in^2) + eps) * w; w (C). */
void ref_rmsnorm(float *out, const float *in, const float *w, int rows, int C, float eps);

/* residual += delta, then norm_out = RMSNorm(residual) when norm_out is not NULL. */
void ref_residual_rmsnorm(float *residual, float *norm_out, const float *delta, const float *w,
                          int rows, int C, float eps);

/* out (rows, cols) = silu(gate) * up; gate_up (rows, 2 * cols), each row [gate | up]. */
void ref_swiglu(float *out, const float *gate_up, int rows, int cols);
/* Mixture of experts: out row i = in row idx[i]; out row idx[i] += weight[i] * in row i. */
void ref_gather_rows(float *out, const float *in, const int32_t *idx, int n, int C);
void ref_scatter_add_rows(float *out, const float *in, const int32_t *idx, const float *weight,
                          int n, int C);

/* inv_freq (head_dim / 2) = theta^(-2i / head_dim), then with llama3 set Llama 3.1 scaling
 * written as a clamped blend: s = clamp((orig * inv / (2 pi) - low) / (high - low), 0, 1),
 * inv * ((1 - s) / factor + s). All in double. */
void ref_rope_inv_freq(double *inv_freq, int head_dim, double theta, int llama3, double factor,
                       double low, double high, double orig);

/* out (hd) = x rotated to position pos ("rotate half": pair (i, i + hd/2) turns by
 * pos * inv_freq[i]), in double, rounded once. out may not alias x. */
void ref_rope_apply(float *out, const float *x, int hd, int pos, const float *inv_freq);

/* Causal grouped-query attention over a whole sequence, no cache: qkv (batch * T,
 * (heads + 2 * kv_heads) * head_dim) laid out [q | k | v]; query head h uses kv head
 * h / (heads / kv_heads); out (batch * T, heads * head_dim). With inv_freq (head_dim / 2) not
 * NULL, q and k of row t are rotated to position t first (in double). */
void ref_attention_gqa(float *out, const float *qkv, int batch, int T, int heads, int kv_heads,
                       int head_dim, const float *inv_freq);

/* The same with the keys (after rotation, rounded to float) and values rounded through a KV
 * cache of type (ref_kv_round) before the double-precision attention: the function the cache's
 * kernels compute on what they stored. DTYPE_F32 is ref_attention_gqa. */
void ref_attention_gqa_kv(float *out, const float *qkv, int batch, int T, int heads, int kv_heads,
                          int head_dim, const float *inv_freq, dtype type);

/* out (hd) = the row x (hd) as a KV cache of type holds it, by arithmetic independent of the
 * kernels' bit tricks: bf16 and f16 to nearest even (f16 subnormals below 2^-14), int8 as
 * q * s with s = max |x| / 127 and q = x / s rounded to nearest even (kernels/quant.h's rule). */
void ref_kv_round(float *out, const float *x, int hd, dtype type);
/* out (hd) = the cache row at row (kv_row_bytes(type, hd) bytes, backend.h's layout) decoded
 * with the twins' own decoders. */
void ref_kv_decode(float *out, const void *row, int hd, dtype type);

/* First maximum of each row, NaN counting as larger than every number: a row holding a NaN
 * gives its first NaN's column and value NaN. */
void ref_argmax(float *max_val, int32_t *max_idx, const float *logits, int rows, int cols);

/* Test helpers. A splitmix64 generator: deterministic from the seed on every platform. */
uint64_t ref_rng_next(uint64_t *state);
/* Uniform in [lo, hi). */
float ref_rng_uniform(uint64_t *state, float lo, float hi);
void ref_fill_uniform(float *x, long n, uint64_t *state, float lo, float hi);

/* Norm-wise relative error max|a - ref| / max|ref| (max|a - ref| when ref is all zero). */
double ref_rel_error(const float *a, const float *ref, long n);

#ifdef __cplusplus
}
#endif
