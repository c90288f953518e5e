/* The activation family for AVX-512: sixteen lanes at a time, the tail through masks (masked
 * lanes are neither read nor written). */
#include <immintrin.h>

#include "kernels/cpu/activation_kernels.h"
#include "kernels/cpu/exp_avx512.h"

static void bias_gelu_avx512(float *x, const float *bias, int n) {
    const __m512 c = _mm512_set1_ps(0.044715f), one = _mm512_set1_ps(1.0f);
    const __m512 k = _mm512_set1_ps(-1.5957691216057308f);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + i));
        const __m512 u =
            _mm512_mul_ps(_mm512_mul_ps(v, _mm512_fmadd_ps(c, _mm512_mul_ps(v, v), one)), k);
        _mm512_mask_storeu_ps(x + i, m, _mm512_div_ps(v, _mm512_add_ps(one, exp_avx512(u))));
    }
}

static void swiglu_avx512(float *o, const float *g, const float *u, int n) {
    const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 e = exp_avx512(_mm512_xor_ps(gv, sign));
        _mm512_mask_storeu_ps(o + i, m,
                              _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)),
                                            _mm512_maskz_loadu_ps(m, u + i)));
    }
}

const cpu_activation_kernels cpu_activation_avx512 = {
    .bias_gelu = bias_gelu_avx512,
    .swiglu = swiglu_avx512,
};
