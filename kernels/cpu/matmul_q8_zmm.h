/* The int8 decode GEMV on 512-bit vectors (kernels/cpu/matmul_kernels.h, gemv_q8), shared by
 * matmul_q8_avx512.c (maddubs with the sign trick) and matmul_q8_avx512vnni.c (vpdpbusd). The
 * including file defines, before it includes this, how one 64-byte chunk meets another:
 *   q8_xrow q8_row(__m512i x)       an activation chunk prepared once for every column
 *   __m512i q8_col(__m512i w)       a weight chunk's int32 lanes that every row's dot starts from
 *   __m512i q8_dot(__m512i init, q8_xrow x, __m512i w)
 *                                   init + the 16 lanes of x . w, each the exact int32 sum of
 *                                   4 neighbouring products
 * A lane never straddles a block (block >= 4), so the lanes of a block convert to fp32 exactly
 * and meet the block's scale in one FMA; every row and column runs the same instructions
 * whatever tile it falls in, so an output never depends on the rows or columns beside it. */
#pragma once
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

/* The NC weight rows of a tile are NC * k contiguous bytes, read a chunk of each row at a
 * time; the prefetch walks the same bytes as one stream, this far ahead of the tile's progress
 * (NC * c0), so it runs into the next tile's rows without a gap. */
enum { Q8_ZMM_PREFETCH = 8192 };
/* Group scales are a second stream, an eighth of the weights' bytes at groups of 32, which the
 * masked loads that read them do not seem to train the hardware prefetcher on: on the Zen 5 box
 * a grouped GEMV ran at 1.0-1.1x the read rate with its scales in cache (bench_gemv) and at a
 * third of it in the model, stalled at those loads (perf annotate). So each tile asks for the
 * scales of the tile this many tiles ahead. */
enum { Q8_ZMM_SCALE_TILES_AHEAD = 4 };

/* The scale lanes of column o's weights over the chunk at c0 (blocks b0.., nbc of them, mask
 * dm): one group for the whole chunk, one scale per block (group == block), or lane by lane. */
static inline __attribute__((always_inline)) __m512 q8_zmm_scales(const float *ws, int group,
                                                                  int ng, int block, int c0, int b0,
                                                                  __mmask16 dm, __m512i bidx) {
    if (group % 64 == 0) return _mm512_set1_ps(ws[c0 / group]);
    if (group == block) return _mm512_permutexvar_ps(bidx, _mm512_maskz_loadu_ps(dm, ws + b0));
    float s[16];
    for (int l = 0; l < 16; l++) {
        const int g = (c0 + 4 * l) / group; // lanes past k hold zero sums: any finite scale
        s[l] = ws[g < ng ? g : ng - 1];
    }
    return _mm512_loadu_ps(s);
}

