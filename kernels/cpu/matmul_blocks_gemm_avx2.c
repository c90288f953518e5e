/* The block formats' GEMM (prefill) for AVX2 (kernels/cpu/matmul_kernels.h, gemm_blocks): the
 * 512-bit kernel's design (matmul_blocks_gemm_avx512vnni.c) on 8 lanes, a tile of 16 weight
 * rows, and the 4-product sums from maddubs and madd. maddubs saturates at int16, which no q4
 * pair reaches (2 * 15 * 127), but q8_0 + 128 would (2 * 255 * 127), so q8_0 stays signed in
 * the pack and takes the sign trick: |w| times x with w's sign, pairs of at most 2 * 128 *
 * 127. Also the table of the 512-bit level without VNNI, which has no faster int8 dot. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/matmul_blocks_pack.h"
#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

enum { LANES = 8, TILE = 2 * LANES, ROW_BLOCK = 2, GROUPS = QBLOCK / 4 };

long gemm_blocks_pack_bytes_avx2(dtype type, int k) { return qb_pack_bytes(type, k, TILE); }

static inline __attribute__((always_inline)) __m256i group_bytes(const uint32_t *qp, dtype type,
                                                                 int b, int g, int half) {
    long j;
    int high;
    qb_pack_group(type, b, g, &j, &high);
    const __m256i v = _mm256_load_si256((const __m256i *)(qp + j * TILE + half * LANES));
    if (type == DTYPE_Q8_0 || type == DTYPE_INT8) return v;
    const __m256i low = _mm256_set1_epi8(0x0F);
    return _mm256_and_si256(high ? _mm256_srli_epi16(v, 4) : v, low);
}

/* sum + the 8 lanes' 4-product sums of weights w and the broadcast quants x. */
static inline __attribute__((always_inline)) __m256i dot4(__m256i sum, __m256i w, __m256i x,
                                                          dtype type) {
    const __m256i pairs = type == DTYPE_Q8_0 || type == DTYPE_INT8
                              ? _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w))
                              : _mm256_maddubs_epi16(w, x);
    return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

/* Rows [0, R) of q against the packed tile, y's columns [0, nc). */
static inline __attribute__((always_inline)) void tile_rows(float *y, long ldy, const int8_t *q,
                                                            const float *dx, const int32_t *xs,
                                                            const void *pack, dtype type,
                                                            const int R, int k, int nc) {
    const int nb = k / QBLOCK, mins = qblock_has_mins(type);
    const int32_t offset = type == DTYPE_Q4_0 ? 8 : 0;
    const uint32_t *qp = pack;
    const float *dp = (const float *)(qp + qb_pack_dwords(type, k) * TILE);
    const float *mp = dp + (long)nb * TILE;
    __m256 acc[ROW_BLOCK][2];
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i sum[ROW_BLOCK][2];
#pragma GCC unroll 2
        for (int r = 0; r < R; r++)
            sum[r][0] = sum[r][1] = _mm256_set1_epi32(-offset * xs[(long)r * nb + b]);
#pragma GCC unroll 8
        for (int g = 0; g < GROUPS; g++) {
            const __m256i w0 = group_bytes(qp, type, b, g, 0), w1 = group_bytes(qp, type, b, g, 1);
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) {
                int32_t x4;
                __builtin_memcpy(&x4, q + (long)r * k + b * QBLOCK + 4 * g, sizeof x4);
                const __m256i x = _mm256_set1_epi32(x4);
                sum[r][0] = dot4(sum[r][0], w0, x, type);
                sum[r][1] = dot4(sum[r][1], w1, x, type);
            }
        }
        const __m256 d0 = _mm256_load_ps(dp + (long)b * TILE);
        const __m256 d1 = _mm256_load_ps(dp + (long)b * TILE + LANES);
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            const __m256 dxr = _mm256_set1_ps(dx[(long)r * nb + b]);
            acc[r][0] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r][0]), _mm256_mul_ps(dxr, d0), acc[r][0]);
            acc[r][1] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r][1]), _mm256_mul_ps(dxr, d1), acc[r][1]);
        }
        if (mins) {
            const __m256 m0 = _mm256_load_ps(mp + (long)b * TILE);
            const __m256 m1 = _mm256_load_ps(mp + (long)b * TILE + LANES);
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) {
                const __m256 dxr = _mm256_set1_ps(dx[(long)r * nb + b]);
                const __m256 s = _mm256_set1_ps((float)xs[(long)r * nb + b]);
                acc[r][0] = _mm256_fmadd_ps(s, _mm256_mul_ps(dxr, m0), acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(s, _mm256_mul_ps(dxr, m1), acc[r][1]);
            }
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++) {
        float *yr = y + (long)r * ldy;
        if (nc == TILE) {
            _mm256_storeu_ps(yr, _mm256_add_ps(_mm256_loadu_ps(yr), acc[r][0]));
            _mm256_storeu_ps(yr + LANES, _mm256_add_ps(_mm256_loadu_ps(yr + LANES), acc[r][1]));
        } else {
            float lanes[TILE];
            _mm256_storeu_ps(lanes, acc[r][0]);
            _mm256_storeu_ps(lanes + LANES, acc[r][1]);
            for (int c = 0; c < nc; c++)
                yr[c] += lanes[c];
        }
    }
}

static inline __attribute__((always_inline)) void gemm_type(float *y, long ldy, const int8_t *q,
                                                            const float *d, const int32_t *xs,
                                                            weight_view w, dtype type, int rows,
                                                            int k, int n, void *pack) {
    const int nb = k / QBLOCK;
    w.type = type; // a constant from here on
    for (int c0 = 0; c0 < n; c0 += TILE) {
        const int nc = n - c0 < TILE ? n - c0 : TILE;
        qb_pack_tile(pack, w, c0, nc, k, TILE, 0);
        int r = 0;
        for (; r + ROW_BLOCK <= rows; r += ROW_BLOCK)
            tile_rows(y + (long)r * ldy + c0, ldy, q + (long)r * k, d + (long)r * nb,
                      xs + (long)r * nb, pack, type, ROW_BLOCK, k, nc);
        if (r < rows)
            tile_rows(y + (long)r * ldy + c0, ldy, q + (long)r * k, d + (long)r * nb,
                      xs + (long)r * nb, pack, type, 1, k, nc);
    }
}

void gemm_blocks_avx2(float *y, long ldy, const int8_t *q, const float *d, const int32_t *xs,
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
