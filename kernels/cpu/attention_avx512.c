/* The attention family for AVX-512: the AVX2 level's methods sixteen lanes wide, with masked
 * loads for tails (kernels/cpu/exp_avx2.h explains the exp), and dot products 16 keys at a time
 * reduced together. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_kernels.h"
#include "kernels/cpu/exp_avx512.h"

static void exp_shift_avx512(float *y, const float *x, float shift, int n) {
    const __m512 sh = _mm512_set1_ps(shift);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m,
                              exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh)));
    }
}

static float exp_shift_sum_avx512(float *y, const float *x, float shift, int n) {
    exp_shift_avx512(y, x, shift, n);
    float sum = 0.0f; // in index order, as every level sums
    for (int i = 0; i < n; i++)
        sum += y[i];
    return sum;
}

/* a[j] holds key j's 16 partial sums (lanes l = d mod 16), j < 16; returns the 16 dots in key
 * order, each summed by the tree the table states: lanes l + (l+8), then l + (l+4), l + (l+2),
 * l + (l+1). Each stage adds the upper half of every key's live lanes to the lower half and
 * packs two keys' results into one vector: 30 shuffles and 15 additions for 16 keys, where
 * reducing each key on its own would take 16 x 8. */
static inline __attribute__((always_inline)) __m512 reduce_16_keys(const __m512 a[16]) {
    __m512 b[8], c[4], d[2];
    for (int j = 0; j < 8; j++) // lanes 0-7: key j's l + (l+8); lanes 8-15: key j+8's
        b[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[j], a[j + 8], 0x44),
                             _mm512_shuffle_f32x4(a[j], a[j + 8], 0xEE));
    for (int j = 0; j < 4; j++) // 128-bit lane L: keys j, j+8, j+4, j+12; l + (l+4)
        c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(b[j], b[j + 4], 0x88),
                             _mm512_shuffle_f32x4(b[j], b[j + 4], 0xDD));
    for (int j = 0; j < 2; j++) { // per lane L: c[j]'s key in 0-1, c[j+2]'s in 2-3; l + (l+2)
        const __m512d lo = _mm512_castps_pd(c[j]), hi = _mm512_castps_pd(c[j + 2]);
        d[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi)));
    }
    // l + (l+1): element 4L + t holds c[0], c[2], c[1], c[3]'s key of lane L for t = 0..3,
    // that is keys 0 2 1 3, 8 10 9 11, 4 6 5 7, 12 14 13 15; the permutation restores the order
    const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
    return _mm512_permutexvar_ps(order, e);
}

/* Sixteen elements d.. of a cache row in fp32, the lanes off m zero: bf16 shifted into the high
 * half, f16 by vcvtph2ps, int8 sign-extended, converted (exactly) and multiplied by the row's
 * scale (kv_rows_load's one product). Exact otherwise, so each kernel below gives the bits its
 * fp32 twin gives on the widened rows. */
static inline __attribute__((always_inline)) __m512 kv_load16(const char *row, int d, __mmask16 m,
                                                              __m512 scale, dtype type) {
    switch (type) {
    case DTYPE_BF16: {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * d));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    case DTYPE_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * d));
    case DTYPE_INT8: {
        const __m512i q = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, row + d));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale);
    }
    case DTYPE_F32:
    case DTYPE_Q8_0: /* weights only: never a cache type */
    case DTYPE_Q4_0:
    case DTYPE_Q4_1:
    case DTYPE_Q4_K: break;
    }
    return _mm512_maskz_loadu_ps(m, (const float *)row + d);
}

/* Sixteen keys at a time, each row read as it lies (hd / 16 vectors, the last one masked, each
 * widened in registers) into its own accumulator, then the 16 reduced together. The rows are
 * read key after key, one sequential stream, with the same bytes 32 keys on prefetched, a
 * prefetch per cache line: the gathers this replaced left a GPT-2 decode step's attention at
 * 4.7 ms for 39 MB of cache (docs/kernels.md, "Decode: prefetch and lanes"). The query stays in
 * registers when hd <= 128. The last keys under 16 go to the scalar twin. Called with hd a
 * constant (64, 128) the loops over d unroll and the masks fold away. */
