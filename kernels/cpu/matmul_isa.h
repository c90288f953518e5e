/* Private to the CPU matmul family: the kernels each level's file exports, so that a higher
 * level's table can reuse what it does not specialise (kernels/cpu/matmul_kernels.h). Named
 * <kernel>_<level>; each is compiled only for its own level. */
#pragma once
#include <stdint.h>

void gemv_f32_scalar(float *y, long ldy, const float *x, const float *w, int rows, int k, int n);
void round_bf16_scalar(uint16_t *out, const float *x, long n);
void gemv_bf16_scalar(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                      int n);
void quantize_q8_scalar(int8_t *q, float *d, const float *x, int rows, int k, int block);
void gemv_q8_scalar(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                    const float *ws, int group, int rows, int k, int n, int block);

void gemv_f32_avx2(float *y, long ldy, const float *x, const float *w, int rows, int k, int n);

void gemv_f32_avx512(float *y, long ldy, const float *x, const float *w, int rows, int k, int n);

/* bf16: integer rounding (bit-identical to round_bf16_scalar) and widening GEMVs. */
void round_bf16_avx2(uint16_t *out, const float *x, long n);
void gemv_bf16_avx2(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                    int n);
void round_bf16_avx512(uint16_t *out, const float *x, long n);
void gemv_bf16_avx512(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                      int n);
void gemv_bf16_avx512bf16(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                          int n);

/* int8 (matmul_q8_avx2.c, matmul_q8_avx512.c, matmul_q8_avx512vnni.c): quantisers
 * bit-identical to quantize_q8_scalar, and decode GEMVs with exact int32 block sums. */
void quantize_q8_avx2(int8_t *q, float *d, const float *x, int rows, int k, int block);
void gemv_q8_avx2(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                  const float *ws, int group, int rows, int k, int n, int block);
void quantize_q8_avx512(int8_t *q, float *d, const float *x, int rows, int k, int block);
void gemv_q8_avx512(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                    const float *ws, int group, int rows, int k, int n, int block);
void gemv_q8_avx512vnni(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                        const float *ws, int group, int rows, int k, int n, int block);
