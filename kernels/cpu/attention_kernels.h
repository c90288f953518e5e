/* The CPU attention family's kernels, one table per instruction-set level
 * (kernels/cpu/cpu_isa.h); attention.c calls them. Every entry is filled: a level that does not
 * specialise one points to the best kernel below it. */
#pragma once

typedef struct cpu_attention_kernels {
    /* y[i] = exp(x[i] - shift) for i < n, and returns the sum of the y (a softmax's
     * denominator). y may be x. */
    float (*exp_shift_sum)(float *y, const float *x, float shift, int n);
} cpu_attention_kernels;

/* The tables (attention_scalar.c, attention_avx2.c, attention_avx512.c). */
extern const cpu_attention_kernels cpu_attention_scalar;
extern const cpu_attention_kernels cpu_attention_avx2;
extern const cpu_attention_kernels cpu_attention_avx512;
