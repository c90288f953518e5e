/* The block GEMM's own layout of a tile of weight rows (kernels/cpu/matmul_kernels.h,
 * gemm_blocks), shared by matmul_blocks_gemm_avx2.c and matmul_blocks_gemm_avx512vnni.c.
 *
 * A GEMM holds one output column per vector lane, so it wants, for each 4 weights along k, the
 * same 4 weights of `tile` neighbouring rows side by side: one vector of 4-byte groups, whose
 * lanes each meet the same broadcast 4 activation quants in one vpdpbusd (or maddubs). The
 * packing is therefore a transpose of the rows' quant bytes at 4-byte granularity, with the
 * fp16 scales (and mins) widened to fp32 planes beside them. Nibbles stay packed: dword j of a
 * q4 row holds 8 weights, and the kernel takes the low or the high nibbles (which ones is
 * qb_pack_group's rule). Each weight is read once per tile and product, and the tile is then
 * reused by every activation row, 512 of them in a 512-token prefill.
 *
 * int8w's rows (DTYPE_INT8, a scale per row or per group of a multiple of 32) pack as q8_0's,
 * each block taking the scale that covers it.
 *
 * Layout of pack for tile columns c < tile (tile a multiple of 16):
 *   uint32_t quants[J][tile]   J = k / 4 (q8_0) or k / 8 (q4): dword j of row c at [j][c]
 *   float    scale[k / 32][tile]  the block's d (q4_k: d * sc, exact)
 *   float    min[k / 32][tile]    q4_1's m, q4_k's -(dmin * mn) (exact); formats with mins only
 * Columns past the slice's last weight row are zero. */
#pragma once
#include <stdint.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/matmul_blocks_half.h"
#include "kernels/quant_blocks.h"

/* Quant dwords of one weight row of k weights. */
static inline long qb_pack_dwords(dtype type, int k) {
    return type == DTYPE_Q8_0 || type == DTYPE_INT8 ? k / 4 : k / 8;
}

static inline long qb_pack_bytes(dtype type, int k, int tile) {
    const long planes = qblock_has_mins(type) ? 2 : 1;
    return ((long)sizeof(uint32_t) * qb_pack_dwords(type, k) +
            planes * (long)sizeof(float) * (k / QBLOCK)) *
           tile;
}

/* Where group g (weights 4g .. 4g + 3) of block b lies in the pack: dword *j of each row,
 * the high nibbles when *high (q4). q4_0 and q4_1: byte i of a block holds weight i low and i +
 * 16 high. q4_k: bytes 32p .. 32p + 31 of a super-block hold sub-block 2p low and 2p + 1 high. */
static inline __attribute__((always_inline)) void qb_pack_group(dtype type, int b, int g, long *j,
                                                                int *high) {
    switch (type) {
    case DTYPE_Q8_0:
    case DTYPE_INT8: *j = 8L * b + g, *high = 0; break;
    case DTYPE_Q4_K: *j = 32L * (b / 8) + 8 * ((b % 8) / 2) + g, *high = b & 1; break;
    default: *j = 4L * b + (g & 3), *high = g >= 4; break; // q4_0, q4_1
    }
}

/* Packs weight rows [c0, c0 + nc) of w (type blocks, or int8 rows with their scales; rows of k
 * weights) into a tile of `tile` columns. xor is applied to each quant dword: 0x80808080 turns
 * int8 quants into the unsigned q + 128 that vpdpbusd wants, 0 keeps the bytes. */
static inline void qb_pack_tile(void *pack, weight_view w, long c0, int nc, int k, int tile,
                                uint32_t xor) {
    const dtype type = w.type;
    const long J = qb_pack_dwords(type, k);
    const int nb = k / QBLOCK, mins = qblock_has_mins(type);
    uint32_t *qp = pack;
    float *dp = (float *)(qp + J * tile), *mp = dp + (long)nb * tile;
    const size_t row_bytes = dtype_bytes(type, (size_t)k), unit = qblock_bytes(type);
    for (int c = 0; c < tile; c++) {
        if (c >= nc) {
            for (long j = 0; j < J; j++)
                qp[j * tile + c] = 0;
            for (int b = 0; b < nb; b++) {
                dp[(long)b * tile + c] = 0.0f;
                if (mins) mp[(long)b * tile + c] = 0.0f;
            }
            continue;
        }
        if (type == DTYPE_INT8) {
            const uint8_t *row = (const uint8_t *)w.data + (size_t)k * (size_t)(c0 + c);
            const int groups = w.group ? (k + w.group - 1) / w.group : 1;
            const float *s = w.scale + (c0 + c) * (long)groups;
            for (long j = 0; j < J; j++) {
                uint32_t v;
                memcpy(&v, row + 4 * j, sizeof v);
                qp[j * tile + c] = v ^ xor;
            }
            for (int b = 0; b < nb; b++)
                dp[(long)b * tile + c] = s[w.group ? b * QBLOCK / w.group : 0];
            continue;
        }
        const uint8_t *row = (const uint8_t *)w.data + row_bytes * (size_t)(c0 + c);
        // Each unit (a block; q4_k's super-block) is its fp16 fields, then quant dwords.
        const int per_unit = qblock_weights(type) / QBLOCK;
        const int head = type == DTYPE_Q8_0 || type == DTYPE_Q4_0 ? 2 : type == DTYPE_Q4_1 ? 4 : 16;
        const int unit_dwords = (int)(J / (nb / per_unit));
        for (int u = 0; u < nb / per_unit; u++) {
            const uint8_t *blk = row + unit * (size_t)u;
            for (int i = 0; i < unit_dwords; i++) {
                uint32_t v;
                memcpy(&v, blk + head + 4 * i, sizeof v);
                qp[((long)u * unit_dwords + i) * tile + c] = v ^ xor;
            }
            if (type == DTYPE_Q4_K) {
                int sc[8], mn[8];
                qblocks_k4_scales(blk + 4, sc, mn);
                const float dd = qb_half(blk), dmin = qb_half(blk + 2);
                for (int s = 0; s < 8; s++) {
                    dp[(long)(8 * u + s) * tile + c] = dd * (float)sc[s];
                    mp[(long)(8 * u + s) * tile + c] = -(dmin * (float)mn[s]);
                }
            } else {
                dp[(long)u * tile + c] = qb_half(blk);
                if (mins) mp[(long)u * tile + c] = qb_half(blk + 2);
            }
        }
    }
}
