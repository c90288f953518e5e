/* Causal grouped-query attention on the CPU over a contiguous or paged KV cache. The new keys
 * (rotated, with RoPE) and values go into the cache first; then the work splits over the
 * backend's threads (OpenMP, the pool OpenBLAS shares) by independent items:
 *   prefill, tiled (n_new >= ctx->attn_tiled_min): items (sequence, kv head, block of query
 *     rows); each walks the keys up to its last row in blocks, once for all the query heads
 *     of its kv head, with an online softmax (running max and sum per row, the output rescaled
 *     when the max grows), so no row of scores longer than a block exists;
 *   prefill, two sgemm (selectable, not the default: docs/kernels.md has the measurements):
 *     items (sequence, head); Q K^T and P V per block of query rows, skipping the masked
 *     triangle;
 *   decode (n_new == 1): items (sequence, head), or (sequence, head, span of the context) when
 *     there are few heads for a long context; the spans' partial softmaxes are merged after.
 * Each item's result depends only on the item, never on the thread count or the schedule.
 * A cache in bf16, f16 or int8 (kv_view.type) is read in its type, so the memory traffic is the
 * cache's own bytes: decode's dot_keys and weigh_values widen each load in registers; prefill,
 * which reuses a block of keys for every query row, widens a block at a time into L1 (the
 * level's kv_rows_load) for the fp32 tile kernels. New rows are narrowed as they are written. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/backend_cpu.h"
#include "kernels/quant.h"
#include "base/check.h"

// Query rows per block in prefill: large enough for efficient sgemm, small enough that the
// skipped triangle is most of the masked work. Keys per block of the tiled kernel: a (64 x 64)
// score tile and a (64 x hd) K and V block stay in L1/L2 between the two products. Both are
// the tile_step kernels' ATTN_TILE.
#define ATTN_ROW_BLOCK ATTN_TILE
#define ATTN_KEY_BLOCK ATTN_TILE
// Decode splits the context into spans of at least this many positions when sequences x heads
// are fewer than ATTN_SPLIT_ITEMS (and into at most ATTN_MAX_SPLITS spans).
#define ATTN_SPLIT_SPAN 512
#define ATTN_SPLIT_ITEMS 8
#define ATTN_MAX_SPLITS 8

/* Address of the row (seq, kv head g, position) in a cache tensor (k or v) of the view. */
static char *kv_at(const kv_view *c, void *base, int seq, int g, int p) {
    const size_t rb = kv_row_bytes(c->type, c->head_dim);
    if (!c->block_table)
        return (char *)base + (((size_t)seq * c->kv_heads + g) * c->max_ctx + p) * rb;
    int blk = c->block_table[(long)seq * c->blocks_per_seq + p / c->block_size];
    CHECK(blk >= 0, "attention: sequence %d has no block for position %d", seq, p);
    return (char *)base +
           (((size_t)blk * c->kv_heads + g) * c->block_size + p % c->block_size) * rb;
}

/* Positions p.. stored contiguously: up to the end of p's block, and not past T. */
static int kv_run(const kv_view *c, int p, int T) {
    int bs = c->block_table ? c->block_size : c->max_ctx;
    int n = bs - p % bs;
    return n < T - p ? n : T - p;
}

/* Copies positions p0..p1-1 of (seq, kv head g) from a cache tensor into dst (p1 - p0, hd) in
 * fp32, widening a narrower cache with the level's kv_rows_load. */
static void kv_gather(float *dst, const kv_view *c, const cpu_attention_kernels *kern, void *base,
                      int seq, int g, int p0, int p1) {
    for (int p = p0; p < p1;) {
        int n = kv_run(c, p, p1);
        float *to = dst + (long)(p - p0) * c->head_dim;
        if (c->type == DTYPE_F32)
            memcpy(to, kv_at(c, base, seq, g, p), sizeof(float) * (size_t)n * (size_t)c->head_dim);
        else
            kern->kv_rows_load(to, kv_at(c, base, seq, g, p), n, c->head_dim, c->type);
        p += n;
    }
}

