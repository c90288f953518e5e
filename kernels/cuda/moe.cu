/* Mixture of experts on the GPU: gathering the token rows an expert serves and adding its
 * weighted output rows back (layout in backend.h). One thread per element; within one call a
 * row is named once, so the adds never race. The engine does not run mixtures of experts on
 * the cuda backend yet (the job is refused: its host routing would stall the stream and break
 * graph capture); the ops are here so the table is complete and tested against the cpu. */
#include "kernels/cuda/cuda_common.cuh"

__global__ void gather_rows_kernel(float *out, const float *in, const int32_t *idx, int n, int C) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)n * C) return;
    long r = i / C;
    out[i] = in[(long)idx[r] * C + i % C];
}

__global__ void scatter_add_rows_kernel(float *out, const float *in, const int32_t *idx,
                                        const float *weight, int n, int C) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)n * C) return;
    long r = i / C;
    out[(long)idx[r] * C + i % C] += weight[r] * in[i];
}

void gather_rows_forward(float *out, const float *in, const int32_t *idx, int n, int C,
                         cudaStream_t stream) {
    CHECK(n >= 0 && C > 0, "gather_rows: bad shape n=%d C=%d", n, C);
    if (n == 0) return;
    const int block = 256;
    long total = (long)n * C;
    gather_rows_kernel<<<(unsigned)CEIL_DIV(total, block), block, 0, stream>>>(out, in, idx, n, C);
    CUDA_LAUNCH_CHECK();
}

void scatter_add_rows_forward(float *out, const float *in, const int32_t *idx,
                              const float *weight, int n, int C, cudaStream_t stream) {
    CHECK(n >= 0 && C > 0, "scatter_add_rows: bad shape n=%d C=%d", n, C);
    if (n == 0) return;
    const int block = 256;
    long total = (long)n * C;
    scatter_add_rows_kernel<<<(unsigned)CEIL_DIV(total, block), block, 0, stream>>>(
        out, in, idx, weight, n, C);
    CUDA_LAUNCH_CHECK();
}
