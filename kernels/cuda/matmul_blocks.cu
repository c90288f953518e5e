/* ggml's block formats on the GPU (q8_0, q4_0, q4_1, q4_k as kernels/quant_blocks.h lays them
 * out; docs/kernels.md, "Block formats"): out (rows, out_dim) = in @ W^T + bias with fp32
 * activations, the blocks read as stored.
 *   rows <= BLOCKS_GEMV_MAX_ROWS (decode): a warp per output; each lane takes whole blocks of 32,
 *     decodes the quants and the block's fp16 scale (and min) in registers, and sums
 *     d * sum(q x) + m * sum(x) in fp32, so memory streams the blocks and nothing else.
 *   more rows (prefill): the blocks dequantised tile by tile into an fp32 workspace (the values
 *     qblocks_dequantize gives), each tile multiplied by cuBLAS (TF32 when allow_tf32), so the
 *     workspace is bounded whatever the matrix.
 * The CPU computes the same function with int8 activations (docs/kernels.md); this path keeps
 * the activations in fp32, as the cuda int8w path does, so it is the dequantised weights' exact
 * product up to fp32 summation. */
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_common.cuh"

#define BLOCKS_GEMV_MAX_ROWS 8
#define BLOCKS_GEMV_WARPS 8
/* Dequantised weights per prefill tile, at most (64 MiB of fp32). */
#define BLOCKS_TILE_FLOATS (16L << 20)

enum { QB = 32 };

/* Bytes of a row of in_dim weights (the module keeps to its own code: kernels/quant_blocks.h's
 * sizes, not the core's dtype_bytes). */
static size_t blocks_row_bytes(dtype type, int in_dim) {
    switch (type) {
    case DTYPE_Q8_0: return 34 * (size_t)(in_dim / QB);
    case DTYPE_Q4_0: return 18 * (size_t)(in_dim / QB);
    case DTYPE_Q4_1: return 20 * (size_t)(in_dim / QB);
    default: return 144 * (size_t)(in_dim / 256); // DTYPE_Q4_K
    }
}

__device__ __forceinline__ float half_at(const uint8_t *p) {
    const unsigned short h = (unsigned short)(p[0] | (p[1] << 8)); // blocks are 2-byte aligned
    return __half2float(__ushort_as_half(h));
}

/* Block b (of 32 weights) of a weight row: its scale, its min (0 for q8_0 and q4_0) and where
 * its quants are. Weight i of the block is q(i) * d + m. */
struct block_ref {
    float d, m;
    const uint8_t *q;
    int high; // q4_k: the block's nibbles are the high halves of its 32 bytes
};