/* Positions p0..p1-1 of (seq, kv head g) as one fp32 (p1 - p0, hd) array: in place when an
 * fp32 cache stores them contiguously, else gathered (and widened) into buf. */
static const float *kv_span(const kv_view *c, const cpu_attention_kernels *kern, void *base,
                            int seq, int g, int p0, int p1, float *buf) {
    if (c->type == DTYPE_F32 && kv_run(c, p0, p1) >= p1 - p0)
        return (const float *)kv_at(c, base, seq, g, p0);
    kv_gather(buf, c, kern, base, seq, g, p0, p1);
    return buf;
}

/* Writes the fp32 row x (hd) into the cache row dst in the cache's type: bf16 and f16 rounded
 * to nearest even, int8 by kernels/quant.h's per-row rule with its scale after the values.
 * One scalar path for every level: only n_new rows per step are written. */
static void kv_row_store(void *dst, const float *x, int hd, dtype type) {
    switch (type) {
    case DTYPE_F32: memcpy(dst, x, sizeof(float) * (size_t)hd); break;
    case DTYPE_BF16: convert_f32_to_bf16(dst, x, hd); break;
    case DTYPE_F16: convert_f32_to_f16(dst, x, hd); break;
    case DTYPE_INT8: {
        float scale;
        quant_rows_int8(dst, &scale, x, 1, hd, NULL);
        memcpy((char *)dst + kv_row_bytes(type, hd) - sizeof scale, &scale, sizeof scale);
        break;
    }
    case DTYPE_Q8_0: /* weights only: never a cache type */
    case DTYPE_Q4_0:
    case DTYPE_Q4_1:
    case DTYPE_Q4_K: break;
    }
}

/* The largest of x[0..n-1] (NaN only when x[0] is). Eight running maxima, each from x[0], so
 * that decode's 4096 scores are not one chain of 4096 dependent comparisons (it cost more than
 * the exps); each skips a NaN as the single chain does, and a maximum is the same value in any
 * order (a tie of -0 and +0 may give either, which no exp(s - m) tells apart). */
static float max_of(const float *x, int n) {
    float m[8];
    for (int i = 0; i < 8; i++)
        m[i] = x[0];
    int j = 1;
    for (; j + 8 <= n; j += 8)
        for (int i = 0; i < 8; i++)
            m[i] = x[j + i] > m[i] ? x[j + i] : m[i];
    for (; j < n; j++)
        m[0] = x[j] > m[0] ? x[j] : m[0];
    for (int i = 1; i < 8; i++)
        m[0] = m[i] > m[0] ? m[i] : m[0];
    return m[0];
}

/* What every item of one call shares. */
typedef struct {
    const kv_view *c;
    const cpu_attention_kernels *kern;
    const float *qkv; // (batch * n_new, ld_qkv)
    float *out;       // (batch * n_new, C)
    const float *cs;  // (n_new, hd) RoPE cos/sin of the new positions, or NULL
    int H, KV, hd, group, n_new, pos0, seq0, T, gemm;
    long C, ld_qkv;
    float scale;
} attn_call;

/* Query rows r0..r0+rows-1 of head h of batch row b, rotated into buf when RoPE is on; returns
 * the rows and sets *ld. */
static const float *attn_queries(const attn_call *a, int b, int h, int r0, int rows, float *buf,
                                 long *ld) {
    const float *q = a->qkv + ((long)b * a->n_new + r0) * a->ld_qkv + (long)h * a->hd;
    if (!a->cs) {
        *ld = a->ld_qkv;
        return q;
    }
    for (int i = 0; i < rows; i++)
        cpu_rope_rotate(buf + (long)i * a->hd, q + i * a->ld_qkv, a->cs + (long)(r0 + i) * a->hd,
                        a->hd);
    *ld = a->hd;
    return buf;
}

/* Floats of one thread's scratch for the tiled kernel. */
static size_t tiled_floats(int group, int hd) {
    return (size_t)group * ATTN_ROW_BLOCK * ((size_t)hd + 2) +
           (size_t)ATTN_ROW_BLOCK * ATTN_KEY_BLOCK + 2 * (size_t)ATTN_KEY_BLOCK * hd;
}

