/* Reference twins of the backend ops (see ref_ops.h): the slowest, plainest version of each op,
 * written from the formulas with double accumulation so a backend's error is measured against
 * something much more accurate than itself. Frozen: change only to fix a proven bug. */
#include "kernels/ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ref_embed(float *out, const int32_t *tokens, const int32_t *positions, const float *wte,
               const float *wpe, int rows, int C, int vocab_begin, int vocab_end) {
    for (int r = 0; r < rows; r++) {
        int tok = tokens[r];
        for (int c = 0; c < C; c++) {
            double v = 0.0;
            if (tok >= vocab_begin && tok < vocab_end) v += wte[(long)(tok - vocab_begin) * C + c];
            if (wpe) v += wpe[(long)positions[r] * C + c];
            out[(long)r * C + c] = (float)v;
        }
    }
}

static void ref_layernorm_row(float *out, const float *x, const float *gamma, const float *beta,
                              int C, float eps) {
    double mean = 0.0;
    for (int c = 0; c < C; c++)
        mean += x[c];
    mean /= C;
    double var = 0.0;
    for (int c = 0; c < C; c++)
        var += (x[c] - mean) * (x[c] - mean);
    var /= C;
    double rstd = 1.0 / sqrt(var + (double)eps);
    for (int c = 0; c < C; c++)
        out[c] = (float)((x[c] - mean) * rstd * gamma[c] + beta[c]);
}

void ref_layernorm(float *out, const float *in, const float *gamma, const float *beta, int rows,
                   int C, float eps) {
    for (int r = 0; r < rows; r++)
        ref_layernorm_row(out + (long)r * C, in + (long)r * C, gamma, beta, C, eps);
}

void ref_residual_layernorm(float *residual, float *norm_out, const float *delta,
                            const float *gamma, const float *beta, int rows, int C, float eps) {
    for (long i = 0; i < (long)rows * C; i++)
        residual[i] = residual[i] + delta[i];
    if (norm_out) ref_layernorm(norm_out, residual, gamma, beta, rows, C, eps);
}

void ref_matmul(float *out, const float *in, const float *w, const float *bias, int rows,
                int in_dim, int out_dim) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_dim; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int i = 0; i < in_dim; i++)
                acc += (double)in[(long)r * in_dim + i] * w[(long)o * in_dim + i];
            out[(long)r * out_dim + o] = (float)acc;
        }
}

void ref_matmul_int8(float *out, const float *in, const int8_t *q, const float *scale,
                     const float *bias, int rows, int in_dim, int out_dim) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_dim; o++) {
            double acc = 0.0;
            for (int i = 0; i < in_dim; i++)
                acc += (double)in[(long)r * in_dim + i] * q[(long)o * in_dim + i];
            acc *= scale[o];
            if (bias) acc += bias[o];
            out[(long)r * out_dim + o] = (float)acc;
        }
}

float ref_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float ref_f16_to_f32(uint16_t h) {
    int sign = (h >> 15) & 1, exp = (h >> 10) & 31, mant = h & 1023;
    double v;
    if (exp == 0)
        v = ldexp((double)mant, -24); // subnormal
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(1.0 + mant / 1024.0, exp - 15);
    return (float)(sign ? -v : v);
}

void ref_weight_to_f32(float *out, weight_view w, long rows, long cols) {
    for (long r = 0; r < rows; r++)
        for (long c = 0; c < cols; c++) {
            long i = r * cols + c;
            switch (w.type) {
            case DTYPE_F32: out[i] = ((const float *)w.data)[i]; break;
            case DTYPE_INT8: {
                const long groups = w.group ? (cols + w.group - 1) / w.group : 1;
                const float s = w.group ? w.scale[r * groups + c / w.group] : w.scale[r];
                out[i] = (float)((const int8_t *)w.data)[i] * s;
                break;
            }
            case DTYPE_BF16: out[i] = ref_bf16_to_f32(((const uint16_t *)w.data)[i]); break;
            case DTYPE_F16: out[i] = ref_f16_to_f32(((const uint16_t *)w.data)[i]); break;
            default: abort();
            }
        }
}

