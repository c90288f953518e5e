/* The attention family for AVX2 + FMA: exp by range reduction and a degree-5 polynomial
 * (Cephes' expf), eight lanes at a time; dot products four keys at a time so each query load
 * serves four keys; weighted values with 32 outputs held in registers across the keys. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_kernels.h"

/* exp(x) for x in [-87.3, 88.7] (clamped to it): x = n ln2 + r, |r| <= ln2 / 2, and
 * exp(x) = 2^n p(r); ln2 in two parts so n ln2 is exact to float precision. */
static inline __m256 exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float exp_shift_sum_avx2(float *y, const float *x, float shift, int n) {
    const __m256 sh = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
        _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum_avx2(acc);
    for (; i < n; i++) {
        y[i] = expf(x[i] - shift);
        sum += y[i];
    }
    return sum;
}

static void dot_keys_avx2(float *s, const float *q, const float *k, int n, int hd, float scale) {
    if (hd % 8) {
        dot_keys_scalar(s, q, k, n, hd, scale);
        return;
    }
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *k0 = k + (long)j * hd;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < hd; d += 8) {
            __m256 qv = _mm256_loadu_ps(q + d);
            a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + d), a0);
            a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + hd + d), a1);
            a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 2 * hd + d), a2);
            a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 3 * hd + d), a3);
        }
        s[j] = hsum_avx2(a0) * scale;
        s[j + 1] = hsum_avx2(a1) * scale;
        s[j + 2] = hsum_avx2(a2) * scale;
        s[j + 3] = hsum_avx2(a3) * scale;
    }
    for (; j < n; j++) {
        const float *kj = k + (long)j * hd;
        __m256 a = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8)
            a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kj + d), a);
        s[j] = hsum_avx2(a) * scale;
    }
}

static void weigh_values_avx2(float *o, const float *w, const float *v, int n, int hd) {
    if (hd % 8) {
        weigh_values_scalar(o, w, v, n, hd);
        return;
    }
    int d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 a0 = _mm256_loadu_ps(o + d), a1 = _mm256_loadu_ps(o + d + 8);
        __m256 a2 = _mm256_loadu_ps(o + d + 16), a3 = _mm256_loadu_ps(o + d + 24);
        for (int j = 0; j < n; j++) {
            const float *vj = v + (long)j * hd + d;
            __m256 wj = _mm256_set1_ps(w[j]);
            a0 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj), a0);
            a1 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 8), a1);
            a2 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 16), a2);
            a3 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 24), a3);
        }
        _mm256_storeu_ps(o + d, a0);
        _mm256_storeu_ps(o + d + 8, a1);
        _mm256_storeu_ps(o + d + 16, a2);
        _mm256_storeu_ps(o + d + 24, a3);
    }
    for (; d < hd; d += 8) {
        __m256 a = _mm256_loadu_ps(o + d);
        for (int j = 0; j < n; j++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(v + (long)j * hd + d), a);
        _mm256_storeu_ps(o + d, a);
    }
}

const cpu_attention_kernels cpu_attention_avx2 = {
    .exp_shift_sum = exp_shift_sum_avx2,
    .dot_keys = dot_keys_avx2,
    .weigh_values = weigh_values_avx2,
    .tile_step = tile_step_scalar, // the backend runs sgemm tiles at this level
};
