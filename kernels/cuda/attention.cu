/* Causal grouped-query self-attention over the KV cache: the append kernel writes the new keys
 * (rotated, with RoPE) and values into the cache (contiguous or paged through block_table).
 * Prefill (n_new > 1) runs one fused kernel per (query, head, sequence): scores, softmax and
 * the weighted sum of values. Decode (n_new == 1) splits the keys of each (sequence, kv head)
 * over several blocks (flash-decoding), each taking the kv head's query heads in turn so the
 * span of keys comes from HBM once; each writes a partial softmax to a workspace and a small
 * kernel combines them, so a batch of one still fills the device. Query head h reads kv head
 * h / (heads / kv_heads). The cache is read in its own type (kv_view.type: fp32, bf16, f16, or
 * int8 with a scale per row) and each element widened to fp32 as it is loaded; the append
 * kernels narrow the new rows with the CPU's rounding (to nearest even; int8 by the per-row
 * rule of kernels/quant.h), so both backends store the same cache. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_common.cuh"

/* The cache row's size in bytes (kv_row_bytes of kernels/dtype.c, which device code cannot
 * call). */
__host__ __device__ __forceinline__ long kv_row_size(const kv_view &c) {
    const long hd = c.head_dim;
    switch (c.type) {
    case DTYPE_BF16:
    case DTYPE_F16: return 2 * hd;
    case DTYPE_INT8: return (hd + 3) / 4 * 4 + (long)sizeof(float);
    default: return 4 * hd;
    }
}

/* Byte offset of the row (seq, kv head g, pos) in the cache's k or v array. */
__device__ __forceinline__ long kv_offset(const kv_view &c, int seq, int g, int pos) {
    long row;
    if (c.block_table) {
        int blk = c.block_table[(long)seq * c.blocks_per_seq + pos / c.block_size];
        row = ((long)blk * c.kv_heads + g) * c.block_size + pos % c.block_size;
    } else {
        row = ((long)seq * c.kv_heads + g) * c.max_ctx + pos;
    }
    return row * kv_row_size(c);
}

/* Element d of the cache row at byte offset off of base (k or v), in fp32. */
__device__ __forceinline__ float kv_load(const kv_view &c, const void *base, long off, int d) {
    const char *row = (const char *)base + off;
    switch (c.type) {
    case DTYPE_BF16: return __bfloat162float(((const __nv_bfloat16 *)row)[d]);
    case DTYPE_F16: return __half2float(((const __half *)row)[d]);
    case DTYPE_INT8:
        return (float)((const int8_t *)row)[d] *
               *(const float *)(row + kv_row_size(c) - (long)sizeof(float));
    default: return ((const float *)row)[d];
    }
}

/* Element d of a 16-bit or fp32 cache row: x narrowed to nearest even. */
__device__ __forceinline__ void kv_store(const kv_view &c, void *base, long off, int d, float x) {
    char *row = (char *)base + off;
    switch (c.type) {
    case DTYPE_BF16: ((__nv_bfloat16 *)row)[d] = __float2bfloat16_rn(x); break;
    case DTYPE_F16: ((__half *)row)[d] = __float2half_rn(x); break;
    default: ((float *)row)[d] = x; break;
    }
}

/* Element d of the head vector x (hd) turned to position pos, Hugging Face "rotate half":
 * the pair (i, i + hd/2) turns by pos * inv_freq[i]. The angle and its sine and cosine in
 * double, rounded to float, then float products without contraction into an FMA: the same
 * arithmetic as the cpu (kernels/cpu/rope.c), so both caches hold the same keys. */
__device__ __forceinline__ float rope_elem(const float *x, int d, int hd, const float *inv_freq,
                                           int pos) {
    const int half = hd / 2, i = d < half ? d : d - half;
    double sd, cd;
    sincos((double)pos * (double)inv_freq[i], &sd, &cd);
    const float c = (float)cd, s = (float)sd;
    return d < half ? __fsub_rn(__fmul_rn(x[d], c), __fmul_rn(x[d + half], s))
                    : __fadd_rn(__fmul_rn(x[d], c), __fmul_rn(x[d - half], s));
}

/* One thread per element of the new keys (and values) of every sequence and kv head. */
__global__ void kv_append_kernel(kv_view cache, const float *qkv, const float *rope, int seq0,
                                 int batch, int n_new, int pos0) {
    const int hd = cache.head_dim, QC = cache.heads * hd, KC = cache.kv_heads * hd;
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)batch * n_new * KC) return;
    int c = (int)(i % KC);
    long row = i / KC; // b * n_new + t
    int b = (int)(row / n_new), t = (int)(row % n_new);
    int g = c / hd, d = c % hd;
    long off = kv_offset(cache, seq0 + b, g, pos0 + t);
    const float *src = qkv + row * (QC + 2 * KC);
    kv_store(cache, cache.k, off, d,
             rope ? rope_elem(src + QC + g * hd, d, hd, rope, pos0 + t) : src[QC + c]);
    kv_store(cache, cache.v, off, d, src[QC + KC + c]);
}

