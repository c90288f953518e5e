/* The matmul family for AVX-512 with VNNI and BF16: bf16 dot products (vdpbf16ps) for the bf16
 * GEMV and GEMM; everything else is the VNNI level's. vdpbf16ps multiplies 32 bf16 pairs into
 * 16 fp32 lanes, each product exact in fp32 and summed in fp32, so these kernels compute the
 * product matmul_kernels.h defines; it treats denormal inputs and results as zero, which only
 * matters below 2^-126 (docs/kernels.md, "bf16 on the CPU"). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

/* ---- GEMV (decode) ---------------------------------------------------------------------- */

/* 32 bf16 at p, those outside m read as 0 (and not read at all). */
static inline __m512bh bf16x32_load(const uint16_t *p, __mmask32 m) {
    return (__m512bh)_mm512_maskz_loadu_epi16(m, p);
}

/* y[r * ldy] += x[r] . wo for r < NR (1..4). Two accumulators per activation row cover
 * vdpbf16ps's latency; the tail of k under 32 (odd k included: the masked-off half of the last
 * pair is 0 in both operands) uses masked loads, which read nothing past the end. */
static inline __attribute__((always_inline)) void dot_rows_dp(float *y, long ldy, const uint16_t *x,
                                                              const uint16_t *wo, int k, int NR) {
    const __mmask32 all = 0xFFFFFFFFu;
    __m512 acc[4][2];
    for (int i = 0; i < NR; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    int c = 0;
    for (; c + 64 <= k; c += 64) {
        const __m512bh w0 = bf16x32_load(wo + c, all), w1 = bf16x32_load(wo + c + 32, all);
        for (int i = 0; i < NR; i++) {
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], bf16x32_load(x + (long)i * k + c, all), w0);
            acc[i][1] =
                _mm512_dpbf16_ps(acc[i][1], bf16x32_load(x + (long)i * k + c + 32, all), w1);
        }
    }
    for (; c < k; c += 32) {
        const __mmask32 m = k - c >= 32 ? all : (__mmask32)((1u << (k - c)) - 1);
        const __m512bh w0 = bf16x32_load(wo + c, m);
        for (int i = 0; i < NR; i++)
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], bf16x32_load(x + (long)i * k + c, m), w0);
    }
    for (int i = 0; i < NR; i++)
        y[(long)i * ldy] += _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
}

/* The bytes of activation rows that stay in L1 (32 KiB on Zen 4, 48 on Sapphire Rapids) beside
 * the weight stream, and the bytes of weights a block holds for the passes after the first. */
enum { GEMV_X_L1_BYTES = 16 * 1024, GEMV_BLOCK_BYTES = 64 * 1024 };

/* One weight row at a time, as gemv_f32_avx512 (matmul_avx512.c says why): a single sequential
 * stream of weights, each weight vector shared by up to four activation rows, and more rows
 * taking the same weight row again from L1. When the rows do not fit in L1 beside the stream
 * (4 rows of k = 3072 are 24 KiB, and the stream evicts them: 12 against 30 GB/s measured),
 * the weights go by blocks of about 64 KiB: the first group of rows that fits streams a block
 * from memory, the next groups reread it from L2 (17 GB/s at 4 rows). */
void gemv_bf16_avx512bf16(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows, int k,
                          int n) {
    const long row_bytes = (long)k * (long)sizeof(uint16_t);
    // Rows per pass over a block of weights: all of them when they fit in L1, in one block.
    int span = rows, block = n;
    if (rows * row_bytes > GEMV_X_L1_BYTES) {
        span = (int)(GEMV_X_L1_BYTES / row_bytes);
        span = span < 1 ? 1 : span;
        block = (int)(GEMV_BLOCK_BYTES / row_bytes) + 1;
    }
    for (int o0 = 0; o0 < n; o0 += block) {
        const int o1 = n - o0 < block ? n : o0 + block;
        for (int g0 = 0; g0 < rows; g0 += span) {
            const int g1 = rows - g0 < span ? rows : g0 + span;
            for (int o = o0; o < o1; o++) {
                const uint16_t *wo = w + (long)o * k;
                for (int r0 = g0; r0 < g1; r0 += 4) {
                    float *yr = y + (long)r0 * ldy + o;
                    const uint16_t *xr = x + (long)r0 * k;
                    switch (g1 - r0 < 4 ? g1 - r0 : 4) {
                    case 1: dot_rows_dp(yr, ldy, xr, wo, k, 1); break;
                    case 2: dot_rows_dp(yr, ldy, xr, wo, k, 2); break;
                    case 3: dot_rows_dp(yr, ldy, xr, wo, k, 3); break;
                    default: dot_rows_dp(yr, ldy, xr, wo, k, 4); break;
                    }
                }
            }
        }
    }
}

