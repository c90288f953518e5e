/* The attention family for AVX-512: the AVX2 level's methods sixteen lanes wide, with masked
 * loads for tails (kernels/cpu/attention_avx2.c explains the exp). */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_kernels.h"
#include "kernels/cpu/exp_avx512.h"

static inline __mmask16 tail_mask(int left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

static float exp_shift_sum_avx512(float *y, const float *x, float shift, int n) {
    const __m512 sh = _mm512_set1_ps(shift);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m,
                              exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh)));
    }
    float sum = 0.0f; // in index order, as every level sums
    for (int i = 0; i < n; i++)
        sum += y[i];
    return sum;
}

/* r[i] (row i, sixteen floats) becomes column i of the 16 x 16 block: r[c][i] = old r[i][c].
 * Unpacks pair rows inside 128-bit lanes, then two lane shuffles gather the four quarters. */
static inline __attribute__((always_inline)) void transpose_16x16(__m512 r[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) { // b[g + e], lane L: element 4L + e of rows g..g+3
        const __m512d a0 = _mm512_castps_pd(a[g]), a1 = _mm512_castps_pd(a[g + 1]);
        const __m512d a2 = _mm512_castps_pd(a[g + 2]), a3 = _mm512_castps_pd(a[g + 3]);
        b[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        b[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        b[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        b[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    for (int e = 0; e < 4; e++) {
        const __m512 c0 = _mm512_shuffle_f32x4(b[e], b[4 + e], 0x88); // lanes 0, 2
        const __m512 c1 = _mm512_shuffle_f32x4(b[e], b[4 + e], 0xDD); // lanes 1, 3
        const __m512 c2 = _mm512_shuffle_f32x4(b[8 + e], b[12 + e], 0x88);
        const __m512 c3 = _mm512_shuffle_f32x4(b[8 + e], b[12 + e], 0xDD);
        r[e] = _mm512_shuffle_f32x4(c0, c2, 0x88);
        r[4 + e] = _mm512_shuffle_f32x4(c1, c3, 0x88);
        r[8 + e] = _mm512_shuffle_f32x4(c0, c2, 0xDD);
        r[12 + e] = _mm512_shuffle_f32x4(c1, c3, 0xDD);
    }
}

/* s[j] for the keys j < n rounded down to 32, in 16 x 16 blocks transposed in registers (hd a
 * multiple of 16); returns how many it did. Two blocks at a time, two independent chains. Inlined
 * with hd a constant (64, 128), the sixteen rows are fixed offsets from one pointer. */
static inline __attribute__((always_inline)) int
dot_keys_transposed(float *s, const float *q, const float *k, int n, int hd, float scale) {
    int j = 0;
    for (; j + 32 <= n; j += 32) {
        const float *kj = k + (long)j * hd;
        __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, r[16];
        for (int d0 = 0; d0 < hd; d0 += 16)
            for (int blk = 0; blk < 2; blk++) {
                const float *kb = kj + (long)blk * 16 * hd + d0;
                // kb opaque to the optimiser, so that the rows are constant offsets from it:
                // otherwise GCC kept a pointer per row, 32 of them, spilled to the stack
                __asm__("" : "+r"(kb));
                // the next 32 keys' 2 hd lines in order, 16 per pass (a prefetch past the
                // cache's end never faults): one sequential stream ahead of the strided loads
                const float *ahead = kj + 32L * hd + ((d0 / 16) * 2 + blk) * 256;
                for (int i = 0; i < 16; i++) {
                    _mm_prefetch((const char *)(ahead + 16 * i), _MM_HINT_T0);
                    r[i] = _mm512_loadu_ps(kb + (long)i * hd);
                }
                transpose_16x16(r);
                for (int d = 0; d < 16; d++)
                    acc[blk] = _mm512_fmadd_ps(_mm512_set1_ps(q[d0 + d]), r[d], acc[blk]);
            }
        _mm512_storeu_ps(s + j, _mm512_mul_ps(acc[0], _mm512_set1_ps(scale)));
        _mm512_storeu_ps(s + j + 16, _mm512_mul_ps(acc[1], _mm512_set1_ps(scale)));
    }
    return j;
}

/* Sixteen keys at a time, one lane each, so that each dot sums over d in order. With hd a
 * multiple of 16 the keys are read as they lie and transposed in registers: a decode step reads
 * the whole cache this way. The gathers this replaced left a GPT-2 decode step's attention at
 * 4.7 ms for 39 MB of cache (docs/kernels.md, "Decode: prefetch and transposed keys"). Other head
 * sizes, and the last keys under 32, gather along d. */
static void dot_keys_avx512(float *s, const float *q, const float *k, int n, int hd, float scale) {
    int j = 0;
    if (hd == 64)
        j = dot_keys_transposed(s, q, k, n, 64, scale);
    else if (hd == 128)
        j = dot_keys_transposed(s, q, k, n, 128, scale);
    else if (hd % 16 == 0)
        j = dot_keys_transposed(s, q, k, n, hd, scale);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(hd));
    for (; j + 32 <= n; j += 32) { // two independent chains hide the FMA latency
        const float *ka = k + (long)j * hd, *kb = ka + 16L * hd;
        __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            const __m512 qd = _mm512_set1_ps(q[d]);
            a = _mm512_fmadd_ps(qd, _mm512_i32gather_ps(idx, ka + d, 4), a);
            b = _mm512_fmadd_ps(qd, _mm512_i32gather_ps(idx, kb + d, 4), b);
        }
        _mm512_storeu_ps(s + j, _mm512_mul_ps(a, _mm512_set1_ps(scale)));
        _mm512_storeu_ps(s + j + 16, _mm512_mul_ps(b, _mm512_set1_ps(scale)));
    }
    for (; j + 16 <= n; j += 16) {
        const float *ka = k + (long)j * hd;
        __m512 a = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), _mm512_i32gather_ps(idx, ka + d, 4), a);
        _mm512_storeu_ps(s + j, _mm512_mul_ps(a, _mm512_set1_ps(scale)));
    }
    if (j < n) dot_keys_scalar(s + j, q, k + (long)j * hd, n - j, hd, scale);
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

const cpu_attention_kernels cpu_attention_avx512 = {
    .exp_shift_sum = exp_shift_sum_avx512,
    .dot_keys = dot_keys_avx512,
    .weigh_values = weigh_values_avx512,
    .tile_step = tile_step_avx512,
};
