/* Causal self-attention over the KV cache: the append kernel writes the new keys/values into
 * the cache (contiguous or paged through block_table). Prefill (n_new > 1) runs one fused
 * kernel per (query, head, sequence): scores, softmax and the weighted sum of values. Decode
 * (n_new == 1) splits the keys of each (sequence, head) over several blocks (flash-decoding):
 * each writes a partial softmax to a workspace and a small kernel combines them, so a batch of
 * one still fills the device. */
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

/* Split-key decode: grid (splits, heads, batch). Block j takes keys [j * chunk, j * chunk + n)
 * of one (sequence, head) for the single new query and writes, at
 * ws + ((b * heads + h) * splits + j) * (hd + 2), its max score m, its sum l of exp(p - m) and
 * its unnormalised output o[d] = sum exp(p - m) v[d]. Shared memory: q (hd) | scores (chunk) |
 * partial sums of the output (groups * hd) | reduction scratch (32). blockDim >= hd. */
__global__ void attention_split_kernel(float *ws, const float *qkv, kv_view cache, int seq0,
                                       int pos0, int chunk) {
    extern __shared__ float smem[];
    const int hd = cache.head_dim, C = cache.heads * hd;
    const int j = blockIdx.x, h = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
    const int seq = seq0 + b, T = pos0 + 1;
    const int s0 = j * chunk, n = min(chunk, T - s0); // >= 1: the launcher leaves no empty chunk
    const int groups = blockDim.x / hd;
    float *q = smem;
    float *p = q + hd;
    float *partial = p + chunk;
    float *scratch = partial + groups * hd;

    const float scale = rsqrtf((float)hd);
    for (int d = threadIdx.x; d < hd; d += blockDim.x)
        q[d] = qkv[(long)b * 3 * C + h * hd + d] * scale;
    __syncthreads();

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int s = warp; s < n; s += nwarps) {
        const float *k = cache.k + kv_offset(cache, seq, h, s0 + s);
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += q[d] * k[d];
        dot = warp_sum(dot);
        if (lane == 0) p[s] = dot;
    }
    __syncthreads();

    float m = -INFINITY;
    for (int s = threadIdx.x; s < n; s += blockDim.x) m = fmaxf(m, p[s]);
    m = block_max(m, scratch);
    float sum = 0.0f;
    for (int s = threadIdx.x; s < n; s += blockDim.x) {
        float e = expf(p[s] - m);
        p[s] = e;
        sum += e;
    }
    sum = block_sum(sum, scratch); // its barriers also publish p[]

    const int g = threadIdx.x / hd, d = threadIdx.x % hd;
    if (g < groups) {
        float acc = 0.0f;
        for (int s = g; s < n; s += groups)
            acc += p[s] * cache.v[kv_offset(cache, seq, h, s0 + s) + d];
        partial[g * hd + d] = acc;
    }
    __syncthreads();
    float *w = ws + (((long)b * cache.heads + h) * splits + j) * (hd + 2);
    if (threadIdx.x < hd) {
        float acc = 0.0f;
        for (int i = 0; i < groups; i++) acc += partial[i * hd + threadIdx.x];
        w[2 + threadIdx.x] = acc;
    }
    if (threadIdx.x == 0) {
        w[0] = m;
        w[1] = sum;
    }
}

/* grid (heads, batch), one thread per d: rescales every split's partial to the largest max M,
 * out = sum_j exp(m_j - M) o_j / sum_j exp(m_j - M) l_j. */
__global__ void attention_combine_kernel(float *out, const float *ws, int heads, int hd,
                                         int splits) {
    const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
    const long stride = hd + 2;
    const float *w = ws + ((long)b * heads + h) * splits * stride;
    float M = -INFINITY;
    for (int j = 0; j < splits; j++) M = fmaxf(M, w[j * stride]);
    float L = 0.0f, acc = 0.0f;
    for (int j = 0; j < splits; j++) {
        float f = expf(w[j * stride] - M);
        L += f * w[j * stride + 1];
        if (d < hd) acc += f * w[j * stride + 2 + d];
    }
    if (d < hd) out[((long)b * heads + h) * hd + d] = acc / L;
}

