/* The block formats' GEMM (prefill) with AVX-512 VNNI (kernels/cpu/matmul_kernels.h,
 * gemm_blocks; docs/kernels.md, "Block formats"). A tile of 32 weight rows is packed
 * (matmul_blocks_pack.h) so that one 64-byte load holds 4 weights of 16 rows; each activation
 * row's 4 quants are broadcast and met by vpdpbusd, so one instruction makes 64 products and
 * every lane is one output column. A block's int32 sums then meet the scales in fp32 lane by
 * lane, in the scalar twin's order, so no reduction across lanes and the same bits.
 *
 * vpdpbusd multiplies unsigned by signed bytes. The activation quants are the signed operand;
 * the weights are unsigned as packed: q4's nibbles as they are, q8_0's q + 128. The offsets
 * come back in int32 before the first product of a block: each sum starts at -8 xs (q4_0,
 * whose weight is nibble - 8) or -128 xs (q8_0), xs the activation block's sum of quants. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/matmul_blocks_pack.h"
#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

enum { LANES = 16, TILE = 2 * LANES, ROW_BLOCK = 4, GROUPS = QBLOCK / 4 };

long gemm_blocks_pack_bytes_avx512vnni(dtype type, int k) { return qb_pack_bytes(type, k, TILE); }

/* Group g of block b for the tile's lanes [16 half, 16 half + 16), as unsigned bytes. */
static inline __attribute__((always_inline)) __m512i group_bytes(const uint32_t *qp, dtype type,
                                                                 int b, int g, int half) {
    long j;
    int high;
    qb_pack_group(type, b, g, &j, &high);
    const __m512i v = _mm512_load_si512(qp + j * TILE + half * LANES);
    if (type == DTYPE_Q8_0 || type == DTYPE_INT8) return v;
    const __m512i low = _mm512_set1_epi8(0x0F);
    return _mm512_and_si512(high ? _mm512_srli_epi16(v, 4) : v, low);
}

/* Rows [0, R) of q against the packed tile, y's columns [0, nc). */
static inline __attribute__((always_inline)) void tile_rows(float *y, long ldy, const int8_t *q,
                                                            const float *dx, const int32_t *xs,
                                                            const void *pack, dtype type,
                                                            const int R, int k, int nc) {
    const int nb = k / QBLOCK, mins = qblock_has_mins(type);
    const int32_t offset = type == DTYPE_Q8_0 || type == DTYPE_INT8 ? 128
                           : type == DTYPE_Q4_0                     ? 8
                                                                    : 0;
    const uint32_t *qp = pack;
    const float *dp = (const float *)(qp + qb_pack_dwords(type, k) * TILE);
    const float *mp = dp + (long)nb * TILE;
    __m512 acc[ROW_BLOCK][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i sum[ROW_BLOCK][2];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            sum[r][0] = sum[r][1] = _mm512_set1_epi32(-offset * xs[(long)r * nb + b]);
#pragma GCC unroll 8
        for (int g = 0; g < GROUPS; g++) {
            const __m512i w0 = group_bytes(qp, type, b, g, 0), w1 = group_bytes(qp, type, b, g, 1);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                int32_t x4;
                __builtin_memcpy(&x4, q + (long)r * k + b * QBLOCK + 4 * g, sizeof x4);
                const __m512i x = _mm512_set1_epi32(x4);
                sum[r][0] = _mm512_dpbusd_epi32(sum[r][0], w0, x);
                sum[r][1] = _mm512_dpbusd_epi32(sum[r][1], w1, x);
            }
        }
        const __m512 d0 = _mm512_load_ps(dp + (long)b * TILE),
                     d1 = _mm512_load_ps(dp + (long)b * TILE + LANES);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 dxr = _mm512_set1_ps(dx[(long)r * nb + b]);
            acc[r][0] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r][0]), _mm512_mul_ps(dxr, d0), acc[r][0]);
            acc[r][1] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r][1]), _mm512_mul_ps(dxr, d1), acc[r][1]);
        }
        if (mins) {
            const __m512 m0 = _mm512_load_ps(mp + (long)b * TILE),
                         m1 = _mm512_load_ps(mp + (long)b * TILE + LANES);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m512 dxr = _mm512_set1_ps(dx[(long)r * nb + b]);
                const __m512 s = _mm512_set1_ps((float)xs[(long)r * nb + b]);
                acc[r][0] = _mm512_fmadd_ps(s, _mm512_mul_ps(dxr, m0), acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(s, _mm512_mul_ps(dxr, m1), acc[r][1]);
            }
        }
    }
    const __mmask16 k0 = nc >= LANES ? 0xFFFF : (__mmask16)((1u << nc) - 1);
    const __mmask16 k1 = nc >= TILE    ? 0xFFFF
                         : nc <= LANES ? 0
                                       : (__mmask16)((1u << (nc - LANES)) - 1);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        float *yr = y + (long)r * ldy;
        _mm512_mask_storeu_ps(yr, k0, _mm512_add_ps(_mm512_maskz_loadu_ps(k0, yr), acc[r][0]));
        _mm512_mask_storeu_ps(yr + LANES, k1,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(k1, yr + LANES), acc[r][1]));
    }
}

