/* Causal grouped-query attention on the CPU over a contiguous or paged KV cache. The new keys
 * (rotated, with RoPE) and values go into the cache first; then each (sequence, head) attends
 * over positions 0..pos of its kv head. Prefill (n_new > 1) uses two sgemm per head (Q K^T and
 * P V); decode (n_new == 1) walks the cache one contiguous run at a time, which is
 * memory-bound and needs no gather. The query heads of one kv head run one after another, so
 * its keys are gathered (paged prefill) or streamed (decode) once and reused from cache. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

// Query rows per causal block in prefill: large enough for efficient sgemm, small enough
// that the skipped triangle is most of the masked work.
#define ATTN_ROW_BLOCK 64

/* Address of (seq, kv head g, position) in a cache tensor (k or v) of the view. */
static float *kv_at(const kv_view *c, float *base, int seq, int g, int p) {
    if (!c->block_table)
        return base + (((long)seq * c->kv_heads + g) * c->max_ctx + p) * c->head_dim;
    int blk = c->block_table[(long)seq * c->blocks_per_seq + p / c->block_size];
    CHECK(blk >= 0, "attention: sequence %d has no block for position %d", seq, p);
    return base + (((long)blk * c->kv_heads + g) * c->block_size + p % c->block_size) * c->head_dim;
}

/* Positions p.. stored contiguously: up to the end of p's block, and not past T. */
static int kv_run(const kv_view *c, int p, int T) {
    int bs = c->block_table ? c->block_size : c->max_ctx;
    int n = bs - p % bs;
    return n < T - p ? n : T - p;
}