/* Tiled prefill item: query rows r0..r0+rows-1 of every head of kv head g, batch row b. The
 * products run as sgemm tiles (a->gemm) or as the level's tile_step kernel, which takes the
 * queries transposed and pre-scaled. */
static void attn_tiled_item(const attn_call *a, int b, int g, int r0, int rows, float *scratch) {
    const int hd = a->hd, group = a->group, seq = a->seq0 + b;
    float *qbuf = scratch;                                     // (group, QB, hd) or (group, hd, QB)
    float *mx = qbuf + (size_t)group * ATTN_ROW_BLOCK * hd;    // (group, QB) running max
    float *sum = mx + (size_t)group * ATTN_ROW_BLOCK;          // (group, QB) running sum
    float *s = sum + (size_t)group * ATTN_ROW_BLOCK;           // (QB, KB) scores tile
    float *kbuf = s + (size_t)ATTN_ROW_BLOCK * ATTN_KEY_BLOCK; // (KB, hd) gathered keys
    float *vbuf = kbuf + (size_t)ATTN_KEY_BLOCK * hd;          // (KB, hd) gathered values
    const float *qh[256];
    long ldq[256];
    CHECK(group <= 256, "attention: %d query heads per kv head, at most 256", group);
    for (int j = 0; j < group; j++) {
        const int h = g * group + j;
        float *qj = qbuf + (size_t)j * ATTN_ROW_BLOCK * hd;
        if (a->gemm) {
            qh[j] = attn_queries(a, b, h, r0, rows, qj, &ldq[j]);
        } else {
            // kbuf is free until the first key block: the rotated rows go there first
            long ld;
            const float *q = attn_queries(a, b, h, r0, rows, kbuf, &ld);
            for (int d = 0; d < hd; d++)
                for (int i = 0; i < ATTN_ROW_BLOCK; i++)
                    qj[(long)d * ATTN_ROW_BLOCK + i] = i < rows ? q[i * ld + d] * a->scale : 0.0f;
            qh[j] = qj;
        }
        for (int i = 0; i < ATTN_ROW_BLOCK; i++) {
            mx[j * ATTN_ROW_BLOCK + i] = -INFINITY;
            sum[j * ATTN_ROW_BLOCK + i] = 0.0f;
        }
        for (int i = 0; i < rows; i++)
            memset(a->out + ((long)b * a->n_new + r0 + i) * a->C + (long)h * hd, 0,
                   sizeof(float) * (size_t)hd);
    }
    const int first = a->pos0 + r0, keys = first + rows; // row i at position first + i
    for (int k0 = 0; k0 < keys; k0 += ATTN_KEY_BLOCK) {
        const int kn = keys - k0 < ATTN_KEY_BLOCK ? keys - k0 : ATTN_KEY_BLOCK;
        // One read of the block serves every query head of the kv head.
        const float *kb = kv_span(a->c, a->kern, a->c->k, seq, g, k0, k0 + kn, kbuf);
        const float *vb = kv_span(a->c, a->kern, a->c->v, seq, g, k0, k0 + kn, vbuf);
        for (int j = 0; j < group; j++) {
            const int h = g * group + j;
            float *o = a->out + ((long)b * a->n_new + r0) * a->C + (long)h * hd; // ld C
            if (!a->gemm) {
                a->kern->tile_step(o, a->C, mx + j * ATTN_ROW_BLOCK, sum + j * ATTN_ROW_BLOCK,
                                   qh[j], kb, vb, rows, kn, hd, first, k0, s);
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kn, hd, a->scale, qh[j],
                        (int)ldq[j], kb, hd, 0.0f, s, ATTN_KEY_BLOCK);
            for (int i = 0; i < rows; i++) {
                float *si = s + (long)i * ATTN_KEY_BLOCK;
                // Keys k0.. that row i (position first + i) sees: none when the block starts
                // after it, which only the last block of an unaligned prompt has.
                int valid = first + i - k0 + 1;
                valid = valid < kn ? valid : kn;
                if (valid <= 0) {
                    memset(si, 0, sizeof(float) * (size_t)kn);
                    continue;
                }
                float *m = mx + j * ATTN_ROW_BLOCK + i, *l = sum + j * ATTN_ROW_BLOCK + i;
                const float bm = max_of(si, valid), mnew = bm > *m ? bm : *m;
                const float alpha = expf(*m - mnew); // 0 at the first block (m = -inf)
                *l = *l * alpha + a->kern->exp_shift_sum(si, si, mnew, valid);
                *m = mnew;
                for (int x = valid; x < kn; x++)
                    si[x] = 0.0f;
                float *oi = o + (long)i * a->C;
                if (alpha != 1.0f)
                    for (int d = 0; d < hd; d++)
                        oi[d] *= alpha;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, kn, 1.0f, s,
                        ATTN_KEY_BLOCK, vb, hd, 1.0f, o, (int)a->C);
        }
    }
    for (int j = 0; j < group; j++) {
        const int h = g * group + j;
        for (int i = 0; i < rows; i++) {
            float *oi = a->out + ((long)b * a->n_new + r0 + i) * a->C + (long)h * hd;
            const float inv = 1.0f / sum[j * ATTN_ROW_BLOCK + i];
            for (int d = 0; d < hd; d++)
                oi[d] *= inv;
        }
    }
}