/* An int8 cache: one thread per new row of one kv head (its k and its v), as the CPU's
 * quant_rows_int8 does it: s = max |x| / 127, q = x / s rounded to nearest even, the scale after
 * the values. A row is head_dim values, so a thread's loop is short and the step's few rows
 * keep the kernel small beside the attention. */
__device__ void kv_store_int8(const kv_view &c, void *base, long off, const float *x,
                              const float *rope, int pos) {
    const int hd = c.head_dim;
    float amax = 0.0f;
    for (int d = 0; d < hd; d++)
        amax = fmaxf(amax, fabsf(rope ? rope_elem(x, d, hd, rope, pos) : x[d]));
    const float scale = amax / 127.0f;
    char *row = (char *)base + off;
    for (int d = 0; d < hd; d++) {
        const float v = rope ? rope_elem(x, d, hd, rope, pos) : x[d];
        const float q = scale > 0.0f ? rintf(__fdiv_rn(v, scale)) : 0.0f;
        ((int8_t *)row)[d] = (int8_t)fminf(127.0f, fmaxf(-127.0f, q));
    }
    *(float *)(row + kv_row_size(c) - (long)sizeof(float)) = scale;
}

__global__ void kv_append_int8_kernel(kv_view cache, const float *qkv, const float *rope, int seq0,
                                      int batch, int n_new, int pos0) {
    const int hd = cache.head_dim, QC = cache.heads * hd, KC = cache.kv_heads * hd;
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)batch * n_new * cache.kv_heads) return;
    const int g = (int)(i % cache.kv_heads);
    const long row = i / cache.kv_heads; // b * n_new + t
    const int b = (int)(row / n_new), t = (int)(row % n_new);
    const long off = kv_offset(cache, seq0 + b, g, pos0 + t);
    const float *src = qkv + row * (QC + 2 * KC);
    kv_store_int8(cache, cache.k, off, src + QC + g * hd, rope, pos0 + t);
    kv_store_int8(cache, cache.v, off, src + QC + KC + g * hd, NULL, 0);
}

/* The preconditions the append and both attention paths share. */
static void attention_check(const kv_view &cache, const float *rope, int pos0, int n_new) {
    const int hd = cache.head_dim;
    CHECK(hd > 0 && hd <= 1024 && cache.heads > 0, "attention: head_dim %d outside 1..1024", hd);
    CHECK(cache.kv_heads > 0 && cache.heads % cache.kv_heads == 0,
          "attention: kv_heads %d does not divide heads %d", cache.kv_heads, cache.heads);
    CHECK(!rope || hd % 2 == 0, "attention: rotary embeddings need an even head_dim, not %d", hd);
    CHECK(cache.type == DTYPE_F32 || cache.type == DTYPE_BF16 || cache.type == DTYPE_F16 ||
              cache.type == DTYPE_INT8,
          "attention: cache dtype %d is not one of f32, bf16, f16, int8", (int)cache.type);
    CHECK(pos0 >= 0 && n_new >= 0 && pos0 + n_new <= cache.max_ctx,
          "attention: positions %d..%d exceed max_ctx %d", pos0, pos0 + n_new - 1, cache.max_ctx);
}

void kv_append_forward(kv_view cache, const float *qkv, const float *rope, int seq0, int batch,
                       int n_new, int pos0, cudaStream_t stream) {
    CHECK(batch >= 0 && n_new >= 0 && pos0 >= 0 && seq0 >= 0, "kv_append: bad arguments");
    attention_check(cache, rope, pos0, n_new);
    CHECK(!cache.block_table || (cache.block_size > 0 && cache.blocks_per_seq > 0),
          "kv_append: paged cache without block_size/blocks_per_seq");
    if (batch == 0 || n_new == 0) return;
    const int block = 256;
    if (cache.type == DTYPE_INT8) {
        long rows = (long)batch * n_new * cache.kv_heads;
        kv_append_int8_kernel<<<(unsigned)CEIL_DIV(rows, block), block, 0, stream>>>(
            cache, qkv, rope, seq0, batch, n_new, pos0);
        CUDA_LAUNCH_CHECK();
        return;
    }
    long n = (long)batch * n_new * cache.kv_heads * cache.head_dim;
    kv_append_kernel<<<(unsigned)CEIL_DIV(n, block), block, 0, stream>>>(cache, qkv, rope, seq0,
                                                                         batch, n_new, pos0);
    CUDA_LAUNCH_CHECK();
}

