/* out = in @ W^T + bias on the CPU. Which kernel runs depends on the weight dtype and on the
 * rows (kernels/cpu/matmul_kernels.h); the instruction-set level only changes how fast:
 *   fp32   rows <= CPU_GEMV_MAX_ROWS: the level's GEMV, streaming the weights once; more rows:
 *          OpenBLAS sgemm, tile by tile over the threads as below (the tiles need no copy).
 *   bf16   activations rounded to bf16 once; the level's bf16 GEMV, or its bf16 GEMM for more
 *          rows, or (no bf16 GEMM at this level) weights widened tile by tile and sgemm on the
 *          widened activations: exact products and fp32 sums in every case.
 *   int8   with act_block (docs/kernels.md): activations quantised to int8 blocks once; the
 *          level's int8 GEMV, or for more rows the block GEMM below where the activation
 *          blocks are 32 and whole and each lies under one weight scale (group 0 or a
 *          multiple of 32), else the blocks widened back (q * d, exact) and the weights tile
 *          by tile, then sgemm: the same function, summed in another order.
 *          Without act_block, and for f16: weights widened tile by tile, fp32 activations.
 *   q8_0, q4_0, q4_1, q4_k (ggml's blocks, kernels/quant_blocks.h): activations in int8
 *          blocks of 32 as for int8; the level's block GEMV reads the packed blocks and widens
 *          them in registers (the same bits at every level), so memory streams the blocks as
 *          stored. More rows: the level's block GEMM, int8 products as the GEMV's on weight
 *          tiles it packs for its vectors, summed per output block by block (the same bits
 *          at every level and thread count).
 * Each output element is the same function of its own row and weights however many rows share
 * the call, but not summed in the same order: the GEMV and sgemm paths, and sgemm at another
 * row count, round differently. So a data-parallel split or a micro-batch may move the last
 * bits, and after int8 rounding a little more; the factorization tests allow for that
 * (activations within tolerance, tokens apart only at near ties).
 * Output columns are split over the backend's threads (OpenMP, which OpenBLAS shares); each
 * thread runs a single-threaded kernel on its slice of weight rows. The paths through fp32
 * tiles cut the columns into tiles that depend on the shape only and hand out whole tiles, so
 * each sgemm call, and with it each output's bits, is the same at every thread count. OpenBLAS
 * never threads a call itself (sgemm_add): how it would split one depends on the threads it
 * has, and with the kernels OpenBLAS 0.3.21 picks on some CPUs (Haswell's, on a Zen 5) the
 * split moves the last bits. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

/* The fewest weight rows worth one BLAS call (a multiple of MATMUL_COLUMN_ALIGN). */
enum { MATMUL_TILE_MIN_ROWS = 16 };
/* Tiles a product is cut into at least, where its columns allow. A thread's share of whole
 * tiles is at most one tile over an even split: even for 2 and 4 threads (to a unit of 16
 * columns), at worst 1 + threads / 8 of it otherwise; fewer, wider tiles feed sgemm better. */
enum { MATMUL_MIN_TILES = 8 };
/* Output columns of one thread's slice are a multiple of this (a cache line of fp32 outputs). */
enum { MATMUL_COLUMN_ALIGN = 16 };
/* Below this many multiply-adds a product runs on one thread: waking the others costs more. */
#define MATMUL_PARALLEL_MIN_MACS 65536L

/* Thread t's slice [*n0, *n1) of n output columns. */
static void column_slice(int n, int t, int nt, int *n0, int *n1) {
    const int units = (n + MATMUL_COLUMN_ALIGN - 1) / MATMUL_COLUMN_ALIGN;
    const int u0 = (int)((long)units * t / nt), u1 = (int)((long)units * (t + 1) / nt);
    *n0 = u0 * MATMUL_COLUMN_ALIGN < n ? u0 * MATMUL_COLUMN_ALIGN : n;
    *n1 = u1 * MATMUL_COLUMN_ALIGN < n ? u1 * MATMUL_COLUMN_ALIGN : n;
}

