/* The int8w and block-format decode GEMVs for AVX-512 with VNNI: vpdpbusd sums four
 * unsigned-by-signed byte products into each int32 lane in one instruction (docs/kernels.md,
 * "int8 on the CPU" and "Block formats"). */
#include <immintrin.h>
#include <stdint.h>

/* vpdpbusd wants one operand unsigned. Rather than the sign trick (a sign transfer per row and
 * column), x moves to x + 128 in [1, 255] (an xor of the sign bit, once per row) and each
 * weight chunk's 128 * sum(w) (one more vpdpbusd per column, shared by every row) is taken
 * off before the row dots start: x . w = (x + 128) . w - 128 * sum(w), exact in int32 as no
 * lane passes 4 * 255 * 127 and vpdpbusd does not saturate. */
typedef struct {
    __m512i biased;
} q8_xrow;

static inline __attribute__((always_inline)) q8_xrow q8_row(__m512i x) {
    return (q8_xrow){.biased = _mm512_xor_si512(x, _mm512_set1_epi8((char)0x80))};
}

static inline __attribute__((always_inline)) __m512i q8_col(__m512i w) {
    const __m512i sum128 =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), w);
    return _mm512_sub_epi32(_mm512_setzero_si512(), sum128);
}

static inline __attribute__((always_inline)) __m512i q8_dot(__m512i init, q8_xrow x, __m512i w) {
    return _mm512_dpbusd_epi32(init, x.biased, w);
}

/* Unsigned weights (q4 nibbles) need no offset: vpdpbusd takes them as its unsigned operand. */
static inline __attribute__((always_inline)) __m512i q8_dot_u(__m512i init, __m512i x, __m512i w) {
    return _mm512_dpbusd_epi32(init, w, x);
}

#include "kernels/cpu/matmul_q8_zmm.h"
#include "kernels/cpu/matmul_blocks_zmm.h"

void gemv_q8_avx512vnni(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                        const float *ws, int group, int rows, int k, int n, int block) {
    q8_zmm_gemv(y, ldy, q, d, w, ws, group, rows, k, n, block);
}

void gemv_blocks_avx512vnni(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                            dtype type, int rows, int k, int n) {
    qb_walk(y, ldy, q, d, w, type, rows, k, n);
}
