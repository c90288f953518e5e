/* out (rows, out_dim) = in (rows, in_dim) @ W^T + bias for every weight dtype.
 * Row-major W (out_dim, in_dim) is column-major W^T, so cuBLAS computes out^T = W * in^T with
 * op(A) = T. fp32: exact fp32, or TF32 tensor cores when allow_tf32. bf16/f16: the activation
 * tile is converted into a workspace and multiplied on tensor cores with fp32 accumulation and
 * fp32 output. int8: the weights are expanded (exact) into an fp32 workspace, multiplied, and the
 * per-row scale is applied with the bias. Few rows (decode) of every dtype take a GEMV kernel
 * instead, which reads the weights once with 16-byte loads and keeps activations in fp32.
 * ggml's block formats have their own file (matmul_blocks.cu). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_common.cuh"

__device__ __forceinline__ float load_weight(const float *w, long i) { return w[i]; }
__device__ __forceinline__ float load_weight(const __nv_bfloat16 *w, long i) {
    return __bfloat162float(w[i]);
}
__device__ __forceinline__ float load_weight(const __half *w, long i) { return __half2float(w[i]); }
__device__ __forceinline__ float load_weight(const int8_t *w, long i) { return (float)w[i]; }

/* Up to this many rows the GEMV kernel beats a conversion pass plus a GEMM. */
#define GEMV_MAX_ROWS 8
#define GEMV_THREADS 256

/* The weights of one 16-byte load, widened to fp32: 4 fp32, 8 bf16/f16 or 16 int8. */
template <typename T> struct gemv_vec { static constexpr int n = 16 / (int)sizeof(T); };

__device__ __forceinline__ void widen(const uint4 &raw, float *f, const float *) {
    const float *p = reinterpret_cast<const float *>(&raw);
#pragma unroll
    for (int k = 0; k < 4; k++) f[k] = p[k];
}
__device__ __forceinline__ void widen(const uint4 &raw, float *f, const __nv_bfloat16 *) {
    const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float2 v = __bfloat1622float2(p[k]);
        f[2 * k] = v.x;
        f[2 * k + 1] = v.y;
    }
}
__device__ __forceinline__ void widen(const uint4 &raw, float *f, const __half *) {
    const __half2 *p = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float2 v = __half22float2(p[k]);
        f[2 * k] = v.x;
        f[2 * k + 1] = v.y;
    }
}
__device__ __forceinline__ void widen(const uint4 &raw, float *f, const int8_t *) {
    const int8_t *p = reinterpret_cast<const int8_t *>(&raw);
#pragma unroll
    for (int k = 0; k < 16; k++) f[k] = (float)p[k];
}

/* LANES lanes (32, 16 or 8: fewer when in_dim is short, so no lane idles) compute one output
 * o, all rows at once so each weight is read once:
 * out[r][o] = (sum_i in[r][i] * W[o][i]) * scale[o] + bias[o].
 * A group whose weight row and activation rows are 16-byte aligned reads them with 16-byte
 * loads (the weight row as one uint4 per VEC weights, the activations as float4), then the
 * in_dim % VEC tail one element per lane; otherwise every element is a scalar load. Each lane
 * accumulates its strided share in fp32; a shuffle tree adds the lanes. */
