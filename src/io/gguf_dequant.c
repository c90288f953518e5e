/* Dequantization of ggml blocks to fp32 (see gguf_dequant.h). Each function reads one block
 * as ggml lays it out and computes in float32 in the same order as gguf-py's numpy code: the
 * scale products (d * sub-scale, then * q) are exact for every type but Q6_K, which has no
 * addition after its product, so fused multiply-add cannot change a result. */
#include "io/gguf_dequant.h"

#include <string.h>

#include "io/safetensors.h"
#include "kernels/quant_blocks.h"

#define QK 32   /* elements per block of the 32-element types */
#define QK_K 256 /* elements per super-block of the k-quants */

static float f16_at(const uint8_t *p) {
    return safetensors_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static void dq_f32(const uint8_t *b, float *y) {
    uint32_t bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                    (uint32_t)b[3] << 24;
    memcpy(y, &bits, sizeof bits);
}

static void dq_f16(const uint8_t *b, float *y) { y[0] = f16_at(b); }

static void dq_bf16(const uint8_t *b, float *y) {
    y[0] = safetensors_bf16_to_f32((uint16_t)(b[0] | b[1] << 8));
}

/* The 32 four-bit values of a 16-byte array: low nibbles first, then high nibbles. */
static void nibbles32(const uint8_t *qs, int q[QK]) {
    for (int j = 0; j < QK / 2; j++) {
        q[j] = qs[j] & 0x0F;
        q[j + QK / 2] = qs[j] >> 4;
    }
}

/* The two ways a 32-value block scales its integers: y = d * (q - zero), and y = d * q + m. */
static void scaled32(const int q[QK], float d, int zero, float *y) {
    for (int j = 0; j < QK; j++) y[j] = d * (float)(q[j] - zero);
}

static void affine32(const int q[QK], float d, float m, float *y) {
    for (int j = 0; j < QK; j++) y[j] = d * (float)q[j] + m;
}

/* The fifth bits of Q5_0/Q5_1: bit j of the little-endian 32-bit qh goes to value j. */
static void fifth_bits(const uint8_t *qh, int q[QK]) {
    uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
                 (uint32_t)qh[3] << 24;
    for (int j = 0; j < QK; j++) q[j] |= (int)((h >> j) & 1u) << 4;
}

/* Q4_0: f16 d, 16 bytes of nibbles; y = d * (q - 8). */
static void dq_q4_0(const uint8_t *b, float *y) {
    int q[QK];
    nibbles32(b + 2, q);
    scaled32(q, f16_at(b), 8, y);
}

/* Q4_1: f16 d, f16 m, 16 bytes of nibbles; y = d * q + m. */
static void dq_q4_1(const uint8_t *b, float *y) {
    int q[QK];
    nibbles32(b + 4, q);
    affine32(q, f16_at(b), f16_at(b + 2), y);
}

/* Q5_0: f16 d, 4 bytes of fifth bits, 16 bytes of nibbles; y = d * (q - 16). */
static void dq_q5_0(const uint8_t *b, float *y) {
    int q[QK];
    nibbles32(b + 6, q);
    fifth_bits(b + 2, q);
    scaled32(q, f16_at(b), 16, y);
}

/* Q5_1: f16 d, f16 m, 4 bytes of fifth bits, 16 bytes of nibbles; y = d * q + m. */
static void dq_q5_1(const uint8_t *b, float *y) {
    int q[QK];
    nibbles32(b + 8, q);
    fifth_bits(b + 4, q);
    affine32(q, f16_at(b), f16_at(b + 2), y);
}

/* Q8_0: f16 d, 32 signed bytes; y = q * d. */
static void dq_q8_0(const uint8_t *b, float *y) {
    float d = f16_at(b);
    for (int j = 0; j < QK; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* Two-bit values of the k-quants: value (h, s, l) of each 128-value half h is bits 2s..2s+1
 * of byte h * 32 + l (l < 32, s < 4). */
static int crumb(const uint8_t *qs, int i) {
    int h = i / 128, s = (i % 128) / 32, l = i % 32;
    return (qs[h * 32 + l] >> (2 * s)) & 3;
}

/* Q2_K: 16 bytes of (4-bit min << 4 | 4-bit scale) per 16 values, 64 bytes of two-bit values,
 * f16 d, f16 dmin; y = (d * scale) * q - dmin * min. */
static void dq_q2_k(const uint8_t *b, float *y) {
    const uint8_t *sc = b, *qs = b + 16;
    float d = f16_at(b + 80), dmin = f16_at(b + 82);
    for (int i = 0; i < QK_K; i++) {
        float dl = d * (float)(sc[i / 16] & 0x0F), ml = dmin * (float)(sc[i / 16] >> 4);
        y[i] = dl * (float)crumb(qs, i) - ml;
    }
}

/* Q3_K: 32 bytes of high-bit masks, 64 bytes of two-bit values, 12 bytes holding sixteen
 * 6-bit scales (low four bits in bytes 0-7 by nibble, high two bits in bytes 8-11 by pairs),
 * f16 d. A clear mask bit subtracts 4; y = (d * (scale - 32)) * q. */
static void dq_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;
    float d = f16_at(b + 108);
    int scale[16];
    for (int k = 0; k < 16; k++) {
        int lo = (sc[k % 8] >> (4 * (k / 8))) & 0x0F;
        int hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 0x03;
        scale[k] = (lo | hi << 4) - 32;
    }
    for (int i = 0; i < QK_K; i++) {
        float dl = d * (float)scale[i / 16];
        int high = (hmask[i % 32] >> (i / 32)) & 1;
        int q = crumb(qs, i) - (high ? 0 : 4);
        y[i] = dl * (float)q;
    }
}

/* The 4-bit values of Q4_K/Q5_K: each 64 values are 32 bytes, low nibbles then high. */
static int nibble_k(const uint8_t *qs, int i) {
    int c = i / 64, k = (i % 64) / 32, l = i % 32;
    return (qs[c * 32 + l] >> (4 * k)) & 0x0F;
}

/* Q4_K: f16 d, f16 dmin, 12 bytes of scales and mins, 128 bytes of nibbles;
 * y = (d * scale) * q - dmin * min, per 32 values: the q4_k weight format's own dequantiser
 * (kernels/quant_blocks.h), which computes q * (d * scale) + -(dmin * min), the same bits. */
static void dq_q4_k(const uint8_t *b, float *y) { qblocks_dequantize(DTYPE_Q4_K, y, b, 1, QK_K); }

/* Q5_K: as Q4_K with 32 bytes of fifth bits before the nibbles: bit i / 32 of byte i % 32. */
static void dq_q5_k(const uint8_t *b, float *y) {
    float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t *qh = b + 16, *qs = b + 48;
    int sc[8], mn[8];
    qblocks_k4_scales(b + 4, sc, mn);
    for (int i = 0; i < QK_K; i++) {
        float dl = d * (float)sc[i / 32], ml = dmin * (float)mn[i / 32];
        int q = nibble_k(qs, i) | ((qh[i % 32] >> (i / 32)) & 1) << 4;
        y[i] = dl * (float)q - ml;
    }
}

/* Q6_K: 128 bytes of low nibbles (each 128 values: 64 bytes, low nibbles then high), 64 bytes
 * of two-bit high parts (as crumb()), 16 signed 8-bit scales, f16 d;
 * y = (d * scale) * (q - 32), per 16 values. */
static void dq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = f16_at(b + 208);
    for (int i = 0; i < QK_K; i++) {
        int h = i / 128, k = (i % 128) / 64, l = i % 64;
        int lo = (ql[h * 64 + l] >> (4 * k)) & 0x0F;
        int q = (lo | crumb(qh, i) << 4) - 32;
        float dl = d * (float)sc[i / 16];
        y[i] = dl * (float)q;
    }
}

/* The one table of readable types, by ggml id. */
static const struct {
    uint32_t id;
    gguf_qtype q;
} qtypes[] = {
    {GGML_TYPE_F32, {"F32", 1, 4, dq_f32}},
    {GGML_TYPE_F16, {"F16", 1, 2, dq_f16}},
    {GGML_TYPE_BF16, {"BF16", 1, 2, dq_bf16}},
    {GGML_TYPE_Q8_0, {"Q8_0", QK, 2 + QK, dq_q8_0}},
    {GGML_TYPE_Q4_0, {"Q4_0", QK, 2 + QK / 2, dq_q4_0}},
    {GGML_TYPE_Q4_1, {"Q4_1", QK, 4 + QK / 2, dq_q4_1}},
    {GGML_TYPE_Q5_0, {"Q5_0", QK, 6 + QK / 2, dq_q5_0}},
    {GGML_TYPE_Q5_1, {"Q5_1", QK, 8 + QK / 2, dq_q5_1}},
    {GGML_TYPE_Q2_K, {"Q2_K", QK_K, QK_K / 16 + QK_K / 4 + 4, dq_q2_k}},
    {GGML_TYPE_Q3_K, {"Q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2, dq_q3_k}},
    {GGML_TYPE_Q4_K, {"Q4_K", QK_K, 4 + 12 + QK_K / 2, dq_q4_k}},
    {GGML_TYPE_Q5_K, {"Q5_K", QK_K, 4 + 12 + QK_K / 8 + QK_K / 2, dq_q5_k}},
    {GGML_TYPE_Q6_K, {"Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, dq_q6_k}},
};

const gguf_qtype *gguf_qtype_get(uint32_t type) {
    for (size_t i = 0; i < sizeof qtypes / sizeof qtypes[0]; i++)
        if (qtypes[i].id == type) return &qtypes[i].q;
    return NULL;
}

const char *gguf_qtype_names(void) {
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";
}

void gguf_dequant(const gguf_qtype *q, const uint8_t *src, uint64_t n_blocks, float *dst) {
    for (uint64_t b = 0; b < n_blocks; b++)
        q->dequant(src + b * q->block_bytes, dst + b * q->block_elems);
}