/* y[r * ldy + j] += the q8 product of rows r < NR and weight rows j < NC, all of k. */
static inline __attribute__((always_inline)) void q8_zmm_tile(float *y, long ldy, const int8_t *q,
                                                              const float *d, const int8_t *w,
                                                              const float *ws, int group, int k,
                                                              int block, int NR, int NC) {
    const int nb = (k + block - 1) / block, ng = group ? (k + group - 1) / group : 1;
    const int bpc = 64 / block; // blocks per chunk
    // Lane l of a chunk lies in its block l / (block / 4).
    const __m512i bidx =
        _mm512_srlv_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                          _mm512_set1_epi32(__builtin_ctz((unsigned)block) - 2));
    __m512 acc[8][4];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++)
            acc[r][j] = _mm512_setzero_ps();
    if (group) { // a prefetch past the end never faults
        const long tile_bytes = (long)NC * ng * (long)sizeof(float);
        const char *ahead = (const char *)ws + Q8_ZMM_SCALE_TILES_AHEAD * tile_bytes;
        for (long off = 0; off < tile_bytes; off += 64)
            _mm_prefetch(ahead + off, _MM_HINT_T0);
    }
    for (int c0 = 0; c0 < k; c0 += 64) {
        // The last chunk is read under a mask: the bytes past k load as zero and add nothing.
        const __mmask64 m = k - c0 >= 64 ? ~0ULL : (1ULL << (k - c0)) - 1;
        const int b0 = c0 / block, nbc = nb - b0 < bpc ? nb - b0 : bpc;
        const __mmask16 dm = (__mmask16)((1u << nbc) - 1);
        __m512i wv[4], init[4];
        __m512 sv[4];
        for (int j = 0; j < NC; j++) {
            const int8_t *wj = w + (long)j * k + c0;
            _mm_prefetch((const char *)(w + (long)NC * c0 + 64 * j + Q8_ZMM_PREFETCH), _MM_HINT_T0);
            wv[j] = _mm512_maskz_loadu_epi8(m, wj);
            init[j] = q8_col(wv[j]);
            sv[j] = group ? q8_zmm_scales(ws + (long)j * ng, group, ng, block, c0, b0, dm, bidx)
                          : _mm512_setzero_ps();
        }
        for (int r = 0; r < NR; r++) {
            const q8_xrow xr = q8_row(_mm512_maskz_loadu_epi8(m, q + (long)r * k + c0));
            const __m512 dv =
                _mm512_permutexvar_ps(bidx, _mm512_maskz_loadu_ps(dm, d + (long)r * nb + b0));
            for (int j = 0; j < NC; j++) {
                const __m512 sum = _mm512_cvtepi32_ps(q8_dot(init[j], xr, wv[j]));
                acc[r][j] = _mm512_fmadd_ps(sum, group ? _mm512_mul_ps(dv, sv[j]) : dv, acc[r][j]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) {
            const float dot = _mm512_reduce_add_ps(acc[r][j]);
            y[(long)r * ldy + j] += group ? dot : dot * ws[j];
        }
}

/* Columns by tiles of NC, the last ones one by one; all rows at once, so each weight byte is
 * read from memory once. Measured on GPT-2's shapes (bench_gemv): at one row, two weight rows
 * stream faster than four (four streams k apart); from three rows, where the vector ports
 * bound the kernel, three weight rows share each activation load and block scale best (at 8
 * rows, 0.9x the time of two and 0.6x that of one). */
static inline __attribute__((always_inline)) void q8_zmm_cols(float *y, long ldy, const int8_t *q,
                                                              const float *d, const int8_t *w,
                                                              const float *ws, int group, int k,
                                                              int n, int block, int NR) {
    const int NC = NR <= 2 ? 2 : 3, ng = group ? (k + group - 1) / group : 1;
    int o = 0;
    for (; o + NC <= n; o += NC)
        q8_zmm_tile(y + o, ldy, q, d, w + (long)o * k, ws + (long)o * (group ? ng : 1), group, k,
                    block, NR, NC);
    for (; o < n; o++)
        q8_zmm_tile(y + o, ldy, q, d, w + (long)o * k, ws + (long)o * (group ? ng : 1), group, k,
                    block, NR, 1);
}

/* The row-scale path (group 0) apart, so that it carries no group scales in registers; and
 * the usual shapes (activation blocks of 32; groups of 32 or 128 columns) with group and block
 * as constants: with them at run time, the per-chunk block index and the choice among the
 * scale paths cost more than the products, and a grouped GEMV ran at a third of the read rate
 * (bench_gemv int8w-g32: 0.35x, against int8w's 1.13x and q8_0's 0.96x). */
static inline __attribute__((always_inline)) void q8_zmm_rows(float *y, long ldy, const int8_t *q,
                                                              const float *d, const int8_t *w,
                                                              const float *ws, int group, int k,
                                                              int n, int block, int NR) {
    if (block == 32 && group == 0)
        q8_zmm_cols(y, ldy, q, d, w, ws, 0, k, n, 32, NR);
    else if (block == 32 && group == 32)
        q8_zmm_cols(y, ldy, q, d, w, ws, 32, k, n, 32, NR);
    else if (block == 32 && group == 128)
        q8_zmm_cols(y, ldy, q, d, w, ws, 128, k, n, 32, NR);
    else if (group)
        q8_zmm_cols(y, ldy, q, d, w, ws, group, k, n, block, NR);
    else
        q8_zmm_cols(y, ldy, q, d, w, ws, 0, k, n, block, NR);
}

static void q8_zmm_gemv(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                        const float *ws, int group, int rows, int k, int n, int block) {
    if (block < 4) { // a lane of 4 products would straddle blocks
        gemv_q8_scalar(y, ldy, q, d, w, ws, group, rows, k, n, block);
        return;
    }
    switch (rows) {
    case 1: q8_zmm_rows(y, ldy, q, d, w, ws, group, k, n, block, 1); break;
    case 2: q8_zmm_rows(y, ldy, q, d, w, ws, group, k, n, block, 2); break;
    case 3: q8_zmm_rows(y, ldy, q, d, w, ws, group, k, n, block, 3); break;
    case 4: q8_zmm_rows(y, ldy, q, d, w, ws, group, k, n, block, 4); break;
    case 5: q8_zmm_rows(y, ldy, q, d, w, ws, group, k, n, block, 5); break;
    case 6: q8_zmm_rows(y, ldy, q, d, w, ws, group, k, n, block, 6); break;
    case 7: q8_zmm_rows(y, ldy, q, d, w, ws, group, k, n, block, 7); break;
    default: q8_zmm_rows(y, ldy, q, d, w, ws, group, k, n, block, 8); break;
    }
}