/* ---- GEMM (prefill) ----------------------------------------------------------------------
 * The micro-kernel keeps a tile of GEMM_MR activation rows x GEMM_NR output columns in 24
 * zmm accumulators (8 rows x 3 vectors of 16 columns). Per pair of k it loads the three weight
 * vectors of the panel (48 columns x one pair, 192 bytes) and, per row, broadcasts that row's
 * pair (x[2p], x[2p+1]) as one 32-bit value: 3 loads and 8 broadcasts feed 24 vdpbf16ps.
 *
 * Weights are packed per call, one block of GEMM_NC columns x kc (<= GEMM_KC) at a time, into
 * panels of 48 columns: panel[p][c] is the 32-bit pair (w[c][2p], w[c][2p+1]), the even element
 * in the low half as vdpbf16ps pairs them; an odd kc's last pair is (w[c][kc - 1], 0) and
 * columns past n are 0. The block (GEMM_NC x GEMM_KC x 2 bytes = 360 KiB) stays in L2 while
 * every 8-row strip of activations (8 x kc x 2 = 12 KiB, in L1) passes over its panels; the
 * activations are read in place, row-major. */
enum { GEMM_MR = 8, GEMM_NV = 3, GEMM_NR = 16 * GEMM_NV, GEMM_NC = 5 * GEMM_NR, GEMM_KC = 768 };

/* The k-block: k split into equal blocks of at most GEMM_KC, rounded up to an even length so
 * that every block but the last is whole pairs. */
static int gemm_kc(int k) {
    const int blocks = (k + GEMM_KC - 1) / GEMM_KC, kc = (k + blocks - 1) / blocks;
    return kc + (kc & 1);
}

static long gemm_bf16_pack_bytes_avx512bf16(int k) {
    return (long)GEMM_NC * gemm_kc(k) * (long)sizeof(uint16_t); // a multiple of 64
}

/* panel (pairs, GEMM_NR) 32-bit pairs <- weight rows w[0..cols) (., ldw), columns [0, kc). */
static void gemm_panel_pack(uint32_t *panel, const uint16_t *w, long ldw, int kc, int cols) {
    const int pairs = (kc + 1) / 2, whole = kc / 2;
    for (int c = 0; c < cols; c++) {
        const uint16_t *wc = w + (long)c * ldw;
        for (int p = 0; p < whole; p++) {
            uint32_t v;
            memcpy(&v, wc + 2 * p, sizeof v); // rows of odd k are only 2-byte aligned
            panel[(long)p * GEMM_NR + c] = v;
        }
        if (kc & 1) panel[(long)whole * GEMM_NR + c] = wc[kc - 1];
    }
    for (int p = 0; p < pairs; p++)
        for (int c = cols; c < GEMM_NR; c++)
            panel[(long)p * GEMM_NR + c] = 0;
}

/* The pair of row xr at p as a 32-bit broadcast. */
static inline __m512bh pair_broadcast(const uint16_t *xr, int p) {
    int32_t v;
    memcpy(&v, xr + 2 * p, sizeof v);
    return (__m512bh)_mm512_set1_epi32(v);
}

/* y (MR, ldy) [0, cols) += x (MR, ldx) [0, kc) @ panel^T: MR rows (1..8) and NV vectors
 * (1..3) known at compile time, cols > 16 * (NV - 1) the columns of the last vector that exist
 * (masked, so nothing past them is read or written). The accumulators start from y. */
static inline __attribute__((always_inline)) void gemm_tile(float *y, long ldy, const uint16_t *x,
                                                            long ldx, const uint32_t *panel, int kc,
                                                            int cols, int MR, int NV) {
    const int whole = kc / 2;
    const __mmask16 last =
        (__mmask16)(cols - 16 * (NV - 1) >= 16 ? 0xFFFF : (1u << (cols - 16 * (NV - 1))) - 1);
    __m512 acc[GEMM_MR][GEMM_NV];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NV; j++)
            acc[i][j] = j == NV - 1 ? _mm512_maskz_loadu_ps(last, y + i * ldy + 16 * j)
                                    : _mm512_loadu_ps(y + i * ldy + 16 * j);
    for (int p = 0; p < whole; p++) {
        const uint32_t *bp = panel + (long)p * GEMM_NR;
        __m512bh b[GEMM_NV];
        for (int j = 0; j < NV; j++)
            b[j] = (__m512bh)_mm512_load_si512(bp + 16 * j);
        for (int i = 0; i < MR; i++) {
            const __m512bh a = pair_broadcast(x + i * ldx, p);
            for (int j = 0; j < NV; j++)
                acc[i][j] = _mm512_dpbf16_ps(acc[i][j], a, b[j]);
        }
    }
    if (kc & 1) { // the last pair is (x[kc - 1], 0): nothing past the row is read
        const uint32_t *bp = panel + (long)whole * GEMM_NR;
        for (int i = 0; i < MR; i++) {
            const __m512bh a = (__m512bh)_mm512_set1_epi32(x[i * ldx + kc - 1]);
            for (int j = 0; j < NV; j++)
                acc[i][j] =
                    _mm512_dpbf16_ps(acc[i][j], a, (__m512bh)_mm512_load_si512(bp + 16 * j));
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NV; j++)
            if (j == NV - 1)
                _mm512_mask_storeu_ps(y + i * ldy + 16 * j, last, acc[i][j]);
            else
                _mm512_storeu_ps(y + i * ldy + 16 * j, acc[i][j]);
}

