/* Private to the CPU attention family: the kernels each level's file exports, so that a higher
 * level's table can reuse what it does not specialise (kernels/cpu/attention_kernels.h). Named
 * <kernel>_<level>; each is compiled only for its own level. */
#pragma once
#include "kernels/backend.h"

/* exp(x) by the polynomial every level uses (attention_avx2.c explains it): 0 below -87.3. */
float exp_poly_scalar(float x);
float exp_shift_sum_scalar(float *y, const float *x, float shift, int n);
void dot_keys_scalar(float *s, const float *q, const float *k, int n, int hd, float scale);
void weigh_values_scalar(float *o, const float *w, const float *v, int n, int hd);
void tile_step_scalar(float *o, long ldo, float *m, float *l, const float *qt, const float *k,
                      const float *v, int rows, int kn, int hd, int first, int k0, float *st);
void kv_rows_load_scalar(float *dst, const void *src, int n, int hd, dtype type);
/* The fp32 scale of an int8 cache row (after its values); 0 for the other types. */
float kv_row_scale(const char *row, int hd, dtype type);
/* Element d of the cache row at src in fp32 (the tails of the vector levels' kv_rows_load). */
float kv_elem_scalar(const char *row, int d, int hd, dtype type);