static inline __attribute__((always_inline)) void
dot_keys_body(float *s, const float *q, const char *k, int n, int hd, float scale, dtype type) {
    const size_t rb = kv_row_bytes(type, hd);
    enum { QREG = 8 }; // query vectors held in registers: hd up to 128
    __m512 qv[QREG];
    for (int c = 0; c < QREG && 16 * c < hd; c++)
        qv[c] = _mm512_maskz_loadu_ps(tail_mask(hd - 16 * c), q + 16 * c);
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        const char *kj = k + j * rb;
        __m512 acc[16];
        for (int i = 0; i < 16; i++) {
            const char *row = kj + i * rb;
            const __m512 sc = _mm512_set1_ps(kv_row_scale(row, rb, type));
            for (size_t b = 0; b < rb; b += 64)
                _mm_prefetch(row + 32 * rb + b, _MM_HINT_T0);
            acc[i] = _mm512_setzero_ps();
            for (int d0 = 0; d0 < hd; d0 += 16) {
                const __mmask16 m = tail_mask(hd - d0);
                const __m512 qd = hd <= 16 * QREG ? qv[d0 / 16] : _mm512_maskz_loadu_ps(m, q + d0);
                acc[i] = _mm512_fmadd_ps(qd, kv_load16(row, d0, m, sc, type), acc[i]);
            }
        }
        _mm512_storeu_ps(s + j, _mm512_mul_ps(reduce_16_keys(acc), _mm512_set1_ps(scale)));
    }
    if (j < n) dot_keys_scalar(s + j, q, k + j * rb, n - j, hd, scale, type);
}

static inline __attribute__((always_inline)) void
dot_keys_typed(float *s, const float *q, const char *k, int n, int hd, float scale, dtype type) {
    if (hd == 64)
        dot_keys_body(s, q, k, n, 64, scale, type);
    else if (hd == 128)
        dot_keys_body(s, q, k, n, 128, scale, type);
    else
        dot_keys_body(s, q, k, n, hd, scale, type);
}

static void dot_keys_avx512(float *s, const float *q, const void *k, int n, int hd, float scale,
                            dtype type) {
    KV_TYPED(type, dot_keys_typed, s, q, k, n, hd, scale);
}

/* All hd outputs in registers across the n values, hd a constant multiple of 32 up to 128 (the
 * loops unroll), each value widened as it is loaded. A bf16 row is read 32 elements a vector and
 * split without a shuffle: shifting each 32-bit lane left by 16 gives the even elements, masking
 * off its low half the odd ones. The accumulators then hold the outputs in that even/odd order,
 * put in it once before the loop and back once after: each output is its own chain of fused
 * multiply-adds in key order, so the order of the lanes changes no bit. */
static inline __attribute__((always_inline)) void
weigh_values_fixed(float *o, const float *w, const char *v, int n, int hd, float *sum,
                   dtype type) {
    const size_t rb = kv_row_bytes(type, hd);
    __m512 a[8]; // hd / 16 <= 8
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int c = 0; c < hd / 16; c += 2) {
        const __m512 lo = _mm512_loadu_ps(o + 16 * c), hi = _mm512_loadu_ps(o + 16 * c + 16);
        a[c] = type == DTYPE_BF16 ? _mm512_permutex2var_ps(lo, even, hi) : lo;
        a[c + 1] = type == DTYPE_BF16 ? _mm512_permutex2var_ps(lo, odd, hi) : hi;
    }
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    float l = *sum; // the weights' chain of additions, beside the values' loads
    for (int j = 0; j < n; j++) {
        const char *vj = v + j * rb;
        const __m512 wj = _mm512_set1_ps(w[j]);
        l += w[j];
        if (type == DTYPE_BF16) {
            for (int c = 0; c < hd / 16; c += 2) {
                const __m512i x = _mm512_loadu_si512(vj + 32 * c);
                a[c] = _mm512_fmadd_ps(wj, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)), a[c]);
                a[c + 1] = _mm512_fmadd_ps(wj, _mm512_castsi512_ps(_mm512_and_si512(x, high)),
                                           a[c + 1]);
            }
            continue;
        }
        const __m512 sc = _mm512_set1_ps(kv_row_scale(vj, rb, type));
        for (int c = 0; c < hd / 16; c++)
            a[c] = _mm512_fmadd_ps(wj, kv_load16(vj, 16 * c, 0xffff, sc, type), a[c]);
    }
    *sum = l;
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
    for (int c = 0; c < hd / 16; c += 2) {
        _mm512_storeu_ps(o + 16 * c, type == DTYPE_BF16
                                         ? _mm512_permutex2var_ps(a[c], first, a[c + 1]) : a[c]);
        _mm512_storeu_ps(o + 16 * c + 16, type == DTYPE_BF16
                                              ? _mm512_permutex2var_ps(a[c], second, a[c + 1])
                                              : a[c + 1]);
    }
}

