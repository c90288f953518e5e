/* The ranking of `tripar plan`: the order of the strategies under an objective and SLOs, what
 * the ranked list says about the request (nothing fits, no SLO met), and each strategy's
 * reason in words (docs/planner.md "Output"). */
#include <stdio.h>
#include <stdlib.h>

#include "base/check.h"
#include "analysis/plan.h"

const char *plan_objective_name(plan_objective o) {
    static const char *const names[] = {"latency", "throughput", "goodput"};
    return names[o];
}

int plan_meets_slo(const plan_summary *q, const plan_prediction *p) {
    return (q->ttft_slo == 0 || p->ttft <= q->ttft_slo) &&
           (q->tpot_slo == 0 || p->tpot <= q->tpot_slo);
}

/* The sort needs the objective; qsort has no context argument. */
static const plan_summary *rank_query;

/* Fitting first; under goodput those meeting the SLOs first; then by the objective; ties by
 * the strategy, so the order is the same on every machine. */
static int prediction_compare(const void *x, const void *y) {
    const plan_prediction *a = x, *b = y;
    if (a->fits != b->fits) return b->fits - a->fits;
    if (!a->fits) return a->rank_bytes < b->rank_bytes ? -1 : a->rank_bytes > b->rank_bytes;
    if (rank_query->objective == PLAN_OBJ_GOODPUT && rank_query->rate > 0) {
        const plan_served *ga = &a->served, *gb = &b->served;
        if (ga->goodput != gb->goodput) return ga->goodput > gb->goodput ? -1 : 1;
        if (ga->ttft_p90 != gb->ttft_p90) return ga->ttft_p90 < gb->ttft_p90 ? -1 : 1;
    } else if (rank_query->objective == PLAN_OBJ_GOODPUT) {
        int ma = plan_meets_slo(rank_query, a), mb = plan_meets_slo(rank_query, b);
        if (ma != mb) return mb - ma;
    }
    double ka = rank_query->objective == PLAN_OBJ_LATENCY ? a->e2e : -a->tokens_per_s;
    double kb = rank_query->objective == PLAN_OBJ_LATENCY ? b->e2e : -b->tokens_per_s;
    if (ka != kb) return ka < kb ? -1 : 1;
    const int sa[] = {a->s.dp,      a->s.tp,    a->s.pp,          a->s.microbatches,
                      a->s.overlap, a->s.order, plan_strategy_ep(&a->s)};
    const int sb[] = {b->s.dp,      b->s.tp,    b->s.pp,          b->s.microbatches,
                      b->s.overlap, b->s.order, plan_strategy_ep(&b->s)};
    for (int i = 0; i < 7; i++)
        if (sa[i] != sb[i]) return sa[i] - sb[i];
    return 0;
}

void plan_rank(plan_prediction *list, int n, const plan_summary *q) {
    rank_query = q;
    qsort(list, (size_t)n, sizeof *list, prediction_compare);
}

static void strategy_text(const plan_strategy *s, char *buf, size_t len) {
    char ep[16] = "";
    if (plan_strategy_ep(s) > 1) snprintf(ep, sizeof ep, " ep%d", s->ep);
    snprintf(buf, len, "dp%d-tp%d-pp%d m%d%s%s %s", s->dp, s->tp, s->pp, s->microbatches,
             s->overlap ? " overlap" : "", ep, plan_order_names[s->order]);
}

