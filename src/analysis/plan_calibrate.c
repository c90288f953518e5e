/* Per-phase rates for `tripar plan` from runs recorded with record.timings: layer: the phase
 * times and analytic costs of analysis/run_roofline.c, read against the cluster file's ceilings as
 * curves over arithmetic intensity, so the planner predicts what the code achieves at each
 * shape rather than what the hardware peaks at; and what time-sharing costs beyond its share. */
#include "analysis/plan_calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/runread.h"
#include "analysis/moe_load.h"
#include "analysis/plan_runs.h"
#include "analysis/run_roofline.h"

/* The measurements of one phase at one arithmetic intensity, summed over the runs, so that a
 * point measured in several runs is weighted by its time. */
enum { CALIBRATION_POINTS = 64 };
typedef struct {
    int n;
    double intensity[CALIBRATION_POINTS], roof[CALIBRATION_POINTS], seconds[CALIBRATION_POINTS];
} calibration_points;

/* [1] holds the ranks that time-shared a core with another busy rank, [0] the others. */
typedef struct {
    calibration_points phase[2][2][PHASE_COUNT];
    double tp_wait, tp_allreduce;
    int expert_runs;                         /* runs that recorded the planned model's routing */
    double expert_rows[PLAN_EXPERT_SHARES]; /* and their rows per (layer, expert), summed */
} calibration_sums;

/* Intensities within 2% are one point (the same shape measured again). */
static void point_add(calibration_points *k, double intensity, double roof, double seconds) {
    int i = 0;
    while (i < k->n && fabs(log(k->intensity[i] / intensity)) > 0.02)
        i++;
    if (i == k->n) {
        if (k->n == CALIBRATION_POINTS) return; /* more shapes than a curve keeps: drop */
        k->intensity[k->n++] = intensity;
    }
    k->roof[i] += roof;
    k->seconds[i] += seconds;
}

