/* Weight conversions (see quant.h): per-row INT8 and f32 <-> bf16/f16 by bit manipulation, so
 * the result does not depend on the compiler's half-precision support. */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

void quant_row_absmax(float *absmax, const float *x, long rows, long cols) {
    for (long r = 0; r < rows; r++) {
        float m = 0.0f;
        for (long c = 0; c < cols; c++)
            m = fmaxf(m, fabsf(x[r * cols + c]));
        absmax[r] = m;
    }
}

void quant_rows_int8(int8_t *q, float *scale, const float *x, long rows, long cols,
                     const float *row_absmax_or_null) {
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float absmax;
        if (row_absmax_or_null)
            absmax = row_absmax_or_null[r];
        else
            quant_row_absmax(&absmax, xr, 1, cols);
        scale[r] = absmax / 127.0f;
        // Divide by the stored scale (not multiply by 127/absmax) so the rounding error is
        // measured against exactly the value dequantization will use.
        for (long c = 0; c < cols; c++) {
            float v = scale[r] > 0.0f ? rintf(xr[c] / scale[r]) : 0.0f;
            q[r * cols + c] = (int8_t)fminf(127.0f, fmaxf(-127.0f, v));
        }
    }
}

void quant_groups_int8(int8_t *q, float *scale, const float *x, long rows, long cols, int group) {
    const long groups = (cols + group - 1) / group;
    for (long r = 0; r < rows; r++)
        for (long g = 0; g < groups; g++) {
            const long c0 = g * group, len = cols - c0 < group ? cols - c0 : group;
            // one group is a row of len values: the per-row rule, scale and rounding included
            quant_rows_int8(q + r * cols + c0, scale + r * groups + g, x + r * cols + c0, 1, len,
                            NULL);
        }
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void convert_f32_to_bf16(uint16_t *out, const float *in, long n) {
    for (long i = 0; i < n; i++) {
        uint32_t x = f32_bits(in[i]);
        if ((x & 0x7FFFFFFFu) > 0x7F800000u) { // NaN: keep it quiet, never round to infinity
            out[i] = (uint16_t)((x >> 16) | 0x0040u);
            continue;
        }
        x += 0x7FFFu + ((x >> 16) & 1u);
        out[i] = (uint16_t)(x >> 16);
    }
}

static uint16_t f32_to_f16_one(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7FFFFFFFu;
    if (absx >= 0x7F800000u) // infinity or NaN
        return (uint16_t)(sign | 0x7C00u |
                          (absx > 0x7F800000u ? 0x0200u | ((absx >> 13) & 0x3FFu) : 0u));
    if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); // >= 65520 rounds to infinity
    if (absx >= 0x38800000u) {                                  // normal half (>= 2^-14)
        uint32_t h = (absx >> 13) - ((127u - 15u) << 10), rem = absx & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; // a carry bumps the exponent
        return (uint16_t)(sign | h);
    }
    if (absx < 0x33000000u)
        return (uint16_t)sign; // below 2^-25 rounds to zero (2^-25 itself is a tie, to even: zero)
    // Subnormal half: units of 2^-24. value = mant * 2^(e - 150), so shift = 126 - e (14..24).
    uint32_t mant = (absx & 0x7FFFFFu) | 0x800000u;
    int shift = 126 - (int)(absx >> 23);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

void convert_f32_to_f16(uint16_t *out, const float *in, long n) {
    for (long i = 0; i < n; i++)
        out[i] = f32_to_f16_one(in[i]);
}

void convert_bf16_to_f32(float *out, const uint16_t *in, long n) {
    for (long i = 0; i < n; i++)
        out[i] = f32_from_bits((uint32_t)in[i] << 16);
}

static float f16_to_f32_one(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 31u, mant = h & 0x3FFu;
    if (exp == 31u) return f32_from_bits(sign | 0x7F800000u | (mant << 13));
    if (exp == 0u) { // zero or subnormal: mant * 2^-24 is exact in float
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

void convert_f16_to_f32(float *out, const uint16_t *in, long n) {
    for (long i = 0; i < n; i++)
        out[i] = f16_to_f32_one(in[i]);
}
