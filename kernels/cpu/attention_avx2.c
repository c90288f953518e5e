/* The attention family for AVX2 + FMA: the shared exp (kernels/cpu/exp_avx2.h) eight lanes at
 * a time; dot products key by key, 16 partial sums in two registers; weighted values with 32
 * outputs held in registers across the keys; the tile kernel. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_kernels.h"
#include "kernels/cpu/exp_avx2.h"

static void exp_shift_avx2(float *y, const float *x, float shift, int n) {
    const __m256 sh = _mm256_set1_ps(shift);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh)));
    for (; i < n; i++)
        y[i] = exp_poly_scalar(x[i] - shift);
}

static float exp_shift_sum_avx2(float *y, const float *x, float shift, int n) {
    exp_shift_avx2(y, x, shift, n);
    float sum = 0.0f; // in index order, as every level sums
    for (int i = 0; i < n; i++)
        sum += y[i];
    return sum;
}

/* One key's 16 partial sums (lanes l of lo, l + 8 of hi) reduced by the table's tree. */
static inline float reduce_key(__m256 lo, __m256 hi) {
    const __m256 s8 = _mm256_add_ps(lo, hi); // l + (l+8)
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4)); // l + (l+2)
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* Eight elements d.. of a cache row in fp32: bf16 shifted into the high half, f16 by F16C,
 * int8 sign-extended, converted (exactly) and multiplied by the row's scale (kv_rows_load's one
 * product). Exact otherwise, so each kernel below gives the bits its fp32 twin gives on the
 * widened rows. */
static inline __attribute__((always_inline)) __m256 kv_load8(const char *row, int d, __m256 scale,
                                                             dtype type) {
    switch (type) {
    case DTYPE_BF16: {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * d)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    case DTYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * d)));
    case DTYPE_INT8: {
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + d)));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
    }
    case DTYPE_F32:
    case DTYPE_Q8_0: /* weights only: never a cache type */
    case DTYPE_Q4_0:
    case DTYPE_Q4_1:
    case DTYPE_Q4_K: break;
    }
    return _mm256_loadu_ps((const float *)row + d);
}

/* Key by key, each row read as it lies in two 8-lane accumulators (the 16 partial sums), each
 * load widened in registers; the same bytes 32 keys on prefetched. A last chunk of d under 16
 * is widened by the scalar rule into 16 floats, zero past hd, against the query's masked
 * lanes: 0 x 0 added to a partial sum leaves it as it is. */
static inline __attribute__((always_inline)) void
dot_keys_typed(float *s, const float *q, const char *k, int n, int hd, float scale, dtype type) {
    const size_t rb = kv_row_bytes(type, hd), es = type == DTYPE_F32 ? 4 : type == DTYPE_INT8 ? 1 : 2;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int j = 0; j < n; j++) {
        const char *row = k + j * rb;
        const __m256 sc = _mm256_set1_ps(kv_row_scale(row, rb, type));
        __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
        for (int d0 = 0; d0 < hd; d0 += 16) {
            _mm_prefetch(row + 32 * rb + d0 * es, _MM_HINT_T0);
            if (hd - d0 >= 16) {
                lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + d0), kv_load8(row, d0, sc, type), lo);
                hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + d0 + 8), kv_load8(row, d0 + 8, sc, type),
                                     hi);
                continue;
            }
            float t[16];
            for (int i = 0; i < 16; i++)
                t[i] = d0 + i < hd ? kv_elem_scalar(row, d0 + i, hd, type) : 0.0f;
            const __m256i mlo = _mm256_cmpgt_epi32(_mm256_set1_epi32(hd - d0), lane);
            const __m256i mhi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hd - d0 - 8), lane);
            lo = _mm256_fmadd_ps(_mm256_maskload_ps(q + d0, mlo), _mm256_loadu_ps(t), lo);
            hi = _mm256_fmadd_ps(_mm256_maskload_ps(q + d0 + 8, mhi), _mm256_loadu_ps(t + 8), hi);
        }
        s[j] = reduce_key(lo, hi) * scale;
    }
}

static void dot_keys_avx2(float *s, const float *q, const void *k, int n, int hd, float scale,
                          dtype type) {
    KV_TYPED(type, dot_keys_typed, s, q, k, n, hd, scale);
}

