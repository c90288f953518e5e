/* ggml's q8_0, q4_0 and q4_1 blocks: quantise (ggml's reference rules), unpack to a plane of
 * int8 quants and fp32 scales for the int8 kernels, pack back, dequantise. */
#include <math.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

/* A block's bytes: d (fp16), for q4_1 m (fp16), then the quants. The q4 nibbles are ggml's:
 * byte j holds value j in its low nibble and value j + 16 in its high one. */
enum { QHALF = QBLOCK / 2 };

size_t qblock_bytes(dtype type) {
    switch (type) {
    case DTYPE_Q8_0: return 2 + QBLOCK;
    case DTYPE_Q4_0: return 2 + QHALF;
    case DTYPE_Q4_1: return 4 + QHALF;
    case DTYPE_F32:
    case DTYPE_INT8:
    case DTYPE_BF16:
    case DTYPE_F16: break;
    }
    return 0;
}

static uint16_t half_of(float x) {
    uint16_t h;
    convert_f32_to_f16(&h, &x, 1);
    return h;
}

/* The fp16 at p widened, exactly, inline: the decode GEMV unpacks one scale per 32 weights,
 * and a call per scale cost a third of q8_0's decode. The exponent field moves into fp32's and
 * a multiply by 2^112 rebiases it (exact for normals and subnormals alike); Inf and NaN keep
 * an all-ones exponent. convert_f16_to_f32 gives the same bits (test_quant_blocks). */
static inline float float_of(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7FFFu;
    uint32_t bits;
    float f;
    if (em >= 0x7C00u) {
        bits = sign | 0x7F800000u | (em & 0x3FFu) << 13;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    bits = em << 13;
    memcpy(&f, &bits, sizeof f);
    f *= 0x1p112f;
    memcpy(&bits, &f, sizeof bits);
    bits |= sign;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void half_put(uint8_t *p, float x) {
    const uint16_t h = half_of(x);
    memcpy(p, &h, sizeof h);
}

/* One block's quants from 32 fp32 values, written into 32 int8 slots (q4: the nibble). */
static void block_quantize(dtype type, const float *x, int8_t *q, float *d, float *m) {
    if (type == DTYPE_Q8_0) {
        float amax = 0.0f;
        for (int i = 0; i < QBLOCK; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        const float s = amax / 127.0f, id = s != 0.0f ? 1.0f / s : 0.0f;
        for (int i = 0; i < QBLOCK; i++)
            q[i] = (int8_t)roundf(x[i] * id);
        *d = s, *m = 0.0f;
    } else if (type == DTYPE_Q4_0) {
        float amax = 0.0f, vmax = 0.0f;
        for (int i = 0; i < QBLOCK; i++)
            if (amax < fabsf(x[i])) amax = fabsf(x[i]), vmax = x[i];
        const float s = vmax / -8.0f, id = s != 0.0f ? 1.0f / s : 0.0f;
        for (int i = 0; i < QBLOCK; i++) {
            const int v = (int8_t)(x[i] * id + 8.5f); // ggml truncates toward zero here
            q[i] = (int8_t)(v < 15 ? v : 15);
        }
        *d = s, *m = 0.0f;
    } else { /* DTYPE_Q4_1 */
        float lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < QBLOCK; i++)
            lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
        const float s = (hi - lo) / 15.0f, id = s != 0.0f ? 1.0f / s : 0.0f;
        for (int i = 0; i < QBLOCK; i++) {
            const int v = (int8_t)((x[i] - lo) * id + 0.5f);
            q[i] = (int8_t)(v < 15 ? v : 15);
        }
        *d = s, *m = lo;
    }
}

/* Writes one block from its quants (q4: nibbles 0..15) and scales. */
static void block_put(dtype type, uint8_t *b, const int8_t *q, float d, float m) {
    half_put(b, d);
    if (type == DTYPE_Q8_0) {
        memcpy(b + 2, q, QBLOCK);
        return;
    }
    uint8_t *qs = b + (type == DTYPE_Q4_1 ? 4 : 2);
    if (type == DTYPE_Q4_1) half_put(b + 2, m);
    for (int j = 0; j < QHALF; j++)
        qs[j] = (uint8_t)((q[j] & 0x0F) | (q[j + QHALF] << 4));
}

void qblocks_quantize(dtype type, void *out, const float *x, long rows, long cols) {
    const long nb = cols / QBLOCK;
    const size_t bb = qblock_bytes(type);
    uint8_t *o = out;
    for (long r = 0; r < rows; r++)
        for (long b = 0; b < nb; b++) {
            int8_t q[QBLOCK];
            float d, m;
            block_quantize(type, x + r * cols + b * QBLOCK, q, &d, &m);
            block_put(type, o + (size_t)(r * nb + b) * bb, q, d, m);
        }
}

void qblocks_unpack(dtype type, int8_t *q, float *d, float *m, const void *in, long rows,
                    long cols) {
    const long nb = rows * (cols / QBLOCK);
    const size_t bb = qblock_bytes(type);
    const uint8_t *p = in;
    // a row is a whole number of blocks, so the planes are the blocks in order
    for (long b = 0; b < nb; b++, p += bb) {
        int8_t *qb = q + b * QBLOCK;
        d[b] = float_of(p);
        if (type == DTYPE_Q8_0) {
            memcpy(qb, p + 2, QBLOCK);
            continue;
        }
        const uint8_t *qs = p + (type == DTYPE_Q4_1 ? 4 : 2);
        const int bias = type == DTYPE_Q4_0 ? 8 : 0;
        if (type == DTYPE_Q4_1) m[b] = float_of(p + 2);
        // two loops of 16 bytes, which the compiler turns into a few vector instructions
        for (int j = 0; j < QHALF; j++)
            qb[j] = (int8_t)((qs[j] & 0x0F) - bias);
        for (int j = 0; j < QHALF; j++)
            qb[j + QHALF] = (int8_t)((qs[j] >> 4) - bias);
    }
}

void qblocks_pack(dtype type, void *out, const int8_t *q, const float *d, const float *m,
                  long rows, long cols) {
    const long nb = rows * (cols / QBLOCK);
    const size_t bb = qblock_bytes(type);
    uint8_t *o = out;
    for (long b = 0; b < nb; b++) {
        int8_t nib[QBLOCK];
        const int8_t *qb = q + b * QBLOCK;
        if (type == DTYPE_Q4_0) { // the plane holds nibble - 8
            for (int i = 0; i < QBLOCK; i++)
                nib[i] = (int8_t)(qb[i] + 8);
            qb = nib;
        }
        block_put(type, o + (size_t)b * bb, qb, d[b], m ? m[b] : 0.0f);
    }
}

void qblocks_dequantize(dtype type, float *out, const void *in, long rows, long cols) {
    const long nb = rows * (cols / QBLOCK);
    const size_t bb = qblock_bytes(type);
    const uint8_t *p = in;
    for (long b = 0; b < nb; b++, p += bb) {
        int8_t q[QBLOCK];
        float d, m = 0.0f;
        qblocks_unpack(type, q, &d, &m, p, 1, QBLOCK);
        for (int i = 0; i < QBLOCK; i++)
            out[b * QBLOCK + i] = type == DTYPE_Q4_1 ? (float)q[i] * d + m : (float)q[i] * d;
    }
}
