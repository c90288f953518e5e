/* Perplexity: the teacher-forced negative log-likelihood of each prompt token under the logits
 * of the position before it, scored at prefill on the last stage as llama-perplexity scores a
 * window (docs/performance.md, "Perplexity"). No row of the vocabulary crosses ranks: each TP
 * rank reduces its shard of a row to (max, sum of exp, target logit) and only those travel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "engine/engine.h"

/* Scored rows per prompt: positions [nll_first, prompt_len - 1). */
static int nll_rows(const engine *e) { return e->prompt_len - 1 - e->cfg.nll_first; }

void engine_nll_init(engine *e) {
    if (e->cfg.nll_first <= 0) return;
    const shard_geom *g = &e->m->geom;
    const int T = e->prompt_len, n = nll_rows(e), tp = e->tp->size;
    CHECK(e->cfg.nll_first < T - 1, "perplexity: first scored position %d leaves nothing of %d",
          e->cfg.nll_first, T);
    e->nll_seq_sum = xcalloc((size_t)e->cfg.batch, sizeof(double));
    if (!g->last_stage) return;
    e->nll = xmalloc((size_t)e->batch_local * T * sizeof(double));
    for (size_t i = 0; i < (size_t)e->batch_local * T; i++)
        e->nll[i] = NAN;
    e->nll_rows_host = xmalloc((size_t)n * g->vocab_local * sizeof(float));
    e->nll_part = xmalloc((size_t)n * 3 * sizeof(double));
    e->nll_parts = xmalloc((size_t)tp * n * 3 * sizeof(double));
    e->nll_counts = xmalloc((size_t)tp * sizeof(int));
    e->nll_displs = xmalloc((size_t)tp * sizeof(int));
    for (int r = 0; r < tp; r++) {
        e->nll_counts[r] = 3 * n;
        e->nll_displs[r] = 3 * n * r;
    }
}

void engine_nll_free(engine *e) {
    free(e->nll);
    free(e->nll_rows_host);
    free(e->nll_part);
    free(e->nll_parts);
    free(e->nll_counts);
    free(e->nll_displs);
    free(e->nll_seq_sum);
    e->nll = e->nll_part = e->nll_parts = e->nll_seq_sum = NULL;
    e->nll_rows_host = NULL;
    e->nll_counts = e->nll_displs = NULL;
}

/* This rank's shard of each scored row: its maximum, the sum of exp(logit - maximum) in
 * double, and the target's logit when this rank's columns hold it (else NaN, never read). */
static void shard_reduce(engine *e, int s, int n) {
    const shard_geom *g = &e->m->geom;
    const int VL = g->vocab_local, first = e->cfg.nll_first;
    const int32_t *next = e->tokens + (size_t)s * e->total_len + first + 1;
    for (int r = 0; r < n; r++) {
        const float *row = e->nll_rows_host + (size_t)r * VL;
        float mx = row[0];
        for (int v = 1; v < VL; v++)
            mx = row[v] > mx ? row[v] : mx;
        double sum = 0.0;
        for (int v = 0; v < VL; v++)
            sum += exp((double)row[v] - (double)mx);
        const int t = next[r] - g->vocab_begin;
        e->nll_part[3 * r] = mx;
        e->nll_part[3 * r + 1] = sum;
        e->nll_part[3 * r + 2] = t >= 0 && t < VL ? (double)row[t] : NAN;
    }
}

/* The TP ranks' parts of row r combined in rank order, so every TP rank computes the same
 * value: logsumexp = M + log(sum_k s_k exp(m_k - M)), less the target logit of the rank whose
 * columns hold it. With one rank this is m + log(s) - target, the same formula. */