/* Threads for a product of rows x k x n multiply-adds. */
static int product_threads(const cpu_ctx *ctx, int rows, int k, int n) {
    const long macs = (long)rows * k * n;
    return macs < MATMUL_PARALLEL_MIN_MACS || ctx->threads < 2 ? 1 : ctx->threads;
}

/* out[:, 0:n] (ld ldo) += in (rows, k) @ w (n, k)^T through OpenBLAS, on the calling thread
 * alone; beta 1 because out holds the bias or 0. OpenBLAS's OpenMP build runs a call on one
 * thread inside an active parallel region, and outside one (a team of one thread is inactive)
 * on omp_get_max_threads(): so there it is told 1 for the call. Setting and restoring the
 * calling thread's count is a store each (OpenBLAS re-reads it at its next call). */
static void sgemm_add(float *out, int ldo, const float *in, const float *w, int rows, int k,
                      int n) {
    const int outer = omp_in_parallel() ? 0 : omp_get_max_threads();
    if (outer > 1) omp_set_num_threads(1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f, in, k, w, k, 1.0f, out,
                ldo);
    if (outer > 1) omp_set_num_threads(outer);
}

/* Expands weight rows [r0, r0 + n) of w (., k) into tile (n, k), exactly (fp32 holds every
 * int8 * scale product to rounding, every bf16 and f16 exactly). */
static void tile_expand(float *tile, weight_view w, long r0, int n, int k) {
    const long count = (long)n * k;
    switch (w.type) {
    case DTYPE_INT8: {
        const int8_t *q = (const int8_t *)w.data + r0 * k;
        const int ng = w.group ? (k + w.group - 1) / w.group : 1;
        for (int r = 0; r < n; r++) {
            const float *s = w.group ? w.scale + (r0 + r) * ng : w.scale + r0 + r;
            for (int c = 0; c < k; c++)
                tile[(long)r * k + c] = (float)q[(long)r * k + c] * s[w.group ? c / w.group : 0];
        }
        break;
    }
    case DTYPE_BF16: convert_bf16_to_f32(tile, (const uint16_t *)w.data + r0 * k, count); break;
    case DTYPE_F16: convert_f16_to_f32(tile, (const uint16_t *)w.data + r0 * k, count); break;
    case DTYPE_F32:
        memcpy(tile, (const float *)w.data + r0 * k, sizeof(float) * (size_t)count);
        break;
    default: /* the block formats take gemv_blocks or gemm_blocks (matmul_q8), never a tile */
        CHECK(0, "matmul: %s weights have no fp32 tiles", dtype_name(w.type));
    }
}

/* How many tiles an n-column product with k-wide rows is cut into: tile i is column_slice(n,
 * i, count), so tiles are whole units of MATMUL_COLUMN_ALIGN columns, as even as units allow;
 * enough that none is wider than the tile budget holds for k, and at least MATMUL_MIN_TILES
 * where n allows, so that the threads get near-equal shares of whole tiles. A function of n
 * and k only: a tile is the same sgemm call at every thread count, which is what keeps the
 * thread count out of the results (sgemm's bits depend on the shape of the call: its kernels
 * for narrow, small or ragged shapes sum in other orders). Tiles read in place (fp32 weights)
 * need no budget: then the fewest that 2 and 4 threads split evenly, since wider sgemm calls run
 * faster. */
static int tile_count(int n, int k, int in_place) {
    const int units = (n + MATMUL_COLUMN_ALIGN - 1) / MATMUL_COLUMN_ALIGN;
    if (in_place) return units < MATMUL_MIN_TILES ? units : MATMUL_MIN_TILES;
    int per_tile = CPU_MATMUL_TILE_FLOATS / k / MATMUL_COLUMN_ALIGN; // units the budget holds
    if (per_tile < MATMUL_TILE_MIN_ROWS / MATMUL_COLUMN_ALIGN)
        per_tile = MATMUL_TILE_MIN_ROWS / MATMUL_COLUMN_ALIGN;
    int count = (units + per_tile - 1) / per_tile;
    if (count < MATMUL_MIN_TILES) count = MATMUL_MIN_TILES;
    return count < units ? count : units;
}

