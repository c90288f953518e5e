/* The stragglers of `tripar explain` (docs/explain.md, "Stragglers and waiters"): each rank's
 * own time in OTHER against the same rank in BASE, compared within its TP group, its pipeline
 * and its DP group; a rank whose own time grew beyond the noise more than its peers' is named,
 * with the phases it grew in, and so are the ranks that waited for it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "analysis/explain.h"

/* A lead under this share of BASE's E2E latency is never named (noise floor). */
#define STRAGGLER_FLOOR 0.01
/* Several stragglers: each named one leads by at least this share of the largest lead. */
#define STRAGGLER_SEVERAL 0.25

enum { AXIS_TP = 0, AXIS_PP, AXIS_DP, AXIS_COUNT };
static const char *const axis_names[AXIS_COUNT] = {"TP group", "pipeline", "DP group"};

static int axis_size(const run_data *run, int axis) {
    return axis == AXIS_TP ? run->tp : axis == AXIS_PP ? run->pp : run->dp;
}

/* Whether q is in r's group along axis: the same coordinates on the other two axes. */
static int same_group(const run_data *run, int r, int q, int axis) {
    const run_rank *a = &run->ranks[r], *b = &run->ranks[q];
    int tp = a->tp_rank == b->tp_rank, pp = a->pp_rank == b->pp_rank, dp = a->dp_rank == b->dp_rank;
    return axis == AXIS_TP ? pp && dp : axis == AXIS_PP ? tp && dp : tp && pp;
}

static int meshes_match(const run_data *b, const run_data *o) {
    if (b->world_size != o->world_size || b->tp != o->tp || b->pp != o->pp || b->dp != o->dp)
        return 0;
    for (int r = 0; r < b->world_size; r++)
        if (b->ranks[r].tp_rank != o->ranks[r].tp_rank ||
            b->ranks[r].pp_rank != o->ranks[r].pp_rank ||
            b->ranks[r].dp_rank != o->ranks[r].dp_rank)
            return 0;
    return 1;
}

static double sum_kinds(const double *v) {
    double s = 0;
    for (int k = 0; k < EXPLAIN_KIND_COUNT; k++)
        s += v[k];
    return s;
}

/* The rank's own work per kind (explain_rank_work), into out. */
static void work_kinds(const explain_rank *rk, double *out) {
    for (int k = 0; k < EXPLAIN_KIND_COUNT; k++)
        out[k] = explain_rank_work(rk, k);
}

/* The per-iteration series a lead is of: own time, or preempted time (NULL when /sched is
 * absent). */
static const double *series_of(const explain_rank *rk, int preempted) {
    return preempted ? rk->preempted_it : rk->own_it;
}

/* Squared standard error of the mean of r's series minus q's, per iteration, in one run. */
static double pair_variance(const explain_run *x, int r, int q, int preempted) {
    const int n = x->iterations;
    const double *a = series_of(&x->ranks[r], preempted), *b = series_of(&x->ranks[q], preempted);
    if (n < 2) return 0.0;
    double m = 0, ss = 0;
    for (int it = 0; it < n; it++)
        m += (a[it] - b[it]) / n;
    for (int it = 0; it < n; it++) {
        double d = a[it] - b[it] - m;
        ss += d * d;
    }
    return ss / (n - 1) / n;
}