void ref_matmul_view(float *out, const float *in, weight_view w, const float *bias, int rows,
                     int in_dim, int out_dim) {
    if (w.type == DTYPE_INT8 && w.group == 0) {
        ref_matmul_int8(out, in, w.data, w.scale, bias, rows, in_dim, out_dim);
        return;
    }
    float *wf = malloc(sizeof(float) * (size_t)in_dim * (size_t)out_dim);
    if (!wf) abort();
    ref_weight_to_f32(wf, w, out_dim, in_dim);
    ref_matmul(out, in, wf, bias, rows, in_dim, out_dim);
    free(wf);
}

void ref_quantize_q8(int8_t *q, float *d, const float *x, int rows, int k, int block) {
    const int blocks = (k + block - 1) / block;
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < blocks; b++) {
            const int c0 = b * block, c1 = c0 + block < k ? c0 + block : k;
            float amax = 0.0f;
            for (int c = c0; c < c1; c++) {
                float a = fabsf(x[(long)r * k + c]);
                if (a > amax) amax = a;
            }
            const float scale = amax / 127.0f;
            const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
            d[(long)r * blocks + b] = scale;
            for (int c = c0; c < c1; c++) {
                double v = nearbyint((double)(x[(long)r * k + c] * inv)); // ties to even
                q[(long)r * k + c] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
            }
        }
}

/* int8 weights against activations in int8 blocks: exact block sums, scales in double. */
static void ref_matmul_q8(float *out, const float *in, weight_view w, const float *bias, int rows,
                          int in_dim, int out_dim) {
    const int block = w.act_block, blocks = (in_dim + block - 1) / block;
    const int groups = w.group ? (in_dim + w.group - 1) / w.group : 1;
    int8_t *q = malloc((size_t)rows * (size_t)in_dim);
    float *d = malloc(sizeof(float) * (size_t)rows * (size_t)blocks);
    if (!q || !d) abort();
    ref_quantize_q8(q, d, in, rows, in_dim, block);
    const int8_t *wq = w.data;
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_dim; o++) {
            double acc = 0.0;
            for (int b = 0; b < blocks; b++) {
                const int c0 = b * block, c1 = c0 + block < in_dim ? c0 + block : in_dim;
                long isum = 0;
                for (int c = c0; c < c1; c++)
                    isum += (long)q[(long)r * in_dim + c] * wq[(long)o * in_dim + c];
                const double s = w.group ? w.scale[(long)o * groups + c0 / w.group] : w.scale[o];
                acc += (double)d[(long)r * blocks + b] * s * (double)isum;
            }
            if (bias) acc += bias[o];
            out[(long)r * out_dim + o] = (float)acc;
        }
    free(q), free(d);
}

/* One of ggml's blocks read from its bytes (ggml's block_q8_0, block_q4_0, block_q4_1): the
 * 32 quants as the integers they stand for (q4_0: nibble - 8), its d and m. */
static void ref_block_read(const unsigned char *b, dtype type, int q[32], double *d, double *m) {
    uint16_t h;
    memcpy(&h, b, 2);
    *d = ref_f16_to_f32(h), *m = 0.0;
    if (type == DTYPE_Q8_0) {
        for (int i = 0; i < 32; i++)
            q[i] = (int8_t)b[2 + i];
        return;
    }
    const unsigned char *qs = b + (type == DTYPE_Q4_1 ? 4 : 2);
    if (type == DTYPE_Q4_1) memcpy(&h, b + 2, 2), *m = ref_f16_to_f32(h);
    const int bias = type == DTYPE_Q4_0 ? 8 : 0;
    for (int i = 0; i < 16; i++)
        q[i] = (qs[i] & 15) - bias, q[i + 16] = (qs[i] >> 4) - bias;
}

/* Sub-block j (of 8) of one of ggml's block_q4_K super-blocks read from its bytes, as the
 * q4_1-like block it is: nibbles q, d * sc and -dmin * mn in double. Bytes 0-1 d, 2-3 dmin,
 * 4-15 the eight 6-bit sc and mn (j < 4: low six bits of bytes 4 + j and 8 + j; j >= 4: the
 * nibbles of byte 8 + j, low for sc and high for mn, over the top two bits of bytes j and
 * j + 4), 16-143 the nibbles: 32 bytes per two sub-blocks, low nibbles the first. */
