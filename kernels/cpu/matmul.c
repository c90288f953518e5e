/* out = in @ W^T + bias on the CPU through OpenBLAS. Low-precision weights (int8 with per-row
 * scales, bf16, f16) are expanded one tile of output rows at a time into an fp32 scratch and
 * multiplied straight away, so the expansion stays inside the product and in cache, and the
 * full fp32 matrix never exists. */
#include <cblas.h>
#include <string.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"
#include "kernels/quant.h"

/* The fewest weight rows worth one BLAS call. */
enum { MATMUL_TILE_MIN_ROWS = 16 };
/* Up to this many activation rows (decode), int8 products skip the fp32 tile and read the int8
 * weights directly: the step is bound by weight bytes, and a quarter of them is the point. */
enum { MATMUL_INT8_DIRECT_ROWS = 4, MATMUL_LANES = 16 };

/* out[r][o] += scale[o] * sum_c in[r][c] * q[o][c] for rows <= MATMUL_INT8_DIRECT_ROWS. Sixteen
 * independent partial sums per dot product let the compiler vectorise without reassociating. */
static void matmul_int8_direct(float *out, const float *in, weight_view w, int rows, int k,
                               int n) {
    const int8_t *q = w.data;
    const int k_main = k - k % MATMUL_LANES;
    for (int o = 0; o < n; o++) {
        const int8_t *qo = q + (long)o * k;
        for (int r = 0; r < rows; r++) {
            const float *x = in + (long)r * k;
            float lane[MATMUL_LANES] = {0};
            for (int c = 0; c < k_main; c += MATMUL_LANES)
                for (int j = 0; j < MATMUL_LANES; j++) lane[j] += x[c + j] * (float)qo[c + j];
            float dot = 0.0f;
            for (int c = k_main; c < k; c++) dot += x[c] * (float)qo[c];
            for (int j = 0; j < MATMUL_LANES; j++) dot += lane[j];
            out[(long)r * n + o] += dot * w.scale[o];
        }
    }
}

/* out[:, 0:n] (ldc ldo) += in (rows, k) @ w (n, k)^T; beta 1 because out holds the bias or 0. */
static void matmul_f32(float *out, int ldo, const float *in, const float *w, int rows, int k,
                       int n) {
    if (rows == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w, k, in, 1, 1.0f, out, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f, in, k, w, k, 1.0f,
                    out, ldo);
}

/* Expands weight rows [r0, r0 + n) of w (., k) into tile (n, k). */
static void matmul_tile_expand(float *tile, weight_view w, long r0, int n, int k) {
    long count = (long)n * k;
    switch (w.type) {
    case DTYPE_INT8: {
        const int8_t *q = (const int8_t *)w.data + r0 * k;
        for (int r = 0; r < n; r++) {
            float s = w.scale[r0 + r];
            for (int c = 0; c < k; c++) tile[(long)r * k + c] = (float)q[(long)r * k + c] * s;
        }
        break;
    }
    case DTYPE_BF16: convert_bf16_to_f32(tile, (const uint16_t *)w.data + r0 * k, count); break;
    case DTYPE_F16: convert_f16_to_f32(tile, (const uint16_t *)w.data + r0 * k, count); break;
    case DTYPE_F32:
        memcpy(tile, (const float *)w.data + r0 * k, sizeof(float) * (size_t)count);
        break;
    }
}

void cpu_matmul(void *vctx, float *out, const float *in, weight_view w, const float *bias, int rows,
                int in_dim, int out_dim) {
    cpu_ctx *ctx = vctx;
    CHECK(rows >= 0 && in_dim > 0 && out_dim > 0, "matmul: bad shape rows %d in %d out %d", rows,
          in_dim, out_dim);
    CHECK(w.type != DTYPE_INT8 || w.scale, "matmul: int8 weight without scales");
    if (rows == 0) return;
    for (int r = 0; r < rows; r++) {
        float *o = out + (long)r * out_dim;
        if (bias)
            memcpy(o, bias, sizeof(float) * (size_t)out_dim);
        else
            memset(o, 0, sizeof(float) * (size_t)out_dim);
    }
    if (w.type == DTYPE_F32) {
        matmul_f32(out, out_dim, in, w.data, rows, in_dim, out_dim);
        return;
    }
    if (w.type == DTYPE_INT8 && rows <= MATMUL_INT8_DIRECT_ROWS) {
        matmul_int8_direct(out, in, w, rows, in_dim, out_dim);
        return;
    }
    int tile_rows = CPU_MATMUL_TILE_FLOATS / in_dim;
    if (tile_rows < MATMUL_TILE_MIN_ROWS) tile_rows = MATMUL_TILE_MIN_ROWS;
    // Sized by in_dim alone so every matrix of a layer shares one tile size and the scratch
    // stops growing after the first call of each width.
    float *tile = cpu_scratch_reserve(ctx, &ctx->tile, (size_t)tile_rows * (size_t)in_dim);
    for (int r0 = 0; r0 < out_dim; r0 += tile_rows) {
        int n = out_dim - r0 < tile_rows ? out_dim - r0 : tile_rows;
        matmul_tile_expand(tile, w, r0, n, in_dim);
        // The tile's products land in output columns [r0, r0 + n): ldc stays out_dim.
        matmul_f32(out + r0, out_dim, in, tile, rows, in_dim, n);
    }
}