/* 32 outputs held in registers across the n values, each value widened as it is loaded; the
 * last hd % 32 eight at a time. The first pass over the values also adds up the weights (their
 * chain of additions runs beside the loads). */
static inline __attribute__((always_inline)) void
weigh_values_typed(float *o, const float *w, const char *v, int n, int hd, float *sum,
                   dtype type) {
    const size_t rb = kv_row_bytes(type, hd);
    int d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 a0 = _mm256_loadu_ps(o + d), a1 = _mm256_loadu_ps(o + d + 8);
        __m256 a2 = _mm256_loadu_ps(o + d + 16), a3 = _mm256_loadu_ps(o + d + 24);
        for (int j = 0; j < n; j++) {
            const char *vj = v + j * rb;
            const __m256 sc = _mm256_set1_ps(kv_row_scale(vj, rb, type));
            const __m256 wj = _mm256_set1_ps(w[j]);
            if (d == 0) *sum += w[j];
            a0 = _mm256_fmadd_ps(wj, kv_load8(vj, d, sc, type), a0);
            a1 = _mm256_fmadd_ps(wj, kv_load8(vj, d + 8, sc, type), a1);
            a2 = _mm256_fmadd_ps(wj, kv_load8(vj, d + 16, sc, type), a2);
            a3 = _mm256_fmadd_ps(wj, kv_load8(vj, d + 24, sc, type), a3);
        }
        _mm256_storeu_ps(o + d, a0);
        _mm256_storeu_ps(o + d + 8, a1);
        _mm256_storeu_ps(o + d + 16, a2);
        _mm256_storeu_ps(o + d + 24, a3);
    }
    for (; d < hd; d += 8) {
        __m256 a = _mm256_loadu_ps(o + d);
        for (int j = 0; j < n; j++) {
            const char *vj = v + j * rb;
            const __m256 sc = _mm256_set1_ps(kv_row_scale(vj, rb, type));
            if (d == 0) *sum += w[j];
            a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), kv_load8(vj, d, sc, type), a);
        }
        _mm256_storeu_ps(o + d, a);
    }
}

static float weigh_values_avx2(float *o, const float *w, const void *v, int n, int hd, dtype type,
                               float sum) {
    if (hd % 8) return weigh_values_scalar(o, w, v, n, hd, type, sum);
    KV_TYPED(type, weigh_values_typed, o, w, v, n, hd, &sum);
    return sum;
}

/* The AVX-512 level's tile kernel (attention_avx512.c explains it) eight lanes wide: half the
 * query block against two keys per pass, the weighted values two rows at a time. */
