/* The exp every AVX2 kernel uses (attention, activations): bit for bit exp_poly_scalar
 * (attention_scalar.c) eight lanes at a time. Include only from files compiled for AVX2. */
#pragma once
#include <immintrin.h>

/* exp(x) for x in [-87.3, 88.7] (clamped to it): x = n ln2 + r, |r| <= ln2 / 2, and
 * exp(x) = 2^n p(r); ln2 in two parts so n ln2 is exact to float precision. */
static inline __attribute__((always_inline)) __m256 exp_avx2(__m256 x) {
    // below -87.3 the true result is a denormal or 0: 0 (and -inf, a masked score, gives 0)
    const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_GE_OQ);
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
    return _mm256_and_ps(live, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}