/* Loads the query of head h in row `row` of qkv into q (hd, shared), rotated to position pos
 * when rope is set, and scaled by 1/sqrt(hd). The caller synchronises before reading q. */
__device__ __forceinline__ void load_query(float *q, const float *qkv, const kv_view &cache,
                                           const float *rope, long row, int h, int pos) {
    const int hd = cache.head_dim;
    const float *x = qkv + row * (long)(cache.heads + 2 * cache.kv_heads) * hd + (long)h * hd;
    const float scale = rsqrtf((float)hd);
    for (int d = threadIdx.x; d < hd; d += blockDim.x)
        q[d] = (rope ? rope_elem(x, d, hd, rope, pos) : x[d]) * scale;
}

/* The softmax-weighted sum of values of one query q (hd, shared, scaled) over keys
 * s0 .. s0 + n - 1 of (seq, kv head g): the loop the prefill and split-decode kernels share.
 * Scores: one warp per key, lanes across head_dim so the key row is read coalesced. Shared
 * scratch: p (n), partial (groups * hd) for groups = blockDim.x / hd, red (32). Every thread
 * gets the largest score *m and l = sum exp(p - m) in *l; thread d < hd returns the
 * unnormalised output sum_s exp(p_s - m) v_s[d] (other threads 0). */
__device__ float attend_span(float *m_out, float *l_out, const float *q, const kv_view &cache,
                             int seq, int g, int s0, int n, float *p, float *partial,
                             float *red) {
    const int hd = cache.head_dim, groups = blockDim.x / hd;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int s = warp; s < n; s += nwarps) {
        const long k = kv_offset(cache, seq, g, s0 + s);
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += q[d] * kv_load(cache, cache.k, k, d);
        dot = warp_sum(dot);
        if (lane == 0) p[s] = dot;
    }
    __syncthreads();

    float m = -INFINITY;
    for (int s = threadIdx.x; s < n; s += blockDim.x) m = fmaxf(m, p[s]);
    m = block_max(m, red);
    float sum = 0.0f;
    for (int s = threadIdx.x; s < n; s += blockDim.x) {
        float e = expf(p[s] - m);
        p[s] = e;
        sum += e;
    }
    sum = block_sum(sum, red); // its barriers also publish p[]

    // p @ V: thread (j, d) sums keys j, j + groups, ...; then the groups are added
    const int j = threadIdx.x / hd, d = threadIdx.x % hd;
    if (j < groups) {
        float acc = 0.0f;
        for (int s = j; s < n; s += groups)
            acc += p[s] * kv_load(cache, cache.v, kv_offset(cache, seq, g, s0 + s), d);
        partial[j * hd + d] = acc;
    }
    __syncthreads();
    float acc = 0.0f;
    if (threadIdx.x < hd)
        for (int i = 0; i < groups; i++) acc += partial[i * hd + threadIdx.x];
    *m_out = m;
    *l_out = sum;
    return acc;
}

/* grid (n_new, heads, batch). Shared memory: q (hd) | scores (pos0 + n_new) | partial sums of
 * the output (groups * hd) | reduction scratch (32). blockDim >= hd. */
__global__ void attention_kernel(float *out, const float *qkv, kv_view cache, const float *rope,
                                 int seq0, int n_new, int pos0) {
    extern __shared__ float smem[];
    const int hd = cache.head_dim, C = cache.heads * hd;
    const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int groups = blockDim.x / hd;
    float *q = smem;
    float *p = q + hd;
    float *partial = p + pos0 + n_new;
    float *red = partial + groups * hd;
    const long row = (long)b * n_new + t;

    load_query(q, qkv, cache, rope, row, h, pos0 + t);
    __syncthreads();
    float m, sum; // causal: keys 0 .. pos0 + t
    float acc = attend_span(&m, &sum, q, cache, seq0 + b, h / (cache.heads / cache.kv_heads), 0,
                            pos0 + t + 1, p, partial, red);
    if (threadIdx.x < hd) out[row * C + h * hd + threadIdx.x] = acc / sum;
}

/* Split-key decode: grid (splits, kv_heads, batch). Block j takes keys [j * chunk,
 * j * chunk + n) of one (sequence, kv head) for the single new query of each of the kv head's
 * query heads h in turn (the span's keys and values come from HBM for the first and from
 * L1/L2 for the others), and writes, at ws + ((b * heads + h) * splits + j) * (hd + 2), its max
 * score m, its sum l of exp(p - m) and its unnormalised output o[d] = sum exp(p - m) v[d].
 * Shared memory: q (hd) | scores (chunk) | partial sums of the output (groups * hd) |
 * reduction scratch (32). blockDim >= hd. */
