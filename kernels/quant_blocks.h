/* ggml's block formats q8_0, q4_0, q4_1 and q4_k (backend.h's DTYPE_Q8_0, DTYPE_Q4_0,
 * DTYPE_Q4_1, DTYPE_Q4_K), byte for byte as ggml lays them out, so a GGUF's blocks are held as
 * they are stored: each row of a (rows, cols) matrix is cols / qblock_weights blocks, cols a
 * multiple of it. The 32-weight quantisers are ggml's reference ones (quantize_row_q8_0_ref
 * and its twins), so tripar and llama.cpp make the same blocks from the same fp32 values;
 * q4_k's is tripar's own, simpler than ggml's search. docs/kernels.md, "Block formats". */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Weights per block of the planes (qblocks_unpack), and per block of the 32-weight formats;
 * q4_k's 256-weight super-block is eight of them. */
enum { QBLOCK = 32, QBLOCK_K = 256 };

/* Bytes of one block: 34 (q8_0), 18 (q4_0), 20 (q4_1), 144 (q4_k, per 256 weights); 0 for a
 * dtype that is not a block one. */
size_t qblock_bytes(dtype type);
/* Weights of one block: QBLOCK, or QBLOCK_K for q4_k; a row (and a TP rank's part of one) is
 * a whole number of them. */
int qblock_weights(dtype type);
/* Whether the blocks carry a min per 32 weights (q4_1, q4_k): the planes then have mins. */
static inline int qblock_has_mins(dtype type) { return type == DTYPE_Q4_1 || type == DTYPE_Q4_K; }

/* out (rows, cols / qblock_weights blocks) from fp32 x (rows, cols), as ggml's reference
 * quantisers:
 *   q8_0: d = amax / 127, q = round(x / d) (half away from zero);
 *   q4_0: d = -v / 8 with v the value of largest magnitude, q = min(15, trunc(x / d + 8.5));
 *   q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - m) / d + 0.5));
 * d and m are stored in fp16 (round to nearest even), the quants from the fp32 d. q4_k (not
 * ggml's make_qkx2 search: min/max per sub-block of 32): a sub-block's scale s = (max - lo) /
 * 15 and min lo = min(0, min); d = max s / 63 and dmin = max(-lo) / 63 in fp16; sc =
 * rint(s / d) and mn = rint(-lo / dmin) in 0..63; q = rint((x + dmin * mn) / (d * sc)) in
 * 0..15. */
void qblocks_quantize(dtype type, void *out, const float *x, long rows, long cols);

/* The blocks as a plane of int8 quants q (rows, cols) and fp32 scales d and mins m
 * (rows, cols / QBLOCK), each value then d * q (+ m for q4_1 and q4_k): q8_0's q, q4_0's
 * nibble - 8, q4_1's and q4_k's nibble (0..15); m may be NULL unless qblock_has_mins. q4_k's
 * sub-block of 32 is a q4_1 block with d = d * sc and m = -(dmin * mn), both exact in fp32
 * (an fp16 times a 6-bit integer), so q * d + m is ggml's d * sc * q - dmin * mn to the bit.
 * Exact (fp16 widens exactly). */
void qblocks_unpack(dtype type, int8_t *q, float *d, float *m, const void *in, long rows,
                    long cols);

/* The inverse of qblocks_unpack: blocks from quants q and scales d, m (rounded to fp16, so
 * exact for values that came from fp16). q must lie in the format's range. q4_k finds, per
 * super-block, an fp16 d and 6-bit sc whose product is each sub-block's scale, the largest sc
 * first (so a super-block whose largest sub-scale is 63, as ggml's reference quantiser and
 * tripar's make them, packs to its own bytes), and dmin, mn likewise: exact for planes that
 * came from q4_k blocks, as a checkpoint's do (its checksums guard them); other planes get the
 * nearest 6-bit scales of d = max / 63. */
void qblocks_pack(dtype type, void *out, const int8_t *q, const float *d, const float *m,
                  long rows, long cols);

/* ggml's eight 6-bit scales sc and mins mn of a q4_k (and Q5_K) super-block, from its 12
 * bytes s (get_scale_min_k4): for j < 4 the low six bits of bytes j and j + 4; for j >= 4 the
 * low four bits are the nibbles of byte j + 4 and the top two the top bits of bytes j - 4 and
 * j. */
void qblocks_k4_scales(const uint8_t *s, int sc[8], int mn[8]);

/* out (rows, cols) = the blocks' values in fp32: q * d (q4_1: q * d + m; q4_k: (d * sc) * q
 * - dmin * mn), as ggml's dequantize_row_* computes them. */
void qblocks_dequantize(dtype type, float *out, const void *in, long rows, long cols);

#ifdef __cplusplus
}
#endif