/* Any weights through fp32 tiles: the output columns are cut into tile_count tiles, and
 * each thread takes a run of whole tiles, expands each into its own part of the tile scratch
 * (fp32 tiles are read in place) and multiplies it with fp32 activations x (rows, k) straight
 * away, so the expansion stays in cache and the whole fp32 matrix never exists. */
static void matmul_tiled(cpu_ctx *ctx, float *out, const float *x, weight_view w, int rows, int k,
                         int n) {
    const int nt = product_threads(ctx, rows, k, n);
    int tile_rows = CPU_MATMUL_TILE_FLOATS / k;
    if (tile_rows < MATMUL_TILE_MIN_ROWS) tile_rows = MATMUL_TILE_MIN_ROWS;
    // Sized by k alone so every matrix of a layer shares one tile size and the scratch stops
    // growing after the first call of each width.
    const size_t per_thread = (size_t)tile_rows * (size_t)k;
    float *tiles = cpu_scratch_reserve(ctx, &ctx->tile, (size_t)ctx->threads * per_thread);
    const cpu_matmul_kernels *mk = ctx->kern->matmul;
    const int count = tile_count(n, k, w.type == DTYPE_F32);
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads();
        float *tile = tiles + (size_t)t * per_thread;
        for (int i = (int)((long)count * t / nth); i < (int)((long)count * (t + 1) / nth); i++) {
            int r0, r1;
            column_slice(n, i, count, &r0, &r1);
            const int nn = r1 - r0;
            // fp32 weights are their own tile
            const float *wt = w.type == DTYPE_F32 ? (const float *)w.data + (long)r0 * k : tile;
            if (w.type != DTYPE_F32) tile_expand(tile, w, r0, nn, k);
            // The tile's products land in output columns [r0, r0 + nn): the ld stays n.
            if (rows <= CPU_GEMV_MAX_ROWS)
                mk->gemv_f32(out + r0, n, x, wt, rows, k, nn);
            else
                sgemm_add(out + r0, n, x, wt, rows, k, nn);
        }
    }
}