/* One case per (rows, vectors) so that every tile keeps its accumulators in registers. */
#define GEMM_TILE_CASE(MR_, NV_)                                                                   \
    case (MR_)*4 + (NV_):                                                                          \
        gemm_tile(y, ldy, x, ldx, panel, kc, cols, MR_, NV_);                                      \
        break
#define GEMM_TILE_ROW(MR_)                                                                         \
    GEMM_TILE_CASE(MR_, 1);                                                                        \
    GEMM_TILE_CASE(MR_, 2);                                                                        \
    GEMM_TILE_CASE(MR_, 3)

static void gemm_tile_any(float *y, long ldy, const uint16_t *x, long ldx, const uint32_t *panel,
                          int kc, int cols, int mr) {
    switch (mr * 4 + (cols + 15) / 16) {
        GEMM_TILE_ROW(1);
        GEMM_TILE_ROW(2);
        GEMM_TILE_ROW(3);
        GEMM_TILE_ROW(4);
        GEMM_TILE_ROW(5);
        GEMM_TILE_ROW(6);
        GEMM_TILE_ROW(7);
        GEMM_TILE_ROW(8);
    default: break; // unreachable: 1 <= mr <= 8 and 1 <= cols <= 48
    }
}

static void gemm_bf16_avx512bf16(float *y, long ldy, const uint16_t *x, const uint16_t *w, int rows,
                                 int k, int n, void *pack) {
    uint32_t *block = pack; // (GEMM_NC / GEMM_NR panels) x (pairs, GEMM_NR)
    const int kc_max = gemm_kc(k);
    for (int k0 = 0; k0 < k; k0 += kc_max) {
        const int kc = k - k0 < kc_max ? k - k0 : kc_max, pairs = (kc + 1) / 2;
        const long panel_words = (long)pairs * GEMM_NR;
        for (int n0 = 0; n0 < n; n0 += GEMM_NC) {
            const int nc = n - n0 < GEMM_NC ? n - n0 : GEMM_NC;
            for (int j0 = 0; j0 < nc; j0 += GEMM_NR)
                gemm_panel_pack(block + (j0 / GEMM_NR) * panel_words, w + (long)(n0 + j0) * k + k0,
                                k, kc, nc - j0 < GEMM_NR ? nc - j0 : GEMM_NR);
            for (int r0 = 0; r0 < rows; r0 += GEMM_MR)
                for (int j0 = 0; j0 < nc; j0 += GEMM_NR)
                    gemm_tile_any(y + (long)r0 * ldy + n0 + j0, ldy, x + (long)r0 * k + k0, k,
                                  block + (j0 / GEMM_NR) * panel_words, kc,
                                  nc - j0 < GEMM_NR ? nc - j0 : GEMM_NR,
                                  rows - r0 < GEMM_MR ? rows - r0 : GEMM_MR);
        }
    }
}

const cpu_matmul_kernels cpu_matmul_avx512bf16 = {
    .gemv_f32 = gemv_f32_avx512,
    .round_bf16 = round_bf16_avx512, // integer rounding: vcvtneps2bf16 flushes denormals
    .gemv_bf16 = gemv_bf16_avx512bf16,
    .gemm_bf16 = gemm_bf16_avx512bf16,
    .gemm_bf16_pack_bytes = gemm_bf16_pack_bytes_avx512bf16,
    .quantize_q8 = quantize_q8_avx512,
    .gemv_q8 = gemv_q8_avx512vnni,
    .gemv_blocks = gemv_blocks_avx512vnni,
    .gemm_blocks = gemm_blocks_avx512vnni,
    .gemm_blocks_pack_bytes = gemm_blocks_pack_bytes_avx512vnni,
};
