/* The CPU matmul family's kernels, one table per instruction-set level (kernels/cpu/cpu_isa.h).
 * matmul.c chooses the kernel for a product (dtype, rows), converts or quantises the activation
 * rows once, and splits the output columns over threads; a kernel is single-threaded and sees
 * one slice of weight rows. Every entry is filled: a level that does not specialise one points
 * to the best kernel below it.
 *
 * Layouts. Weights w are (n, k) row-major, as y = x @ w^T (PyTorch Linear), n the output
 * columns of this slice; activations x are (rows, k); y is (rows, ldy) and is accumulated into
 * (+=), since it already holds the bias or zero. */
#pragma once
#include <stdint.h>

#include "kernels/backend.h"

/* Products with at most this many activation rows (decode: one row per sequence) stream the
 * weights once through a GEMV kernel; more rows (prefill) go to a GEMM. */
enum { CPU_GEMV_MAX_ROWS = 8 };

/* The activation block of int8 products when the shape allows it (ggml's Q8_0 uses 32). */
enum { CPU_Q8_BLOCK = 32 };

typedef struct cpu_matmul_kernels {
    /* y[r][o] += sum_c x[r][c] w[o][c], r < rows <= CPU_GEMV_MAX_ROWS: fp32 weights streamed
     * once for all rows. */
    void (*gemv_f32)(float *y, long ldy, const float *x, const float *w, int rows, int k, int n);

    /* out[i] = x[i] rounded to bf16, to nearest even (NaN stays NaN). */
    void (*round_bf16)(uint16_t *out, const float *x, long n);

    /* The same product with bf16 weights and activations (x rounded once by round_bf16): every
     * product exact in fp32, accumulated in fp32. rows <= CPU_GEMV_MAX_ROWS. */
    void (*gemv_bf16)(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                      int n);

    /* The bf16 product for any rows (prefill), or NULL where the level has no bf16 dot product:
     * matmul.c then widens w tile by tile and x once to fp32 (exact) and calls sgemm, which is
     * the same function up to the order of the fp32 sums. pack is scratch of
     * gemm_bf16_pack_bytes(k) bytes, 64-byte aligned, for the kernel's own layout of w. */
    void (*gemm_bf16)(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                      int n, void *pack);
    long (*gemm_bf16_pack_bytes)(int k); /* NULL when gemm_bf16 is */

    /* Activation rows to int8 blocks of `block` values (a power of two <= 32; ggml's Q8_0 when
     * 32), counted from the start of each row, the last one shorter when block does not divide
     * k: per block d = max|x| / 127 and q = x * (1 / d) rounded to nearest even, in
     * [-127, 127] (d = 0 and q = 0 for an all-zero block). Each step is one IEEE operation, so
     * every level gives the same bits. q (rows, k); d (rows, ceil(k / block)). */
    void (*quantize_q8)(int8_t *q, float *d, const float *x, int rows, int k, int block);

    /* y[r][o] += sum over blocks b of d[r][b] s(o, b) (sum_{c in b} q[r][c] w[o][c]) with int8
     * weights w and their scales ws: s(o, b) = ws[o] when group == 0 (one scale per weight
     * row), else ws[o * ceil(k / group) + (b * block) / group] (group a multiple of block).
     * Each block's sum is exact in int32; rows <= CPU_GEMV_MAX_ROWS. */
    void (*gemv_q8)(float *y, long ldy, const int8_t *q, const float *d, const int8_t *w,
                    const float *ws, int group, int rows, int k, int n, int block);

    /* y[r][o] += the product of activation blocks q, d (quantize_q8, block QBLOCK = 32) with
     * weight rows o < n stored as `type` blocks at w (q8_0, q4_0, q4_1, q4_k as ggml lays them
     * out, kernels/quant_blocks.h), read and widened in registers; k a multiple of
     * qblock_weights(type), rows <= CPU_GEMV_MAX_ROWS. Every level gives the same bits, those of
     * gemv_blocks_scalar: per (r, o) 16 fp32 lanes, lane (b % 2) * 8 + l taking columns
     * 4l..4l+3 of block b; per block, with s = d_x[b] * d_w[b] (q4_k: d_w = d * sc, exact),
     *   lane = fma(float(sum of the 4 products q_x q_w), s, lane)
     * and for q4_1 and q4_k, whose values are d_w q_w + m_w (q4_k: m_w = -(dmin * mn), exact),
     *   lane = fma(float(sum of the 4 q_x), d_x[b] * m_w[b], lane);
     * then dot = ((lane[i] + lane[i + 8]) halved twice more, pairwise, the same way), and
     * y += dot. q_w is q8_0's int8, q4_0's nibble - 8, q4_1's and q4_k's nibble. Each 4-product
     * sum is an exact int32, so only the fp32 order above fixes the bits, and it is the
     * 512-bit int8 GEMV's order (gemv_q8 with group = block = 32), two blocks per 64 columns. */
    void (*gemv_blocks)(float *y, long ldy, const int8_t *q, const float *d, const void *w,
                        dtype type, int rows, int k, int n);

    /* The same product for any rows (prefill), in integers as the GEMV, for block-format
     * weights and for int8 weights whose scales cover whole blocks of 32 (group 0 or a multiple
     * of 32; k a multiple of 32; d_w[b] = s(o, b) as in gemv_q8). w is the slice's view: data
     * (and for int8 scale) at its first row. xs (rows, k / QBLOCK) holds each activation
     * block's sum of quants (block_sums). Every level gives the bits of gemm_blocks_scalar,
     * which sums each output over the blocks in order, one fp32 accumulator per (r, o) from 0,
     * with s = d_x[b] * d_w[b] as in gemv_blocks:
     *   acc = fma(float(sum over the block of q_x q_w), s, acc)
     * and for q4_1 and q4_k
     *   acc = fma(float(xs[r][b]), d_x[b] * m_w[b], acc)
     * then y += acc. The block's sum is an exact int32 (q_w as in gemv_blocks), so each output
     * depends on its own row and weight row alone, at any row count, column split or thread
     * count. The SIMD levels hold a column per lane, so that order is theirs with no
     * reduction across lanes: they interleave a tile of weight rows into pack, scratch of
     * gemm_blocks_pack_bytes(k) bytes, 64-byte aligned, and reuse it for every row. */
    void (*gemm_blocks)(float *y, long ldy, const int8_t *q, const float *d, const int32_t *xs,
                        weight_view w, int rows, int k, int n, void *pack);
    long (*gemm_blocks_pack_bytes)(dtype type, int k);
} cpu_matmul_kernels;

/* xs[r][b] = the sum of the int8 quants q[r][32 b .. 32 b + 31] (rows, k), k a multiple of
 * QBLOCK: what gemm_blocks' kernels take off or add for a format whose weights they hold with an
 * offset (q4_0's nibble - 8, q8_0's + 128) or with a min (q4_1, q4_k). */
void block_sums(int32_t *xs, const int8_t *q, int rows, int k);

/* The tables (matmul_scalar.c, matmul_avx2.c, matmul_avx512.c, matmul_avx512vnni.c,
 * matmul_avx512bf16.c, matmul_amxbf16.c). */
extern const cpu_matmul_kernels cpu_matmul_scalar;
extern const cpu_matmul_kernels cpu_matmul_avx2;
extern const cpu_matmul_kernels cpu_matmul_avx512;
extern const cpu_matmul_kernels cpu_matmul_avx512vnni;
extern const cpu_matmul_kernels cpu_matmul_avx512bf16;
extern const cpu_matmul_kernels cpu_matmul_amxbf16;
