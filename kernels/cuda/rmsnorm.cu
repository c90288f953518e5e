/* RMSNorm (Llama) and the fused residual-add + RMSNorm, with layernorm.cu's calling
 * convention. One block per row; the sum of squares is a block tree in fp32. */
#include "kernels/cuda/cuda_common.cuh"

#define RMS_BLOCK 256

/* Normalises row x (already final) into out; x is read once more, from L1/L2. */
__device__ void rmsnorm_row(float *out, const float *x, const float *w, int C, float eps,
                            float *shared) {
    float sq = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) sq += x[c] * x[c];
    float rstd = rsqrtf(block_sum(sq, shared) / C + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x) out[c] = x[c] * rstd * w[c];
}

__global__ void rmsnorm_kernel(float *out, const float *in, const float *w, int C, float eps) {
    __shared__ float shared[32];
    long r = blockIdx.x;
    rmsnorm_row(out + r * C, in + r * C, w, C, eps, shared);
}

/* Each thread adds and later re-reads the same columns, so it only reads its own writes. */
__global__ void residual_rmsnorm_kernel(float *residual, float *norm_out, const float *delta,
                                        const float *w, int C, float eps) {
    __shared__ float shared[32];
    long r = blockIdx.x;
    float *x = residual + r * C;
    const float *d = delta + r * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) x[c] += d[c];
    if (norm_out) rmsnorm_row(norm_out + r * C, x, w, C, eps, shared);
}

void rmsnorm_forward(float *out, const float *in, const float *w, int rows, int C, float eps,
                     cudaStream_t stream) {
    CHECK(rows >= 0 && C > 0, "rmsnorm: bad shape rows=%d C=%d", rows, C);
    if (rows == 0) return;
    rmsnorm_kernel<<<rows, RMS_BLOCK, 0, stream>>>(out, in, w, C, eps);
    CUDA_LAUNCH_CHECK();
}

void residual_rmsnorm_forward(float *residual, float *norm_out, const float *delta,
                              const float *w, int rows, int C, float eps, cudaStream_t stream) {
    CHECK(rows >= 0 && C > 0, "residual_rmsnorm: bad shape rows=%d C=%d", rows, C);
    CHECK(norm_out != residual, "residual_rmsnorm: norm_out must not alias residual");
    if (rows == 0) return;
    residual_rmsnorm_kernel<<<rows, RMS_BLOCK, 0, stream>>>(residual, norm_out, delta, w, C, eps);
    CUDA_LAUNCH_CHECK();
}