static void ref_k4_read(const unsigned char *b, int j, int q[32], double *d, double *m) {
    uint16_t h;
    memcpy(&h, b, 2);
    const double dd = ref_f16_to_f32(h);
    memcpy(&h, b + 2, 2);
    const double dmin = ref_f16_to_f32(h);
    const unsigned char *s = b + 4;
    int sc, mn;
    if (j < 4)
        sc = s[j] % 64, mn = s[j + 4] % 64;
    else
        sc = s[j + 4] % 16 + s[j - 4] / 64 * 16, mn = s[j + 4] / 16 + s[j] / 64 * 16;
    *d = dd * sc, *m = -dmin * mn;
    for (int i = 0; i < 32; i++) {
        const unsigned char byte = b[16 + (j / 2) * 32 + i];
        q[i] = j % 2 ? byte / 16 : byte % 16;
    }
}

void ref_q4k_dequantize(double *out, const void *blocks, long n) {
    for (long b = 0; b < n / 32; b++) {
        int q[32];
        double d, m;
        ref_k4_read((const unsigned char *)blocks + b / 8 * 144, (int)(b % 8), q, &d, &m);
        for (int i = 0; i < 32; i++)
            out[b * 32 + i] = d * q[i] + m;
    }
}

/* Block-format weights against activations in int8 blocks of 32 (ggml's q8_0): exact block
 * sums, scales in double; q4_1 adds m * d_x * sum q_x per block, and q4_k per sub-block. */
static void ref_matmul_blocks(float *out, const float *in, weight_view w, const float *bias,
                              int rows, int in_dim, int out_dim) {
    const int blocks = in_dim / 32;
    const size_t bb = w.type == DTYPE_Q8_0 ? 34 : w.type == DTYPE_Q4_0 ? 18 : 20;
    int8_t *q = malloc((size_t)rows * (size_t)in_dim);
    float *d = malloc(sizeof(float) * (size_t)rows * (size_t)blocks);
    if (!q || !d || in_dim % (w.type == DTYPE_Q4_K ? 256 : 32)) abort();
    ref_quantize_q8(q, d, in, rows, in_dim, 32);
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out_dim; o++) {
            double acc = 0.0;
            for (int b = 0; b < blocks; b++) {
                int wq[32];
                double wd, wm;
                if (w.type == DTYPE_Q4_K) /* 144 bytes per 8 blocks of 32 */
                    ref_k4_read((const unsigned char *)w.data + ((size_t)o * blocks + b) / 8 * 144,
                                b % 8, wq, &wd, &wm);
                else
                    ref_block_read((const unsigned char *)w.data + ((size_t)o * blocks + b) * bb,
                                   w.type, wq, &wd, &wm);
                long isum = 0, xsum = 0;
                for (int i = 0; i < 32; i++) {
                    isum += (long)q[(long)r * in_dim + b * 32 + i] * wq[i];
                    xsum += q[(long)r * in_dim + b * 32 + i];
                }
                const double dx = d[(long)r * blocks + b];
                acc += dx * wd * (double)isum + wm * dx * (double)xsum;
            }
            if (bias) acc += bias[o];
            out[(long)r * out_dim + o] = (float)acc;
        }
    free(q), free(d);
}

void ref_matmul_cpu(float *out, const float *in, weight_view w, const float *bias, int rows,
                    int in_dim, int out_dim) {
    if (w.type == DTYPE_Q8_0 || w.type == DTYPE_Q4_0 || w.type == DTYPE_Q4_1 ||
        w.type == DTYPE_Q4_K) {
        ref_matmul_blocks(out, in, w, bias, rows, in_dim, out_dim);
        return;
    }
    if (w.type == DTYPE_INT8 && w.act_block) {
        ref_matmul_q8(out, in, w, bias, rows, in_dim, out_dim);
        return;
    }
    if (w.type != DTYPE_BF16) {
        ref_matmul_view(out, in, w, bias, rows, in_dim, out_dim);
        return;
    }
    // bf16: activations rounded to nearest even on the bf16 grid, then exact products
    const long n = (long)rows * in_dim;
    float *xr = malloc(sizeof(float) * (size_t)n);
    if (!xr) abort();
    for (long i = 0; i < n; i++) {
        float x = in[i];
        uint32_t bits;
        memcpy(&bits, &x, sizeof bits);
        if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
            xr[i] = x; // NaN stays NaN
            continue;
        }
        // ties to even: add half an ulp of the bf16 grid minus one, plus the kept low bit
        bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
        memcpy(&xr[i], &bits, sizeof bits);
    }
    ref_matmul_view(out, xr, w, bias, rows, in_dim, out_dim);
    free(xr);
}

