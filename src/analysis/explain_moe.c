/* explain's expert-load verdict (explain.h, explain_moe_words): from the recorded /moe, how
 * unbalanced the routing was, where, and what that costs a rank, tied to the layer's measured
 * mlp_gemm (docs/explain.md "Expert load"). */
#include <math.h>

#include "analysis/explain.h"

/* The layer's mlp_gemm in the window of the period (TTFT for prefill, TPOT for decode), mean
 * seconds per iteration on the attribution's rank; NaN when the layer has no slot. */
static double layer_mlp_seconds(const explain_run *x, moe_period p, int layer) {
    const explain_qty q = p == MOE_PREFILL ? EXPLAIN_TTFT : EXPLAIN_TPOT;
    if (!x->bucket[q] || layer + 1 >= x->slots) return NAN;
    return x->bucket[q][(size_t)PHASE_MLP_GEMM * x->slots + layer + 1];
}

static void say_cost(explain_text *t, const explain_run *x, moe_period p, int layer,
                     const moe_imbalance *m) {
    const moe_load *l = &x->moe;
    if (l->ep > 1) {
        const int per = l->experts / l->ep, first = m->hottest_block * per;
        explain_say(t,
                    " With ep %d the busiest EP block of that layer served %.2fx the mean "
                    "block's rows per step, on average (the hottest expert %d is in block %d, "
                    "experts %d-%d): every rank of the TP group waits for the busiest block at "
                    "the layer's all-reduce.",
                    l->ep, m->block_ratio_mean, m->hottest_expert, m->hottest_block, first,
                    first + per - 1);
    } else {
        explain_say(t, " With ep 1 every rank runs a slice of every expert, so the imbalance "
                       "costs no rank more than another; with parallel.ep > 1 the rank "
                       "holding the hottest expert's block would do more of the work.");
    }
    const double mlp = layer_mlp_seconds(x, p, layer);
    if (isfinite(mlp) && mlp > 0)
        explain_say(t,
                    " Layer %d's mlp_gemm (routing and expert compute) measured %.3f ms of "
                    "the %s.",
                    layer, 1e3 * mlp, p == MOE_PREFILL ? "TTFT" : "TPOT");
}

void explain_moe_words(const explain_run *x, char *out, size_t len) {
    explain_text t = {out, len, 0};
    out[0] = '\0';
    if (!x->has_moe) return;
    moe_imbalance all[MOE_PERIODS];
    for (int p = 0; p < MOE_PERIODS; p++)
        moe_imbalance_compute(&x->moe, (moe_period)p, -1, &all[p]);
    /* the period whose mean is the larger names the worst layer */
    moe_period p = MOE_PREFILL;
    if (all[MOE_DECODE].samples > 0 &&
        (all[MOE_PREFILL].samples == 0 || all[MOE_DECODE].ratio_mean > all[MOE_PREFILL].ratio_mean))
        p = MOE_DECODE;
    if (all[p].samples == 0) {
        explain_say(&t, "no rows were routed in the recorded generation.");
        return;
    }
    const int high = all[p].ratio_mean >= MOE_IMBALANCE_HIGH;
    explain_say(&t, "%s: max/mean tokens per expert %.2f in prefill",
                high ? "unbalanced" : "balanced", all[MOE_PREFILL].ratio_mean);
    if (all[MOE_DECODE].samples > 0)
        explain_say(&t, ", %.2f in decode", all[MOE_DECODE].ratio_mean);
    explain_say(&t, " (mean over steps and layers; 1.00 is even, %.2f the threshold).",
                MOE_IMBALANCE_HIGH);
    if (!high) return;
    const int y = moe_worst_layer(&x->moe, p);
    moe_imbalance m;
    moe_imbalance_compute(&x->moe, p, y, &m);
    explain_say(&t,
                " The worst is layer %d in %s: %.2f (worst step %.2f); its hottest expert %d "
                "served %.0f%% of the layer's routed rows (%.0f%% each when even).",
                y, moe_period_name(p), m.ratio_mean, m.ratio_max, m.hottest_expert,
                100 * m.hottest_share, 100.0 / x->moe.experts);
    say_cost(&t, x, p, y, &m);
}