/* Floats of one thread's scratch for the two-sgemm prefill: keys and values are gathered when
 * paged or not fp32. */
static size_t twogemm_floats(const attn_call *a, int gathered) {
    return (size_t)ATTN_ROW_BLOCK * a->T + (size_t)a->n_new * a->hd +
           (gathered ? 2 * (size_t)a->T * a->hd : 0);
}

/* Two-sgemm prefill item: every new row of head h, batch row b. */
static void attn_twogemm_item(const attn_call *a, int b, int h, float *scratch) {
    const int hd = a->hd, g = h / a->group, seq = a->seq0 + b, T = a->T;
    float *scores = scratch;                                                   // (QB, T)
    float *qrot = scores + (size_t)ATTN_ROW_BLOCK * T;                         // (n_new, hd)
    float *kbuf = qrot + (size_t)a->n_new * hd, *vbuf = kbuf + (size_t)T * hd; // (T, hd) each
    const float *k = kv_span(a->c, a->kern, a->c->k, seq, g, 0, T, kbuf);
    const float *v = kv_span(a->c, a->kern, a->c->v, seq, g, 0, T, vbuf);
    long ldq;
    const float *q = attn_queries(a, b, h, 0, a->n_new, qrot, &ldq);
    float *o = a->out + (long)b * a->n_new * a->C + (long)h * hd; // (n_new, hd), ld C
    // Causal: a block of query rows needs only the keys up to its last row.
    for (int r0 = 0; r0 < a->n_new; r0 += ATTN_ROW_BLOCK) {
        const int rows = a->n_new - r0 < ATTN_ROW_BLOCK ? a->n_new - r0 : ATTN_ROW_BLOCK;
        const int keys = a->pos0 + r0 + rows;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hd, a->scale,
                    q + (long)r0 * ldq, (int)ldq, k, hd, 0.0f, scores, keys);
        for (int i = 0; i < rows; i++) {
            float *si = scores + (long)i * keys;
            const int valid = a->pos0 + r0 + i + 1;
            const float inv = 1.0f / a->kern->exp_shift_sum(si, si, max_of(si, valid), valid);
            for (int j = 0; j < valid; j++)
                si[j] *= inv;
            for (int j = valid; j < keys; j++)
                si[j] = 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, keys, 1.0f, scores, keys,
                    v, hd, 0.0f, o + (long)r0 * a->C, (int)a->C);
    }
}

/* Decode item: the one new row of head h, batch row b, over positions p0..p1-1. With part
 * NULL writes the normalised output; else the partial (max, sum, unnormalised output (hd)).
 * The kernels read the cache rows where they lie, run by contiguous run, in the cache's type:
 * each key and value is read once, from memory, and widened in registers (a block widened
 * into an fp32 buffer first cost more than the dot products, docs/performance.md). */