void ref_bias_gelu(float *inout, const float *bias, int rows, int cols) {
    const double k = sqrt(2.0 / M_PI);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double x = (double)inout[(long)r * cols + c] + (bias ? bias[c] : 0.0);
            inout[(long)r * cols + c] =
                (float)(0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x))));
        }
}

void ref_attention(float *out, const float *qkv, int batch, int T, int heads, int head_dim) {
    const long C = (long)heads * head_dim, row = 3 * C;
    const double scale = 1.0 / sqrt((double)head_dim);
    double *p = malloc(sizeof(double) * (size_t)T);
    if (!p) abort();
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((long)b * T + t) * row + (long)h * head_dim;
                double maxv = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const float *k = qkv + ((long)b * T + s) * row + C + (long)h * head_dim;
                    double dot = 0.0;
                    for (int d = 0; d < head_dim; d++)
                        dot += (double)q[d] * k[d];
                    p[s] = dot * scale;
                    if (p[s] > maxv) maxv = p[s];
                }
                double sum = 0.0;
                for (int s = 0; s <= t; s++) {
                    p[s] = exp(p[s] - maxv);
                    sum += p[s];
                }
                float *o = out + ((long)b * T + t) * C + (long)h * head_dim;
                for (int d = 0; d < head_dim; d++) {
                    double acc = 0.0;
                    for (int s = 0; s <= t; s++)
                        acc += p[s] * qkv[((long)b * T + s) * row + 2 * C + (long)h * head_dim + d];
                    o[d] = (float)(acc / sum);
                }
            }
    free(p);
}

void ref_rmsnorm(float *out, const float *in, const float *w, int rows, int C, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *x = in + (long)r * C;
        double ms = 0.0;
        for (int c = 0; c < C; c++)
            ms += (double)x[c] * x[c];
        ms /= C;
        double inv = 1.0 / sqrt(ms + (double)eps);
        for (int c = 0; c < C; c++)
            out[(long)r * C + c] = (float)(x[c] * inv * w[c]);
    }
}

void ref_residual_rmsnorm(float *residual, float *norm_out, const float *delta, const float *w,
                          int rows, int C, float eps) {
    for (long i = 0; i < (long)rows * C; i++)
        residual[i] = residual[i] + delta[i];
    if (norm_out) ref_rmsnorm(norm_out, residual, w, rows, C, eps);
}

void ref_swiglu(float *out, const float *gate_up, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double g = gate_up[(long)r * 2 * cols + c], u = gate_up[(long)r * 2 * cols + cols + c];
            double sigmoid = g >= 0 ? 1.0 / (1.0 + exp(-g)) : exp(g) / (1.0 + exp(g));
            out[(long)r * cols + c] = (float)(g * sigmoid * u);
        }
}

void ref_gather_rows(float *out, const float *in, const int32_t *idx, int n, int C) {
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            out[(long)i * C + c] = in[(long)idx[i] * C + c];
}

void ref_scatter_add_rows(float *out, const float *in, const int32_t *idx, const float *weight,
                          int n, int C) {
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++) {
            float *o = &out[(long)idx[i] * C + c];
            *o = (float)((double)*o + (double)weight[i] * in[(long)i * C + c]);
        }
}

void ref_rope_inv_freq(double *inv_freq, int head_dim, double theta, int llama3, double factor,
                       double low, double high, double orig) {
    for (int i = 0; i < head_dim / 2; i++) {
        double inv = exp(-log(theta) * (2.0 * i) / head_dim);
        if (llama3) {
            double s = (orig * inv / (2.0 * M_PI) - low) / (high - low);
            s = s < 0.0 ? 0.0 : s > 1.0 ? 1.0 : s;
            inv *= (1.0 - s) / factor + s;
        }
        inv_freq[i] = inv;
    }
}

