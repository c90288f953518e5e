/* The reference forward of ref_llama.h: Hugging Face's LlamaForCausalLM written out as loops
 * in double precision. */
#include "ref_llama.h"
#include "ref_quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[RL_N] = {
    "wte",    "ln1_g",  "qkv_w",         "proj_w",     "ln2_g",        "gate_up_w", "down_w",
    "lnf_g",  "head_w", "router_w", "exp_gate_up_w", "exp_down_w", "sh_gate_up_w", "sh_down_w"};

static long elems(const model_config *c, int i) {
    const long L = c->layers, C = c->embd, M = c->mlp, V = c->vocab, hd = model_head_dim(c);
    switch (i) {
    case RL_WTE:
    case RL_HEAD: return V * C;
    case RL_QKV: return L * (c->heads + 2L * c->kv_heads) * hd * C;
    case RL_O: return L * C * c->heads * hd;
    case RL_GATE_UP: return L * 2 * M * C;
    case RL_DOWN: return L * C * M;
    case RL_LNF: return C;
    case RL_ROUTER: return L * (c->experts + (c->shared_mlp > 0)) * C;
    case RL_EXP_GU: return L * c->experts * 2 * M * C;
    case RL_EXP_DOWN: return L * c->experts * C * M;
    case RL_SH_GU: return L * 2 * c->shared_mlp * C;
    case RL_SH_DOWN: return L * C * c->shared_mlp;
    default: return L * C;
    }
}

