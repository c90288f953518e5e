/* ggml's q8_0, q4_0, q4_1 and q4_k blocks: quantise (ggml's reference rules; q4_k min/max per
 * sub-block), unpack to a plane of int8 quants and fp32 scales (and mins) for the int8
 * kernels, pack back, dequantise. */
#include <math.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

/* A block's bytes: d (fp16), for q4_1 m (fp16), then the quants. The q4 nibbles are ggml's:
 * byte j holds value j in its low nibble and value j + 16 in its high one. */
enum { QHALF = QBLOCK / 2 };
/* A q4_k super-block's bytes: d and dmin (fp16), K4_SCALES bytes of eight 6-bit scales and
 * mins, then from K4_QS the nibbles: sub-block 2c is the low nibbles of bytes 32c..32c+31, sub-
 * block 2c + 1 their high nibbles (ggml's dequantize_row_q4_K). */
enum { K4_SUBS = QBLOCK_K / QBLOCK, K4_SCALES = 12, K4_QS = 4 + K4_SCALES };

int qblock_weights(dtype type) { return type == DTYPE_Q4_K ? QBLOCK_K : QBLOCK; }

size_t qblock_bytes(dtype type) {
    switch (type) {
    case DTYPE_Q8_0: return 2 + QBLOCK;
    case DTYPE_Q4_0: return 2 + QHALF;
    case DTYPE_Q4_1: return 4 + QHALF;
    case DTYPE_Q4_K: return K4_QS + QBLOCK_K / 2;
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

/* rint(r) in [0, hi], NaN to 0: a float-to-int conversion that cannot overflow. */
static int rint_in(float r, int hi) {
    if (!(r > 0.0f)) return 0;
    return r >= (float)hi ? hi : (int)rintf(r);
}

void qblocks_k4_scales(const uint8_t *s, int sc[8], int mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 0x3F;
        mn[j] = s[j + 4] & 0x3F;
        sc[j + 4] = (s[j + 8] & 0x0F) | (s[j] >> 6) << 4;
        mn[j + 4] = (s[j + 8] >> 4) | (s[j + 4] >> 6) << 4;
    }
}

static void k4_scales_put(uint8_t *s, const int sc[K4_SUBS], const int mn[K4_SUBS]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 0x0F) | (mn[j + 4] & 0x0F) << 4);
    }
}

/* One q4_k super-block from its quants (nibbles, 256) and its scales: d, dmin and the 6-bit
 * sc, mn of each sub-block. */
static void k4_put(uint8_t *b, const int8_t *q, float d, float dmin, const int sc[K4_SUBS],
                   const int mn[K4_SUBS]) {
    half_put(b, d);
    half_put(b + 2, dmin);
    k4_scales_put(b + 4, sc, mn);
    uint8_t *qs = b + K4_QS;
    for (int c = 0; c < K4_SUBS / 2; c++)
        for (int l = 0; l < QBLOCK; l++)
            qs[c * QBLOCK + l] =
                (uint8_t)((q[2 * c * QBLOCK + l] & 0x0F) | q[(2 * c + 1) * QBLOCK + l] << 4);
}

/* One q4_k super-block from 256 fp32 values: per sub-block the range [lo, hi] with lo =
 * min(0, min x) (ggml subtracts a min that is never negative), its scale (hi - lo) / 15 and
 * min -lo in 6 bits of d = max scale / 63 and dmin = max min / 63 (fp16, as stored), then each
 * value to the nearest of the 16 levels the stored scales give. */
static void k4_quantize(uint8_t *b, const float *x) {
    float scale[K4_SUBS], minv[K4_SUBS], smax = 0.0f, mmax = 0.0f;
    for (int j = 0; j < K4_SUBS; j++) {
        float lo = 0.0f, hi = -INFINITY;
        for (int i = 0; i < QBLOCK; i++)
            lo = fminf(lo, x[j * QBLOCK + i]), hi = fmaxf(hi, x[j * QBLOCK + i]);
        scale[j] = hi > lo ? (hi - lo) / 15.0f : 0.0f, minv[j] = -lo;
        smax = fmaxf(smax, scale[j]), mmax = fmaxf(mmax, minv[j]);
    }
    uint8_t h[4];
    half_put(h, smax / 63.0f);
    half_put(h + 2, mmax / 63.0f);
    const float d = float_of(h), dmin = float_of(h + 2);
    int sc[K4_SUBS], mn[K4_SUBS];
    int8_t q[QBLOCK_K];
    for (int j = 0; j < K4_SUBS; j++) {
        sc[j] = d > 0.0f ? rint_in(scale[j] / d, 63) : 0;
        mn[j] = dmin > 0.0f ? rint_in(minv[j] / dmin, 63) : 0;
        const float ds = d * (float)sc[j], dm = dmin * (float)mn[j];
        for (int i = 0; i < QBLOCK; i++) {
            const float v = x[j * QBLOCK + i];
            q[j * QBLOCK + i] = (int8_t)(ds > 0.0f ? rint_in((v + dm) / ds, 15) : 0);
        }
    }
    k4_put(b, q, d, dmin, sc, mn);
}

