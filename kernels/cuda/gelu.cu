/* Fused bias add + GELU (tanh approximation, as GPT-2), in place. */
#include "kernels/cuda/cuda_common.cuh"

__global__ void bias_gelu_kernel(float *inout, const float *bias, int rows, int cols) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)rows * cols) return;
    float x = inout[i] + (bias ? bias[i % cols] : 0.0f);
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
    inout[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

void bias_gelu_forward(float *inout, const float *bias, int rows, int cols, cudaStream_t stream) {
    CHECK(rows >= 0 && cols > 0, "bias_gelu: bad shape rows=%d cols=%d", rows, cols);
    if (rows == 0) return;
    const int block = 256;
    long n = (long)rows * cols;
    bias_gelu_kernel<<<(unsigned)CEIL_DIV(n, block), block, 0, stream>>>(inout, bias, rows, cols);
    CUDA_LAUNCH_CHECK();
}