static void matmul_f32(cpu_ctx *ctx, float *out, const float *x, const float *w, int rows, int k,
                       int n) {
    if (rows > CPU_GEMV_MAX_ROWS) { // sgemm tile by tile, the same calls at every thread count
        const weight_view wv = {.type = DTYPE_F32, .data = w};
        matmul_tiled(ctx, out, x, wv, rows, k, n);
        return;
    }
    const cpu_matmul_kernels *mk = ctx->kern->matmul;
#pragma omp parallel num_threads(product_threads(ctx, rows, k, n))
    {
        int n0, n1;
        column_slice(n, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
        if (n1 > n0) mk->gemv_f32(out + n0, n, x, w + (long)n0 * k, rows, k, n1 - n0);
    }
}

static void matmul_bf16(cpu_ctx *ctx, float *out, const float *x, const uint16_t *w, int rows,
                        int k, int n) {
    const cpu_matmul_kernels *mk = ctx->kern->matmul;
    const long count = (long)rows * k;
    const int gemm = rows > CPU_GEMV_MAX_ROWS && mk->gemm_bf16;
    const int widen = rows > CPU_GEMV_MAX_ROWS && !mk->gemm_bf16;
    // The rounded rows (bf16), then for the widening path the same values back in fp32.
    const size_t bf16_floats = ((size_t)count + 1) / 2;
    float *act = cpu_scratch_reserve(ctx, &ctx->act, bf16_floats + (widen ? (size_t)count : 0));
    uint16_t *xb = (uint16_t *)act;
    mk->round_bf16(xb, x, count);
    if (widen) {
        float *xw = act + bf16_floats;
        convert_bf16_to_f32(xw, xb, count);
        matmul_tiled(ctx, out, xw, (weight_view){.type = DTYPE_BF16, .data = w}, rows, k, n);
        return;
    }
    const size_t pack = gemm ? (size_t)(mk->gemm_bf16_pack_bytes(k) + 3) / 4 : 0;
    float *packs = gemm ? cpu_scratch_reserve(ctx, &ctx->tile, (size_t)ctx->threads * pack) : NULL;
#pragma omp parallel num_threads(product_threads(ctx, rows, k, n))
    {
        int n0, n1;
        column_slice(n, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
        if (n1 > n0 && gemm)
            mk->gemm_bf16(out + n0, n, xb, w + (long)n0 * k, rows, k, n1 - n0,
                          packs + (size_t)omp_get_thread_num() * pack);
        else if (n1 > n0)
            mk->gemv_bf16(out + n0, n, xb, w + (long)n0 * k, rows, k, n1 - n0);
    }
}

/* Block-format weights, and int8 weights whose scales cover whole blocks of 32 activations,
 * at more rows than a GEMV takes (prefill): the level's block GEMM on each
 * thread's slice of columns, with its own packing of weight tiles in the tile scratch. Each
 * output is a function of its row and weight row alone (matmul_kernels.h, gemm_blocks), so
 * the split does not move a bit. */
static void matmul_blocks_gemm(cpu_ctx *ctx, float *out, const int8_t *q, const float *d,
                               const int32_t *xs, weight_view w, int rows, int k, int n) {
    const cpu_matmul_kernels *mk = ctx->kern->matmul;
    // Each thread's pack starts on a cache line, as the kernels' aligned loads want.
    const size_t pack = (size_t)(mk->gemm_blocks_pack_bytes(w.type, k) + 63) / 64 * 16;
    float *packs = cpu_scratch_reserve(ctx, &ctx->tile, (size_t)ctx->threads * pack);
    const int ng = w.group ? (k + w.group - 1) / w.group : 1;
#pragma omp parallel num_threads(product_threads(ctx, rows, k, n))
    {
        int n0, n1;
        column_slice(n, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
        weight_view slice = w;
        slice.data = (const char *)w.data + dtype_bytes(w.type, (size_t)n0 * k);
        if (w.type == DTYPE_INT8) slice.scale = w.scale + (long)n0 * (w.group ? ng : 1);
        if (n1 > n0)
            mk->gemm_blocks(out + n0, n, q, d, xs, slice, rows, k, n1 - n0,
                            packs + (size_t)omp_get_thread_num() * pack);
    }
}

/* int8 weights with activations in int8 blocks of w.act_block, or block-format weights with
 * activations in blocks of QBLOCK. */
static void matmul_q8(cpu_ctx *ctx, float *out, const float *x, weight_view w, int rows, int k,
                      int n) {
    const cpu_matmul_kernels *mk = ctx->kern->matmul;
    const int blocks = dtype_is_block(w.type);
    const int block = blocks ? QBLOCK : w.act_block, nb = (k + block - 1) / block;
    const long count = (long)rows * k;
    // int8 rows take the block GEMM where every activation block is whole and under one scale
    const int whole_blocks =
        blocks || (block == QBLOCK && k % QBLOCK == 0 && w.group % QBLOCK == 0);
    const int gemm = whole_blocks && rows > CPU_GEMV_MAX_ROWS;
    const int widen = !whole_blocks && rows > CPU_GEMV_MAX_ROWS;
    // Scratch: the scales (rows, nb), the int8 values, then for the block GEMM the blocks'
    // sums of quants (rows, nb), for the widening path q * d in fp32.
    const size_t q_floats = ((size_t)count + 3) / 4, d_floats = (size_t)rows * (size_t)nb;
    const size_t extra = gemm ? d_floats : widen ? (size_t)count : 0;
    float *act = cpu_scratch_reserve(ctx, &ctx->act, d_floats + q_floats + extra);
    float *d = act;
    int8_t *q = (int8_t *)(act + d_floats);
    mk->quantize_q8(q, d, x, rows, k, block);
    if (gemm) {
        int32_t *xs = (int32_t *)(act + d_floats + q_floats);
        block_sums(xs, q, rows, k);
        matmul_blocks_gemm(ctx, out, q, d, xs, w, rows, k, n);
        return;
    }
    if (widen) {
        float *xw = act + d_floats + q_floats;
#pragma omp parallel for num_threads(product_threads(ctx, rows, k, n))
        for (long r = 0; r < rows; r++)
            for (int c = 0; c < k; c++)
                xw[r * k + c] = (float)q[r * k + c] * d[r * nb + c / block];
        matmul_tiled(ctx, out, xw, w, rows, k, n);
        return;
    }
    const int ng = w.group ? (k + w.group - 1) / w.group : 1;
#pragma omp parallel num_threads(product_threads(ctx, rows, k, n))
    {
        int n0, n1;
        column_slice(n, omp_get_thread_num(), omp_get_num_threads(), &n0, &n1);
        if (n1 > n0 && blocks)
            mk->gemv_blocks(out + n0, n, q, d,
                            (const char *)w.data + dtype_bytes(w.type, (size_t)n0 * k), w.type,
                            rows, k, n1 - n0);
        else if (n1 > n0)
            mk->gemv_q8(out + n0, n, q, d, (const int8_t *)w.data + (long)n0 * k,
                        w.scale + (long)n0 * (w.group ? ng : 1), w.group, rows, k, n1 - n0, block);
    }
}

void cpu_matmul(void *vctx, float *out, const float *in, weight_view w, const float *bias, int rows,
                int in_dim, int out_dim) {
    cpu_ctx *ctx = vctx;
    CHECK(rows >= 0 && in_dim > 0 && out_dim > 0, "matmul: bad shape rows %d in %d out %d", rows,
          in_dim, out_dim);
    CHECK(w.type != DTYPE_INT8 || w.scale, "matmul: int8 weight without scales");
    CHECK(w.type != DTYPE_INT8 || w.group >= 0, "matmul: int8 group %d", w.group);
    CHECK(w.type != DTYPE_INT8 || w.act_block == 0 ||
              (w.act_block > 0 && (w.group == 0 || w.group % w.act_block == 0)),
          "matmul: activation block %d does not divide the weight group %d", w.act_block, w.group);
    CHECK(!dtype_is_block(w.type) || in_dim % qblock_weights(w.type) == 0,
          "matmul: %s weights need in_dim %d a multiple of %d", dtype_name(w.type), in_dim,
          qblock_weights(w.type));
    if (rows == 0) return;
    for (int r = 0; r < rows; r++) {
        float *o = out + (long)r * out_dim;
        if (bias)
            memcpy(o, bias, sizeof(float) * (size_t)out_dim);
        else
            memset(o, 0, sizeof(float) * (size_t)out_dim);
    }
    switch (w.type) {
    case DTYPE_F32: matmul_f32(ctx, out, in, w.data, rows, in_dim, out_dim); break;
    case DTYPE_BF16: matmul_bf16(ctx, out, in, w.data, rows, in_dim, out_dim); break;
    case DTYPE_INT8:
        if (w.act_block)
            matmul_q8(ctx, out, in, w, rows, in_dim, out_dim);
        else
            matmul_tiled(ctx, out, in, w, rows, in_dim, out_dim);
        break;
    case DTYPE_F16: matmul_tiled(ctx, out, in, w, rows, in_dim, out_dim); break;
    case DTYPE_Q8_0:
    case DTYPE_Q4_0:
    case DTYPE_Q4_1:
    case DTYPE_Q4_K: matmul_q8(ctx, out, in, w, rows, in_dim, out_dim); break;
    }
}