void qblocks_quantize(dtype type, void *out, const float *x, long rows, long cols) {
    const long nb = cols / qblock_weights(type);
    const size_t bb = qblock_bytes(type);
    uint8_t *o = out;
    for (long r = 0; r < rows; r++)
        for (long b = 0; b < nb; b++) {
            const float *xb = x + r * cols + b * qblock_weights(type);
            uint8_t *ob = o + (size_t)(r * nb + b) * bb;
            if (type == DTYPE_Q4_K) {
                k4_quantize(ob, xb);
                continue;
            }
            int8_t q[QBLOCK];
            float d, m;
            block_quantize(type, xb, q, &d, &m);
            block_put(type, ob, q, d, m);
        }
}

/* One q4_k super-block as eight q4_1 blocks of the planes: d * sc and -(dmin * mn), exact. */
static void k4_unpack(int8_t *q, float *d, float *m, const uint8_t *p) {
    const float dd = float_of(p), dm = float_of(p + 2);
    int sc[K4_SUBS], mn[K4_SUBS];
    qblocks_k4_scales(p + 4, sc, mn);
    for (int j = 0; j < K4_SUBS; j++)
        d[j] = dd * (float)sc[j], m[j] = -(dm * (float)mn[j]);
    const uint8_t *qs = p + K4_QS;
    for (int c = 0; c < K4_SUBS / 2; c++) {
        for (int l = 0; l < QBLOCK; l++)
            q[2 * c * QBLOCK + l] = (int8_t)(qs[c * QBLOCK + l] & 0x0F);
        for (int l = 0; l < QBLOCK; l++)
            q[(2 * c + 1) * QBLOCK + l] = (int8_t)(qs[c * QBLOCK + l] >> 4);
    }
}

void qblocks_unpack(dtype type, int8_t *q, float *d, float *m, const void *in, long rows,
                    long cols) {
    const size_t bb = qblock_bytes(type);
    const uint8_t *p = in;
    if (type == DTYPE_Q4_K) {
        const long nk = rows * (cols / QBLOCK_K);
        for (long b = 0; b < nk; b++, p += bb)
            k4_unpack(q + b * QBLOCK_K, d + b * K4_SUBS, m + b * K4_SUBS, p);
        return;
    }
    const long nb = rows * (cols / QBLOCK);
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

/* An fp16 d and 6-bit k with d * k[j] == v[j] for each sub-block, the largest k first (a
 * quantiser gives the largest sub-scale 63); when none is exact, d = vmax / 63 and k rounded. */
static void k4_scale_find(const float v[K4_SUBS], float *d, int k[K4_SUBS]) {
    float vmax = 0.0f;
    for (int j = 0; j < K4_SUBS; j++)
        if (fabsf(v[j]) > fabsf(vmax)) vmax = v[j];
    for (int s = 63; s >= 1; s--) {
        uint8_t h[2];
        half_put(h, vmax / (float)s);
        *d = float_of(h);
        int exact = 1;
        for (int j = 0; j < K4_SUBS; j++) {
            k[j] = *d != 0.0f ? rint_in(v[j] / *d, 63) : 0;
            exact = exact && *d * (float)k[j] == v[j];
        }
        if (exact) return;
    }
    uint8_t h[2];
    half_put(h, vmax / 63.0f);
    *d = float_of(h);
    for (int j = 0; j < K4_SUBS; j++)
        k[j] = *d != 0.0f ? rint_in(v[j] / *d, 63) : 0;
}

void qblocks_pack(dtype type, void *out, const int8_t *q, const float *d, const float *m,
                  long rows, long cols) {
    const long nb = rows * (cols / QBLOCK);
    const size_t bb = qblock_bytes(type);
    uint8_t *o = out;
    if (type == DTYPE_Q4_K) {
        for (long b = 0; b < nb / K4_SUBS; b++) {
            const float *db = d + b * K4_SUBS, *mb = m + b * K4_SUBS;
            float negm[K4_SUBS], dd, dm;
            int sc[K4_SUBS], mn[K4_SUBS];
            for (int j = 0; j < K4_SUBS; j++)
                negm[j] = -mb[j];
            k4_scale_find(db, &dd, sc);
            k4_scale_find(negm, &dm, mn);
            k4_put(o + (size_t)b * bb, q + b * QBLOCK_K, dd, dm, sc, mn);
        }
        return;
    }
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
    const int bw = qblock_weights(type);
    const long nb = rows * (cols / bw);
    const size_t bb = qblock_bytes(type);
    const uint8_t *p = in;
    for (long b = 0; b < nb; b++, p += bb) {
        int8_t q[QBLOCK_K];
        float d[K4_SUBS], m[K4_SUBS] = {0};
        qblocks_unpack(type, q, d, m, p, 1, bw);
        float *o = out + b * bw;
        for (int i = 0; i < bw; i++)
            o[i] = qblock_has_mins(type) ? (float)q[i] * d[i / QBLOCK] + m[i / QBLOCK]
                                         : (float)q[i] * d[i / QBLOCK];
    }
}
