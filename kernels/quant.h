/* Host-side weight conversions used when storing weights in a lower precision: per-row
 * symmetric INT8 and the 16-bit float formats (round to nearest even). Also used by the CPU
 * backend to expand 16-bit weight tiles. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* absmax (rows) = max |x[r][c]| over each row of x (rows, cols). A row split across TP ranks
 * needs the max over all shards (an all-reduce MAX of this) before quant_rows_int8. */
void quant_row_absmax(float *absmax, const float *x, long rows, long cols);

/* q (rows, cols) = round(x / scale[r]) in [-127, 127], scale (rows) = absmax[r] / 127, so
 * |q * scale - x| <= scale / 2. absmax comes from row_absmax_or_null when given (rows spanning
 * several ranks must share one scale), else it is computed from x. An all-zero row gets
 * scale 0 and q 0. */
void quant_rows_int8(int8_t *q, float *scale, const float *x, long rows, long cols,
                     const float *row_absmax_or_null);

/* Block-wise INT8: the per-row rule applied to each group of `group` consecutive columns
 * (the last group of a row shorter when group does not divide cols). q (rows, cols);
 * scale (rows, ceil(cols / group)). */
void quant_groups_int8(int8_t *q, float *scale, const float *x, long rows, long cols, int group);

/* Round to nearest even; NaN stays NaN, overflow becomes infinity, f16 subnormals kept. */
void convert_f32_to_bf16(uint16_t *out, const float *in, long n);
void convert_f32_to_f16(uint16_t *out, const float *in, long n);
/* Exact widening. */
void convert_bf16_to_f32(float *out, const uint16_t *in, long n);
void convert_f16_to_f32(float *out, const uint16_t *in, long n);

#ifdef __cplusplus
}
#endif
