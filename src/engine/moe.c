/* Mixture-of-experts routing on the host (engine/moe.h). The engine copies the small router
 * logits back, routes here, and copies the expert lists to the backend (forward.c). */
#include "engine/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"

void moe_routing_init(moe_routing *r, const model_config *cfg, int rows_max, int steps,
                      int layers) {
    memset(r, 0, sizeof *r);
    if (cfg->experts <= 0) return;
    r->experts = cfg->experts, r->top_k = cfg->experts_top_k;
    r->shared = cfg->shared_mlp > 0, r->norm_topk_prob = cfg->norm_topk_prob;
    r->rows_max = rows_max;
    const size_t rows = (size_t)(rows_max > 0 ? rows_max : 1);
    const size_t entries = rows * (size_t)(r->top_k + r->shared);
    r->logits = xmalloc(rows * (size_t)(r->experts + r->shared) * sizeof(float));
    r->idx = xmalloc(entries * sizeof(int32_t));
    r->wts = xmalloc(entries * sizeof(float));
    r->count = xmalloc((size_t)r->experts * sizeof(int));
    r->offset = xmalloc((size_t)(r->experts + 1) * sizeof(int));
    r->choice = xmalloc(rows * (size_t)r->top_k * sizeof(int));
    r->choice_w = xmalloc(rows * (size_t)r->top_k * sizeof(float));
    r->load_steps = steps > 0 ? steps : 0, r->load_layers = layers > 0 ? layers : 0;
    r->load = xcalloc((size_t)(r->load_steps * r->load_layers * r->experts) + 1, sizeof(int32_t));
}

void moe_routing_free(moe_routing *r) {
    free(r->logits), free(r->idx), free(r->wts), free(r->count), free(r->offset);
    free(r->choice), free(r->choice_w), free(r->load);
    memset(r, 0, sizeof *r);
}

void moe_routing_load_clear(moe_routing *r) {
    if (r->load)
        memset(r->load, 0, (size_t)r->load_steps * r->load_layers * r->experts * sizeof(int32_t));
}

void moe_routing_load_add(moe_routing *r, int step, int l) {
    if (!r->load || step < 0 || step >= r->load_steps || l < 0 || l >= r->load_layers) return;
    int32_t *row = r->load + ((size_t)step * r->load_layers + l) * r->experts;
    for (int x = 0; x < r->experts; x++)
        row[x] += r->offset[x + 1] - r->offset[x];
}

/* One row's top k experts, best first; ties go to the lower index (the strict > over experts
 * in ascending order), so the choice never depends on how the logits were computed beyond
 * their values. A NaN logit is never chosen over a number. */
static void row_top_k(const float *logit, int experts, int k, int *chosen) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int x = 0; x < experts; x++) {
            int taken = 0;
            for (int i = 0; i < j && !taken; i++)
                taken = chosen[i] == x;
            if (!taken && (best < 0 || logit[x] > logit[best] || isnan(logit[best]))) best = x;
        }
        chosen[j] = best;
    }
}

/* The chosen experts' weights: softmax over the k (renormalised), or the softmax over every
 * expert read at the k. The largest logit is the first chosen one (NaN aside). */
static void row_weights(const float *logit, int experts, int k, const int *chosen, int renorm,
                        float *w) {
    const double top = logit[chosen[0]];
    double sum = 0;
    if (renorm)
        for (int j = 0; j < k; j++)
            sum += exp((double)logit[chosen[j]] - top);
    else
        for (int x = 0; x < experts; x++)
            sum += exp((double)logit[x] - top);
    for (int j = 0; j < k; j++)
        w[j] = (float)(exp((double)logit[chosen[j]] - top) / sum);
}

int moe_route(moe_routing *r, int rows) {
    CHECK(rows >= 0 && rows <= r->rows_max, "moe_route: %d rows of at most %d", rows, r->rows_max);
    const int E = r->experts, K = r->top_k, RL = E + r->shared;
    memset(r->count, 0, (size_t)E * sizeof(int));
    for (int t = 0; t < rows; t++) {
        const float *logit = r->logits + (size_t)t * RL;
        int *chosen = r->choice + (size_t)t * K;
        row_top_k(logit, E, K, chosen);
        row_weights(logit, E, K, chosen, r->norm_topk_prob, r->choice_w + (size_t)t * K);
        for (int j = 0; j < K; j++)
            r->count[chosen[j]]++;
    }
    r->offset[0] = 0;
    for (int x = 0; x < E; x++)
        r->offset[x + 1] = r->offset[x] + r->count[x];
    /* fill each expert's list in row order: the count array is reused as the fill cursor */
    memset(r->count, 0, (size_t)E * sizeof(int));
    for (int t = 0; t < rows; t++)
        for (int j = 0; j < K; j++) {
            const int x = r->choice[(size_t)t * K + j], at = r->offset[x] + r->count[x]++;
            r->idx[at] = t;
            r->wts[at] = r->choice_w[(size_t)t * K + j];
        }
    if (r->shared) /* the shared expert serves every row, scaled by sigmoid of its gate */
        for (int t = 0; t < rows; t++) {
            const size_t at = (size_t)rows * K + t;
            r->idx[at] = t;
            r->wts[at] = (float)(1.0 / (1.0 + exp(-(double)r->logits[(size_t)t * RL + E])));
        }
    return rows * (K + r->shared);
}