/* Head sizes other than 64 and 128: 64 outputs held in registers across the n values, each
 * value widened as it is loaded; the last hd % 64 sixteen at a time, masked; the weights' sum
 * first, in a loop of its own. */
static inline __attribute__((always_inline)) void
weigh_values_typed(float *o, const float *w, const char *v, int n, int hd, float *sum,
                   dtype type) {
    if (hd == 64) {
        weigh_values_fixed(o, w, v, n, 64, sum, type);
        return;
    }
    if (hd == 128) {
        weigh_values_fixed(o, w, v, n, 128, sum, type);
        return;
    }
    for (int j = 0; j < n; j++)
        *sum += w[j];
    const size_t rb = kv_row_bytes(type, hd);
    int d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m512 a0 = _mm512_loadu_ps(o + d), a1 = _mm512_loadu_ps(o + d + 16);
        __m512 a2 = _mm512_loadu_ps(o + d + 32), a3 = _mm512_loadu_ps(o + d + 48);
        for (int j = 0; j < n; j++) {
            const char *vj = v + j * rb;
            const __m512 sc = _mm512_set1_ps(kv_row_scale(vj, rb, type));
            const __m512 wj = _mm512_set1_ps(w[j]);
            a0 = _mm512_fmadd_ps(wj, kv_load16(vj, d, 0xffff, sc, type), a0);
            a1 = _mm512_fmadd_ps(wj, kv_load16(vj, d + 16, 0xffff, sc, type), a1);
            a2 = _mm512_fmadd_ps(wj, kv_load16(vj, d + 32, 0xffff, sc, type), a2);
            a3 = _mm512_fmadd_ps(wj, kv_load16(vj, d + 48, 0xffff, sc, type), a3);
        }
        _mm512_storeu_ps(o + d, a0);
        _mm512_storeu_ps(o + d + 16, a1);
        _mm512_storeu_ps(o + d + 32, a2);
        _mm512_storeu_ps(o + d + 48, a3);
    }
    for (; d < hd; d += 16) {
        const __mmask16 m = tail_mask(hd - d);
        __m512 a = _mm512_maskz_loadu_ps(m, o + d);
        for (int j = 0; j < n; j++) {
            const char *vj = v + j * rb;
            const __m512 sc = _mm512_set1_ps(kv_row_scale(vj, rb, type));
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), kv_load16(vj, d, m, sc, type), a);
        }
        _mm512_mask_storeu_ps(o + d, m, a);
    }
}

static float weigh_values_avx512(float *o, const float *w, const void *v, int n, int hd,
                                 dtype type, float sum) {
    KV_TYPED(type, weigh_values_typed, o, w, v, n, hd, &sum);
    return sum;
}

/* Scores are computed transposed, st[j] = the 64 rows' scores for key j, so the row max, the
 * exp and the row sum all run across rows, sixteen lanes at a time, with no horizontal sums;
 * each key is broadcast against the transposed queries, two keys per pass of the query block
 * (8 accumulators). The weighted values then go two rows at a time, 64 outputs each. */