int explain_rank_diffs(const explain_run *b, const explain_run *o, explain_rank_diff *out) {
    if (!meshes_match(&b->run, &o->run)) return 0;
    const int P = b->run.world_size;
    for (int r = 0; r < P; r++) {
        const explain_rank *rb = &b->ranks[r], *ro = &o->ranks[r];
        explain_rank_diff *d = &out[r];
        memset(d, 0, sizeof *d);
        d->rank = r;
        d->own = ro->own - rb->own;
        double wb[EXPLAIN_KIND_COUNT], wo[EXPLAIN_KIND_COUNT];
        work_kinds(rb, wb);
        work_kinds(ro, wo);
        d->work = sum_kinds(wo) - sum_kinds(wb);
        d->late = sum_kinds(ro->late) - sum_kinds(rb->late);
        d->waited = sum_kinds(ro->waited) - sum_kinds(rb->waited);
        d->shared = sum_kinds(ro->shared) - sum_kinds(rb->shared);
        d->preempted = ro->preempted - rb->preempted; /* NaN when either is not recorded */
        d->lead = -INFINITY;
        d->noise = STRAGGLER_FLOOR * b->measured[EXPLAIN_E2E];
    }
    /* the lead over the least-changed other rank of each group, in own time and (with /sched
     * in both runs) in preempted time; the one furthest beyond its noise */
    const int bases = b->sched_present && o->sched_present ? 2 : 1;
    double best_lead = 0;
    for (int r = 0; r < P; r++)
        for (int axis = 0; axis < AXIS_COUNT; axis++)
            for (int pre = 0; pre < bases; pre++) {
                if (axis_size(&b->run, axis) < 2) continue;
                int ref = -1;
                for (int q = 0; q < P; q++)
                    if (q != r && same_group(&b->run, r, q, axis) &&
                        (ref < 0 ||
                         (pre ? out[q].preempted < out[ref].preempted : out[q].own < out[ref].own)))
                        ref = q;
                if (ref < 0) continue;
                double lead =
                    pre ? out[r].preempted - out[ref].preempted : out[r].own - out[ref].own;
                double noise =
                    fmax(2 * sqrt(pair_variance(b, r, ref, pre) + pair_variance(o, r, ref, pre)),
                         STRAGGLER_FLOOR * b->measured[EXPLAIN_E2E]);
                if (!isfinite(out[r].lead) || lead / noise > out[r].lead / out[r].noise) {
                    out[r].lead = lead;
                    out[r].noise = noise;
                    out[r].by_preemption = pre;
                }
            }
    for (int r = 0; r < P; r++)
        if (out[r].lead > out[r].noise && out[r].lead > best_lead) best_lead = out[r].lead;
    for (int r = 0; r < P; r++)
        out[r].straggler =
            out[r].lead > out[r].noise && out[r].lead >= STRAGGLER_SEVERAL * best_lead;
    for (int r = 0; r < P; r++) {
        if (out[r].straggler || !(out[r].waited > STRAGGLER_FLOOR * b->measured[EXPLAIN_E2E]))
            continue;
        for (int q = 0; q < P && !out[r].waiter; q++)
            for (int axis = 0; axis < AXIS_COUNT; axis++)
                if (out[q].straggler && q != r && axis_size(&b->run, axis) > 1 &&
                    same_group(&b->run, r, q, axis))
                    out[r].waiter = 1;
    }
    return P;
}

void explain_share_words(double part, double total, char *out, size_t len) {
    double share = total != 0 ? part / total : NAN;
    if (isfinite(share) && share > 0 && share <= 1.0005)
        snprintf(out, len, "%.0f%% of the E2E difference", 100 * fmin(share, 1.0));
    else
        snprintf(out, len, "%+.3f ms against an E2E difference of %+.3f ms", 1e3 * part,
                 1e3 * total);
}

/* The two kinds that changed most, of one per-kind table (OTHER - BASE), as "mlp_gemm +7.3 ms,
 * norm +0.2 ms"; kinds filtered by work (1), waits (0). */
static void put_top_kinds(explain_text *t, const double *vb, const double *vo, int work) {
    int used[EXPLAIN_KIND_COUNT] = {0}, said = 0;
    for (int n = 0; n < 2; n++) {
        int best = -1;
        for (int k = 0; k < EXPLAIN_KIND_COUNT; k++) {
            if (used[k] || (work ? !explain_kind_is_work(k) : !(vb[k] != 0 || vo[k] != 0)))
                continue;
            if (best < 0 || fabs(vo[k] - vb[k]) > fabs(vo[best] - vb[best])) best = k;
        }
        if (best < 0 || fabs(vo[best] - vb[best]) < 1e-6) break;
        used[best] = 1;
        explain_say(t, "%s%s %+.3f ms", said++ ? ", " : "", explain_kind_name(best),
                    1e3 * (vo[best] - vb[best]));
    }
}

static void put_rank(explain_text *t, const explain_run *o, int r) {
    const run_rank *k = &o->run.ranks[r];
    explain_say(t, "rank %d (host %s, dp%d tp%d pp%d)", r, k->host, k->dp_rank, k->tp_rank,
                k->pp_rank);
}

