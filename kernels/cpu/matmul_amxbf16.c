/* The matmul family for AMX-BF16: the bf16 GEMM (prefill) on tiles with tdpbf16ps; everything
 * else is the avx512_bf16 level's. tdpbf16ps multiplies bf16 pairs, each product exact in fp32,
 * and sums them in fp32 with denormal inputs and results taken as zero, as vdpbf16ps does, so
 * this computes the product matmul_kernels.h defines (docs/kernels.md, "AMX on the CPU"). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

/* A micro-block is 32 activation rows x 32 output columns in four 16 x 16 fp32 C tiles (0-3),
 * fed per k-step of 32 by two A tiles (4, 5: 16 rows x 32 bf16 each) and two B tiles (6, 7: 16
 * pairs x 16 columns, the VNNI layout). The four tdpbf16ps of a step (16 x 16 x 32 each) share
 * every tile load twice. Weights are packed per call by blocks of AMX_NC columns x kc (<=
 * AMX_KC) depth, 384 KiB that stay in L2 while every 32-row strip of activations passes. */
enum { AMX_MR = 32, AMX_NR = 32, AMX_KSTEP = 32, AMX_NC = 256, AMX_KC = 768 };
enum { AMX_TILE_WORDS = 16 * 16 }; /* one tile: 16 rows of 64 bytes */

/* The k-block: k in equal blocks of at most AMX_KC, each but the last a multiple of the step. */
static int amx_kc(int k) {
    const int blocks = (k + AMX_KC - 1) / AMX_KC, kc = (k + blocks - 1) / blocks;
    return (kc + AMX_KSTEP - 1) / AMX_KSTEP * AMX_KSTEP;
}

/* Scratch: the packed weight block, then a zero-padded strip of activation rows for strips
 * that are short (rows not a multiple of 32) or whose k-block is not whole steps. */
static long gemm_bf16_pack_bytes_amxbf16(int k) {
    const long kc = amx_kc(k);
    return (long)AMX_NC * kc * 2 + (long)AMX_MR * kc * 2; // multiples of 64
}

/* The tile palette (Intel SDM vol. 1, 3.2.2): palette 1, every tile 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

static void amx_configure(void) {
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* tile (16 pairs, 16 columns) <- the 16 weight rows at w (., ldw), pairs [0, 16): a 16 x 16
 * transpose of 32-bit pairs, in registers (unpacks within 128-bit lanes, then the lanes). */
static void amx_pack_tile_whole(uint32_t *tile, const uint16_t *w, long ldw) {
    __m512i r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_si512(w + (long)i * ldw);
    for (int i = 0; i < 16; i += 2) { // pairs 4L+{0,1} and 4L+{2,3} of two rows
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 4; g++) { // r[4g + j], lane L: pair 4L + j of rows 4g..4g+3
        r[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        r[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        r[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        r[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int j = 0; j < 4; j++) { // pair 4L + j: lane L of r[j], r[4 + j], r[8 + j], r[12 + j]
        const __m512i v0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44);
        const __m512i v1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xEE);
        const __m512i v2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44);
        const __m512i v3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xEE);
        _mm512_store_si512(tile + (0 + j) * 16, _mm512_shuffle_i32x4(v0, v2, 0x88));
        _mm512_store_si512(tile + (4 + j) * 16, _mm512_shuffle_i32x4(v0, v2, 0xDD));
        _mm512_store_si512(tile + (8 + j) * 16, _mm512_shuffle_i32x4(v1, v3, 0x88));
        _mm512_store_si512(tile + (12 + j) * 16, _mm512_shuffle_i32x4(v1, v3, 0xDD));
    }
}

/* tile <- weight rows [0, cols) at w (., ldw), depth [0, kc) of this step (kc <= 32): the
 * pairs that exist, an odd kc's last pair (w[kc - 1], 0), and 0 past them. */