/* x rotated to pos in double, into out (hd). */
static void ref_rope_double(double *out, const float *x, int hd, int pos, const float *inv_freq) {
    const int half = hd / 2;
    for (int i = 0; i < half; i++) {
        double a = (double)pos * inv_freq[i];
        out[i] = x[i] * cos(a) - x[i + half] * sin(a);
        out[i + half] = x[i + half] * cos(a) + x[i] * sin(a);
    }
}

void ref_rope_apply(float *out, const float *x, int hd, int pos, const float *inv_freq) {
    double *tmp = calloc((size_t)hd, sizeof(double));
    if (!tmp) abort();
    ref_rope_double(tmp, x, hd, pos, inv_freq);
    for (int d = 0; d < hd; d++)
        out[d] = (float)tmp[d];
    free(tmp);
}

/* x rounded to a float with `bits` significant bits (the leading one included), to nearest
 * even, no exponent below min_exp (where a subnormal format's spacing stops shrinking). */
static float ref_round_bits(float x, int bits, int min_exp) {
    if (x == 0.0f || !isfinite(x)) return x;
    int e;
    frexp((double)x, &e); // |x| in [2^(e-1), 2^e)
    if (e - 1 < min_exp) e = min_exp + 1;
    const double ulp = ldexp(1.0, e - bits);
    return (float)(nearbyint((double)x / ulp) * ulp); // exact: the quotient fits a double
}

void ref_kv_round(float *out, const float *x, int hd, dtype type) {
    float amax = 0.0f;
    for (int d = 0; d < hd; d++)
        amax = fabsf(x[d]) > amax ? fabsf(x[d]) : amax;
    const float s = amax / 127.0f;
    for (int d = 0; d < hd; d++)
        switch (type) {
        case DTYPE_F32: out[d] = x[d]; break;
        case DTYPE_BF16: out[d] = ref_round_bits(x[d], 8, -126); break;
        case DTYPE_F16: out[d] = ref_round_bits(x[d], 11, -14); break;
        case DTYPE_INT8: out[d] = s > 0.0f ? nearbyintf(x[d] / s) * s : 0.0f; break;
        default: abort(); // the block formats are never a cache type
        }
}

void ref_kv_decode(float *out, const void *row, int hd, dtype type) {
    const unsigned char *b = row;
    float s = 0.0f;
    if (type == DTYPE_INT8) memcpy(&s, b + kv_row_bytes(type, hd) - sizeof s, sizeof s);
    for (int d = 0; d < hd; d++) {
        uint16_t h;
        switch (type) {
        case DTYPE_F32: memcpy(&out[d], b + 4 * d, sizeof(float)); break;
        case DTYPE_BF16: memcpy(&h, b + 2 * d, 2), out[d] = ref_bf16_to_f32(h); break;
        case DTYPE_F16: memcpy(&h, b + 2 * d, 2), out[d] = ref_f16_to_f32(h); break;
        case DTYPE_INT8: out[d] = (float)(int8_t)b[d] * s; break;
        default: abort();
        }
    }
}

void ref_attention_gqa(float *out, const float *qkv, int batch, int T, int heads, int kv_heads,
                       int head_dim, const float *inv_freq) {
    ref_attention_gqa_kv(out, qkv, batch, T, heads, kv_heads, head_dim, inv_freq, DTYPE_F32);
}

