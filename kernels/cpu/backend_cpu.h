/* Private to the CPU backend: its context and the ops of each kernel file, gathered into the
 * ops table by backend_cpu.c. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_isa.h"

/* Matmul tile budget in floats (512 KiB, about an L2), allocated at init: widths up to 8192
 * fit MATMUL_TILE_MIN_ROWS rows in it; wider ones grow it once. */
enum { CPU_MATMUL_TILE_FLOATS = 128 * 1024 };

/* Scratch buffers grow at the first call with a bigger shape and never shrink, so the decode
 * loop (same or smaller shapes than the prefill before it) allocates nothing. */
typedef struct {
    float *data;
    size_t cap; // floats
} cpu_scratch;

typedef struct {
    double *marks; // (max_marks) CLOCK_MONOTONIC seconds
    int max_marks;
    int threads;                // OpenMP threads of the kernels (and of OpenBLAS)
    const cpu_kernel_set *kern; // the instruction-set level's kernels, chosen at init
    cpu_scratch tile;           // matmul: tiles of weight rows expanded to fp32, one per thread
    cpu_scratch act;            // matmul: the activation rows in bf16 or int8 blocks, or widened
    cpu_scratch attn;           // attention: per-thread scores, tiles and gathered K/V
    int attn_tiled_min;         // prefill of at least this many tokens runs the tiled kernel
    int attn_tile_gemm;         // tiled kernel's products: sgemm (1) or the level's kernels (0)
    long grow_count;            // scratch (re)allocations since init, for the no-allocation test
} cpu_ctx;

/* Ops outside BLAS split their rows (or heads, or vocabulary chunks) over the backend's
 * threads only above this many elements of work: below it, waking the other threads costs
 * more than the loop (a decode step's norms of one 768-wide row stay on one thread). */
enum { CPU_PARALLEL_MIN_ELEMS = 16384 };

/* Threads for an op over rows x cols elements: ctx->threads, or 1 for small work. */
static inline int cpu_op_threads(const cpu_ctx *ctx, long rows, long cols) {
    return rows * cols < CPU_PARALLEL_MIN_ELEMS || ctx->threads < 2 ? 1 : ctx->threads;
}

/* Returns scratch of at least floats floats, growing it if needed. */
float *cpu_scratch_reserve(cpu_ctx *ctx, cpu_scratch *s, size_t floats);

/* Number of scratch allocations made by a CPU backend since init (tests use it to check that
 * steady-state calls allocate nothing). */
long backend_cpu_grow_count(const backend *be);

/* The instruction-set level a CPU backend runs. */
cpu_isa backend_cpu_isa(const backend *be);

void cpu_gather_rows(void *ctx, float *out, const float *in, const int32_t *idx, int n, int C);
void cpu_scatter_add_rows(void *ctx, float *out, const float *in, const int32_t *idx,
                          const float *weight, int n, int C);
void cpu_embed(void *ctx, float *out, const int32_t *tokens, const float *wte, const float *wpe,
               int rows, int C, int n_new, int pos0, int vocab_begin, int vocab_end);
void cpu_layernorm(void *ctx, float *out, const float *in, const float *gamma, const float *beta,
                   int rows, int C, float eps);
void cpu_residual_layernorm(void *ctx, float *residual, float *norm_out, const float *delta,
                            const float *gamma, const float *beta, int rows, int C, float eps);
void cpu_matmul(void *ctx, float *out, const float *in, weight_view w, const float *bias, int rows,
                int in_dim, int out_dim);
void cpu_bias_gelu(void *ctx, float *inout, const float *bias, int rows, int cols);
void cpu_rmsnorm(void *ctx, float *out, const float *in, const float *w, int rows, int C,
                 float eps);
void cpu_residual_rmsnorm(void *ctx, float *residual, float *norm_out, const float *delta,
                          const float *w, int rows, int C, float eps);
void cpu_swiglu(void *ctx, float *out, const float *gate_up, int rows, int cols);
void cpu_attention(void *ctx, float *out, const float *qkv, kv_view cache,
                   const float *rope_inv_freq, int seq0, int batch, int n_new, int pos0);

/* Rotary embeddings (rope.c), for attention. cs (n, hd): row t holds cos(a_i) in [0, hd/2)
 * and sin(a_i) in [hd/2, hd) for a_i = (pos0 + t) * inv_freq[i], the angle in double. */
void cpu_rope_table(float *cs, const float *inv_freq, int hd, int pos0, int n);
/* dst (hd) = src turned by one row cs of cpu_rope_table: (x_i, x_{i+hd/2}) ->
 * (x_i c - x_{i+hd/2} s, x_{i+hd/2} c + x_i s). dst may be src. */
void cpu_rope_rotate(float *dst, const float *src, const float *cs, int hd);
void cpu_argmax(void *ctx, float *max_val, int32_t *max_idx, const float *logits, int rows,
                int cols);
