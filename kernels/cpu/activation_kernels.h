/* The CPU activation family's kernels (GELU, SwiGLU), one table per instruction-set level
 * (kernels/cpu/cpu_isa.h); gelu.c and swiglu.c call them row by row. Every level computes the
 * same function bit for bit: the exp polynomial the attention kernels use (within 2 ulp of
 * expf, kernels/cpu/exp_avx2.h), and every operation in the order written here, with a fused
 * multiply-add where one is named. */
#pragma once

typedef struct cpu_activation_kernels {
    /* x[i] = v / (1 + exp(u)) for i < n, v = x[i] + (bias ? bias[i] : 0) and
     * u = (v (fma(0.044715, v v, 1))) (-2 sqrt(2 / pi)): GPT-2's tanh GELU, as
     * 0.5 v (1 + tanh(a)) = v sigmoid(2a), with no cancellation for negative v. */
    void (*bias_gelu)(float *x, const float *bias, int n);
    /* o[i] = g[i] / (1 + exp(-g[i])) * u[i] for i < n: silu(gate) times up. For g below about
     * -88 the exp is clamped and the quotient is a tiny negative number, the right limit. */
    void (*swiglu)(float *o, const float *g, const float *u, int n);
} cpu_activation_kernels;

/* The tables (activation_scalar.c, activation_avx2.c, activation_avx512.c). */
extern const cpu_activation_kernels cpu_activation_scalar;
extern const cpu_activation_kernels cpu_activation_avx2;
extern const cpu_activation_kernels cpu_activation_avx512;
