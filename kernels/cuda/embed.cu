/* Token + position embedding (vocab-parallel: a rank adds only the tokens of its vocab shard;
 * the TP all-reduce completes the sum). Row r is at position pos0 + r % n_new: positions are
 * kernel arguments, never an array copied to the device. */
#include "kernels/cuda/cuda_common.cuh"

__global__ void embed_kernel(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                             int rows, int C, int n_new, int pos0, int vocab_begin,
                             int vocab_end) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)rows * C) return;
    int r = (int)(i / C), c = (int)(i % C);
    int tok = tokens[r];
    float v = 0.0f;
    if (tok >= vocab_begin && tok < vocab_end) v = wte[(long)(tok - vocab_begin) * C + c];
    if (wpe) v += wpe[(long)(pos0 + r % n_new) * C + c];
    out[i] = v;
}

void embed_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe, int rows,
                   int C, int n_new, int pos0, int vocab_begin, int vocab_end,
                   cudaStream_t stream) {
    CHECK(rows >= 0 && C > 0 && vocab_end >= vocab_begin && n_new > 0 && pos0 >= 0 &&
              rows % n_new == 0,
          "embed: bad shape rows=%d C=%d n_new=%d pos0=%d", rows, C, n_new, pos0);
    if (rows == 0) return;
    const int block = 256;
    long n = (long)rows * C;
    embed_kernel<<<(unsigned)CEIL_DIV(n, block), block, 0, stream>>>(
        out, tokens, wte, wpe, rows, C, n_new, pos0, vocab_begin, vocab_end);
    CUDA_LAUNCH_CHECK();
}