template <typename T, int LANES>
__global__ void gemv_kernel(float *out, const float *in, const T *w, const float *scale,
                            const float *bias, int rows, int in_dim, int out_dim) {
    constexpr int VEC = gemv_vec<T>::n;
    const int lane = threadIdx.x % LANES;
    const int o = blockIdx.x * (blockDim.x / LANES) + threadIdx.x / LANES;
    // no early return: the shuffles below run on the full warp, and a warp may hold groups
    // of several outputs
    const bool valid = o < out_dim;
    float acc[GEMV_MAX_ROWS];
#pragma unroll
    for (int r = 0; r < GEMV_MAX_ROWS; r++) acc[r] = 0.0f;
    const T *wrow = w + (long)(valid ? o : 0) * in_dim;
    const bool vec = ((((uintptr_t)wrow) | ((uintptr_t)in)) & 15) == 0 && (in_dim & 3) == 0;
    int scalar_from = 0;
    if (valid && vec) {
        const int nvec = in_dim / VEC;
        const uint4 *wv = reinterpret_cast<const uint4 *>(wrow);
        for (int v = lane; v < nvec; v += LANES) {
            float wf[VEC];
            widen(__ldg(wv + v), wf, wrow);
#pragma unroll
            for (int r = 0; r < GEMV_MAX_ROWS; r++) {
                if (r >= rows) break;
                const float4 *x = reinterpret_cast<const float4 *>(in + (long)r * in_dim) +
                                  (long)v * (VEC / 4);
#pragma unroll
                for (int k = 0; k < VEC / 4; k++) {
                    float4 xv = x[k];
                    acc[r] += wf[4 * k] * xv.x + wf[4 * k + 1] * xv.y + wf[4 * k + 2] * xv.z +
                              wf[4 * k + 3] * xv.w;
                }
            }
        }
        scalar_from = nvec * VEC;
    }
    if (valid)
        for (int i = scalar_from + lane; i < in_dim; i += LANES) {
            float wv = load_weight(wrow, i);
#pragma unroll
            for (int r = 0; r < GEMV_MAX_ROWS; r++)
                if (r < rows) acc[r] += wv * in[(long)r * in_dim + i];
        }
#pragma unroll
    for (int r = 0; r < GEMV_MAX_ROWS; r++) {
        if (r >= rows) break;
        float v = acc[r];
#pragma unroll
        for (int off = LANES / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (valid && lane == 0) {
            if (scale) v *= scale[o];
            if (bias) v += bias[o];
            out[(long)r * out_dim + o] = v;
        }
    }
}

template <typename T>
__global__ void convert_kernel(T *out, const float *in, long n);
template <>
__global__ void convert_kernel<__nv_bfloat16>(__nv_bfloat16 *out, const float *in, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16(in[i]); // round to nearest even
}
template <>
__global__ void convert_kernel<__half>(__half *out, const float *in, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half(in[i]);
}

/* int8 to fp32 without the scale (exact); the scale is applied per output in the epilogue. */
__global__ void int8_expand_kernel(float *out, const int8_t *in, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)in[i];
}

/* out[r][o] = out[r][o] * (scale ? scale[o] : 1) + (bias ? bias[o] : 0) */
__global__ void scale_bias_kernel(float *out, const float *scale, const float *bias, int rows,
                                  int out_dim) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)rows * out_dim) return;
    int o = (int)(i % out_dim);
    float v = out[i];
    if (scale) v *= scale[o];
    if (bias) v += bias[o];
    out[i] = v;
}

/* Lanes per output: a row of in_dim weights is in_dim / VEC 16-byte loads; short rows (small
 * in_dim) share a warp between 2 or 4 outputs so no lane idles. */
template <typename T>
static void gemv_forward(float *out, const float *in, const T *w, const float *scale,
                         const float *bias, int rows, int in_dim, int out_dim,
                         cudaStream_t stream) {
    CHECK(rows >= 1 && rows <= GEMV_MAX_ROWS, "gemv: %d rows outside 1..%d", rows, GEMV_MAX_ROWS);
    CHECK(in_dim > 0 && out_dim > 0, "gemv: bad shape in=%d out=%d", in_dim, out_dim);
    const int loads = CEIL_DIV(in_dim, gemv_vec<T>::n);
    const int lanes = loads <= 8 ? 8 : loads <= 16 ? 16 : 32;
    const dim3 grid((unsigned)CEIL_DIV(out_dim, GEMV_THREADS / lanes));
    switch (lanes) {
    case 8:
        gemv_kernel<T, 8><<<grid, GEMV_THREADS, 0, stream>>>(out, in, w, scale, bias, rows, in_dim,
                                                             out_dim);
        break;
    case 16:
        gemv_kernel<T, 16><<<grid, GEMV_THREADS, 0, stream>>>(out, in, w, scale, bias, rows,
                                                              in_dim, out_dim);
        break;
    default:
        gemv_kernel<T, 32><<<grid, GEMV_THREADS, 0, stream>>>(out, in, w, scale, bias, rows,
                                                              in_dim, out_dim);
    }
    CUDA_LAUNCH_CHECK();
}

void scale_bias_forward(float *out, const float *scale, const float *bias, int rows, int out_dim,
                        cudaStream_t stream) {
    if (!scale && !bias) return;
    const int block = 256;
    long n = (long)rows * out_dim;
    scale_bias_kernel<<<(unsigned)CEIL_DIV(n, block), block, 0, stream>>>(out, scale, bias, rows,
                                                                          out_dim);
    CUDA_LAUNCH_CHECK();
}