static double row_nll(const engine *e, int r, int n, int32_t target) {
    const int tp = e->tp->size;
    double M = -INFINITY, S = 0.0, t = NAN;
    for (int k = 0; k < tp; k++)
        M = fmax(M, e->nll_parts[(size_t)(k * n + r) * 3]);
    for (int k = 0; k < tp; k++) {
        const double *p = e->nll_parts + (size_t)(k * n + r) * 3;
        S += p[1] * exp(p[0] - M);
        if (target >= e->vocab_displs[k] && target < e->vocab_displs[k] + e->vocab_counts[k])
            t = p[2];
    }
    return M + log(S) - t;
}

void engine_nll_score(engine *e, const float *x, int mb) {
    const shard_geom *g = &e->m->geom;
    const int T = e->prompt_len, first = e->cfg.nll_first, n = nll_rows(e);
    const int VL = g->vocab_local;
    const size_t C = (size_t)e->m->cfg.embd;
    /* rows past the sampler's mb_max, which the sampling that follows still reads */
    float *head_in = e->head_in + (size_t)e->mb_max * C;
    float *logits = e->logits + (size_t)e->mb_max * VL;
    comm *tp = e->tp;
    for (int b = 0; b < e->split.size[mb]; b++) {
        const int s = e->split.begin[mb] + b;
        TIMER_SCOPE(e->tm, PHASE_HEAD, 0, mb, TIMER_NO_LAYER) {
            engine_head_rows(e, logits, head_in, x + ((size_t)b * T + first) * C, n);
            e->be->ops->copy_to_host(e->be->ctx, e->nll_rows_host, logits,
                                     (size_t)n * VL * sizeof(float));
            shard_reduce(e, s, n);
        }
        /* the gather waits for the slowest TP rank: its own event, not the head's work */
        if (tp->size > 1) {
            double t0 = timer_host_seconds();
            tp->ops->allgatherv(tp->ctx, e->nll_parts, e->nll_part, e->nll_counts, e->nll_displs,
                                COMM_DOUBLE);
            timer_add_host(e->tm, PHASE_NLL_WAIT, 0, mb, TIMER_NO_LAYER, t0, timer_host_seconds());
        } else {
            memcpy(e->nll_parts, e->nll_part, (size_t)n * 3 * sizeof(double));
        }
        /* n log-sum-exps over tp parts: untimed, negligible beside the head's GEMM */
        const int32_t *next = e->tokens + (size_t)s * e->total_len + first + 1;
        for (int r = 0; r < n; r++)
            e->nll[(size_t)s * T + first + 1 + r] = row_nll(e, r, n, next[r]);
    }
}

void engine_nll_finish(engine *e) {
    const shard_geom *g = &e->m->geom;
    const int T = e->prompt_len, first = e->cfg.nll_first, n = nll_rows(e);
    /* Each sequence's sum comes from exactly one rank (its replica's last stage, TP rank 0)
     * and every other rank adds zero, so the world sum is exact and the total below is taken
     * in sequence order: the same for every dp x tp x pp. */
    memset(e->nll_seq_sum, 0, (size_t)e->cfg.batch * sizeof(double));
    if (g->last_stage && g->tp_rank == 0)
        for (int s = 0; s < e->batch_local; s++) {
            double sum = 0.0;
            for (int r = 0; r < n; r++)
                sum += e->nll[(size_t)s * T + first + 1 + r];
            e->nll_seq_sum[e->seq_global_begin + s] = sum;
        }
    double t0 = timer_host_seconds(); /* after the steps: step -1, like dp_gather */
    e->world->ops->allreduce(e->world->ctx, e->nll_seq_sum, (size_t)e->cfg.batch, COMM_DOUBLE,
                             COMM_OP_SUM);
    timer_add_host(e->tm, PHASE_NLL_WAIT, -1, -1, TIMER_NO_LAYER, t0, timer_host_seconds());
    e->nll_sum = 0.0;
    for (int s = 0; s < e->cfg.batch; s++)
        e->nll_sum += e->nll_seq_sum[s];
    e->nll_count = (long)e->cfg.batch * n;
    e->perplexity = exp(e->nll_sum / (double)e->nll_count);
}
