/* The int8 kernels for AVX-512 (F, BW): the activation quantiser, bit-identical to
 * quantize_q8_scalar, and the decode GEMVs of int8w and of the block formats with maddubs and
 * the sign trick (docs/kernels.md, "int8 on the CPU" and "Block formats"). */
#include <immintrin.h>
#include <stdint.h>

/* The sign trick: maddubs multiplies unsigned by signed bytes, so x's sign moves onto w and
 * |x| <= 127 goes in unsigned; a pair of products is then at most 2 * 127 * 127 = 32258, under
 * the int16 saturation at 32767. madd with ones widens the pairs to the 4-product int32 lanes. */
typedef struct {
    __m512i abs;
    __mmask64 neg;
} q8_xrow;

static inline __attribute__((always_inline)) q8_xrow q8_row(__m512i x) {
    return (q8_xrow){.abs = _mm512_abs_epi8(x), .neg = _mm512_movepi8_mask(x)};
}

static inline __attribute__((always_inline)) __m512i q8_col(__m512i w) {
    (void)w;
    return _mm512_setzero_si512();
}

static inline __attribute__((always_inline)) __m512i q8_dot(__m512i init, q8_xrow x, __m512i w) {
    const __m512i ws = _mm512_mask_sub_epi8(w, x.neg, _mm512_setzero_si512(), w);
    const __m512i pairs = _mm512_maddubs_epi16(x.abs, ws);
    return _mm512_add_epi32(init, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
}

/* Unsigned weights (q4 nibbles, <= 15) go in as maddubs's unsigned operand as they are: a pair
 * is at most 2 * 15 * 127, far from saturating. */
static inline __attribute__((always_inline)) __m512i q8_dot_u(__m512i init, __m512i x, __m512i w) {
    const __m512i pairs = _mm512_maddubs_epi16(w, x);
    return _mm512_add_epi32(init, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
}

#include "kernels/cpu/matmul_q8_zmm.h"
#include "kernels/cpu/matmul_blocks_zmm.h"

void gemv_q8_avx512(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                    const float *ws, int group, int rows, int k, int n, int block) {
    q8_zmm_gemv(y, ldy, q, d, w, ws, group, rows, k, n, block);
}

void gemv_blocks_avx512(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                        dtype type, int rows, int k, int n) {
    qb_walk(y, ldy, q, d, w, type, rows, k, n);
}

/* One IEEE operation per step as quantize_q8_scalar takes them: the max is exact in any order;
 * d and 1 / d are the same scalar operations; x * inv is one rounding and cvtps rounds to
 * nearest even (the default MXCSR mode) as rintf does. The clamp keeps NaN (its constant is
 * the first operand) and vpmovdb truncates, so a NaN becomes 0 as the scalar cast does on
 * x86-64. */
void quantize_q8_avx512(int8_t *q, float *d, const float *x, int rows, int k, int block) {
    const int nb = (k + block - 1) / block;
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < nb; b++) {
            const float *xb = x + (long)r * k + (long)b * block;
            int8_t *qb = q + (long)r * k + (long)b * block;
            const int len = k - b * block < block ? k - b * block : block;
            __m512 vmax = _mm512_setzero_ps();
            for (int i = 0; i < len; i += 16) {
                const __mmask16 m = len - i >= 16 ? 0xFFFF : (__mmask16)((1u << (len - i)) - 1);
                vmax = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(m, xb + i)), vmax);
            }
            const float amax = _mm512_reduce_max_ps(vmax);
            const float scale = amax / 127.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
            d[(long)r * nb + b] = scale;
            const __m512 vinv = _mm512_set1_ps(inv);
            for (int i = 0; i < len; i += 16) {
                const __mmask16 m = len - i >= 16 ? 0xFFFF : (__mmask16)((1u << (len - i)) - 1);
                const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xb + i), vinv);
                const __m512 c = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
                _mm512_mask_cvtepi32_storeu_epi8(qb + i, m, _mm512_cvtps_epi32(c));
            }
        }
}