/* Hugging Face's _compute_llama3_parameters, in double. */
static void inv_freq_fill(double *inv, int hd, const model_config *c) {
    for (int i = 0; i < hd / 2; i++) {
        inv[i] = pow(c->rope_theta, -2.0 * i / hd);
        if (!c->rope_scaled) continue;
        const rope_llama3 *s = &c->rope_scaling;
        double wavelen = 2 * M_PI / inv[i], orig = s->original_max_position_embeddings;
        if (wavelen > orig / s->low_freq_factor) {
            inv[i] /= s->factor;
        } else if (wavelen >= orig / s->high_freq_factor) {
            double sm =
                (orig / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
            inv[i] = (1 - sm) * inv[i] / s->factor + sm * inv[i];
        }
    }
}

void ref_llama_synthetic(ref_llama *r, const model_config *cfg, uint64_t seed) {
    memset(r, 0, sizeof *r);
    /* Init kinds and scales from the one-rank size table; values from the documented formula
     * over global indices. */
    model m;
    shard_geom g;
    memset(&m, 0, sizeof m);
    memset(r, 0, sizeof *r);
    shard_geom_init(&g, cfg, 1, 0, 1, 0);
    model_tensor_table(&m, cfg, &g, DTYPE_F32);
    r->cfg = *cfg;
    for (int i = 0; i < RL_N; i++) {
        const tensor_desc *t = NULL;
        for (int k = 0; k < m.n_tensors; k++)
            if (!strcmp(m.tensors[k].name, NAMES[i]) && m.tensors[k].present) t = &m.tensors[k];
        if (!t) continue; /* head_w when tied */
        long n = elems(cfg, i);
        r->t[i] = malloc((size_t)n * sizeof(double));
        for (long e = 0; e < n; e++)
            r->t[i][e] = synthetic_value(seed, NAMES[i], e, t->init, t->init_std);
    }
    const int hd = model_head_dim(cfg);
    r->inv_freq = malloc((size_t)hd / 2 * sizeof(double));
    inv_freq_fill(r->inv_freq, hd, cfg);
}

void ref_llama_quantize_int8(ref_llama *r) {
    const int mats[5] = {RL_QKV, RL_O, RL_GATE_UP, RL_DOWN, RL_HEAD};
    const matrix_input inputs[5] = {MATRIX_INPUT_WHOLE, MATRIX_INPUT_HEADS, MATRIX_INPUT_WHOLE,
                                    MATRIX_INPUT_MLP, MATRIX_INPUT_WHOLE};
    const long C = r->cfg.embd, A = (long)r->cfg.heads * model_head_dim(&r->cfg);
    const long cols[5] = {C, A, C, r->cfg.mlp, C}; /* o_proj reads the heads' width A */
    if (r->cfg.quantize_head && !r->t[RL_HEAD]) {  /* a tied head's int8 copy of wte */
        r->t[RL_HEAD] = malloc((size_t)elems(&r->cfg, RL_WTE) * sizeof(double));
        memcpy(r->t[RL_HEAD], r->t[RL_WTE], (size_t)elems(&r->cfg, RL_WTE) * sizeof(double));
    }
    for (int k = 0; k < 5; k++) {
        if (!r->t[mats[k]] || (mats[k] == RL_HEAD && !r->cfg.quantize_head)) continue;
        const int8_layout q = model_int8_layout(&r->cfg, inputs[k]);
        ref_round_int8_weights(r->t[mats[k]], elems(&r->cfg, mats[k]) / cols[k], cols[k], q.group);
    }
    for (int k = 0; k < MATRIX_INPUT_KINDS; k++)
        r->act_block[k] = model_int8_layout(&r->cfg, (matrix_input)k).act_block;
    r->head_act_block = r->cfg.quantize_head ? r->act_block[MATRIX_INPUT_WHOLE] : 0;
}

void ref_llama_free(ref_llama *r) {
    for (int i = 0; i < RL_N; i++)
        free(r->t[i]);
    free(r->inv_freq);
    memset(r, 0, sizeof *r);
}

static void rmsnorm(double *out, const double *x, const double *w, int C, double eps) {
    double ss = 0;
    for (int c = 0; c < C; c++)
        ss += x[c] * x[c];
    double s = 1.0 / sqrt(ss / C + eps);
    for (int c = 0; c < C; c++)
        out[c] = x[c] * s * w[c];
}

/* out (rows_out) = W (rows_out, cols) @ x (cols), x first rounded to int8 blocks of
 * act_block (0: as it is) */
static void matvec(double *out, const double *W, const double *x, long rows_out, long cols,
                   int act_block) {
    double *xq = malloc((size_t)cols * sizeof(double));
    ref_round_int8_activations(xq, x, cols, act_block);
    for (long r = 0; r < rows_out; r++) {
        double s = 0;
        for (long c = 0; c < cols; c++)
            s += W[r * cols + c] * xq[c];
        out[r] = s;
    }
    free(xq);
}

/* rotate half: (x_i, x_{i+hd/2}) by angle p * inv_freq[i] */
static void rope(double *v, int hd, int p, const double *inv) {
    for (int i = 0; i < hd / 2; i++) {
        double a = p * inv[i], c = cos(a), s = sin(a), x0 = v[i], x1 = v[i + hd / 2];
        v[i] = x0 * c - x1 * s;
        v[i + hd / 2] = x1 * c + x0 * s;
    }
}

/* One SwiGLU MLP of width M on h, added into out (C) scaled by weight. */
static void swiglu_mlp_add(double *out, const double *Wgu, const double *Wd, const double *h,
                           int C, int M, double weight) {
    double *gu = malloc((size_t)2 * M * sizeof(double)), *a = malloc((size_t)M * sizeof(double));
    double *y = malloc((size_t)C * sizeof(double));
    matvec(gu, Wgu, h, 2 * M, C, 0);
    for (int i = 0; i < M; i++)
        a[i] = gu[i] / (1 + exp(-gu[i])) * gu[M + i];
    matvec(y, Wd, a, C, M, 0);
    for (int i = 0; i < C; i++)
        out[i] += weight * y[i];
    free(gu), free(a), free(y);
}

/* Hugging Face's sparse MoE block for one token of layer l: softmax of the router logits,
 * top-k (the lower expert on a tie), renormalised when norm_topk_prob; plus the shared expert
 * times sigmoid of its gate. out (C) is set. */
static void moe_block(const ref_llama *r, int l, const double *h, double *out) {
    const model_config *c = &r->cfg;
    const int C = c->embd, E = c->experts, K = c->experts_top_k, M = c->mlp, S = c->shared_mlp;
    const int RL = E + (S > 0);
    double *logit = malloc((size_t)RL * sizeof(double)), *p = malloc((size_t)E * sizeof(double));
    int *used = calloc((size_t)E, sizeof(int));
    matvec(logit, r->t[RL_ROUTER] + (size_t)l * RL * C, h, RL, C, 0);
    double mx = -INFINITY, sum = 0, chosen_sum = 0;
    for (int x = 0; x < E; x++)
        mx = fmax(mx, logit[x]);
    for (int x = 0; x < E; x++)
        sum += p[x] = exp(logit[x] - mx);
    for (int x = 0; x < E; x++)
        p[x] /= sum;
    int pick[64];
    if (K > 64) abort(); /* the tests route to a few */
    for (int j = 0; j < K; j++) {
        int best = -1;
        for (int x = 0; x < E; x++)
            if (!used[x] && (best < 0 || p[x] > p[best])) best = x;
        used[best] = 1, pick[j] = best, chosen_sum += p[best];
    }
    for (int i = 0; i < C; i++)
        out[i] = 0;
    for (int j = 0; j < K; j++) {
        const size_t ex = (size_t)l * E + pick[j];
        swiglu_mlp_add(out, r->t[RL_EXP_GU] + ex * 2 * M * C, r->t[RL_EXP_DOWN] + ex * C * M, h,
                       C, M, c->norm_topk_prob ? p[pick[j]] / chosen_sum : p[pick[j]]);
    }
    if (S > 0)
        swiglu_mlp_add(out, r->t[RL_SH_GU] + (size_t)l * 2 * S * C,
                       r->t[RL_SH_DOWN] + (size_t)l * C * S, h, C, S,
                       1 / (1 + exp(-logit[E])));
    free(logit), free(p), free(used);
}

void ref_llama_forward(const ref_llama *r, const int32_t *tokens, int n, double *logits) {
    const model_config *c = &r->cfg;
    const int C = c->embd, H = c->heads, KV = c->kv_heads, hd = model_head_dim(c), M = c->mlp;
    const int V = c->vocab;
    const int A = H * hd, QKV = (H + 2 * KV) * hd, group = H / KV;
    double *x = calloc((size_t)n * C, sizeof(double)), *h = malloc((size_t)C * sizeof(double));
    double *qkv = malloc((size_t)n * QKV * sizeof(double));
    double *att = malloc((size_t)n * A * sizeof(double)), *o = malloc((size_t)C * sizeof(double));
    double *gu = malloc((size_t)2 * M * sizeof(double)), *a = malloc((size_t)M * sizeof(double));
    double *sc = malloc((size_t)n * sizeof(double));
    for (int t = 0; t < n; t++)
        memcpy(x + (size_t)t * C, r->t[RL_WTE] + (size_t)tokens[t] * C, C * sizeof(double));
    for (int l = 0; l < c->layers; l++) {
        const double *Wqkv = r->t[RL_QKV] + (size_t)l * QKV * C,
                     *Wo = r->t[RL_O] + (size_t)l * C * A;
        /* absent (NULL) for a mixture of experts */
        const double *Wgu = r->t[RL_GATE_UP] ? r->t[RL_GATE_UP] + (size_t)l * 2 * M * C : NULL;
        const double *Wd = r->t[RL_DOWN] ? r->t[RL_DOWN] + (size_t)l * C * M : NULL;
        for (int t = 0; t < n; t++) {
            double *row = qkv + (size_t)t * QKV;
            rmsnorm(h, x + (size_t)t * C, r->t[RL_LN1] + (size_t)l * C, C, c->ln_eps);
            matvec(row, Wqkv, h, QKV, C, r->act_block[MATRIX_INPUT_WHOLE]);
            for (int hh = 0; hh < H; hh++)
                rope(row + hh * hd, hd, t, r->inv_freq);
            for (int k = 0; k < KV; k++)
                rope(row + A + k * hd, hd, t, r->inv_freq);
        }
        for (int t = 0; t < n; t++)
            for (int hh = 0; hh < H; hh++) {
                const int kvh = hh / group;
                const double *q = qkv + (size_t)t * QKV + hh * hd;
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const double *k = qkv + (size_t)u * QKV + A + kvh * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++)
                        d += q[i] * k[i];
                    sc[u] = d / sqrt((double)hd);
                    mx = fmax(mx, sc[u]);
                }
                for (int u = 0; u <= t; u++)
                    sum += sc[u] = exp(sc[u] - mx);
                double *out = att + (size_t)t * A + hh * hd;
                for (int i = 0; i < hd; i++)
                    out[i] = 0;
                for (int u = 0; u <= t; u++) {
                    const double *v = qkv + (size_t)u * QKV + A + (KV + kvh) * hd;
                    for (int i = 0; i < hd; i++)
                        out[i] += sc[u] / sum * v[i];
                }
            }
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * C;
            matvec(o, Wo, att + (size_t)t * A, C, A, r->act_block[MATRIX_INPUT_HEADS]);
            for (int i = 0; i < C; i++)
                xt[i] += o[i];
            rmsnorm(h, xt, r->t[RL_LN2] + (size_t)l * C, C, c->ln_eps);
            if (c->experts > 0) {
                moe_block(r, l, h, o);
                for (int i = 0; i < C; i++)
                    xt[i] += o[i];
                continue;
            }
            matvec(gu, Wgu, h, 2 * M, C, r->act_block[MATRIX_INPUT_WHOLE]);
            for (int i = 0; i < M; i++)
                a[i] = gu[i] / (1 + exp(-gu[i])) * gu[M + i];
            matvec(o, Wd, a, C, M, r->act_block[MATRIX_INPUT_MLP]);
            for (int i = 0; i < C; i++)
                xt[i] += o[i];
        }
    }
    const double *head = r->t[RL_HEAD] ? r->t[RL_HEAD] : r->t[RL_WTE];
    for (int t = 0; t < n; t++) {
        rmsnorm(h, x + (size_t)t * C, r->t[RL_LNF], C, c->ln_eps);
        matvec(logits + (size_t)t * V, head, h, V, C, r->head_act_block);
    }
    free(x), free(h), free(qkv), free(att), free(o), free(gu), free(a), free(sc);
}

void ref_llama_generate(const ref_llama *r, const int32_t *prompt, int prompt_len, int new_tokens,
                        int32_t *out) {
    const int V = r->cfg.vocab, total = prompt_len + new_tokens;
    double *logits = malloc((size_t)total * V * sizeof(double));
    memcpy(out, prompt, (size_t)prompt_len * sizeof(int32_t));
    for (int n = prompt_len; n < total; n++) {
        ref_llama_forward(r, out, n, logits);
        const double *last = logits + (size_t)(n - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (last[v] > last[best]) best = v;
        out[n] = best;
    }
    free(logits);
}
