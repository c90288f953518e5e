/* The block formats' decode GEMV in portable C (kernels/cpu/matmul_kernels.h, gemv_blocks):
 * the twin whose bits every level reproduces. It reads each block through qblocks_unpack, so
 * the values it multiplies are the codec's by definition; the SIMD levels widen the same
 * bytes in registers. */
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant_blocks.h"

/* The 16 fp32 lanes of one output: blocks alternate between lanes 0-7 and 8-15, eight lanes
 * of four columns each, as a 64-byte vector holds two blocks (matmul_blocks_zmm.h). */
enum { QB_LANES = 16, QB_LANE_COLS = 4, QB_SUBS = QBLOCK_K / QBLOCK };

/* The lanes halved three times, pairwise, then the last two: the order of
 * _mm512_reduce_add_ps and of the AVX2 twin's sum of its two accumulators. */
static float lanes_sum(const float *a) {
    float h8[8], h4[4];
    for (int i = 0; i < 8; i++)
        h8[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; i++)
        h4[i] = h8[i] + h8[i + 4];
    return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

void gemv_blocks_scalar(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                        dtype type, int rows, int k, int n) {
    const int nb = k / QBLOCK, unit = qblock_weights(type), per = unit / QBLOCK;
    const int mins = qblock_has_mins(type);
    const size_t unit_bytes = qblock_bytes(type), row_bytes = unit_bytes * (size_t)(k / unit);
    for (int o = 0; o < n; o++) {
        const uint8_t *wo = (const uint8_t *)w + (size_t)o * row_bytes;
        float acc[8][QB_LANES] = {{0}}; // rows <= CPU_GEMV_MAX_ROWS = 8
        int8_t qw[QBLOCK_K];
        float dw[QB_SUBS], mw[QB_SUBS];
        for (int b = 0; b < nb; b++) {
            const int j = b % per; // the block within its unit (q4_k: the sub-block)
            if (j == 0)
                qblocks_unpack(type, qw, dw, mw, wo + (size_t)(b / per) * unit_bytes, 1, unit);
            const int8_t *wb = qw + j * QBLOCK;
            for (int r = 0; r < rows; r++) {
                const int8_t *xb = q + (long)r * k + (long)b * QBLOCK;
                const float dx = d[(long)r * nb + b], s = dx * dw[j];
                const float sm = mins ? dx * mw[j] : 0.0f;
                float *lane = acc[r] + (b % 2) * (QB_LANES / 2);
                for (int l = 0; l < QBLOCK / QB_LANE_COLS; l++) {
                    int32_t dot = 0, xs = 0;
                    for (int c = l * QB_LANE_COLS; c < (l + 1) * QB_LANE_COLS; c++)
                        dot += (int32_t)xb[c] * wb[c], xs += xb[c];
                    lane[l] = fmaf((float)dot, s, lane[l]);
                    if (mins) lane[l] = fmaf((float)xs, sm, lane[l]);
                }
            }
        }
        for (int r = 0; r < rows; r++)
            y[(long)r * ldy + o] += lanes_sum(acc[r]);
    }
}

void block_sums(int32_t *xs, const int8_t *q, int rows, int k) {
    const long blocks = (long)rows * (k / QBLOCK);
    for (long b = 0; b < blocks; b++) {
        int32_t s = 0;
        for (int c = 0; c < QBLOCK; c++)
            s += q[b * QBLOCK + c];
        xs[b] = s;
    }
}

/* The scalar twin holds one weight row's planes (qblocks_unpack: int8 quants, scales, mins). */
long gemm_blocks_pack_bytes_scalar(dtype type, int k) {
    (void)type;
    return k + 2 * (long)sizeof(float) * (k / QBLOCK);
}

void gemm_blocks_scalar(float *y, long ldy, const int8_t *q, const float *d, const int32_t *xs,
                        weight_view w, int rows, int k, int n, void *pack) {
    const dtype type = w.type;
    const int nb = k / QBLOCK, mins = qblock_has_mins(type);
    const int groups = w.group ? (k + w.group - 1) / w.group : 1;
    const size_t row_bytes = dtype_bytes(type, (size_t)k);
    float *dw = pack, *mw = dw + nb;
    int8_t *planes = (int8_t *)(mw + nb);
    for (int o = 0; o < n; o++) {
        const int8_t *qw = planes;
        if (type == DTYPE_INT8) { // the row as it is, each block under the scale covering it
            qw = (const int8_t *)w.data + (size_t)k * o;
            for (int b = 0; b < nb; b++)
                dw[b] = w.scale[(long)o * groups + (w.group ? b * QBLOCK / w.group : 0)];
        } else {
            qblocks_unpack(type, planes, dw, mins ? mw : NULL, (const char *)w.data + row_bytes * o,
                           1, k);
        }
        for (int r = 0; r < rows; r++) {
            const int8_t *xr = q + (long)r * k;
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                int32_t dot = 0;
                for (int c = b * QBLOCK; c < (b + 1) * QBLOCK; c++)
                    dot += (int32_t)xr[c] * qw[c];
                const float dx = d[(long)r * nb + b];
                acc = fmaf((float)dot, dx * dw[b], acc);
                if (mins) acc = fmaf((float)xs[(long)r * nb + b], dx * mw[b], acc);
            }
            y[(long)r * ldy + o] += acc;
        }
    }
}