static void tile_step_avx2(float *o, long ldo, float *m, float *l, const float *qt, const float *k,
                           const float *v, int rows, int kn, int hd, int first, int k0, float *st) {
    if (hd % 8) {
        tile_step_scalar(o, ldo, m, l, qt, k, v, rows, kn, hd, first, k0, st);
        return;
    }
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const int masked = k0 + kn - 1 > first; // the block reaches past the first row
    __m256 mx[8];
    for (int c = 0; c < 8; c++)
        mx[c] = ninf;
    // Half the rows (32, four vectors) against two keys per pass: 8 accumulators, and each
    // query load serves both keys.
    for (int half = 0; half < 2; half++)
        for (int j = 0; j < kn; j += 2) {
            const int two = j + 1 < kn;
            const float *ka = k + (long)j * hd, *kb = two ? ka + hd : ka;
            __m256 a[8];
            for (int c = 0; c < 8; c++)
                a[c] = _mm256_setzero_ps();
            for (int d = 0; d < hd; d++) {
                const __m256 x = _mm256_set1_ps(ka[d]), y = _mm256_set1_ps(kb[d]);
                const float *q = qt + (long)d * ATTN_TILE + 32 * half;
                for (int c = 0; c < 4; c++) {
                    const __m256 qc = _mm256_loadu_ps(q + 8 * c);
                    a[c] = _mm256_fmadd_ps(x, qc, a[c]);
                    a[4 + c] = _mm256_fmadd_ps(y, qc, a[4 + c]);
                }
            }
            for (int t = 0; t <= two; t++)
                for (int c = 0; c < 4; c++) {
                    const int cc = 4 * half + c; // rows 8 cc ..
                    __m256 sc = a[4 * t + c];
                    if (masked) { // row i sees key k0 + j + t when i > k0 + j + t - first - 1
                        const __m256i row = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * cc));
                        const __m256i sees =
                            _mm256_cmpgt_epi32(row, _mm256_set1_epi32(k0 + j + t - first - 1));
                        sc = _mm256_blendv_ps(ninf, sc, _mm256_castsi256_ps(sees));
                    }
                    _mm256_storeu_ps(st + (long)(j + t) * ATTN_TILE + 8 * cc, sc);
                    mx[cc] = _mm256_max_ps(mx[cc], sc);
                }
        }
    float alpha[ATTN_TILE];
    for (int c = 0; c < 8; c++) {
        const __m256 mold = _mm256_loadu_ps(m + 8 * c), mnew = _mm256_max_ps(mold, mx[c]);
        const __m256 al = exp_avx2(_mm256_sub_ps(mold, mnew));
        __m256 sum = _mm256_setzero_ps();
        for (int j = 0; j < kn; j++) {
            float *sj = st + (long)j * ATTN_TILE + 8 * c;
            const __m256 p = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(sj), mnew));
            _mm256_storeu_ps(sj, p);
            sum = _mm256_add_ps(sum, p);
        }
        _mm256_storeu_ps(m + 8 * c, mnew);
        _mm256_storeu_ps(l + 8 * c, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8 * c), al, sum));
        _mm256_storeu_ps(alpha + 8 * c, al);
    }
    // Two rows per pass, 32 outputs each: each value load serves both rows.
    for (int i = 0; i < rows; i += 2) {
        const int two = i + 1 < rows;
        float *oa = o + (long)i * ldo, *ob = two ? oa + ldo : oa;
        const __m256 aa = _mm256_set1_ps(alpha[i]), ab = _mm256_set1_ps(alpha[i + two]);
        for (int d = 0; d < hd; d += 32) {
            const int nc = hd - d >= 32 ? 4 : (hd - d) / 8;
            __m256 a[8];
            for (int c = 0; c < nc; c++) {
                a[c] = _mm256_mul_ps(aa, _mm256_loadu_ps(oa + d + 8 * c));
                a[4 + c] = _mm256_mul_ps(ab, _mm256_loadu_ps(ob + d + 8 * c));
            }
            for (int j = 0; j < kn; j++) {
                const __m256 pa = _mm256_set1_ps(st[(long)j * ATTN_TILE + i]);
                const __m256 pb = _mm256_set1_ps(st[(long)j * ATTN_TILE + i + two]);
                const float *vj = v + (long)j * hd + d;
                for (int c = 0; c < nc; c++) {
                    const __m256 vc = _mm256_loadu_ps(vj + 8 * c);
                    a[c] = _mm256_fmadd_ps(pa, vc, a[c]);
                    a[4 + c] = _mm256_fmadd_ps(pb, vc, a[4 + c]);
                }
            }
            for (int c = 0; c < nc; c++) {
                if (two) _mm256_storeu_ps(ob + d + 8 * c, a[4 + c]);
                _mm256_storeu_ps(oa + d + 8 * c, a[c]);
            }
        }
    }
}

/* kv_load8 row by row; the last hd % 8 by the scalar twin's element rule. */
static void kv_rows_load_avx2(float *dst, const void *src, int n, int hd, dtype type) {
    const size_t rb = kv_row_bytes(type, hd);
    for (int j = 0; j < n; j++) {
        const char *row = (const char *)src + j * rb;
        float *out = dst + (long)j * hd;
        const __m256 scale = _mm256_set1_ps(kv_row_scale(row, rb, type));
        int d = 0;
        for (; d + 8 <= hd; d += 8)
            _mm256_storeu_ps(out + d, kv_load8(row, d, scale, type));
        for (; d < hd; d++)
            out[d] = kv_elem_scalar(row, d, hd, type);
    }
}

const cpu_attention_kernels cpu_attention_avx2 = {
    .exp_shift_sum = exp_shift_sum_avx2,
    .exp_shift = exp_shift_avx2,
    .dot_keys = dot_keys_avx2,
    .weigh_values = weigh_values_avx2,
    .tile_step = tile_step_avx2,
    .kv_rows_load = kv_rows_load_avx2,
};
