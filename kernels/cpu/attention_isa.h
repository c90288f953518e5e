/* Private to the CPU attention family: the kernels each level's file exports, so that a higher
 * level's table can reuse what it does not specialise (kernels/cpu/attention_kernels.h). Named
 * <kernel>_<level>; each is compiled only for its own level. */
#pragma once
#include <string.h>

#include "kernels/backend.h"

/* exp(x) by the polynomial every level uses (attention_avx2.c explains it): 0 below -87.3. */
float exp_poly_scalar(float x);
float exp_shift_sum_scalar(float *y, const float *x, float shift, int n);
void exp_shift_scalar(float *y, const float *x, float shift, int n);
void dot_keys_scalar(float *s, const float *q, const void *k, int n, int hd, float scale,
                     dtype type);
float weigh_values_scalar(float *o, const float *w, const void *v, int n, int hd, dtype type,
                          float sum);
void tile_step_scalar(float *o, long ldo, float *m, float *l, const float *qt, const float *k,
                      const float *v, int rows, int kn, int hd, int first, int k0, float *st);
void kv_rows_load_scalar(float *dst, const void *src, int n, int hd, dtype type);
/* The fp32 scale of an int8 cache row of rb = kv_row_bytes bytes (after its values); 0 for the
 * other types. Inline: the vector kernels read it once per key. */
static inline float kv_row_scale(const char *row, size_t rb, dtype type) {
    float scale = 0.0f;
    if (type == DTYPE_INT8) memcpy(&scale, row + rb - sizeof scale, sizeof scale);
    return scale;
}
/* Element d of the cache row at src in fp32 (the tails of the vector levels' kernels). */
float kv_elem_scalar(const char *row, int d, int hd, dtype type);
/* Runs fn(args..., T) with T the cache type as a constant, so that an always-inline kernel body
 * is compiled once per type with its widening chosen outside the loops. */
#define KV_TYPED(type, fn, ...)                                                                    \
    do {                                                                                           \
        switch (type) {                                                                            \
        case DTYPE_F32: fn(__VA_ARGS__, DTYPE_F32); break;                                         \
        case DTYPE_BF16: fn(__VA_ARGS__, DTYPE_BF16); break;                                       \
        case DTYPE_F16: fn(__VA_ARGS__, DTYPE_F16); break;                                         \
        case DTYPE_INT8: fn(__VA_ARGS__, DTYPE_INT8); break;                                       \
        default: break; /* the block formats are weights only, never a cache type */               \
        }                                                                                          \
    } while (0)
