/* ggml's block formats q8_0, q4_0 and q4_1 (backend.h's DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1),
 * byte for byte as ggml lays them out, so a GGUF's blocks are held as they are stored: each
 * row of a (rows, cols) matrix is cols / QBLOCK blocks, cols a multiple of QBLOCK. The
 * quantisers are ggml's reference ones (quantize_row_q8_0_ref and its twins), so tripar and
 * llama.cpp make the same blocks from the same fp32 values. docs/kernels.md, "Block formats". */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { QBLOCK = 32 }; /* weights per block */

/* Bytes of one block: 34 (q8_0), 18 (q4_0), 20 (q4_1); 0 for a dtype that is not a block one. */
size_t qblock_bytes(dtype type);

/* out (rows, cols / QBLOCK blocks) from fp32 x (rows, cols), as ggml's reference quantisers:
 *   q8_0: d = amax / 127, q = round(x / d) (half away from zero);
 *   q4_0: d = -v / 8 with v the value of largest magnitude, q = min(15, trunc(x / d + 8.5));
 *   q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - m) / d + 0.5));
 * d and m are stored in fp16 (round to nearest even), the quants from the fp32 d. */
void qblocks_quantize(dtype type, void *out, const float *x, long rows, long cols);

/* The blocks as a plane of int8 quants q (rows, cols) and fp32 scales d and mins m
 * (rows, cols / QBLOCK), each value then d * q (+ m for q4_1): q8_0's q, q4_0's nibble - 8,
 * q4_1's nibble (0..15); m may be NULL except for q4_1. Exact (fp16 widens exactly). */
void qblocks_unpack(dtype type, int8_t *q, float *d, float *m, const void *in, long rows,
                    long cols);

/* The inverse of qblocks_unpack: blocks from quants q and scales d, m (rounded to fp16, so
 * exact for values that came from fp16). q must lie in the format's range. */
void qblocks_pack(dtype type, void *out, const int8_t *q, const float *d, const float *m,
                  long rows, long cols);

/* out (rows, cols) = the blocks' values in fp32: q * d (q4_1: q * d + m), as ggml's
 * dequantize_row_* computes them. */
void qblocks_dequantize(dtype type, float *out, const void *in, long rows, long cols);

#ifdef __cplusplus
}
#endif