/* One format: the type is a constant in each call, so its branches fold away. */
static inline __attribute__((always_inline)) void gemm_type(float *y, long ldy, const int8_t *q,
                                                            const float *d, const int32_t *xs,
                                                            weight_view w, dtype type, int rows,
                                                            int k, int n, void *pack) {
    const int nb = k / QBLOCK;
    w.type = type; // a constant from here on
    for (int c0 = 0; c0 < n; c0 += TILE) {
        const int nc = n - c0 < TILE ? n - c0 : TILE;
        qb_pack_tile(pack, w, c0, nc, k, TILE,
                     type == DTYPE_Q8_0 || type == DTYPE_INT8 ? 0x80808080u : 0);
        int r = 0;
        for (; r + ROW_BLOCK <= rows; r += ROW_BLOCK)
            tile_rows(y + (long)r * ldy + c0, ldy, q + (long)r * k, d + (long)r * nb,
                      xs + (long)r * nb, pack, type, ROW_BLOCK, k, nc);
        float *yr = y + (long)r * ldy + c0;
        const int8_t *qr = q + (long)r * k;
        switch (rows - r) {
        case 3:
            tile_rows(yr, ldy, qr, d + (long)r * nb, xs + (long)r * nb, pack, type, 3, k, nc);
            break;
        case 2:
            tile_rows(yr, ldy, qr, d + (long)r * nb, xs + (long)r * nb, pack, type, 2, k, nc);
            break;
        case 1:
            tile_rows(yr, ldy, qr, d + (long)r * nb, xs + (long)r * nb, pack, type, 1, k, nc);
            break;
        default: break;
        }
    }
}

void gemm_blocks_avx512vnni(float *y, long ldy, const int8_t *q, const float *d, const int32_t *xs,
                            weight_view w, int rows, int k, int n, void *pack) {
    switch (w.type) {
    case DTYPE_INT8: gemm_type(y, ldy, q, d, xs, w, DTYPE_INT8, rows, k, n, pack); break;
    case DTYPE_Q8_0: gemm_type(y, ldy, q, d, xs, w, DTYPE_Q8_0, rows, k, n, pack); break;
    case DTYPE_Q4_0: gemm_type(y, ldy, q, d, xs, w, DTYPE_Q4_0, rows, k, n, pack); break;
    case DTYPE_Q4_1: gemm_type(y, ldy, q, d, xs, w, DTYPE_Q4_1, rows, k, n, pack); break;
    case DTYPE_Q4_K: gemm_type(y, ldy, q, d, xs, w, DTYPE_Q4_K, rows, k, n, pack); break;
    default: break;
    }
}
