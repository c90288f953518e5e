/* The reference forward of ref_model.h: the textbook GPT-2 block in double precision. */
#include "ref_model.h"
#include "ref_quant.h"

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const ref_tensor_names[REF_N_TENSORS] = {
    "wte",   "wpe",   "ln1_g", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
    "ln2_g", "ln2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b", "lnf_g",  "lnf_b"};

static long ref_tensor_elems(const model_config *c, int i) {
    long L = c->layers, C = c->embd, M = c->mlp, V = c->vocab;
    switch (i) {
    case REF_WTE: return V * C;
    case REF_WPE: return (long)c->ctx * C;
    case REF_QKV_W: return L * 3 * C * C;
    case REF_QKV_B: return L * 3 * C;
    case REF_PROJ_W: return L * C * C;
    case REF_FC1_W: return L * M * C;
    case REF_FC1_B: return L * M;
    case REF_FC2_W: return L * C * M;
    case REF_LNF_G:
    case REF_LNF_B: return C;
    default: return L * C; /* ln*, proj_b, fc2_b */
    }
}

void ref_model_synthetic(ref_model *r, const model_config *cfg, uint64_t seed) {
    memset(r, 0, sizeof *r);
    /* The init kind and scale of each tensor come from the one-rank size table; the values
     * come from the documented formula over global indices. */
    model m;
    shard_geom g;
    memset(&m, 0, sizeof m);
    shard_geom_init(&g, cfg, 1, 0, 1, 0);
    model_tensor_table(&m, cfg, &g, DTYPE_F32);
    r->cfg = *cfg;
    for (int i = 0; i < REF_N_TENSORS; i++) {
        const tensor_desc *t = NULL;
        for (int k = 0; k < m.n_tensors; k++)
            if (!strcmp(m.tensors[k].name, ref_tensor_names[i])) t = &m.tensors[k];
        long n = ref_tensor_elems(cfg, i);
        r->t[i] = malloc((size_t)n * sizeof(float));
        for (long e = 0; e < n; e++)
            r->t[i][e] = synthetic_value(seed, ref_tensor_names[i], e, t->init, t->init_std);
    }
}

int ref_model_checkpoint(ref_model *r, const char *path) {
    memset(r, 0, sizeof *r);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return -1;
    const char *attrs[] = {"layers", "heads", "embd", "vocab", "ctx", "mlp"};
    int *dst[] = {&r->cfg.layers, &r->cfg.heads, &r->cfg.embd,
                  &r->cfg.vocab,  &r->cfg.ctx,   &r->cfg.mlp};
    for (int i = 0; i < 6; i++) {
        long long v = 0;
        hid_t a = H5Aopen(f, attrs[i], H5P_DEFAULT);
        H5Aread(a, H5T_NATIVE_LLONG, &v);
        H5Aclose(a);
        *dst[i] = (int)v;
    }
    double eps = 1e-5;
    hid_t a = H5Aopen(f, "ln_eps", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_DOUBLE, &eps);
    H5Aclose(a);
    r->cfg.ln_eps = (float)eps;
    r->cfg.norm = NORM_PRE;
    for (int i = 0; i < REF_N_TENSORS; i++) {
        char name[64];
        snprintf(name, sizeof name, "/weights/%s", ref_tensor_names[i]);
        r->t[i] = malloc((size_t)ref_tensor_elems(&r->cfg, i) * sizeof(float));
        hid_t d = H5Dopen(f, name, H5P_DEFAULT);
        if (d < 0 || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r->t[i]) < 0) {
            H5Fclose(f);
            return -1;
        }
        H5Dclose(d);
    }
    H5Fclose(f);
    return 0;
}

/* Rounds the float tensor w (rows, cols) through the double helper. */
static void round_float_weights(float *w, long rows, long cols, int group) {
    double *d = malloc((size_t)(rows * cols) * sizeof(double));
    for (long i = 0; i < rows * cols; i++)
        d[i] = w[i];
    ref_round_int8_weights(d, rows, cols, group);
    for (long i = 0; i < rows * cols; i++)
        w[i] = (float)d[i];
    free(d);
}

