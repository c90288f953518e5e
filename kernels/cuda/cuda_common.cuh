/* Private to kernels/cuda/: the CUDA backend's context, the generic CUDA/cuBLAS checks, and
 * the launchers each op family file provides. Never included by host (.c) code. */
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "base/check.h"

#define CUDA_CHECK(call)                                                                     \
    TRIPAR_CHECK_GEN(call, cudaError_t, rc_ == cudaSuccess, cudaGetErrorString(rc_))
#define CUBLAS_CHECK(call)                                                                   \
    TRIPAR_CHECK_GEN(call, cublasStatus_t, rc_ == CUBLAS_STATUS_SUCCESS,                     \
                     cublasGetStatusString(rc_))
/* After a kernel launch: catches bad launch configurations without synchronising. */
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

/* Workspace grown on demand by the first call of a shape that needs more (see docs/cuda.md:
 * prefill is the largest shape and runs before decode, so decode never allocates). */
typedef struct {
    void *ptr;
    size_t bytes;
} cuda_workspace;

typedef struct {
    void *ptr;
    size_t bytes;
} cuda_allocation;

typedef struct {
    int device;
    cudaStream_t stream;      /* every op is queued here */
    cublasHandle_t cublas;
    void *cublas_ws;          /* fixed cuBLAS workspace: makes cuBLAS safe under graph capture */
    size_t cublas_ws_bytes;
    int allow_tf32;
    cuda_workspace convert;   /* matmul: activations in bf16/f16, or int8 weights as fp32 */
    cuda_workspace attn_split; /* split decode attention's partials, sized from max_ctx */
    int sm_count;             /* multiprocessors: how many blocks fill the device */
    /* timing marks: anchor paired with the host monotonic clock at init */
    cudaEvent_t anchor;
    double anchor_host;
    cudaEvent_t *marks;       /* (max_marks) */
    int max_marks;
    int capturing;            /* inside graph_begin .. graph_end_and_launch */
    /* memory accounting of backend allocations (workspaces included) */
    size_t bytes_now, bytes_peak;
    cuda_allocation *allocs;  /* live allocations, for release's byte count */
    int n_allocs, cap_allocs;
} cuda_ctx;

/* cudaMalloc of at least one byte, counted in the context's current and peak bytes; dies naming
 * the device and its free memory when it fails. */
void *cuda_device_alloc(cuda_ctx *ctx, size_t bytes);

/* Makes ws at least bytes (synchronises the stream before freeing the old buffer). Refuses to
 * grow while a graph is being captured: the caller must warm up first. */
void *cuda_workspace_reserve(cuda_ctx *ctx, cuda_workspace *ws, size_t bytes);

/* Launchers, one family per file: (out, in..., dims..., stream). */
void embed_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe, int rows,
                   int C, int n_new, int pos0, int vocab_begin, int vocab_end,
                   cudaStream_t stream);
void layernorm_forward(float *out, const float *in, const float *gamma, const float *beta,
                       int rows, int C, float eps, cudaStream_t stream);
void residual_layernorm_forward(float *residual, float *norm_out, const float *delta,
                                const float *gamma, const float *beta, int rows, int C,
                                float eps, cudaStream_t stream);
void matmul_forward(cuda_ctx *ctx, float *out, const float *in, weight_view w, const float *bias,
                    int rows, int in_dim, int out_dim);
/* The epilogue of a cuBLAS matmul (matmul.cu, matmul_blocks.cu): out[r][o] = out[r][o] *
 * scale[o] + bias[o] in place, a NULL scale or bias leaving its step out (both NULL: no launch). */
void scale_bias_forward(float *out, const float *scale, const float *bias, int rows, int out_dim,
                        cudaStream_t stream);
/* matmul_forward of ggml's block formats (matmul_blocks.cu). */
void matmul_blocks_forward(cuda_ctx *ctx, float *out, const float *in, weight_view w,
                           const float *bias, int rows, int in_dim, int out_dim);
void bias_gelu_forward(float *inout, const float *bias, int rows, int cols, cudaStream_t stream);
void rmsnorm_forward(float *out, const float *in, const float *w, int rows, int C, float eps,
                     cudaStream_t stream);
void residual_rmsnorm_forward(float *residual, float *norm_out, const float *delta,
                              const float *w, int rows, int C, float eps, cudaStream_t stream);
void swiglu_forward(float *out, const float *gate_up, int rows, int cols, cudaStream_t stream);
void gather_rows_forward(float *out, const float *in, const int32_t *idx, int n, int C,
                         cudaStream_t stream);
void scatter_add_rows_forward(float *out, const float *in, const int32_t *idx,
                              const float *weight, int n, int C, cudaStream_t stream);
/* rope: the inverse-frequency table (head_dim / 2) or NULL (backend.h, attention). */
void kv_append_forward(kv_view cache, const float *qkv, const float *rope, int seq0, int batch,
                       int n_new, int pos0, cudaStream_t stream);
void attention_forward(float *out, const float *qkv, kv_view cache, const float *rope, int seq0,
                       int batch, int n_new, int pos0, cudaStream_t stream);
/* Decode (one new query per sequence) with the keys split over blocks; the partials go to
 * workspace, which must hold attention_workspace_floats(batch, heads, kv_heads, head_dim,
 * max_ctx, sm_count) floats: that bound holds for every pos0 < max_ctx. */
void attention_decode_forward(float *out, float *workspace, size_t workspace_floats,
                              const float *qkv, kv_view cache, const float *rope, int seq0,
                              int batch, int pos0, int sm_count, cudaStream_t stream);
size_t attention_workspace_floats(int batch, int heads, int kv_heads, int head_dim, int max_ctx,
                                  int sm_count);
void argmax_forward(float *max_val, int32_t *max_idx, const float *logits, int rows, int cols,
                    cudaStream_t stream);

/* Block-wide sum of one float per thread (blockDim.x a multiple of 32, at most 1024). */
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* shared: at least 32 floats. Every thread gets the result. */
__device__ __forceinline__ float block_sum(float v, float *shared) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // shared may still be read by a previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < nwarps ? shared[lane] : 0.0f;
    return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float *shared) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < nwarps ? shared[lane] : -INFINITY;
    return warp_max(v);
}