static void attn_decode_item(const attn_call *a, int b, int h, int p0, int p1, float *scratch,
                             float *part) {
    const int hd = a->hd, g = h / a->group, seq = a->seq0 + b;
    const dtype type = a->c->type;
    float *qrot = scratch, *scores = scratch + hd; // (hd), (p1 - p0)
    long ldq;
    const float *q = attn_queries(a, b, h, 0, 1, qrot, &ldq);
    for (int p = p0; p < p1;) {
        const int n = kv_run(a->c, p, p1);
        a->kern->dot_keys(scores + (p - p0), q, kv_at(a->c, a->c->k, seq, g, p), n, hd, a->scale,
                          type);
        p += n;
    }
    const float m = max_of(scores, p1 - p0);
    a->kern->exp_shift(scores, scores, m, p1 - p0);
    float *o = part ? part + 2 : a->out + (long)b * a->C + (long)h * hd;
    memset(o, 0, sizeof(float) * (size_t)hd);
    float l = 0.0f; // the softmax's sum, which weigh_values adds up as it reads the weights
    for (int p = p0; p < p1;) {
        const int n = kv_run(a->c, p, p1);
        l = a->kern->weigh_values(o, scores + (p - p0), kv_at(a->c, a->c->v, seq, g, p), n, hd,
                                  type, l);
        p += n;
    }
    if (part) {
        part[0] = m;
        part[1] = l;
        return;
    }
    const float inv = 1.0f / l;
    for (int d = 0; d < hd; d++)
        o[d] *= inv;
}

/* Spans the decode context splits into: 1 unless few (sequence, head) items face a long
 * context. Depends on the shape only, so the result is the same at any thread count. */