void ref_model_quantize_int8(ref_model *r) {
    const int mats[4] = {REF_QKV_W, REF_PROJ_W, REF_FC1_W, REF_FC2_W};
    const matrix_input inputs[4] = {MATRIX_INPUT_WHOLE, MATRIX_INPUT_HEADS, MATRIX_INPUT_WHOLE,
                                    MATRIX_INPUT_MLP};
    const long C = r->cfg.embd, M = r->cfg.mlp, V = r->cfg.vocab;
    const long cols[4] = {C, C, C, M};
    for (int k = 0; k < 4; k++) {
        const int8_layout q = model_int8_layout(&r->cfg, inputs[k]);
        round_float_weights(r->t[mats[k]], ref_tensor_elems(&r->cfg, mats[k]) / cols[k], cols[k],
                            q.group);
    }
    for (int k = 0; k < MATRIX_INPUT_KINDS; k++)
        r->act_block[k] = model_int8_layout(&r->cfg, (matrix_input)k).act_block;
    if (r->cfg.quantize_head) {
        r->head = malloc((size_t)(V * C) * sizeof(float));
        memcpy(r->head, r->t[REF_WTE], (size_t)(V * C) * sizeof(float));
        round_float_weights(r->head, V, C, model_int8_layout(&r->cfg, MATRIX_INPUT_WHOLE).group);
    }
}

void ref_model_free(ref_model *r) {
    for (int i = 0; i < REF_N_TENSORS; i++)
        free(r->t[i]);
    free(r->head);
    memset(r, 0, sizeof *r);
}

static void layernorm(double *out, const double *x, const float *g, const float *b, int C,
                      double eps) {
    double mean = 0, var = 0;
    for (int c = 0; c < C; c++)
        mean += x[c];
    mean /= C;
    for (int c = 0; c < C; c++)
        var += (x[c] - mean) * (x[c] - mean);
    var /= C;
    for (int c = 0; c < C; c++)
        out[c] = (x[c] - mean) / sqrt(var + eps) * g[c] + b[c];
}

/* y (out) = W (out, in) x + b, x first rounded to int8 blocks of act_block (0: as it is) */
static void linear(double *y, const double *x, const float *w, const float *b, int in, int out,
                   int act_block) {
    double *xq = malloc((size_t)in * sizeof(double));
    ref_round_int8_activations(xq, x, in, act_block);
    for (int o = 0; o < out; o++) {
        double s = b ? b[o] : 0.0;
        for (int i = 0; i < in; i++)
            s += (double)w[(long)o * in + i] * xq[i];
        y[o] = s;
    }
    free(xq);
}