static void amx_pack_tile_part(uint32_t *tile, const uint16_t *w, long ldw, int kc, int cols) {
    memset(tile, 0, sizeof(uint32_t) * AMX_TILE_WORDS);
    for (int c = 0; c < cols; c++) {
        const uint16_t *wc = w + (long)c * ldw;
        for (int p = 0; p < kc / 2; p++) {
            uint32_t v;
            memcpy(&v, wc + 2 * p, sizeof v); // rows of odd k are only 2-byte aligned
            tile[p * 16 + c] = v;
        }
        if (kc & 1) tile[(kc / 2) * 16 + c] = wc[kc - 1];
    }
}

/* The block's B tiles: panel j (16 columns) holds kcp / 32 tiles, tile s at
 * (j * steps + s) * AMX_TILE_WORDS, element [p][c] the 32-bit pair (w[c][32s + 2p],
 * w[c][32s + 2p + 1]), the even element in the low half as tdpbf16ps pairs them. Depth past kc
 * and columns past cols (up to a multiple of 32) are 0, which adds exactly nothing. */
static void amx_pack_b(uint32_t *block, const uint16_t *w, long ldw, int kc, int cols) {
    const int steps = (kc + AMX_KSTEP - 1) / AMX_KSTEP;
    const int colsp = (cols + AMX_NR - 1) / AMX_NR * AMX_NR;
    for (int c0 = 0; c0 < colsp; c0 += 16) {
        const int nc = cols - c0 < 16 ? (cols > c0 ? cols - c0 : 0) : 16;
        for (int s = 0; s < steps; s++) {
            uint32_t *tile = block + ((long)(c0 / 16) * steps + s) * AMX_TILE_WORDS;
            const int kk = kc - s * AMX_KSTEP < AMX_KSTEP ? kc - s * AMX_KSTEP : AMX_KSTEP;
            const uint16_t *ws = w + (long)c0 * ldw + (long)s * AMX_KSTEP;
            if (nc == 16 && kk == AMX_KSTEP)
                amx_pack_tile_whole(tile, ws, ldw);
            else
                amx_pack_tile_part(tile, ws, ldw, kk, nc);
        }
    }
}

/* strip (AMX_MR, kcp) <- x rows [0, mr) (., ldx), columns [0, kc); the rest 0. */
static void amx_pack_a(uint16_t *strip, const uint16_t *x, long ldx, int mr, int kc, int kcp) {
    for (int r = 0; r < AMX_MR; r++) {
        uint16_t *s = strip + (long)r * kcp;
        const int have = r < mr ? kc : 0;
        if (have) memcpy(s, x + (long)r * ldx, sizeof(uint16_t) * (size_t)have);
        memset(s + have, 0, sizeof(uint16_t) * (size_t)(kcp - have));
    }
}

/* The k loop of a micro-block: C tiles 0-3 += a (32 rows, stride lda elements) @ the panels b0
 * and b1 (16 columns each), steps of 32. */