/* In-place softmax of x[0..valid), zeroing x[valid..n) so a product over all n is causal. */
static void softmax_causal(float *x, int valid, int n) {
    float maxv = x[0];
    for (int j = 1; j < valid; j++) maxv = x[j] > maxv ? x[j] : maxv;
    float sum = 0.0f;
    for (int j = 0; j < valid; j++) {
        x[j] = expf(x[j] - maxv); // subtracting the max keeps expf finite
        sum += x[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < valid; j++) x[j] *= inv;
    for (int j = valid; j < n; j++) x[j] = 0.0f;
}

/* One query (row of length hd) against positions 0..T-1 of (seq, kv head g). scores (T). */
static void attention_decode_head(float *o, const float *q, const kv_view *c, int seq, int g, int T,
                                  float scale, float *scores) {
    const int hd = c->head_dim;
    for (int p = 0; p < T;) {
        int n = kv_run(c, p, T);
        const float *k = kv_at(c, c->k, seq, g, p);
        for (int j = 0; j < n; j++) {
            float dot = 0.0f;
            for (int d = 0; d < hd; d++) dot += q[d] * k[(long)j * hd + d];
            scores[p + j] = dot * scale;
        }
        p += n;
    }
    softmax_causal(scores, T, T);
    for (int d = 0; d < hd; d++) o[d] = 0.0f;
    for (int p = 0; p < T;) {
        int n = kv_run(c, p, T);
        const float *v = kv_at(c, c->v, seq, g, p);
        for (int j = 0; j < n; j++) {
            float w = scores[p + j];
            for (int d = 0; d < hd; d++) o[d] += w * v[(long)j * hd + d];
        }
        p += n;
    }
}

/* Copies positions 0..T-1 of (seq, kv head g) from a paged cache tensor into dst (T, hd). */
static void kv_gather(float *dst, const kv_view *c, float *base, int seq, int g, int T) {
    for (int p = 0; p < T;) {
        int n = kv_run(c, p, T);
        memcpy(dst + (long)p * c->head_dim, kv_at(c, base, seq, g, p),
               sizeof(float) * (size_t)n * (size_t)c->head_dim);
        p += n;
    }
}

void cpu_attention(void *vctx, float *out, const float *qkv, kv_view cache,
                   const float *rope_inv_freq, int seq0, int batch, int n_new, int pos0) {
    cpu_ctx *ctx = vctx;
    const int H = cache.heads, KV = cache.kv_heads, hd = cache.head_dim, T = pos0 + n_new;
    const long C = (long)H * hd, KC = (long)KV * hd, ld_qkv = C + 2 * KC;
    const int paged = cache.block_table != NULL, rope = rope_inv_freq != NULL;
    CHECK(H > 0 && hd > 0 && batch >= 0 && n_new > 0 && pos0 >= 0 && seq0 >= 0,
          "attention: bad shape heads %d head_dim %d batch %d n_new %d pos0 %d", H, hd, batch,
          n_new, pos0);
    CHECK(KV > 0 && H % KV == 0, "attention: kv_heads %d does not divide heads %d", KV, H);
    CHECK(!rope || hd % 2 == 0, "attention: rotary embeddings need an even head_dim, not %d", hd);
    CHECK(T <= cache.max_ctx, "attention: position %d beyond the cache (max_ctx %d)", T - 1,
          cache.max_ctx);
    CHECK(!paged || (cache.block_size > 0 &&
                     (long)cache.block_size * cache.blocks_per_seq >= cache.max_ctx),
          "attention: paged cache with block_size %d x %d blocks < max_ctx %d", cache.block_size,
          cache.blocks_per_seq, cache.max_ctx);
    const int group = H / KV;

    // Scores for decode need up to max_ctx floats: reserving that at the first call means
    // later decode steps, whose T grows, never allocate. With RoPE, the new positions'
    // cos/sin and one head's rotated queries follow (n_new * hd each, so decode's 2 * hd is
    // never more than the prefill before it reserved).
    size_t score_floats = (size_t)n_new * (size_t)T;
    if (score_floats < (size_t)cache.max_ctx) score_floats = (size_t)cache.max_ctx;
    size_t rope_floats = rope ? 2 * (size_t)n_new * (size_t)hd : 0;
    size_t gather_floats = paged && n_new > 1 ? 2 * (size_t)T * (size_t)hd : 0;
    float *scores =
        cpu_scratch_reserve(ctx, &ctx->attn, score_floats + rope_floats + gather_floats);
    float *cs = scores + score_floats, *qrot = cs + (rope ? (size_t)n_new * hd : 0);
    float *kbuf = scores + score_floats + rope_floats, *vbuf = kbuf + (size_t)T * hd;
    if (rope) cpu_rope_table(cs, rope_inv_freq, hd, pos0, n_new);

    for (int b = 0; b < batch; b++)
        for (int i = 0; i < n_new; i++) {
            const float *row = qkv + ((long)b * n_new + i) * ld_qkv;
            for (int g = 0; g < KV; g++) {
                float *kdst = kv_at(&cache, cache.k, seq0 + b, g, pos0 + i);
                if (rope)
                    cpu_rope_rotate(kdst, row + C + (long)g * hd, cs + (long)i * hd, hd);
                else
                    memcpy(kdst, row + C + (long)g * hd, sizeof(float) * (size_t)hd);
                memcpy(kv_at(&cache, cache.v, seq0 + b, g, pos0 + i),
                       row + C + KC + (long)g * hd, sizeof(float) * (size_t)hd);
            }
        }

    const float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < batch; b++)
        for (int g = 0; g < KV; g++) {
            const int seq = seq0 + b;
            const float *k = NULL, *v = NULL; // (T, hd), prefill only
            if (n_new > 1 && paged) {
                kv_gather(kbuf, &cache, cache.k, seq, g, T);
                kv_gather(vbuf, &cache, cache.v, seq, g, T);
                k = kbuf;
                v = vbuf;
            } else if (n_new > 1) {
                k = kv_at(&cache, cache.k, seq, g, 0);
                v = kv_at(&cache, cache.v, seq, g, 0);
            }
            for (int h = g * group; h < (g + 1) * group; h++) {
                const float *q = qkv + (long)b * n_new * ld_qkv + (long)h * hd; // (n_new, hd)
                long ldq = ld_qkv;
                float *o = out + (long)b * n_new * C + (long)h * hd; // (n_new, hd), ld C
                if (rope) {
                    for (int i = 0; i < n_new; i++)
                        cpu_rope_rotate(qrot + (long)i * hd, q + i * ld_qkv, cs + (long)i * hd, hd);
                    q = qrot;
                    ldq = hd;
                }
                if (n_new == 1) {
                    attention_decode_head(o, q, &cache, seq, g, T, scale, scores);
                    continue;
                }
                // Causal: a block of query rows needs only the keys up to its last row, so the
                // products run per block of rows and skip most of the masked upper triangle.
                for (int r0 = 0; r0 < n_new; r0 += ATTN_ROW_BLOCK) {
                    const int rows = n_new - r0 < ATTN_ROW_BLOCK ? n_new - r0 : ATTN_ROW_BLOCK;
                    const int keys = pos0 + r0 + rows;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hd, scale,
                                q + (long)r0 * ldq, (int)ldq, k, hd, 0.0f, scores, keys);
                    for (int i = 0; i < rows; i++)
                        softmax_causal(scores + (long)i * keys, pos0 + r0 + i + 1, keys);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, keys, 1.0f,
                                scores, keys, v, hd, 0.0f, o + (long)r0 * C, (int)C);
                }
            }
        }
}