static void put_straggler(explain_text *t, const explain_run *b, const explain_run *o,
                          const explain_rank_diff *d, int only_peer) {
    const explain_rank *rb = &b->ranks[d->rank], *ro = &o->ranks[d->rank];
    double wb[EXPLAIN_KIND_COUNT], wo[EXPLAIN_KIND_COUNT];
    work_kinds(rb, wb);
    work_kinds(ro, wo);
    double work_b = sum_kinds(wb);
    put_rank(t, o, d->rank);
    const char *peer = only_peer ? "the other rank" : "its least-changed peer";
    if (d->by_preemption)
        explain_say(
            t,
            " was preempted %+.3f ms more than in BASE, %.3f ms more than %s (noise %.3f ms); "
            "its own time %+.3f ms: its work %+.3f ms",
            1e3 * d->preempted, 1e3 * d->lead, peer, 1e3 * d->noise, 1e3 * d->own, 1e3 * d->work);
    else
        explain_say(t,
                    " took %+.3f ms more of its own time than in BASE, %.3f ms more than %s (noise "
                    "%.3f ms): its work %+.3f ms",
                    1e3 * d->own, 1e3 * d->lead, peer, 1e3 * d->noise, 1e3 * d->work);
    if (work_b > 0) explain_say(t, " (%+.0f%%", 100 * d->work / work_b);
    explain_say(t, "%s", work_b > 0 ? ": " : " (");
    put_top_kinds(t, wb, wo, 1);
    explain_say(t, ")");
    if (fabs(d->late) >= 1e-6) {
        explain_say(t, ", late out of waits already satisfied (a peer had left, the data had come) "
                       "%+.3f ms (",
                    1e3 * d->late);
        put_top_kinds(t, rb->late, ro->late, 0);
        explain_say(t, ")");
    }
    if (fabs(d->shared) >= 1e-6)
        explain_say(t,
                    ", and the collectives themselves (all arrived, none left yet) took %+.3f ms "
                    "more on it",
                    1e3 * d->shared);
    if (o->sched_present && isfinite(ro->preempted)) {
        explain_say(t, "; rank %d was preempted for %.3f ms", d->rank, 1e3 * ro->preempted);
        if (isfinite(d->preempted)) explain_say(t, " (%+.3f ms against BASE)", 1e3 * d->preempted);
    }
}

static void put_waiter(explain_text *t, const explain_run *b, const explain_run *o,
                       const explain_rank_diff *d, int n_stragglers, double total) {
    char share[128];
    put_rank(t, o, d->rank);
    explain_say(t, " waited for %s %+.3f ms more (", n_stragglers > 1 ? "them" : "it",
                1e3 * d->waited);
    put_top_kinds(t, b->ranks[d->rank].waited, o->ranks[d->rank].waited, 0);
    explain_share_words(d->waited, total, share, sizeof share);
    explain_say(t, "), %s", share);
}

void explain_straggler_words(const explain_run *b, const explain_run *o, char *out, size_t len) {
    explain_text t = {out, len, 0};
    out[0] = '\0';
    const int P = b->run.world_size;
    if (P == 1 && o->run.world_size == 1) return;
    explain_rank_diff *d = xcalloc((unsigned long)P, sizeof(explain_rank_diff));
    if (!explain_rank_diffs(b, o, d)) {
        explain_say(&t, "The meshes differ, so ranks are not compared one to one.");
        free(d);
        return;
    }
    const double total = o->measured[EXPLAIN_E2E] - b->measured[EXPLAIN_E2E];
    int said = 0;
    char *done = xcalloc((unsigned long)P, 1);
    for (int axis = 0; axis < AXIS_COUNT; axis++) {
        if (axis_size(&b->run, axis) < 2) continue;
        for (int r0 = 0; r0 < P; r0++) {
            /* each group once, at its lowest rank */
            int first = 1;
            for (int q = 0; q < r0; q++)
                if (same_group(&b->run, r0, q, axis)) first = 0;
            if (!first) continue;
            int n_str = 0, n_wait = 0, size = 0;
            for (int q = 0; q < P; q++)
                if (same_group(&b->run, r0, q, axis)) {
                    size++;
                    n_str += d[q].straggler && !done[q];
                    n_wait += d[q].waiter;
                }
            if (!n_str) continue;
            explain_say(&t, "%sIn the %s of ranks", said++ ? " " : "", axis_names[axis]);
            for (int q = 0, c = 0; q < P; q++)
                if (same_group(&b->run, r0, q, axis)) explain_say(&t, "%s %d", c++ ? "," : "", q);
            explain_say(&t, ", ");
            int c = 0;
            for (int q = 0; q < P; q++)
                if (same_group(&b->run, r0, q, axis) && d[q].straggler && !done[q]) {
                    explain_say(&t, "%s", c++ ? "; " : "");
                    put_straggler(&t, b, o, &d[q], size == 2);
                    done[q] = 1;
                }
            c = 0;
            for (int q = 0; q < P; q++)
                if (same_group(&b->run, r0, q, axis) && d[q].waiter) {
                    explain_say(&t, "%s", c++ ? "; " : "; ");
                    put_waiter(&t, b, o, &d[q], n_str, total);
                }
            explain_say(&t, ".");
        }
    }
    if (!said) {
        int top = 0;
        for (int r = 1; r < P; r++)
            if (d[r].lead > d[top].lead) top = r;
        explain_say(&t,
                    "No rank's own time grew beyond the noise against its peers (the largest lead: "
                    "rank %d, %+.3f ms, noise %.3f ms).",
                    top, 1e3 * (isfinite(d[top].lead) ? d[top].lead : 0.0), 1e3 * d[top].noise);
    }
    free(done);
    free(d);
}
