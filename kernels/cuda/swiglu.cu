/* SwiGLU (Llama's MLP activation): out = silu(gate) * up over the [gate | up] rows of the
 * fused gate/up GEMM (layout in backend.h). One thread per output element. */
#include "kernels/cuda/cuda_common.cuh"

__global__ void swiglu_kernel(float *out, const float *gate_up, int rows, int cols) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)rows * cols) return;
    long r = i / cols;
    int c = (int)(i % cols);
    float g = gate_up[r * 2 * cols + c], u = gate_up[r * 2 * cols + cols + c];
    // g / (1 + e^-g): a very negative g overflows e^-g to inf and gives -0, with no NaN
    out[i] = g / (1.0f + expf(-g)) * u;
}

void swiglu_forward(float *out, const float *gate_up, int rows, int cols, cudaStream_t stream) {
    CHECK(rows >= 0 && cols > 0, "swiglu: bad shape rows=%d cols=%d", rows, cols);
    CHECK(out != gate_up, "swiglu: out must not alias gate_up");
    if (rows == 0) return;
    const int block = 256;
    long n = (long)rows * cols;
    swiglu_kernel<<<(unsigned)CEIL_DIV(n, block), block, 0, stream>>>(out, gate_up, rows, cols);
    CUDA_LAUNCH_CHECK();
}