/* Splits of a decode over T keys: about two blocks per SM over batch * heads, but no chunk
 * shorter than ATTN_SPLIT_MIN_CHUNK keys (a block's warps would idle) or longer than
 * ATTN_SPLIT_MAX_CHUNK (the scores live in shared memory). Nondecreasing in T, so the count
 * at max_ctx bounds every step's and sizes the workspace once. */
#define ATTN_SPLIT_MIN_CHUNK 64
#define ATTN_SPLIT_MAX_CHUNK 4096

static int attention_splits(int batch, int heads, int T, int sm_count) {
    int want = CEIL_DIV(2 * (sm_count > 0 ? sm_count : 1), batch * heads);
    int splits = min(want, CEIL_DIV(T, ATTN_SPLIT_MIN_CHUNK));
    splits = max(splits, CEIL_DIV(T, ATTN_SPLIT_MAX_CHUNK));
    return max(splits, 1);
}

size_t attention_workspace_floats(int batch, int heads, int head_dim, int max_ctx, int sm_count) {
    if (batch <= 0 || heads <= 0 || max_ctx <= 0) return 0;
    return (size_t)batch * heads * attention_splits(batch, heads, max_ctx, sm_count) *
           ((size_t)head_dim + 2);
}

static int attention_block(int hd) { return hd <= 128 ? 128 : CEIL_DIV(hd, 32) * 32; }

void attention_decode_forward(float *out, float *workspace, size_t workspace_floats,
                              const float *qkv, kv_view cache, int seq0, int batch, int pos0,
                              int sm_count, cudaStream_t stream) {
    const int hd = cache.head_dim, heads = cache.heads, T = pos0 + 1;
    CHECK(hd > 0 && hd <= 1024 && heads > 0, "attention: head_dim %d outside 1..1024", hd);
    CHECK(batch >= 0 && pos0 >= 0 && T <= cache.max_ctx, "attention: position %d beyond max_ctx %d",
          pos0, cache.max_ctx);
    if (batch == 0) return;
    int splits = attention_splits(batch, heads, T, sm_count);
    const int chunk = CEIL_DIV(T, splits);
    splits = CEIL_DIV(T, chunk); // no empty chunk
    const size_t need = (size_t)batch * heads * splits * ((size_t)hd + 2);
    CHECK(workspace && need <= workspace_floats,
          "attention: split decode needs %zu workspace floats, %zu given", need, workspace_floats);
    const int block = attention_block(hd), groups = block / hd;
    const size_t smem = sizeof(float) * ((size_t)hd + (size_t)chunk + (size_t)groups * hd + 32);
    CHECK(smem <= 48 * 1024, "attention: split decode needs %zu bytes of shared memory", smem);
    dim3 grid((unsigned)splits, (unsigned)heads, (unsigned)batch);
    attention_split_kernel<<<grid, block, smem, stream>>>(workspace, qkv, cache, seq0, pos0, chunk);
    CUDA_LAUNCH_CHECK();
    dim3 grid_combine((unsigned)heads, (unsigned)batch);
    attention_combine_kernel<<<grid_combine, CEIL_DIV(hd, 32) * 32, 0, stream>>>(out, workspace,
                                                                               heads, hd, splits);
    CUDA_LAUNCH_CHECK();
}

void attention_forward(float *out, const float *qkv, kv_view cache, int seq0, int batch,
                       int n_new, int pos0, cudaStream_t stream) {
    CHECK(cache.head_dim > 0 && cache.head_dim <= 1024 && cache.heads > 0,
          "attention: head_dim %d outside 1..1024", cache.head_dim);
    CHECK(pos0 + n_new <= cache.max_ctx, "attention: positions exceed max_ctx %d", cache.max_ctx);
    if (batch == 0 || n_new == 0) return;
    const int hd = cache.head_dim;
    int block = attention_block(hd);
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