/* Exit 2 cases once ranked: nothing fits, or nothing meets the SLOs. */
int plan_ranked_check(const plan_summary *q, const plan_cluster *c, const plan_prediction *ranked,
                      int n) {
    char what[96];
    if (!ranked[0].fits) {
        strategy_text(&ranked[0].s, what, sizeof what);
        error_set("the model fits nowhere on %d devices of %.1f GiB: the smallest rank needs "
                  "%.1f GiB (%s: weights %.1f, KV cache %.1f, activations %.1f GiB)",
                  q->gpus, c->device_memory / 1073741824.0, ranked[0].rank_bytes / 1073741824.0,
                  what, ranked[0].weight_bytes / 1073741824.0, ranked[0].kv_bytes / 1073741824.0,
                  ranked[0].act_bytes / 1073741824.0);
        return STATUS_BAD_INPUT;
    }
    if (q->rate > 0) {
        /* a stream serves smaller batches than the whole one: its SLO is met request by
         * request, so what counts is whether any strategy serves any request within it */
        int best = -1;
        for (int i = 0; i < n && ranked[i].fits; i++) {
            if (ranked[i].served.met > 0) return STATUS_OK;
            if (best < 0 || ranked[i].served.ttft_p50 < ranked[best].served.ttft_p50) best = i;
        }
        error_set("no strategy serves any request within the SLO (TTFT <= %g s, TPOT <= %g s) "
                  "at %g requests/s on %d devices: the best p50 TTFT under that load is %.4g s "
                  "(TPOT %.4g s)",
                  q->ttft_slo, q->tpot_slo, q->rate, q->gpus, ranked[best].served.ttft_p50,
                  ranked[best].served.tpot_p50);
        return STATUS_BAD_INPUT;
    }
    if ((q->ttft_slo > 0 || q->tpot_slo > 0) && !plan_meets_slo(q, &ranked[0])) {
        double best_ttft = 0, best_tpot = 0;
        for (int i = 0; i < n && ranked[i].fits; i++) {
            if (!best_ttft || ranked[i].ttft < best_ttft) best_ttft = ranked[i].ttft;
            if (!best_tpot || ranked[i].tpot < best_tpot) best_tpot = ranked[i].tpot;
        }
        /* only goodput ranks by the SLO; the others may still list a strategy that misses */
        int any = 0;
        for (int i = 0; i < n && ranked[i].fits; i++)
            any |= plan_meets_slo(q, &ranked[i]);
        if (!any) {
            error_set("no strategy meets the SLO (TTFT <= %g s, TPOT <= %g s; 0 = none) on %d "
                      "devices: the best TTFT is %.4g s and the best TPOT %.4g s",
                      q->ttft_slo, q->tpot_slo, q->gpus, best_ttft, best_tpot);
            return STATUS_BAD_INPUT;
        }
    }
    return STATUS_OK;
}

#define GIB 1073741824.0

void plan_reason(const plan_prediction *p, const plan_cluster *c, char *buf, int len) {
    const size_t n = (size_t)len;
    if (!p->fits) {
        snprintf(buf, n, "does not fit: %.1f GiB per rank > %.1f GiB", p->rank_bytes / GIB,
                 c->device_memory / GIB);
        return;
    }
    const double e2e = p->e2e;
    const double bubble = p->bubble / e2e, tp = p->tp_exposed / e2e, pp = p->pp_exposed / e2e;
    const double ep = p->ep_exposed / e2e;
    const double tp_exposed_share = p->tp_total > 0 ? p->tp_exposed / p->tp_total : 0;
    char algo[32];
    plan_collective_label(p->tp_algo, p->tp_proto, algo, sizeof algo);
    /* the largest cost beyond compute names the strategy, when it is worth naming */
    if (p->tp_group.nodes > 1 && tp >= bubble && tp >= pp) {
        snprintf(buf, n, "TP all-reduce crosses nodes (%s, %s): %.0f%% exposed, %.0f%% of E2E",
                 plan_tier_name(p->tp_group.outer), algo, 100 * tp_exposed_share, 100 * tp);
    } else if (bubble >= 0.10 && bubble >= tp && bubble >= pp) {
        snprintf(buf, n, "pp=%d bubble %.0f%% at %d micro-batch%s", p->s.pp, 100 * bubble,
                 p->s.microbatches, p->s.microbatches == 1 ? "" : "es");
    } else if (tp >= 0.10 && tp >= pp) {
        snprintf(buf, n, "TP all-reduce %.0f%% of E2E (%s, %.0f%% exposed)", 100 * tp, algo,
                 100 * tp_exposed_share);
    } else if (pp >= 0.10 && pp >= ep) {
        snprintf(buf, n, "PP transfers %.0f%% of E2E (%s)", 100 * pp,
                 plan_tier_name(p->pp_group.outer));
    } else if (ep >= 0.10) { /* expert parallelism across replicas */
        plan_group g;
        plan_ep_group(c, &p->s, &g);
        snprintf(buf, n, "EP all-to-all %.0f%% of E2E (%s)", 100 * ep, plan_tier_name(g.outer));
    } else {
        snprintf(buf, n, "compute %.0f%%: %s %s %.0f%% of it, %s-bound", 100 * p->compute / e2e,
                 p->top_period ? "decode" : "prefill", phase_name(p->top_phase), 100 * p->top_share,
                 p->top_memory_bound ? "memory" : "compute");
    }
}