__device__ __forceinline__ block_ref block_at(const uint8_t *row, dtype type, int b) {
    block_ref r = {0.0f, 0.0f, NULL, 0};
    switch (type) {
    case DTYPE_Q8_0: r.q = row + 34L * b + 2, r.d = half_at(row + 34L * b); break;
    case DTYPE_Q4_0: r.q = row + 18L * b + 2, r.d = half_at(row + 18L * b); break;
    case DTYPE_Q4_1:
        r.q = row + 20L * b + 4, r.d = half_at(row + 20L * b), r.m = half_at(row + 20L * b + 2);
        break;
    default: { // DTYPE_Q4_K: sub-block j of a 144-byte super-block (ggml's get_scale_min_k4)
        const uint8_t *sb = row + 144L * (b / 8), *s = sb + 4;
        const int j = b % 8;
        int sc, mn;
        if (j < 4) {
            sc = s[j] & 63, mn = s[j + 4] & 63;
        } else {
            sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
            mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
        r.d = half_at(sb) * (float)sc, r.m = -(half_at(sb + 2) * (float)mn);
        r.q = sb + 16 + 32 * (j / 2), r.high = j & 1;
    }
    }
    return r;
}

/* Quant i of a block, as the integer whose value is q * d + m: q8_0's int8, q4_0's nibble - 8,
 * q4_1's nibble (byte i % 16, low for i < 16), q4_k's nibble (byte i, low or high). */
__device__ __forceinline__ int quant_at(const block_ref &r, dtype type, int i) {
    switch (type) {
    case DTYPE_Q8_0: return (int)(int8_t)r.q[i];
    case DTYPE_Q4_0: return (i < 16 ? r.q[i] & 0xF : r.q[i - 16] >> 4) - 8;
    case DTYPE_Q4_1: return i < 16 ? r.q[i] & 0xF : r.q[i - 16] >> 4;
    default: return r.high ? r.q[i] >> 4 : r.q[i] & 0xF;
    }
}

/* A warp per output o: lanes take blocks lane, lane + 32, ...; rows <= BLOCKS_GEMV_MAX_ROWS. */
template <dtype TYPE>
__global__ void blocks_gemv_kernel(float *out, const float *in, const uint8_t *w, size_t row_bytes,
                                   const float *bias, int rows, int in_dim, int out_dim) {
    const int lane = threadIdx.x % 32;
    const int o = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (o >= out_dim) return; // whole warps leave together: o is the same across a warp
    const uint8_t *row = w + row_bytes * (size_t)o;
    float acc[BLOCKS_GEMV_MAX_ROWS];
#pragma unroll
    for (int r = 0; r < BLOCKS_GEMV_MAX_ROWS; r++)
        acc[r] = 0.0f;
    for (int b = lane; b < in_dim / QB; b += 32) {
        const block_ref br = block_at(row, TYPE, b);
        int q[QB];
#pragma unroll
        for (int i = 0; i < QB; i++)
            q[i] = quant_at(br, TYPE, i);
#pragma unroll
        for (int r = 0; r < BLOCKS_GEMV_MAX_ROWS; r++) {
            if (r >= rows) break;
            const float *x = in + (long)r * in_dim + (long)b * QB;
            float dot = 0.0f, sum = 0.0f;
#pragma unroll
            for (int i = 0; i < QB; i++) {
                const float xi = __ldg(x + i);
                dot = fmaf((float)q[i], xi, dot);
                sum += xi;
            }
            acc[r] = fmaf(br.d, dot, acc[r]);
            if (TYPE == DTYPE_Q4_1 || TYPE == DTYPE_Q4_K) acc[r] = fmaf(br.m, sum, acc[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < BLOCKS_GEMV_MAX_ROWS; r++) {
        if (r >= rows) break;
        const float v = warp_sum(acc[r]);
        if (lane == 0) out[(long)r * out_dim + o] = v + (bias ? bias[o] : 0.0f);
    }
}

/* out (n, in_dim) = the values of weight rows [0, n): a thread per block of 32. */
template <dtype TYPE>
__global__ void blocks_dequantize_kernel(float *out, const uint8_t *w, size_t row_bytes, int n,
                                         int in_dim) {
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x, nb = in_dim / QB;
    if (i >= (long)n * nb) return;
    const long o = i / nb;
    const int b = (int)(i % nb);
    const block_ref br = block_at(w + row_bytes * (size_t)o, TYPE, b);
    float *dst = out + o * in_dim + (long)b * QB;
#pragma unroll
    for (int k = 0; k < QB; k++)
        dst[k] = (float)quant_at(br, TYPE, k) * br.d + br.m;
}

template <dtype TYPE>
static void blocks_forward(cuda_ctx *ctx, float *out, const float *in, const uint8_t *w,
                           const float *bias, int rows, int in_dim, int out_dim) {
    const size_t row_bytes = blocks_row_bytes(TYPE, in_dim);
    if (rows <= BLOCKS_GEMV_MAX_ROWS) {
        const dim3 grid((unsigned)CEIL_DIV(out_dim, BLOCKS_GEMV_WARPS));
        blocks_gemv_kernel<TYPE><<<grid, 32 * BLOCKS_GEMV_WARPS, 0, ctx->stream>>>(
            out, in, w, row_bytes, bias, rows, in_dim, out_dim);
        CUDA_LAUNCH_CHECK();
        return;
    }
    long tile = BLOCKS_TILE_FLOATS / in_dim;
    if (tile < 1) tile = 1;
    if (tile > out_dim) tile = out_dim;
    float *wf = (float *)cuda_workspace_reserve(ctx, &ctx->convert,
                                                sizeof(float) * (size_t)tile * (size_t)in_dim);
    const cublasComputeType_t compute =
        ctx->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float one = 1.0f, zero = 0.0f;
    for (long o0 = 0; o0 < out_dim; o0 += tile) {
        const int n = (int)(out_dim - o0 < tile ? out_dim - o0 : tile);
        const long blocks = (long)n * (in_dim / QB);
        blocks_dequantize_kernel<TYPE><<<(unsigned)CEIL_DIV(blocks, 256), 256, 0, ctx->stream>>>(
            wf, w + row_bytes * (size_t)o0, row_bytes, n, in_dim);
        CUDA_LAUNCH_CHECK();
        // out^T's rows [o0, o0 + n) (column-major, ld out_dim) = tile * in^T
        CUBLAS_CHECK(cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, in_dim, &one, wf,
                                  CUDA_R_32F, in_dim, in, CUDA_R_32F, in_dim, &zero, out + o0,
                                  CUDA_R_32F, out_dim, compute, CUBLAS_GEMM_DEFAULT));
    }
    scale_bias_forward(out, NULL, bias, rows, out_dim, ctx->stream);
}

void matmul_blocks_forward(cuda_ctx *ctx, float *out, const float *in, weight_view w,
                           const float *bias, int rows, int in_dim, int out_dim) {
    CHECK(in_dim % (w.type == DTYPE_Q4_K ? 256 : QB) == 0,
          "matmul: block weights (dtype %d) need in_dim %d a multiple of %d", (int)w.type, in_dim,
          w.type == DTYPE_Q4_K ? 256 : QB);
    const uint8_t *b = (const uint8_t *)w.data;
    switch (w.type) {
    case DTYPE_Q8_0:
        blocks_forward<DTYPE_Q8_0>(ctx, out, in, b, bias, rows, in_dim, out_dim);
        break;
    case DTYPE_Q4_0:
        blocks_forward<DTYPE_Q4_0>(ctx, out, in, b, bias, rows, in_dim, out_dim);
        break;
    case DTYPE_Q4_1:
        blocks_forward<DTYPE_Q4_1>(ctx, out, in, b, bias, rows, in_dim, out_dim);
        break;
    case DTYPE_Q4_K:
        blocks_forward<DTYPE_Q4_K>(ctx, out, in, b, bias, rows, in_dim, out_dim);
        break;
    default: tripar_dief(__FILE__, __LINE__, "matmul: dtype %d is not a block format", (int)w.type);
    }
}