void tile_step_avx512(float *o, long ldo, float *m, float *l, const float *qt, const float *k,
                      const float *v, int rows, int kn, int hd, int first, int k0, float *st) {
    if (hd % 16) {
        tile_step_scalar(o, ldo, m, l, qt, k, v, rows, kn, hd, first, k0, st);
        return;
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int masked = k0 + kn - 1 > first; // the block reaches past the first row
    __m512 mx[4] = {ninf, ninf, ninf, ninf};
    for (int j = 0; j < kn; j += 2) {
        const int two = j + 1 < kn;
        const float *ka = k + (long)j * hd, *kb = two ? ka + hd : ka;
        __m512 a[8];
        for (int c = 0; c < 8; c++)
            a[c] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            const __m512 x = _mm512_set1_ps(ka[d]), y = _mm512_set1_ps(kb[d]);
            const float *q = qt + (long)d * ATTN_TILE;
            for (int c = 0; c < 4; c++) {
                const __m512 qc = _mm512_loadu_ps(q + 16 * c);
                a[c] = _mm512_fmadd_ps(x, qc, a[c]);
                a[4 + c] = _mm512_fmadd_ps(y, qc, a[4 + c]);
            }
        }
        for (int t = 0; t <= two; t++)
            for (int c = 0; c < 4; c++) {
                __m512 sc = a[4 * t + c];
                if (masked) { // row i sees key k0 + j + t when i >= k0 + j + t - first
                    const __m512i row = _mm512_add_epi32(lane, _mm512_set1_epi32(16 * c));
                    const __mmask16 sees = _mm512_cmp_epi32_mask(
                        row, _mm512_set1_epi32(k0 + j + t - first), _MM_CMPINT_NLT);
                    sc = _mm512_mask_mov_ps(ninf, sees, sc);
                }
                _mm512_storeu_ps(st + (long)(j + t) * ATTN_TILE + 16 * c, sc);
                mx[c] = _mm512_max_ps(mx[c], sc);
            }
    }
    float alpha[ATTN_TILE];
    for (int c = 0; c < 4; c++) {
        const __m512 mold = _mm512_loadu_ps(m + 16 * c), mnew = _mm512_max_ps(mold, mx[c]);
        // a row with no key in this block keeps its max (mnew = mold, alpha 1)
        const __m512 al = exp_avx512(_mm512_sub_ps(mold, mnew));
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < kn; j++) {
            float *sj = st + (long)j * ATTN_TILE + 16 * c;
            const __m512 p = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(sj), mnew));
            _mm512_storeu_ps(sj, p);
            sum = _mm512_add_ps(sum, p);
        }
        _mm512_storeu_ps(m + 16 * c, mnew);
        _mm512_storeu_ps(l + 16 * c, _mm512_fmadd_ps(_mm512_loadu_ps(l + 16 * c), al, sum));
        _mm512_storeu_ps(alpha + 16 * c, al);
    }
    for (int i = 0; i < rows; i += 2) {
        const int two = i + 1 < rows;
        float *oa = o + (long)i * ldo, *ob = two ? oa + ldo : oa;
        for (int d = 0; d < hd; d += 64) {
            const int nc = hd - d >= 64 ? 4 : (hd - d) / 16;
            __m512 a[8];
            const __m512 aa = _mm512_set1_ps(alpha[i]), ab = _mm512_set1_ps(alpha[i + two]);
            for (int c = 0; c < nc; c++) {
                a[c] = _mm512_mul_ps(aa, _mm512_loadu_ps(oa + d + 16 * c));
                a[4 + c] = _mm512_mul_ps(ab, _mm512_loadu_ps(ob + d + 16 * c));
            }
            for (int j = 0; j < kn; j++) {
                const __m512 pa = _mm512_set1_ps(st[(long)j * ATTN_TILE + i]);
                const __m512 pb = _mm512_set1_ps(st[(long)j * ATTN_TILE + i + two]);
                const float *vj = v + (long)j * hd + d;
                for (int c = 0; c < nc; c++) {
                    const __m512 vc = _mm512_loadu_ps(vj + 16 * c);
                    a[c] = _mm512_fmadd_ps(pa, vc, a[c]);
                    a[4 + c] = _mm512_fmadd_ps(pb, vc, a[4 + c]);
                }
            }
            for (int c = 0; c < nc; c++) {
                if (two) _mm512_storeu_ps(ob + d + 16 * c, a[4 + c]);
                _mm512_storeu_ps(oa + d + 16 * c, a[c]);
            }
        }
    }
}

/* kv_load16 row by row, the tail masked. */
static void kv_rows_load_avx512(float *dst, const void *src, int n, int hd, dtype type) {
    const size_t rb = kv_row_bytes(type, hd);
    for (int j = 0; j < n; j++) {
        const char *row = (const char *)src + j * rb;
        const __m512 scale = _mm512_set1_ps(kv_row_scale(row, rb, type));
        for (int d = 0; d < hd; d += 16) {
            const __mmask16 m = tail_mask(hd - d);
            _mm512_mask_storeu_ps(dst + (long)j * hd + d, m, kv_load16(row, d, m, scale, type));
        }
    }
}

const cpu_attention_kernels cpu_attention_avx512 = {
    .exp_shift_sum = exp_shift_sum_avx512,
    .exp_shift = exp_shift_avx512,
    .dot_keys = dot_keys_avx512,
    .weigh_values = weigh_values_avx512,
    .tile_step = tile_step_avx512,
    .kv_rows_load = kv_rows_load_avx512,
};
