/* Causal self-attention over the KV cache: the append kernel writes the new keys/values into
 * the cache (contiguous or paged through block_table), then one fused kernel per
 * (query, head, sequence) computes scores, softmax and the weighted sum of values reading the
 * cache. The same kernel serves prefill (n_new = T) and decode (n_new = 1). */
#include "kernels/cuda/cuda_common.cuh"

/* Element offset of (seq, head, pos, 0) in the cache's k or v array. */
__device__ __forceinline__ long kv_offset(const kv_view &c, int seq, int h, int pos) {
    if (c.block_table) {
        int blk = c.block_table[(long)seq * c.blocks_per_seq + pos / c.block_size];
        return (((long)blk * c.heads + h) * c.block_size + pos % c.block_size) * c.head_dim;
    }
    return (((long)seq * c.heads + h) * c.max_ctx + pos) * c.head_dim;
}

/* One thread per element of the new keys (and values) of every sequence and head. */
__global__ void kv_append_kernel(kv_view cache, const float *qkv, int seq0, int batch, int n_new,
                                 int pos0) {
    const int hd = cache.head_dim, C = cache.heads * hd;
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)batch * n_new * C) return;
    int c = (int)(i % C);
    long row = i / C; // b * n_new + t
    int b = (int)(row / n_new), t = (int)(row % n_new);
    int h = c / hd, d = c % hd;
    long off = kv_offset(cache, seq0 + b, h, pos0 + t) + d;
    const float *src = qkv + row * 3 * C;
    cache.k[off] = src[C + c];
    cache.v[off] = src[2 * C + c];
}

void kv_append_forward(kv_view cache, const float *qkv, int seq0, int batch, int n_new, int pos0,
                       cudaStream_t stream) {
    CHECK(batch >= 0 && n_new >= 0 && pos0 >= 0 && seq0 >= 0, "kv_append: bad arguments");
    CHECK(pos0 + n_new <= cache.max_ctx, "kv_append: positions %d..%d exceed max_ctx %d", pos0,
          pos0 + n_new - 1, cache.max_ctx);
    CHECK(!cache.block_table || (cache.block_size > 0 && cache.blocks_per_seq > 0),
          "kv_append: paged cache without block_size/blocks_per_seq");
    if (batch == 0 || n_new == 0) return;
    const int block = 256;
    long n = (long)batch * n_new * cache.heads * cache.head_dim;
    kv_append_kernel<<<(unsigned)CEIL_DIV(n, block), block, 0, stream>>>(cache, qkv, seq0, batch,
                                                                         n_new, pos0);
    CUDA_LAUNCH_CHECK();
}

/* grid (n_new, heads, batch). Shared memory: q (hd) | scores (pos0 + n_new) | partial sums of
 * the output (groups * hd) | reduction scratch (32). blockDim >= hd. */
__global__ void attention_kernel(float *out, const float *qkv, kv_view cache, int seq0,
                                 int n_new, int pos0) {
    extern __shared__ float smem[];
    const int hd = cache.head_dim, C = cache.heads * hd;
    const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int seq = seq0 + b, T = pos0 + t + 1; // causal: keys 0 .. pos0 + t
    const int groups = blockDim.x / hd;
    float *q = smem;
    float *p = q + hd;
    float *partial = p + pos0 + n_new;
    float *scratch = partial + groups * hd;
    const long row = (long)b * n_new + t;

    const float scale = rsqrtf((float)hd);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) q[d] = qkv[row * 3 * C + h * hd + d] * scale;
    __syncthreads();

    // scores: one warp per key, lanes across head_dim so the key row is read coalesced
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int s = warp; s < T; s += nwarps) {
        const float *k = cache.k + kv_offset(cache, seq, h, s);
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += q[d] * k[d];
        dot = warp_sum(dot);
        if (lane == 0) p[s] = dot;
    }
    __syncthreads();

    float m = -INFINITY;
    for (int s = threadIdx.x; s < T; s += blockDim.x) m = fmaxf(m, p[s]);
    m = block_max(m, scratch);
    float sum = 0.0f;
    for (int s = threadIdx.x; s < T; s += blockDim.x) {
        float e = expf(p[s] - m);
        p[s] = e;
        sum += e;
    }
    sum = block_sum(sum, scratch); // its barriers also publish p[]

    // out = p @ V: thread (g, d) sums keys g, g + groups, ...; then the groups are added
    const int g = threadIdx.x / hd, d = threadIdx.x % hd;
    if (g < groups) {
        float acc = 0.0f;
        for (int s = g; s < T; s += groups) acc += p[s] * cache.v[kv_offset(cache, seq, h, s) + d];
        partial[g * hd + d] = acc;
    }
    __syncthreads();
    if (threadIdx.x < hd) {
        float acc = 0.0f;
        for (int j = 0; j < groups; j++) acc += partial[j * hd + threadIdx.x];
        out[row * C + h * hd + threadIdx.x] = acc / sum;
    }
}

void attention_forward(float *out, const float *qkv, kv_view cache, int seq0, int batch,
                       int n_new, int pos0, cudaStream_t stream) {
    CHECK(cache.head_dim > 0 && cache.head_dim <= 1024 && cache.heads > 0,
          "attention: head_dim %d outside 1..1024", cache.head_dim);
    CHECK(pos0 + n_new <= cache.max_ctx, "attention: positions exceed max_ctx %d", cache.max_ctx);
    if (batch == 0 || n_new == 0) return;
    const int hd = cache.head_dim;
    int block = hd <= 128 ? 128 : CEIL_DIV(hd, 32) * 32;
    int groups = block / hd;
    size_t smem = sizeof(float) * ((size_t)hd + (size_t)(pos0 + n_new) + (size_t)groups * hd + 32);
    if (smem > 48 * 1024) {
        int dev = 0, max_smem = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        CHECK(smem <= (size_t)max_smem,
              "attention: context %d needs %zu bytes of shared memory; the device allows %d",
              pos0 + n_new, smem, max_smem);
        CUDA_CHECK(cudaFuncSetAttribute(attention_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    }
    dim3 grid((unsigned)n_new, (unsigned)cache.heads, (unsigned)batch);
    attention_kernel<<<grid, block, smem, stream>>>(out, qkv, cache, seq0, n_new, pos0);
    CUDA_LAUNCH_CHECK();
}
