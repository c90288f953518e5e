/* Private to the CPU matmul family: the kernels each level's file exports, so that a higher
 * level's table can reuse what it does not specialise (kernels/cpu/matmul_kernels.h). Named
 * <kernel>_<level>; each is compiled only for its own level. */
#pragma once
#include <stdint.h>

#include "kernels/backend.h"

/* How far ahead of its loads the fp32 decode GEMV asks for weights, in bytes. On Sapphire
 * Rapids, one thread, the hardware streamer alone kept GPT-2's decode products at 88% of the
 * read rate measured in the same run; with this prefetch they run at 95-101% of it, phase by
 * phase (`tripar explain`'s rooflines; docs/kernels.md, "Decode: prefetch and lanes").
 * 512 to 2048 bytes measured alike, 8 KiB worse. A prefetch past the end never faults. */
enum { GEMV_F32_PREFETCH_BYTES = 1024 };

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

/* Block formats (matmul_blocks_scalar.c, matmul_blocks_avx2.c, matmul_blocks_zmm.h included by
 * matmul_q8_avx512.c and matmul_q8_avx512vnni.c): decode GEMVs straight from the packed
 * blocks, every level the scalar bits (matmul_kernels.h, gemv_blocks). */
void gemv_blocks_scalar(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                        dtype type, int rows, int k, int n);
void gemv_blocks_avx2(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                      dtype type, int rows, int k, int n);
void gemv_blocks_avx512(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                        dtype type, int rows, int k, int n);
void gemv_blocks_avx512vnni(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                            dtype type, int rows, int k, int n);

/* The block formats' and int8w's GEMM (matmul_blocks_scalar.c, matmul_blocks_gemm_avx2.c,
 * matmul_blocks_gemm_avx512vnni.c): every level the scalar bits (matmul_kernels.h,
 * gemm_blocks). The 512-bit level without VNNI runs AVX2's. */
void gemm_blocks_scalar(float *y, long ldy, const int8_t *q, const float *d, const int32_t *xs,
                        weight_view w, int rows, int k, int n, void *pack);
long gemm_blocks_pack_bytes_scalar(dtype type, int k);
void gemm_blocks_avx2(float *y, long ldy, const int8_t *q, const float *d, const int32_t *xs,
                      weight_view w, int rows, int k, int n, void *pack);
long gemm_blocks_pack_bytes_avx2(dtype type, int k);
void gemm_blocks_avx512vnni(float *y, long ldy, const int8_t *q, const float *d, const int32_t *xs,
                            weight_view w, int rows, int k, int n, void *pack);
long gemm_blocks_pack_bytes_avx512vnni(dtype type, int k);