void ref_attention_gqa_kv(float *out, const float *qkv, int batch, int T, int heads, int kv_heads,
                          int head_dim, const float *inv_freq, dtype type) {
    const int hd = head_dim, group = heads / kv_heads;
    const long C = (long)heads * hd, KC = (long)kv_heads * hd, row = C + 2 * KC;
    const double scale = 1.0 / sqrt((double)hd);
    // q and k of every row, rotated (or copied) in double, then plain attention on those.
    double *q = malloc(sizeof(double) * (size_t)batch * T * C);
    double *k = malloc(sizeof(double) * (size_t)batch * T * KC);
    double *p = malloc(sizeof(double) * (size_t)T);
    // the values as the cache holds them (type not f32), and one key row in float
    float *v = malloc(sizeof(float) * (size_t)batch * T * KC), *kf = malloc(sizeof(float) * hd);
    if (!q || !k || !p || !v || !kf) abort();
    for (long r = 0; r < (long)batch * T; r++) {
        const float *x = qkv + r * row;
        const int pos = (int)(r % T);
        for (int h = 0; h < heads; h++) {
            double *qh = q + r * C + (long)h * hd;
            if (inv_freq)
                ref_rope_double(qh, x + (long)h * hd, hd, pos, inv_freq);
            else
                for (int d = 0; d < hd; d++)
                    qh[d] = x[(long)h * hd + d];
        }
        for (int g = 0; g < kv_heads; g++) {
            const float *kx = x + C + (long)g * hd;
            double *kg = k + r * KC + (long)g * hd;
            if (inv_freq)
                ref_rope_double(kg, kx, hd, pos, inv_freq);
            else
                for (int d = 0; d < hd; d++)
                    kg[d] = kx[d];
            if (type == DTYPE_F32) continue;
            // the cache rounds the float key (rotated in float by the kernels) and the value
            for (int d = 0; d < hd; d++)
                kf[d] = (float)kg[d];
            ref_kv_round(kf, kf, hd, type);
            ref_kv_round(v + r * KC + (long)g * hd, x + C + KC + (long)g * hd, hd, type);
            for (int d = 0; d < hd; d++)
                kg[d] = kf[d];
        }
    }
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++) {
            const int g = h / group;
            for (int t = 0; t < T; t++) {
                const double *qt = q + ((long)b * T + t) * C + (long)h * hd;
                double maxv = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const double *ks = k + ((long)b * T + s) * KC + (long)g * hd;
                    double dot = 0.0;
                    for (int d = 0; d < hd; d++)
                        dot += qt[d] * ks[d];
                    p[s] = dot * scale;
                    if (p[s] > maxv) maxv = p[s];
                }
                double sum = 0.0;
                for (int s = 0; s <= t; s++) {
                    p[s] = exp(p[s] - maxv);
                    sum += p[s];
                }
                float *o = out + ((long)b * T + t) * C + (long)h * hd;
                for (int d = 0; d < hd; d++) {
                    double acc = 0.0;
                    for (int s = 0; s <= t; s++)
                        acc += p[s] * (type == DTYPE_F32
                                           ? qkv[((long)b * T + s) * row + C + KC + (long)g * hd + d]
                                           : v[((long)b * T + s) * KC + (long)g * hd + d]);
                    o[d] = (float)(acc / sum);
                }
            }
        }
    free(q), free(k), free(p), free(v), free(kf);
}

void ref_argmax(float *max_val, int32_t *max_idx, const float *logits, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        const float *x = logits + (long)r * cols;
        int best = 0;
        for (int c = 1; c < cols; c++) {
            // NaN is larger than every number and the first NaN wins (numpy's and PyTorch's
            // argmax); written as two plain tests so it does not share code with the backend
            if (isnan(x[best])) break;
            if (isnan(x[c]) || x[c] > x[best]) best = c;
        }
        max_val[r] = x[best];
        max_idx[r] = best;
    }
}

uint64_t ref_rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float ref_rng_uniform(uint64_t *state, float lo, float hi) {
    double u = (double)(ref_rng_next(state) >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
    return (float)(lo + (hi - lo) * u);
}

void ref_fill_uniform(float *x, long n, uint64_t *state, float lo, float hi) {
    for (long i = 0; i < n; i++)
        x[i] = ref_rng_uniform(state, lo, hi);
}

double ref_rel_error(const float *a, const float *ref, long n) {
    double maxdiff = 0.0, maxref = 0.0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (d > maxdiff || d != d) maxdiff = d != d ? INFINITY : d; // NaN counts as failure
        if (fabs((double)ref[i]) > maxref) maxref = fabs((double)ref[i]);
    }
    return maxref > 0.0 ? maxdiff / maxref : maxdiff;
}
