/* The activation family for AVX2 + FMA: eight lanes at a time, the tail of n under 8 through
 * the scalar twin (the same bits). */
#include <immintrin.h>
#include <stddef.h>

#include "kernels/cpu/activation_kernels.h"
#include "kernels/cpu/exp_avx2.h"

static void bias_gelu_avx2(float *x, const float *bias, int n) {
    const __m256 c = _mm256_set1_ps(0.044715f), one = _mm256_set1_ps(1.0f);
    const __m256 k = _mm256_set1_ps(-1.5957691216057308f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + i));
        const __m256 u =
            _mm256_mul_ps(_mm256_mul_ps(v, _mm256_fmadd_ps(c, _mm256_mul_ps(v, v), one)), k);
        _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, exp_avx2(u))));
    }
    if (i < n) cpu_activation_scalar.bias_gelu(x + i, bias ? bias + i : NULL, n - i);
}

static void swiglu_avx2(float *o, const float *g, const float *u, int n) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gv = _mm256_loadu_ps(g + i);
        const __m256 e = exp_avx2(_mm256_xor_ps(gv, sign));
        _mm256_storeu_ps(
            o + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    if (i < n) cpu_activation_scalar.swiglu(o + i, g + i, u + i, n - i);
}

const cpu_activation_kernels cpu_activation_avx2 = {
    .bias_gelu = bias_gelu_avx2,
    .swiglu = swiglu_avx2,
};
