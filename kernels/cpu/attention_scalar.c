/* The attention family in portable C (kernels/cpu/attention_kernels.h): the twins the vector
 * levels are tested against, and bit for bit the same function: the same exp polynomial, the
 * same order of every sum, and fused multiply-adds (fmaf) where the vector code fuses. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_kernels.h"
#include "kernels/quant.h"

float exp_poly_scalar(float x) {
    if (!(x >= -87.3f)) return 0.0f; // the true result is a denormal or 0 (-inf: a masked score)
    x = x < 88.7f ? x : 88.7f;
    const float n = nearbyintf(x * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, x);
    r = fmaf(-n, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r + 1.0f);
    const int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}

void exp_shift_scalar(float *y, const float *x, float shift, int n) {
    for (int i = 0; i < n; i++)
        y[i] = exp_poly_scalar(x[i] - shift);
}

float exp_shift_sum_scalar(float *y, const float *x, float shift, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        y[i] = exp_poly_scalar(x[i] - shift);
        sum += y[i];
    }
    return sum;
}

void tile_step_scalar(float *o, long ldo, float *m, float *l, const float *qt, const float *k,
                      const float *v, int rows, int kn, int hd, int first, int k0, float *st) {
    for (int i = 0; i < rows; i++) {
        // keys k0..k0+valid-1 are at or before the row's position
        int valid = first + i - k0 + 1;
        valid = valid < kn ? valid : kn;
        if (valid <= 0) continue;
        float *s = st + (long)i * ATTN_TILE;
        float mx = -INFINITY;
        for (int j = 0; j < valid; j++) {
            float dot = 0.0f;
            for (int d = 0; d < hd; d++)
                dot = fmaf(qt[(long)d * ATTN_TILE + i], k[(long)j * hd + d], dot);
            s[j] = dot;
            mx = dot > mx ? dot : mx;
        }
        const float mnew = mx > m[i] ? mx : m[i];
        const float alpha = exp_poly_scalar(m[i] - mnew); // 0 at the first block (m = -inf)
        l[i] = fmaf(l[i], alpha, exp_shift_sum_scalar(s, s, mnew, valid));
        m[i] = mnew;
        float *oi = o + (long)i * ldo;
        for (int d = 0; d < hd; d++)
            oi[d] *= alpha;
        weigh_values_scalar(oi, s, v, valid, hd, DTYPE_F32, 0.0f);
    }
}

/* kv_elem_scalar, inlined into the kernels below so that each compiles once per cache type. */
static inline __attribute__((always_inline)) float kv_elem(const char *row, int d, int hd,
                                                            dtype type) {
    uint16_t h;
    uint32_t bits;
    float x;
    switch (type) {
    case DTYPE_BF16:
        memcpy(&h, row + 2 * d, sizeof h);
        bits = (uint32_t)h << 16;
        memcpy(&x, &bits, sizeof x);
        return x;
    case DTYPE_F16:
        memcpy(&h, row + 2 * d, sizeof h);
        convert_f16_to_f32(&x, &h, 1);
        return x;
    case DTYPE_INT8: return (float)(int8_t)row[d] * kv_row_scale(row, kv_row_bytes(type, hd), type);
    case DTYPE_F32:
    case DTYPE_Q8_0: /* weights only: never a cache type */
    case DTYPE_Q4_0:
    case DTYPE_Q4_1:
    case DTYPE_Q4_K: break;
    }
    memcpy(&x, row + 4 * d, sizeof x);
    return x;
}

float kv_elem_scalar(const char *row, int d, int hd, dtype type) {
    return kv_elem(row, d, hd, type);
}

static inline __attribute__((always_inline)) void
dot_keys_typed(float *s, const float *q, const char *k, int n, int hd, float scale, dtype type) {
    const size_t rb = kv_row_bytes(type, hd);
    for (int j = 0; j < n; j++) {
        const char *kj = k + j * rb;
        float p[16] = {0};
        for (int d = 0; d < hd; d++)
            p[d % 16] = fmaf(q[d], kv_elem(kj, d, hd, type), p[d % 16]);
        for (int width = 8; width >= 1; width /= 2) // the lanes' tree, as the vectors reduce
            for (int l = 0; l < width; l++)
                p[l] = p[l] + p[l + width];
        s[j] = p[0] * scale;
    }
}

void dot_keys_scalar(float *s, const float *q, const void *k, int n, int hd, float scale,
                     dtype type) {
    KV_TYPED(type, dot_keys_typed, s, q, k, n, hd, scale);
}

static inline __attribute__((always_inline)) void
weigh_values_typed(float *o, const float *w, const char *v, int n, int hd, float *sum,
                   dtype type) {
    const size_t rb = kv_row_bytes(type, hd);
    for (int j = 0; j < n; j++) {
        for (int d = 0; d < hd; d++)
            o[d] = fmaf(w[j], kv_elem(v + j * rb, d, hd, type), o[d]);
        *sum += w[j];
    }
}

float weigh_values_scalar(float *o, const float *w, const void *v, int n, int hd, dtype type,
                          float sum) {
    KV_TYPED(type, weigh_values_typed, o, w, v, n, hd, &sum);
    return sum;
}

void kv_rows_load_scalar(float *dst, const void *src, int n, int hd, dtype type) {
    const size_t rb = kv_row_bytes(type, hd);
    for (int j = 0; j < n; j++)
        for (int d = 0; d < hd; d++)
            dst[(long)j * hd + d] = kv_elem((const char *)src + j * rb, d, hd, type);
}

const cpu_attention_kernels cpu_attention_scalar = {
    .exp_shift_sum = exp_shift_sum_scalar,
    .exp_shift = exp_shift_scalar,
    .dot_keys = dot_keys_scalar,
    .weigh_values = weigh_values_scalar,
    .tile_step = tile_step_scalar,
    .kv_rows_load = kv_rows_load_scalar,
};