static inline __attribute__((always_inline)) void
amx_steps(const uint16_t *a, long lda, const uint32_t *b0, const uint32_t *b1, int steps) {
    const long sa = lda * (long)sizeof(uint16_t);
    for (int s = 0; s < steps; s++) {
        _tile_loadd(4, a + (long)s * AMX_KSTEP, sa);
        _tile_loadd(6, b0 + (long)s * AMX_TILE_WORDS, 64);
        _tile_loadd(5, a + 16 * lda + (long)s * AMX_KSTEP, sa);
        _tile_loadd(7, b1 + (long)s * AMX_TILE_WORDS, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
}

/* y (mr, ldy) [0, cols) += the micro-block's product. A whole block (32 x 32) accumulates on y
 * in the tiles; a partial one starts from zero, goes through c, and adds only what exists. */
static void amx_block(float *y, long ldy, const uint16_t *a, long lda, const uint32_t *b0,
                      const uint32_t *b1, int steps, int mr, int cols) {
    const long sy = ldy * (long)sizeof(float);
    if (mr == AMX_MR && cols == AMX_NR) {
        _tile_loadd(0, y, sy);
        _tile_loadd(1, y + 16, sy);
        _tile_loadd(2, y + 16 * ldy, sy);
        _tile_loadd(3, y + 16 * ldy + 16, sy);
        amx_steps(a, lda, b0, b1, steps);
        _tile_stored(0, y, sy);
        _tile_stored(1, y + 16, sy);
        _tile_stored(2, y + 16 * ldy, sy);
        _tile_stored(3, y + 16 * ldy + 16, sy);
        return;
    }
    float c[AMX_MR][AMX_NR] __attribute__((aligned(64)));
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    amx_steps(a, lda, b0, b1, steps);
    const long sc = AMX_NR * (long)sizeof(float);
    _tile_stored(0, &c[0][0], sc);
    _tile_stored(1, &c[0][16], sc);
    _tile_stored(2, &c[16][0], sc);
    _tile_stored(3, &c[16][16], sc);
    const __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
    const __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xFFFF : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
    for (int r = 0; r < mr; r++) {
        float *yr = y + (long)r * ldy;
        _mm512_mask_storeu_ps(yr, m0,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(m0, yr), _mm512_load_ps(c[r])));
        _mm512_mask_storeu_ps(
            yr + 16, m1,
            _mm512_add_ps(_mm512_maskz_loadu_ps(m1, yr + 16), _mm512_load_ps(c[r] + 16)));
    }
}

static void gemm_bf16_amxbf16(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows,
                              int k, int n, void *pack) {
    const int kc_max = amx_kc(k);
    uint32_t *block = pack;                                            // (AMX_NC / 16) panels
    uint16_t *strip = (uint16_t *)(block + (long)AMX_NC * kc_max / 2); // (AMX_MR, kcp)
    // Tile state is per thread and ldtilecfg zeroes it: configure on every call.
    amx_configure();
    for (int k0 = 0; k0 < k; k0 += kc_max) {
        const int kc = k - k0 < kc_max ? k - k0 : kc_max;
        const int steps = (kc + AMX_KSTEP - 1) / AMX_KSTEP, kcp = steps * AMX_KSTEP;
        const long panel_words = (long)steps * AMX_TILE_WORDS;
        for (int n0 = 0; n0 < n; n0 += AMX_NC) {
            const int nc = n - n0 < AMX_NC ? n - n0 : AMX_NC;
            amx_pack_b(block, w + (long)n0 * k + k0, k, kc, nc);
            for (int r0 = 0; r0 < rows; r0 += AMX_MR) {
                const int mr = rows - r0 < AMX_MR ? rows - r0 : AMX_MR;
                // Whole strips of whole steps are read in place, row-major; others padded.
                const uint16_t *a = x + (long)r0 * k + k0;
                long lda = k;
                if (mr < AMX_MR || kc != kcp) {
                    amx_pack_a(strip, a, k, mr, kc, kcp);
                    a = strip, lda = kcp;
                }
                for (int j0 = 0; j0 < nc; j0 += AMX_NR) {
                    const uint32_t *b0 = block + (long)(j0 / 16) * panel_words;
                    amx_block(y + (long)r0 * ldy + n0 + j0, ldy, a, lda, b0, b0 + panel_words,
                              steps, mr, nc - j0 < AMX_NR ? nc - j0 : AMX_NR);
                }
            }
        }
    }
    _tile_release();
}

const cpu_matmul_kernels cpu_matmul_amxbf16 = {
    .gemv_f32 = gemv_f32_avx512,
    .round_bf16 = round_bf16_avx512,
    .gemv_bf16 = gemv_bf16_avx512bf16,
    .gemm_bf16 = gemm_bf16_amxbf16,
    .gemm_bf16_pack_bytes = gemm_bf16_pack_bytes_amxbf16,
    .quantize_q8 = quantize_q8_avx512,
    .gemv_q8 = gemv_q8_avx512vnni,
    .gemv_blocks = gemv_blocks_avx512vnni,
    .gemm_blocks = gemm_blocks_avx512vnni,
    .gemm_blocks_pack_bytes = gemm_blocks_pack_bytes_avx512vnni,
};