/* out^T (out_dim, rows) = W (as column-major (in_dim, out_dim), transposed) * in^T */
static void gemm_ex(cuda_ctx *ctx, float *out, const void *in, cudaDataType in_type,
                    const void *w, cudaDataType w_type, int rows, int in_dim, int out_dim,
                    cublasComputeType_t compute) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, rows, in_dim, &one,
                              w, w_type, in_dim, in, in_type, in_dim, &zero, out, CUDA_R_32F,
                              out_dim, compute, CUBLAS_GEMM_DEFAULT));
}

template <typename T>
static void matmul_half(cuda_ctx *ctx, float *out, const float *in, const T *w,
                        cudaDataType type, const float *bias, int rows, int in_dim,
                        int out_dim) {
    if (rows <= GEMV_MAX_ROWS) {
        gemv_forward<T>(out, in, w, NULL, bias, rows, in_dim, out_dim, ctx->stream);
        return;
    }
    long n = (long)rows * in_dim;
    T *in_half = (T *)cuda_workspace_reserve(ctx, &ctx->convert, sizeof(T) * (size_t)n);
    const int block = 256;
    convert_kernel<T><<<(unsigned)CEIL_DIV(n, block), block, 0, ctx->stream>>>(in_half, in, n);
    CUDA_LAUNCH_CHECK();
    gemm_ex(ctx, out, in_half, type, w, type, rows, in_dim, out_dim, CUBLAS_COMPUTE_32F);
    scale_bias_forward(out, NULL, bias, rows, out_dim, ctx->stream);
}

void matmul_forward(cuda_ctx *ctx, float *out, const float *in, weight_view w, const float *bias,
                    int rows, int in_dim, int out_dim) {
    CHECK(rows >= 0 && in_dim > 0 && out_dim > 0, "matmul: bad shape rows=%d in=%d out=%d", rows,
          in_dim, out_dim);
    CHECK(w.type != DTYPE_INT8 || w.scale, "matmul: int8 weights without scales");
    if (rows == 0) return;
    const cublasComputeType_t f32_compute =
        ctx->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    switch (w.type) {
    case DTYPE_F32:
        if (rows <= GEMV_MAX_ROWS) {
            gemv_forward<float>(out, in, (const float *)w.data, NULL, bias, rows, in_dim, out_dim,
                                ctx->stream);
            break;
        }
        gemm_ex(ctx, out, in, CUDA_R_32F, w.data, CUDA_R_32F, rows, in_dim, out_dim, f32_compute);
        scale_bias_forward(out, NULL, bias, rows, out_dim, ctx->stream);
        break;
    case DTYPE_BF16:
        matmul_half<__nv_bfloat16>(ctx, out, in, (const __nv_bfloat16 *)w.data, CUDA_R_16BF, bias,
                                   rows, in_dim, out_dim);
        break;
    case DTYPE_F16:
        matmul_half<__half>(ctx, out, in, (const __half *)w.data, CUDA_R_16F, bias, rows, in_dim,
                            out_dim);
        break;
    case DTYPE_INT8: {
        const int8_t *q = (const int8_t *)w.data;
        if (rows <= GEMV_MAX_ROWS) {
            gemv_forward<int8_t>(out, in, q, w.scale, bias, rows, in_dim, out_dim, ctx->stream);
            break;
        }
        long n = (long)out_dim * in_dim;
        float *wf = (float *)cuda_workspace_reserve(ctx, &ctx->convert, sizeof(float) * (size_t)n);
        const int block = 256;
        int8_expand_kernel<<<(unsigned)CEIL_DIV(n, block), block, 0, ctx->stream>>>(wf, q, n);
        CUDA_LAUNCH_CHECK();
        gemm_ex(ctx, out, in, CUDA_R_32F, wf, CUDA_R_32F, rows, in_dim, out_dim, f32_compute);
        scale_bias_forward(out, w.scale, bias, rows, out_dim, ctx->stream);
        break;
    }
    case DTYPE_Q8_0:
    case DTYPE_Q4_0:
    case DTYPE_Q4_1:
    case DTYPE_Q4_K: matmul_blocks_forward(ctx, out, in, w, bias, rows, in_dim, out_dim); break;
    default:
        tripar_dief(__FILE__, __LINE__, "matmul: unknown weight dtype %d", (int)w.type);
    }
}
