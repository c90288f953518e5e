/* The int8 kernels for AVX2: the activation quantiser, bit-identical to quantize_q8_scalar,
 * and the decode GEMV with maddubs and the sign trick (docs/kernels.md, "int8 on the CPU"). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

/* The NC weight rows of a tile are NC * k contiguous bytes, read a chunk of each row at a
 * time; the prefetch walks the same bytes as one stream, this far ahead of the tile's progress
 * (NC * c0), a line every other chunk, so it runs into the next tile's rows without a gap. */
enum { Q8_YMM_PREFETCH = 8192 };

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The lanes of n floats at p (n <= 8), the rest zero, spread so lane l holds p[bidx[l]]. */
static inline __attribute__((always_inline)) __m256 spread8(const float *p, int n, __m256i bidx) {
    const __m256i m =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_permutevar8x32_ps(_mm256_maskload_ps(p, m), bidx);
}

/* The scale lanes of a column's weights over the 32-byte chunk at c0: one group for the whole
 * chunk, one scale per block (group == block), or lane by lane. */
static inline __attribute__((always_inline)) __m256 q8_ymm_scales(const float *ws, int group,
                                                                  int ng, int block, int c0, int b0,
                                                                  int nbc, __m256i bidx) {
    if (group % 32 == 0) return _mm256_set1_ps(ws[c0 / group]);
    if (group == block) return spread8(ws + b0, nbc, bidx);
    float s[8];
    for (int l = 0; l < 8; l++) {
        const int g = (c0 + 4 * l) / group; // lanes past k hold zero sums: any finite scale
        s[l] = ws[g < ng ? g : ng - 1];
    }
    return _mm256_loadu_ps(s);
}

/* y[r * ldy + j] += the q8 product of rows r < NR and weight rows j < NC, all of k: per
 * 32-byte chunk, the sign trick (maddubs multiplies unsigned by signed bytes, so x's sign moves
 * onto w and |x| <= 127 goes in unsigned; a pair of products is at most 2 * 127 * 127 = 32258,
 * under int16 saturation), madd with ones to 4-product int32 lanes, exact; a lane never
 * straddles a block (block >= 4), so each lane converts to fp32 exactly and meets its block's
 * scale in one FMA. The last chunk is copied into zeroed buffers, so the same instructions take
 * it. */