static int decode_splits(int items, int T) {
    if (items >= ATTN_SPLIT_ITEMS) return 1;
    int s = T / ATTN_SPLIT_SPAN;
    s = s < ATTN_MAX_SPLITS ? s : ATTN_MAX_SPLITS;
    return s > 1 ? s : 1;
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
    CHECK(cache.type == DTYPE_F32 || cache.type == DTYPE_BF16 || cache.type == DTYPE_F16 ||
              cache.type == DTYPE_INT8,
          "attention: cache dtype %d is not one of f32, bf16, f16, int8", (int)cache.type);
    CHECK(!paged || (cache.block_size > 0 &&
                     (long)cache.block_size * cache.blocks_per_seq >= cache.max_ctx),
          "attention: paged cache with block_size %d x %d blocks < max_ctx %d", cache.block_size,
          cache.blocks_per_seq, cache.max_ctx);
    const int group = H / KV;
    attn_call a = {.c = &cache,
                   .kern = ctx->kern->attention,
                   .qkv = qkv,
                   .out = out,
                   .H = H,
                   .KV = KV,
                   .hd = hd,
                   .group = group,
                   .n_new = n_new,
                   .pos0 = pos0,
                   .seq0 = seq0,
                   .T = T,
                   .gemm = ctx->attn_tile_gemm,
                   .C = C,
                   .ld_qkv = ld_qkv,
                   .scale = 1.0f / sqrtf((float)hd)};
    const int tiled = n_new > 1 && n_new >= ctx->attn_tiled_min;
    const int splits = n_new == 1 ? decode_splits(batch * H, T) : 1;
    const int nt = cpu_op_threads(ctx, (long)batch * H * n_new, (long)T * hd);

    // Scratch: RoPE cos/sin of the new rows, then one region per thread, then the decode
    // spans' partials. A region always has room for a decode step at max_ctx (its query and
    // scores; a narrow cache too, as decode reads it in place), so once a prefill has sized
    // the scratch no decode step grows it.
    const int wide = cache.type != DTYPE_F32;
    size_t region = (size_t)hd + (size_t)cache.max_ctx;
    if (n_new > 1) {
        size_t need = tiled ? tiled_floats(group, hd) : twogemm_floats(&a, paged || wide);
        region = need > region ? need : region;
    }
    region = (region + 15) / 16 * 16; // a cache line apart
    const size_t cs_floats = rope ? (size_t)n_new * hd : 0;
    const size_t parts = splits > 1 ? (size_t)batch * H * splits * ((size_t)hd + 2) : 0;
    float *scratch =
        cpu_scratch_reserve(ctx, &ctx->attn, cs_floats + (size_t)ctx->threads * region + parts);
    float *cs = rope ? scratch : NULL, *regions = scratch + cs_floats;
    float *part = regions + (size_t)ctx->threads * region;
    a.cs = cs;

    const int qblocks = (n_new + ATTN_ROW_BLOCK - 1) / ATTN_ROW_BLOCK;
#pragma omp parallel num_threads(nt)
    {
        float *mine = regions + (size_t)omp_get_thread_num() * region;
        if (rope) {
#pragma omp for schedule(static)
            for (int t = 0; t < n_new; t++)
                cpu_rope_table(cs + (long)t * hd, rope_inv_freq, hd, pos0 + t, 1);
        }
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < batch; b++)
            for (int i = 0; i < n_new; i++) {
                const float *row = qkv + ((long)b * n_new + i) * ld_qkv;
                for (int g = 0; g < KV; g++) {
                    char *kdst = kv_at(&cache, cache.k, seq0 + b, g, pos0 + i);
                    const float *key = row + C + (long)g * hd;
                    if (rope) { // rotated in fp32 (in place for an fp32 cache), then stored
                        float *rot = wide ? mine : (float *)kdst;
                        cpu_rope_rotate(rot, key, cs + (long)i * hd, hd);
                        key = rot;
                    }
                    if (key != (const float *)kdst) kv_row_store(kdst, key, hd, cache.type);
                    kv_row_store(kv_at(&cache, cache.v, seq0 + b, g, pos0 + i),
                                 row + C + KC + (long)g * hd, hd, cache.type);
                }
            }
        if (tiled) {
            // Last query blocks first: they see the most keys, so the dynamic schedule ends
            // with the cheap ones and the threads finish together.
#pragma omp for schedule(dynamic, 1)
            for (long it = 0; it < (long)batch * KV * qblocks; it++) {
                const int r = qblocks - 1 - (int)(it % qblocks), bg = (int)(it / qblocks);
                const int r0 = r * ATTN_ROW_BLOCK;
                const int rows = n_new - r0 < ATTN_ROW_BLOCK ? n_new - r0 : ATTN_ROW_BLOCK;
                attn_tiled_item(&a, bg / KV, bg % KV, r0, rows, mine);
            }
        } else if (n_new > 1) {
#pragma omp for schedule(dynamic, 1)
            for (int it = 0; it < batch * H; it++)
                attn_twogemm_item(&a, it / H, it % H, mine);
        } else if (splits == 1) {
#pragma omp for schedule(static)
            for (int it = 0; it < batch * H; it++)
                attn_decode_item(&a, it / H, it % H, 0, T, mine, NULL);
        } else {
#pragma omp for schedule(static)
            for (int it = 0; it < batch * H * splits; it++) {
                const int s = it % splits, bh = it / splits;
                attn_decode_item(&a, bh / H, bh % H, (int)((long)T * s / splits),
                                 (int)((long)T * (s + 1) / splits), mine,
                                 part + (size_t)it * (hd + 2));
            }
            // Merge the spans: rescale each partial to the largest max, then normalise.
#pragma omp for schedule(static)
            for (int bh = 0; bh < batch * H; bh++) {
                const float *p = part + (size_t)bh * splits * (hd + 2);
                float m = p[0];
                for (int s = 1; s < splits; s++)
                    m = p[(size_t)s * (hd + 2)] > m ? p[(size_t)s * (hd + 2)] : m;
                float *o = out + (long)(bh / H) * C + (long)(bh % H) * hd;
                float l = 0.0f;
                memset(o, 0, sizeof(float) * (size_t)hd);
                for (int s = 0; s < splits; s++) {
                    const float *ps = p + (size_t)s * (hd + 2);
                    const float w = expf(ps[0] - m);
                    l += ps[1] * w;
                    for (int d = 0; d < hd; d++)
                        o[d] += ps[2 + d] * w;
                }
                const float inv = 1.0f / l;
                for (int d = 0; d < hd; d++)
                    o[d] *= inv;
            }
        }
    }
}