static int point_compare(const void *a, const void *b) {
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The curve of the points, ascending in intensity; past PLAN_RATE_POINTS the two points
 * closest in log intensity merge, time-weighted, until it fits. */
static void curve_set(plan_rate_curve *curve, const calibration_points *k) {
    double pts[CALIBRATION_POINTS][3];
    int n = 0;
    for (int i = 0; i < k->n; i++)
        if (k->seconds[i] > 0 && k->roof[i] > 0) {
            pts[n][0] = k->intensity[i], pts[n][1] = k->roof[i], pts[n][2] = k->seconds[i];
            n++;
        }
    qsort(pts, (size_t)n, sizeof pts[0], point_compare);
    while (n > PLAN_RATE_POINTS) {
        int j = 0;
        for (int i = 1; i + 1 < n; i++)
            if (pts[i + 1][0] / pts[i][0] < pts[j + 1][0] / pts[j][0]) j = i;
        const double w = pts[j][2] + pts[j + 1][2];
        pts[j][0] = exp((pts[j][2] * log(pts[j][0]) + pts[j + 1][2] * log(pts[j + 1][0])) / w);
        pts[j][1] += pts[j + 1][1];
        pts[j][2] = w;
        memmove(pts[j + 1], pts[j + 2], (size_t)(n - j - 2) * sizeof pts[0]);
        n--;
    }
    curve->n = n;
    for (int i = 0; i < n; i++) {
        curve->intensity[i] = pts[i][0];
        curve->efficiency[i] = pts[i][1] / pts[i][2];
    }
}

/* The ranks of a run on the node of its rank r; block placement on the cluster when it
 * recorded no host names. */
static int ranks_on_host(const run_data *run, int r, const plan_cluster *c) {
    const int n = plan_run_host_ranks(run, r);
    return n > 0 ? n : plan_node_ranks(c, run->world_size);
}

/* The ceilings of rank r's stage where the run placed it: the cluster's, time-shared
 * (plan_stage_ceilings) among the ranks its host held, placed in blocks of that many. */
static plan_ceilings run_rank_ceilings(const run_data *run, int r, const plan_cluster *c,
                                       int period) {
    plan_cluster here = *c;
    here.devices_per_node = ranks_on_host(run, r, c);
    plan_strategy s = plan_run_strategy(run);
    if (s.microbatches < 1) s.microbatches = 1;
    const int stage = run->ranks ? run->ranks[r].pp_rank : 0;
    /* equal replicas: whether the rank shared its core is all that is asked */
    return plan_stage_ceilings(&here, &s, s.dp, s.microbatches, period, stage);
}

/* "gpt2: 12 layers, embd 768, 12 heads (12 kv), mlp 3072, vocab 50257" */
static void shape_text(const model_config *m, char *buf, size_t len) {
    snprintf(buf, len, "%s: %d layers, embd %d, %d heads (%d kv), mlp %d, vocab %d",
             arch_kind_name(m->arch), m->layers, m->embd, m->heads,
             m->kv_heads > 0 ? m->kv_heads : m->heads, m->mlp, m->vocab);
}

/* A run of another shape than the model planned still calibrates (a phase's efficiency is
 * read by arithmetic intensity, docs/planner.md "Calibration"), but not without a word: the
 * user may have named the wrong file. */
static void shape_warn(FILE *warn, const char *path, const model_config *ran,
                       const model_config *planned) {
    const int kr = ran->kv_heads > 0 ? ran->kv_heads : ran->heads;
    const int kp = planned->kv_heads > 0 ? planned->kv_heads : planned->heads;
    if (!warn || (ran->arch == planned->arch && ran->layers == planned->layers &&
                  ran->embd == planned->embd && ran->heads == planned->heads && kr == kp &&
                  ran->mlp == planned->mlp && ran->vocab == planned->vocab))
        return;
    char a[160], b[160];
    shape_text(ran, a, sizeof a);
    shape_text(planned, b, sizeof b);
    fprintf(warn,
            "tripar plan: warning: %s ran another model (%s) than the one planned (%s); its "
            "phase times calibrate this one by arithmetic intensity, which holds between the "
            "shapes measured (docs/planner.md \"Calibration\")\n",
            path, a, b);
}

/* Adds a run's phases to the sums; *measured gets what it ran and measured, for the cost of
 * shared cores, and *has_measured whether it could be read (runs without /metrics or whose job
 * no longer loads still calibrate the phases). */
static int calibration_add(calibration_sums *sum, const plan_cluster *c, const plan_model *m,
                           const char *path, FILE *warn, plan_measured_run *measured,
                           int *has_measured) {
    run_data run;
    if (run_data_load(&run, path) != STATUS_OK) return STATUS_BAD_INPUT;
    if (!run.complete) {
        error_set("%s is an incomplete run file (complete=0); calibrate from finished runs", path);
        run_data_free(&run);
        return STATUS_BAD_INPUT;
    }
    /* the routing a mixture of experts recorded: its layers' shares of rows per expert price
     * the planned runs' experts (docs/planner.md "Mixture of experts") */
    const int L = m->cfg.layers, E = m->cfg.experts;
    if (E > 0 && (long)L * E <= PLAN_EXPERT_SHARES) {
        const int got = moe_load_counts_read(run.file, L, E, sum->expert_rows);
        if (got < 0) {
            char why[512];
            snprintf(why, sizeof why, "%s", error_message());
            error_set("%s: %s", path, why);
            run_data_free(&run);
            return STATUS_BAD_INPUT;
        }
        sum->expert_runs += got;
    }
    run_roofline table;
    const int slowest = run_roofline_slowest_rank(&run);
    int rc = run_roofline_compute(&run, slowest, &table);
    if (rc != STATUS_OK) {
        run_data_free(&run);
        return rc;
    }
    shape_warn(warn, path, &table.cfg, &m->cfg);
    /* The roofline of the run's own placement. A rank that time-shared its core with another
     * busy rank was stopped inside its phases by the scheduler or not, depending on whether
     * the other waited on it (a TP peer) or ran beside it (another replica): its phase times
     * say less about the code's rate, and calibrate only phases no rank with a core to itself
     * measured. */
    int any = 0;
    const plan_strategy ran = plan_run_strategy(&run);
    const run_rank *rk = run.ranks ? &run.ranks[slowest] : NULL;
    const double rank_weights =
        c->llc_bytes > 0 ? plan_rank_weight_bytes(&table.cfg, table.precision, &ran,
                                                  rk ? rk->tp_rank : 0, rk ? rk->pp_rank : 0)
                         : 0;
    for (int period = 0; period < ROOF_PERIOD_COUNT; period++) {
        const plan_ceilings k = run_rank_ceilings(&run, slowest, c, period);
        const int shared = k.share > 1;
        for (int p = 0; p < PHASE_COUNT; p++) {
            const roof_phase *ph = &table.phase[period][p];
            if (!phase_cost_modelled((phase)p) || ph->events == 0 || !(ph->seconds > 0)) continue;
            const double intensity = fmax(ph->bytes > 0 ? ph->flops / ph->bytes : 0, 1e-9);
            point_add(&sum->phase[shared][period][p], intensity,
                      plan_phase_roofline(c, &k, ph->flops, ph->bytes, ph->weight_bytes,
                                          rank_weights, NULL),
                      ph->seconds);
            any = 1;
        }
        if (run.overlap && run.tp > 1) {
            sum->tp_wait += table.phase[period][PHASE_TP_WAIT].seconds;
            sum->tp_allreduce += table.phase[period][PHASE_TP_ALLREDUCE].seconds;
        }
    }
    *has_measured = plan_measured_from(&run, c, measured) == STATUS_OK;
    if (!*has_measured) error_clear();
    /* blocking all-reduces only: with overlap an event spans the products it ran under */
    if (*has_measured && !run.overlap && run.tp > 1 && run.metrics.iterations > 0)
        for (int period = 0; period < 2; period++)
            measured->tp_allreduce[period] =
                table.phase[period][PHASE_TP_ALLREDUCE].seconds / run.metrics.iterations;
    run_data_free(&run);
    if (!any) {
        error_set("%s has no timed compute phases; record it with record.timings: layer", path);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

/* Whether the first or the last stage of the run's strategy shares a core between replicas in
 * this period. */
static int run_mixed(const plan_cluster *placed, const plan_measured_run *run, int period) {
    const plan_strategy *s = &run->s;
    const int batch_local = split_count(run->w.batch, s->dp, s->dp - 1);
    const int micro = s->microbatches < batch_local ? s->microbatches : batch_local;
    const int ends[2] = {0, s->pp - 1};
    for (int i = 0; i < 2; i++) {
        const plan_ceilings k =
            plan_stage_ceilings(placed, s, run->w.batch, micro, period, ends[i]);
        if (k.mixed && k.share > 1) return 1;
    }
    return 0;
}

/* The cost of a core shared by replicas beyond 1/L, per period: their phase times cannot show
 * it (a rank stopped inside a phase and one that waited at a collective look alike), so it is
 * read off the runs whole: measured TTFT (prefill) and TPOT (decode) of such runs against their
 * prediction from the curves, at least 1. Runs whose job no longer loads are left out. */
static void mixed_cost_calibrate(plan_rates *r, const plan_cluster *c,
                                 const plan_measured_run *runs, const int *has_measured, int n) {
    double measured[2] = {0, 0}, predicted[2] = {0, 0};
    for (int i = 0; i < n; i++) {
        if (!has_measured[i]) continue;
        const plan_measured_run *run = &runs[i];
        const plan_cluster placed = plan_measured_cluster(c, run);
        plan_prediction p;
        plan_predict(&run->m, &run->w, &placed, r, &run->s, &p);
        if (run_mixed(&placed, run, 0)) measured[0] += run->ttft, predicted[0] += p.ttft;
        if (run_mixed(&placed, run, 1) && run->tpot > 0)
            measured[1] += run->tpot, predicted[1] += p.tpot;
    }
    for (int period = 0; period < 2; period++)
        if (predicted[period] > 0 && measured[period] > 0)
            r->mixed_cost[period] = fmax(1.0, measured[period] / predicted[period]);
}

/* What the TP all-reduces cost against the model, per period, on time-shared nodes and on the
 * others (docs/planner.md "Calibration"). Each blocking run gives y, what its all-reduces took
 * per generation, beside the model's time for them m and their number n (its bottleneck
 * stage's). With a core per rank, y is what its busiest rank's all-reduce events measured. On
 * a time-shared node those events also span the peers' products run on the rank's core, which
 * the model prices already as compute at the node's share, so y is instead what the whole run
 * measured beyond the rest of the model: the measured TTFT (or the decode steps at the
 * measured TPOT) less the prediction's, plus m. Two one-parameter forms are fitted, the ratio
 * a = sum y / sum m (the tiers priced too low or too high) and a wait per call
 * w = max(0, sum (y - m) / sum n) (a rank waiting until the scheduler runs each peer), and the
 * one whose relative errors over the runs are smaller is kept; a tie (one run fits both
 * exactly) keeps the ratio. */
enum { COMM_RUNS = 256 };
typedef struct {
    int n;
    double y[COMM_RUNS], m[COMM_RUNS], calls[COMM_RUNS];
} comm_points;

static void comm_fit(const comm_points *k, double *scale, double *wait) {
    double sy = 0, sm = 0, sn = 0;
    for (int i = 0; i < k->n; i++)
        sy += k->y[i], sm += k->m[i], sn += k->calls[i];
    const double a = sy / sm, w = fmax(0.0, (sy - sm) / sn);
    double err_ratio = 0, err_wait = 0;
    for (int i = 0; i < k->n; i++) {
        const double er = (a * k->m[i] - k->y[i]) / k->y[i];
        const double ew = (k->m[i] + w * k->calls[i] - k->y[i]) / k->y[i];
        err_ratio += er * er, err_wait += ew * ew;
    }
    const int per_call = err_wait + 1e-12 < err_ratio;
    *scale = per_call ? 1.0 : fmax(1e-3, a);
    *wait = per_call ? w : 0.0;
}

static void comm_cost_calibrate(plan_rates *r, const plan_cluster *c,
                                const plan_measured_run *runs, const int *has_measured, int n) {
    comm_points *pts = xcalloc(4, sizeof *pts); /* [shared * 2 + period] */
    for (int i = 0; i < n; i++) {
        const plan_measured_run *run = &runs[i];
        if (!has_measured[i] || !(run->tp_allreduce[0] + run->tp_allreduce[1] > 0)) continue;
        const plan_cluster placed = plan_measured_cluster(c, run);
        const int shared = plan_node_time_shared(&placed, run->s.dp * run->s.tp * run->s.pp);
        plan_prediction p;
        plan_predict(&run->m, &run->w, &placed, r, &run->s, &p);
        const int steps = run->w.new_tokens - 1;
        const double whole[2] = {run->ttft - p.ttft + p.tp_period[0],
                                 steps * (run->tpot - p.tpot) + p.tp_period[1]};
        for (int period = 0; period < 2; period++) {
            const double y = shared ? whole[period] : run->tp_allreduce[period];
            comm_points *k = &pts[shared * 2 + period];
            if (!(run->tp_allreduce[period] > 0 && y > 0 && p.tp_period[period] > 0 &&
                  p.tp_calls[period] > 0) ||
                k->n == COMM_RUNS)
                continue;
            k->y[k->n] = y, k->m[k->n] = p.tp_period[period], k->calls[k->n] = p.tp_calls[period];
            k->n++;
        }
    }
    for (int shared = 0; shared < 2; shared++)
        for (int period = 0; period < 2; period++)
            if (pts[shared * 2 + period].n > 0)
                comm_fit(&pts[shared * 2 + period], &r->comm_cost[shared][period],
                         &r->comm_wait[shared][period]);
    free(pts);
}

int plan_calibrate(plan_rates *r, const plan_cluster *c, const plan_model *m,
                   const char *const *runs, int n, FILE *warn) {
    calibration_sums *sum = xcalloc(1, sizeof *sum);
    plan_measured_run *measured = xcalloc((unsigned long)(n ? n : 1), sizeof *measured);
    int *has_measured = xcalloc((unsigned long)(n ? n : 1), sizeof *has_measured);
    int rc = STATUS_OK;
    for (int i = 0; i < n && rc == STATUS_OK; i++)
        rc = calibration_add(sum, c, m, runs[i], warn, &measured[i], &has_measured[i]);
    if (rc != STATUS_OK) {
        free(has_measured);
        free(measured);
        free(sum);
        return STATUS_BAD_INPUT;
    }
    for (int period = 0; period < 2; period++)
        for (int p = 0; p < PHASE_COUNT; p++)
            for (int shared = 0; shared < 2 && r->curve[period][p].n == 0; shared++)
                curve_set(&r->curve[period][p], &sum->phase[shared][period][p]);
    if (sum->expert_runs > 0) {
        r->expert_runs = sum->expert_runs;
        moe_load_shares(sum->expert_rows, m->cfg.layers, m->cfg.experts, r->expert_share);
    }
    comm_cost_calibrate(r, c, measured, has_measured, n);
    mixed_cost_calibrate(r, c, measured, has_measured, n);
    if (sum->tp_allreduce > 0)
        r->overlap_efficiency = fmin(1.0, fmax(0.0, 1.0 - sum->tp_wait / sum->tp_allreduce));
    free(has_measured);
    free(measured);
    free(sum);
    return STATUS_OK;
}