void ref_model_forward(const ref_model *r, const int32_t *tokens, int n, double *logits) {
    const model_config *c = &r->cfg;
    const int C = c->embd, H = c->heads, hd = C / H, M = c->mlp, V = c->vocab;
    const int post = c->norm == NORM_POST;
    double *x = calloc((size_t)n * C, sizeof(double)), *h = calloc((size_t)n * C, sizeof(double));
    double *qkv = calloc((size_t)n * 3 * C, sizeof(double)),
           *att = calloc((size_t)n * C, sizeof(double));
    double *tmp = calloc((size_t)(M > C ? M : C) * 2, sizeof(double)),
           *p = calloc((size_t)n, sizeof(double));
    for (int t = 0; t < n; t++)
        for (int k = 0; k < C; k++)
            x[t * C + k] =
                (double)r->t[REF_WTE][(long)tokens[t] * C + k] + r->t[REF_WPE][(long)t * C + k];
    for (int l = 0; l < c->layers; l++) {
        const float *ln1g = r->t[REF_LN1_G] + l * C, *ln1b = r->t[REF_LN1_B] + l * C;
        const float *ln2g = r->t[REF_LN2_G] + l * C, *ln2b = r->t[REF_LN2_B] + l * C;
        for (int t = 0; t < n; t++) {
            if (post)
                memcpy(h + t * C, x + t * C, C * sizeof(double));
            else
                layernorm(h + t * C, x + t * C, ln1g, ln1b, C, c->ln_eps);
            linear(qkv + (long)t * 3 * C, h + t * C, r->t[REF_QKV_W] + (long)l * 3 * C * C,
                   r->t[REF_QKV_B] + (long)l * 3 * C, C, 3 * C, r->act_block[MATRIX_INPUT_WHOLE]);
        }
        for (int hh = 0; hh < H; hh++)
            for (int t = 0; t < n; t++) {
                const double *q = qkv + (long)t * 3 * C + hh * hd;
                double mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    const double *k = qkv + (long)s * 3 * C + C + hh * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++)
                        d += q[i] * k[i];
                    p[s] = d / sqrt((double)hd);
                    mx = fmax(mx, p[s]);
                }
                for (int s = 0; s <= t; s++)
                    sum += (p[s] = exp(p[s] - mx));
                for (int i = 0; i < hd; i++) {
                    double a = 0;
                    for (int s = 0; s <= t; s++)
                        a += p[s] / sum * qkv[(long)s * 3 * C + 2 * C + hh * hd + i];
                    att[t * C + hh * hd + i] = a;
                }
            }
        for (int t = 0; t < n; t++) {
            double *xt = x + t * C;
            linear(tmp, att + t * C, r->t[REF_PROJ_W] + (long)l * C * C, r->t[REF_PROJ_B] + l * C,
                   C, C, r->act_block[MATRIX_INPUT_HEADS]);
            for (int k = 0; k < C; k++)
                xt[k] += tmp[k];
            if (post) {
                layernorm(tmp, xt, ln1g, ln1b, C, c->ln_eps);
                memcpy(xt, tmp, C * sizeof(double));
                memcpy(h + t * C, xt, C * sizeof(double));
            } else {
                layernorm(h + t * C, xt, ln2g, ln2b, C, c->ln_eps);
            }
            linear(tmp, h + t * C, r->t[REF_FC1_W] + (long)l * M * C, r->t[REF_FC1_B] + (long)l * M,
                   C, M, r->act_block[MATRIX_INPUT_WHOLE]);
            for (int k = 0; k < M; k++) {
                double u = tmp[k];
                tmp[k] = 0.5 * u * (1.0 + tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)));
            }
            double *y = tmp + M;
            linear(y, tmp, r->t[REF_FC2_W] + (long)l * C * M, r->t[REF_FC2_B] + l * C, M, C,
                   r->act_block[MATRIX_INPUT_MLP]);
            for (int k = 0; k < C; k++)
                xt[k] += y[k];
            if (post) {
                layernorm(y, xt, ln2g, ln2b, C, c->ln_eps);
                memcpy(xt, y, C * sizeof(double));
            }
        }
    }
    for (int t = 0; t < n; t++) {
        layernorm(h + t * C, x + t * C, r->t[REF_LNF_G], r->t[REF_LNF_B], C, c->ln_eps);
        if (r->head) { /* the int8 copy, its input rounded as the other int8 products' */
            linear(logits + (long)t * V, h + t * C, r->head, NULL, C, V,
                   r->act_block[MATRIX_INPUT_WHOLE]);
            continue;
        }
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int k = 0; k < C; k++)
                s += h[t * C + k] * r->t[REF_WTE][(long)v * C + k];
            logits[(long)t * V + v] = s;
        }
    }
    free(x);
    free(h);
    free(qkv);
    free(att);
    free(tmp);
    free(p);
}

void ref_model_generate(const ref_model *r, const int32_t *prompt, int prompt_len, int new_tokens,
                        int32_t *out) {
    const int V = r->cfg.vocab;
    memcpy(out, prompt, (size_t)prompt_len * sizeof(int32_t));
    double *logits = malloc((size_t)(prompt_len + new_tokens) * V * sizeof(double));
    for (int s = 0; s < new_tokens; s++) {
        int n = prompt_len + s;
        ref_model_forward(r, out, n, logits);
        const double *row = logits + (long)(n - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        out[n] = best;
    }
    free(logits);
}
