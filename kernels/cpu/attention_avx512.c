/* The attention family for AVX-512: the AVX2 level's methods sixteen lanes wide, with masked
 * loads for tails (kernels/cpu/attention_avx2.c explains the exp). */
#include <immintrin.h>

#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_kernels.h"

static inline __m512 exp_avx512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.7f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

static inline __mmask16 tail_mask(int left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

static float exp_shift_sum_avx512(float *y, const float *x, float shift, int n) {
    const __m512 sh = _mm512_set1_ps(shift);
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh));
        _mm512_mask_storeu_ps(y + i, m, e);
        acc = _mm512_mask_add_ps(acc, m, acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}

static void dot_keys_avx512(float *s, const float *q, const float *k, int n, int hd, float scale) {
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *k0 = k + (long)j * hd;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < hd; d += 16) {
            const __mmask16 m = tail_mask(hd - d);
            __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
            a0 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k0 + d), a0);
            a1 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k0 + hd + d), a1);
            a2 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k0 + 2 * hd + d), a2);
            a3 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k0 + 3 * hd + d), a3);
        }
        s[j] = _mm512_reduce_add_ps(a0) * scale;
        s[j + 1] = _mm512_reduce_add_ps(a1) * scale;
        s[j + 2] = _mm512_reduce_add_ps(a2) * scale;
        s[j + 3] = _mm512_reduce_add_ps(a3) * scale;
    }
    for (; j < n; j++) {
        const float *kj = k + (long)j * hd;
        __m512 a = _mm512_setzero_ps();
        for (int d = 0; d < hd; d += 16) {
            const __mmask16 m = tail_mask(hd - d);
            a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), _mm512_maskz_loadu_ps(m, kj + d),
                                a);
        }
        s[j] = _mm512_reduce_add_ps(a) * scale;
    }
}

static void weigh_values_avx512(float *o, const float *w, const float *v, int n, int hd) {
    int d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m512 a0 = _mm512_loadu_ps(o + d), a1 = _mm512_loadu_ps(o + d + 16);
        __m512 a2 = _mm512_loadu_ps(o + d + 32), a3 = _mm512_loadu_ps(o + d + 48);
        for (int j = 0; j < n; j++) {
            const float *vj = v + (long)j * hd + d;
            __m512 wj = _mm512_set1_ps(w[j]);
            a0 = _mm512_fmadd_ps(wj, _mm512_loadu_ps(vj), a0);
            a1 = _mm512_fmadd_ps(wj, _mm512_loadu_ps(vj + 16), a1);
            a2 = _mm512_fmadd_ps(wj, _mm512_loadu_ps(vj + 32), a2);
            a3 = _mm512_fmadd_ps(wj, _mm512_loadu_ps(vj + 48), a3);
        }
        _mm512_storeu_ps(o + d, a0);
        _mm512_storeu_ps(o + d + 16, a1);
        _mm512_storeu_ps(o + d + 32, a2);
        _mm512_storeu_ps(o + d + 48, a3);
    }
    for (; d < hd; d += 16) {
        const __mmask16 m = tail_mask(hd - d);
        __m512 a = _mm512_maskz_loadu_ps(m, o + d);
        for (int j = 0; j < n; j++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]),
                                _mm512_maskz_loadu_ps(m, v + (long)j * hd + d), a);
        _mm512_mask_storeu_ps(o + d, m, a);
    }
}

const cpu_attention_kernels cpu_attention_avx512 = {
    .exp_shift_sum = exp_shift_sum_avx512,
    .dot_keys = dot_keys_avx512,
    .weigh_values = weigh_values_avx512,
};
