/* The CPU attention family's kernels, one table per instruction-set level
 * (kernels/cpu/cpu_isa.h); attention.c calls them. Every entry is filled: a level that does not
 * specialise one points to the best kernel below it. Every level computes the same function
 * bit for bit (the int8w path quantises attention's output, where one flipped rounding shows
 * in the logits): one exp polynomial, every sum in the order stated, a fused multiply-add for
 * each product that is summed. */
#pragma once
#include "kernels/backend.h"

typedef struct cpu_attention_kernels {
    /* y[i] = exp(x[i] - shift) for i < n, and returns the sum of the y in index order (a
     * softmax's denominator). y may be x. exp is a polynomial within 2 ulp of expf, and 0 below
     * -87.3 (where expf is a denormal). */
    float (*exp_shift_sum)(float *y, const float *x, float shift, int n);
    /* The same y without the sum: decode adds them up in weigh_values instead, where the chain
     * of n dependent additions runs beside the loads of the values rather than after the exps
     * on its own (about a tenth of a 16-bit cache's decode step at 4096 positions). */
    void (*exp_shift)(float *y, const float *x, float shift, int n);
    /* s[j] = scale * (q . k_j) for the n keys k: one query's scores. The keys are n cache
     * rows in type, kv_row_bytes(type, hd) bytes apart, each element widened in registers to
     * the fp32 kv_rows_load gives (so a narrow cache streams its own bytes once, with no fp32
     * copy written and read back). Each dot in 16 partial sums p[l] over d = l, l + 16,
     * l + 32, ... < hd, each a chain of fused multiply-adds from 0 in increasing d, then the
     * pairwise tree ((p[l] + p[l+8]), then + lane l+4, then l+2, then l+1): a key's row is read
     * as it lies, 16 lanes at a time. */
    void (*dot_keys)(float *s, const float *q, const void *k, int n, int hd, float scale,
                     dtype type);
    /* o[d] += w[j] v_j[d] for j = 0..n-1 in order, fused, over n values v: cache rows in type
     * as dot_keys reads them, widened in registers. One query's weighted values. Returns
     * sum + w[0] + w[1] + ... + w[n-1], added in index order: from sum 0 the bits of
     * exp_shift_sum's sum of the same w, and the run after run of a paged cache continues one
     * chain. */
    float (*weigh_values)(float *o, const float *w, const void *v, int n, int hd, dtype type,
                          float sum);
    /* One key block of the tiled prefill's online softmax, for up to ATTN_TILE rows of one head:
     * qt (hd, ATTN_TILE) the rows' queries transposed and pre-scaled (columns past rows zero);
     * k, v (kn, hd) keys k0..k0+kn-1, kn <= ATTN_TILE; row i sits at position first + i and sees
     * the keys up to it. m, l (ATTN_TILE) each row's running max and sum; o (rows, hd), ld ldo,
     * its unnormalised output, rescaled to the new max and added to. st (ATTN_TILE^2) scratch.
     * Scores sum over d in order, fused; the block's exp sum runs over keys in order; l becomes
     * fma(l, alpha, sum), o becomes alpha o then its fused weighted values in key order. */
    void (*tile_step)(float *o, long ldo, float *m, float *l, const float *qt, const float *k,
                      const float *v, int rows, int kn, int hd, int first, int k0, float *st);
    /* dst (n, hd) = the n cache rows at src, kv_row_bytes(type, hd) bytes apart, in fp32 (the
     * kv_view layout of kernels/backend.h): bf16 and f16 widened exactly, int8 as q * s, one
     * product. No sums, so every level gives the same bits. type is not DTYPE_F32 (that cache
     * is read in place). Prefill's blocks, which every query row of the block reuses. */
    void (*kv_rows_load)(float *dst, const void *src, int n, int hd, dtype type);
} cpu_attention_kernels;

/* Rows and keys of one tile_step. */
enum { ATTN_TILE = 64 };

/* The tables (attention_scalar.c, attention_avx2.c, attention_avx512.c). */
extern const cpu_attention_kernels cpu_attention_scalar;
extern const cpu_attention_kernels cpu_attention_avx2;
extern const cpu_attention_kernels cpu_attention_avx512;