__global__ void attention_split_kernel(float *ws, const float *qkv, kv_view cache,
                                       const float *rope, int seq0, int pos0, int chunk) {
    extern __shared__ float smem[];
    const int hd = cache.head_dim, group = cache.heads / cache.kv_heads;
    const int j = blockIdx.x, g = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
    const int s0 = j * chunk, n = min(chunk, pos0 + 1 - s0); // >= 1: no empty chunk
    const int groups = blockDim.x / hd;
    float *q = smem;
    float *p = q + hd;
    float *partial = p + chunk;
    float *red = partial + groups * hd;

    for (int h = g * group; h < (g + 1) * group; h++) {
        // The previous head's last reads of q were before attend_span's barriers.
        load_query(q, qkv, cache, rope, b, h, pos0);
        __syncthreads();
        float m, sum;
        float acc = attend_span(&m, &sum, q, cache, seq0 + b, g, s0, n, p, partial, red);
        float *w = ws + (((long)b * cache.heads + h) * splits + j) * (hd + 2);
        if (threadIdx.x < hd) w[2 + threadIdx.x] = acc;
        if (threadIdx.x == 0) {
            w[0] = m;
            w[1] = sum;
        }
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

/* Splits of a decode over T keys: about two blocks per SM over batch * kv_heads (the blocks
 * of the grid's other dimensions), but no chunk shorter than ATTN_SPLIT_MIN_CHUNK keys (a
 * block's warps would idle) or longer than ATTN_SPLIT_MAX_CHUNK (the scores live in shared
 * memory). Nondecreasing in T, so the count at max_ctx bounds every step's and sizes the
 * workspace once. */
#define ATTN_SPLIT_MIN_CHUNK 64
#define ATTN_SPLIT_MAX_CHUNK 4096

static int attention_splits(int batch, int kv_heads, int T, int sm_count) {
    int want = CEIL_DIV(2 * (sm_count > 0 ? sm_count : 1), batch * kv_heads);
    int splits = min(want, CEIL_DIV(T, ATTN_SPLIT_MIN_CHUNK));
    splits = max(splits, CEIL_DIV(T, ATTN_SPLIT_MAX_CHUNK));
    return max(splits, 1);
}

size_t attention_workspace_floats(int batch, int heads, int kv_heads, int head_dim, int max_ctx,
                                  int sm_count) {
    if (batch <= 0 || heads <= 0 || kv_heads <= 0 || max_ctx <= 0) return 0;
    return (size_t)batch * heads * attention_splits(batch, kv_heads, max_ctx, sm_count) *
           ((size_t)head_dim + 2);
}

static int attention_block(int hd) { return hd <= 128 ? 128 : CEIL_DIV(hd, 32) * 32; }

void attention_decode_forward(float *out, float *workspace, size_t workspace_floats,
                              const float *qkv, kv_view cache, const float *rope, int seq0,
                              int batch, int pos0, int sm_count, cudaStream_t stream) {
    const int hd = cache.head_dim, heads = cache.heads, T = pos0 + 1;
    attention_check(cache, rope, pos0, 1);
    CHECK(batch >= 0, "attention: batch %d", batch);
    if (batch == 0) return;
    int splits = attention_splits(batch, cache.kv_heads, T, sm_count);
    const int chunk = CEIL_DIV(T, splits);
    splits = CEIL_DIV(T, chunk); // no empty chunk
    const size_t need = (size_t)batch * heads * splits * ((size_t)hd + 2);
    CHECK(workspace && need <= workspace_floats,
          "attention: split decode needs %zu workspace floats, %zu given", need, workspace_floats);
    const int block = attention_block(hd), groups = block / hd;
    const size_t smem = sizeof(float) * ((size_t)hd + (size_t)chunk + (size_t)groups * hd + 32);
    CHECK(smem <= 48 * 1024, "attention: split decode needs %zu bytes of shared memory", smem);
    dim3 grid((unsigned)splits, (unsigned)cache.kv_heads, (unsigned)batch);
    attention_split_kernel<<<grid, block, smem, stream>>>(workspace, qkv, cache, rope, seq0, pos0,
                                                          chunk);
    CUDA_LAUNCH_CHECK();
    dim3 grid_combine((unsigned)heads, (unsigned)batch);
    attention_combine_kernel<<<grid_combine, CEIL_DIV(hd, 32) * 32, 0, stream>>>(out, workspace,
                                                                               heads, hd, splits);
    CUDA_LAUNCH_CHECK();
}

void attention_forward(float *out, const float *qkv, kv_view cache, const float *rope, int seq0,
                       int batch, int n_new, int pos0, cudaStream_t stream) {
    attention_check(cache, rope, pos0, n_new);
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
    attention_kernel<<<grid, block, smem, stream>>>(out, qkv, cache, rope, seq0, n_new, pos0);
    CUDA_LAUNCH_CHECK();
}
