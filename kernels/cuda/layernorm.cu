/* LayerNorm and the fused residual-add + LayerNorm. One block per row; two passes over the
 * row (mean, then the variance of the deviations) keep fp32 accurate for large C. */
#include "kernels/cuda/cuda_common.cuh"

#define LN_BLOCK 256

/* Normalises row x (already final) into out; x is read twice more, from L1/L2. */
__device__ void layernorm_row(float *out, const float *x, const float *gamma, const float *beta,
                              int C, float eps, float *shared) {
    float sum = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) sum += x[c];
    float mean = block_sum(sum, shared) / C;
    float sq = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float d = x[c] - mean;
        sq += d * d;
    }
    float rstd = rsqrtf(block_sum(sq, shared) / C + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        out[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
}

__global__ void layernorm_kernel(float *out, const float *in, const float *gamma,
                                 const float *beta, int C, float eps) {
    __shared__ float shared[32];
    long r = blockIdx.x;
    layernorm_row(out + r * C, in + r * C, gamma, beta, C, eps, shared);
}

/* Each thread adds and later re-reads the same columns, so it only reads its own writes. */
__global__ void residual_layernorm_kernel(float *residual, float *norm_out, const float *delta,
                                          const float *gamma, const float *beta, int C,
                                          float eps) {
    __shared__ float shared[32];
    long r = blockIdx.x;
    float *x = residual + r * C;
    const float *d = delta + r * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) x[c] += d[c];
    if (norm_out) layernorm_row(norm_out + r * C, x, gamma, beta, C, eps, shared);
}

void layernorm_forward(float *out, const float *in, const float *gamma, const float *beta,
                       int rows, int C, float eps, cudaStream_t stream) {
    CHECK(rows >= 0 && C > 0, "layernorm: bad shape rows=%d C=%d", rows, C);
    CHECK(out != in, "layernorm: out must not alias in");
    if (rows == 0) return;
    layernorm_kernel<<<rows, LN_BLOCK, 0, stream>>>(out, in, gamma, beta, C, eps);
    CUDA_LAUNCH_CHECK();
}

void residual_layernorm_forward(float *residual, float *norm_out, const float *delta,
                                const float *gamma, const float *beta, int rows, int C,
                                float eps, cudaStream_t stream) {
    CHECK(rows >= 0 && C > 0, "residual_layernorm: bad shape rows=%d C=%d", rows, C);
    CHECK(norm_out != residual, "residual_layernorm: norm_out must not alias residual");
    if (rows == 0) return;
    residual_layernorm_kernel<<<rows, LN_BLOCK, 0, stream>>>(residual, norm_out, delta, gamma,
                                                             beta, C, eps);
    CUDA_LAUNCH_CHECK();
}
