/* Row-wise argmax for greedy decoding: the largest value and its first column. One block per
 * row; ties keep the smaller column so the result matches the CPU twin exactly. NaN counts as
 * larger than every number, so a row holding a NaN reports its first NaN (kernels/backend.h
 * says why). */
#include "kernels/cuda/cuda_common.cuh"

#define ARGMAX_BLOCK 256

/* Keeps (ov, oi) when it comes first in the order the CPU twin scans by: a NaN beats every
 * number, two NaNs or two equal numbers go to the smaller column. The reduction visits columns
 * out of order, so the column breaks every tie, NaN against NaN included. */
__device__ __forceinline__ void argmax_pick(float *v, int *i, float ov, int oi) {
    const bool onan = isnan(ov), vnan = isnan(*v);
    const bool wins = onan ? (!vnan || oi < *i) : (!vnan && (ov > *v || (ov == *v && oi < *i)));
    if (wins) {
        *v = ov;
        *i = oi;
    }
}

__global__ void argmax_kernel(float *max_val, int32_t *max_idx, const float *logits, int cols) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const float *x = logits + (long)blockIdx.x * cols;
    float v = -INFINITY;
    int idx = 0x7fffffff;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) argmax_pick(&v, &idx, x[c], c);
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        argmax_pick(&v, &idx, ov, oi);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
        int nwarps = blockDim.x >> 5;
        v = lane < nwarps ? sv[lane] : -INFINITY;
        idx = lane < nwarps ? si[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, v, o);
            int oi = __shfl_xor_sync(0xffffffffu, idx, o);
            argmax_pick(&v, &idx, ov, oi);
        }
        if (lane == 0) {
            if (idx == 0x7fffffff) idx = 0; // unreachable: a real -inf ties the padding and wins
            max_val[blockIdx.x] = x[idx];
            max_idx[blockIdx.x] = idx;
        }
    }
}

void argmax_forward(float *max_val, int32_t *max_idx, const float *logits, int rows, int cols,
                    cudaStream_t stream) {
    CHECK(rows >= 0 && cols > 0, "argmax: bad shape rows=%d cols=%d", rows, cols);
    if (rows == 0) return;
    argmax_kernel<<<rows, ARGMAX_BLOCK, 0, stream>>>(max_val, max_idx, logits, cols);
    CUDA_LAUNCH_CHECK();
}