static inline __attribute__((always_inline)) void q8_ymm_tile(float *y, long ldy, const int8_t *q,
                                                              const float *d, const int8_t *w,
                                                              const float *ws, int group, int k,
                                                              int block, int NR, int NC) {
    const int nb = (k + block - 1) / block, ng = group ? (k + group - 1) / group : 1;
    const int bpc = 32 / block;
    const __m256i bidx = _mm256_srlv_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32(__builtin_ctz((unsigned)block) - 2));
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8][4];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++)
            acc[r][j] = _mm256_setzero_ps();
    for (int c0 = 0; c0 < k; c0 += 32) {
        const int tail = k - c0 < 32;
        int8_t xt[8][32], wt[4][32];
        const int b0 = c0 / block, nbc = nb - b0 < bpc ? nb - b0 : bpc;
        __m256i wv[4];
        __m256 sv[4];
        for (int j = 0; j < NC; j++) {
            const int8_t *wj = w + (long)j * k + c0;
            if (c0 % 64 == 0)
                _mm_prefetch((const char *)(w + (long)NC * c0 + 64 * j + Q8_YMM_PREFETCH),
                             _MM_HINT_T0);
            if (tail) {
                memset(wt[j], 0, 32);
                memcpy(wt[j], wj, (size_t)(k - c0));
                wj = wt[j];
            }
            wv[j] = _mm256_loadu_si256((const __m256i *)wj);
            sv[j] = group ? q8_ymm_scales(ws + (long)j * ng, group, ng, block, c0, b0, nbc, bidx)
                          : _mm256_setzero_ps();
        }
        for (int r = 0; r < NR; r++) {
            const int8_t *xr = q + (long)r * k + c0;
            if (tail) {
                memset(xt[r], 0, 32);
                memcpy(xt[r], xr, (size_t)(k - c0));
                xr = xt[r];
            }
            const __m256i x = _mm256_loadu_si256((const __m256i *)xr), xa = _mm256_abs_epi8(x);
            const __m256 dv = bpc == 1 ? _mm256_broadcast_ss(d + (long)r * nb + b0)
                                       : spread8(d + (long)r * nb + b0, nbc, bidx);
            for (int j = 0; j < NC; j++) {
                const __m256i pairs = _mm256_maddubs_epi16(xa, _mm256_sign_epi8(wv[j], x));
                const __m256 sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                acc[r][j] = _mm256_fmadd_ps(sum, group ? _mm256_mul_ps(dv, sv[j]) : dv, acc[r][j]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) {
            const float dot = hsum256(acc[r][j]);
            y[(long)r * ldy + j] += group ? dot : dot * ws[j];
        }
}

/* Columns by tiles of two, the last one alone; all rows at once, so each weight byte is read
 * from memory once. Two weight rows streamed faster than four at one row and than one at 8
 * rows (bench_gemv; 0.9x the time at 8 rows, where 16 accumulators fill the registers). */
static inline __attribute__((always_inline)) void q8_ymm_rows(float *y, long ldy, const int8_t *q,
                                                              const float *d, const int8_t *w,
                                                              const float *ws, int group, int k,
                                                              int n, int block, int NR) {
    const int NC = 2, ng = group ? (k + group - 1) / group : 1;
    int o = 0;
    for (; o + NC <= n; o += NC)
        q8_ymm_tile(y + o, ldy, q, d, w + (long)o * k, ws + (long)o * (group ? ng : 1), group, k,
                    block, NR, NC);
    for (; o < n; o++)
        q8_ymm_tile(y + o, ldy, q, d, w + (long)o * k, ws + (long)o * (group ? ng : 1), group, k,
                    block, NR, 1);
}

void gemv_q8_avx2(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                  const float *ws, int group, int rows, int k, int n, int block) {
    if (block < 4) { // a lane of 4 products would straddle blocks
        gemv_q8_scalar(y, ldy, q, d, w, ws, group, rows, k, n, block);
        return;
    }
    switch (rows) {
    case 1: q8_ymm_rows(y, ldy, q, d, w, ws, group, k, n, block, 1); break;
    case 2: q8_ymm_rows(y, ldy, q, d, w, ws, group, k, n, block, 2); break;
    case 3: q8_ymm_rows(y, ldy, q, d, w, ws, group, k, n, block, 3); break;
    case 4: q8_ymm_rows(y, ldy, q, d, w, ws, group, k, n, block, 4); break;
    case 5: q8_ymm_rows(y, ldy, q, d, w, ws, group, k, n, block, 5); break;
    case 6: q8_ymm_rows(y, ldy, q, d, w, ws, group, k, n, block, 6); break;
    case 7: q8_ymm_rows(y, ldy, q, d, w, ws, group, k, n, block, 7); break;
    default: q8_ymm_rows(y, ldy, q, d, w, ws, group, k, n, block, 8); break;
    }
}

/* One IEEE operation per step as quantize_q8_scalar takes them: the max is exact in any order;
 * d and 1 / d are the same scalar operations; x * inv is one rounding and cvtps rounds to
 * nearest even (the default MXCSR mode) as rintf does. The clamp keeps NaN (its constant is
 * the first operand) and the low byte of cvtps's 0x80000000 is 0, as the scalar cast gives on
 * x86-64. A block's last values under 8 go through the scalar steps. */
void quantize_q8_avx2(int8_t *q, float *d, const float *x, int rows, int k, int block) {
    const int nb = (k + block - 1) / block;
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < nb; b++) {
            const float *xb = x + (long)r * k + (long)b * block;
            int8_t *qb = q + (long)r * k + (long)b * block;
            const int len = k - b * block < block ? k - b * block : block, len8 = len & ~7;
            __m256 vmax = _mm256_setzero_ps();
            for (int i = 0; i < len8; i += 8)
                vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + i), absmask), vmax);
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            float amax = _mm_cvtss_f32(m4);
            for (int i = len8; i < len; i++) {
                const float a = xb[i] < 0.0f ? -xb[i] : xb[i];
                amax = a > amax ? a : amax; // NaN skipped, as fmaxf does
            }
            const float scale = amax / 127.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
            d[(long)r * nb + b] = scale;
            const __m256 vinv = _mm256_set1_ps(inv);
            for (int i = 0; i < len8; i += 8) {
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + i), vinv);
                const __m256i c = _mm256_cvtps_epi32(_mm256_min_ps(hi, _mm256_max_ps(lo, v)));
                // int32 -> int8 keeping the low byte of each lane.
                const __m256i bytes = _mm256_shuffle_epi8(
                    c,
                    _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0,
                                     4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
                const uint32_t lo4 = (uint32_t)_mm256_extract_epi32(bytes, 0);
                const uint32_t hi4 = (uint32_t)_mm256_extract_epi32(bytes, 4);
                const uint64_t eight = (uint64_t)lo4 | (uint64_t)hi4 << 32;
                memcpy(qb + i, &eight, 8);
            }
            for (int i = len8; i < len; i++) {
                const float v = __builtin_rintf(xb[i] * inv);
                qb[i] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
            }
        }
}
