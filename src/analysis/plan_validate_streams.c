/* `tripar plan --validate` on arrival-rate runs: the goodput model (plan_goodput.h) checked
 * against tripar's own streams. Each run's recorded arrivals go through the simulated serve
 * loop with the per-generation times the planner predicts from the other runs' calibration
 * (or the --calibrate runs');
 * predicted and measured TTFT, TPOT and goodput are printed with their relative errors
 * (docs/planner.md "Goodput under an arrival rate"). */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/stats.h"
#include "io/h5util.h"
#include "analysis/plan.h"
#include "analysis/plan_goodput.h"
#include "analysis/plan_internal.h"
#include "analysis/plan_runs.h"

/* What a run's /metrics/arrival holds (docs/benchmarks.md "Arrival-rate mode"). */
typedef struct {
    double rate, duration;
    long arrived, served;
    double *arrival; /* (arrived) */
    double *ttft;    /* (served) */
    double *latency; /* (served) */
} run_stream;

static void run_stream_free(run_stream *st) {
    free(st->arrival);
    free(st->ttft);
    free(st->latency);
    memset(st, 0, sizeof *st);
}

/* 1 with *st filled when the run has a stream, 0 when it has none, -1 (error set) when its
 * stream cannot be read. */
static int run_stream_read(const char *path, run_stream *st) {
    memset(st, 0, sizeof *st);
    hid_t f = h5_open_read(path);
    if (f < 0) return -1;
    int rc = 0;
    if (h5_exists(f, "metrics/arrival")) {
        hid_t g = H5Gopen2(f, "metrics/arrival", H5P_DEFAULT);
        int nd;
        hsize_t dims[8];
        st->arrival = h5_dataset_read_all(f, "metrics/arrival/arrival", H5T_NATIVE_DOUBLE, &nd,
                                          dims, &st->arrived);
        st->ttft = h5_dataset_read_all(f, "metrics/arrival/ttft", H5T_NATIVE_DOUBLE, &nd, dims,
                                       &st->served);
        long n_latency = 0;
        st->latency = h5_dataset_read_all(f, "metrics/arrival/latency", H5T_NATIVE_DOUBLE, &nd,
                                          dims, &n_latency);
        const int ok = g >= 0 && h5_attr_read_double(g, "target_rate", &st->rate) == 0 &&
                       h5_attr_read_double(g, "duration", &st->duration) == 0 && st->arrival &&
                       st->arrived > 0 && n_latency == st->served &&
                       (st->served == 0 || (st->ttft && st->latency));
        if (g >= 0) H5Gclose(g);
        if (ok)
            rc = 1;
        else {
            error_set("%s: /metrics/arrival lacks its arrival, ttft or latency series, or its "
                      "target_rate and duration attributes (docs/benchmarks.md)",
                      path);
            run_stream_free(st);
            rc = -1;
        }
    }
    H5Fclose(f);
    return rc;
}

/* What the stream measured, summarised as the simulation summarises its own. */
static void stream_measured(const run_stream *st, int new_tokens, const plan_load *load,
                            plan_served *out) {
    memset(out, 0, sizeof *out);
    out->arrived = st->arrived;
    out->served = st->served;
    double *tpot = xcalloc((size_t)st->served + 1, sizeof *tpot);
    for (long i = 0; i < st->served; i++) {
        tpot[i] = new_tokens > 1 ? (st->latency[i] - st->ttft[i]) / (new_tokens - 1) : 0;
        out->met += st->ttft[i] <= load->ttft_slo && tpot[i] <= load->tpot_slo;
    }
    out->attainment = (double)out->met / (double)st->arrived;
    out->goodput = load->rate * out->attainment;
    if (st->served > 0) {
        out->ttft_p50 = stats_percentile_of(st->ttft, st->served, 50);
        out->ttft_p90 = stats_percentile_of(st->ttft, st->served, 90);
        out->tpot_p50 = stats_percentile_of(tpot, st->served, 50);
        out->tpot_p90 = stats_percentile_of(tpot, st->served, 90);
    }
    free(tpot);
}

enum { N_ERR = 4 }; /* TTFT p50, TTFT p90, TPOT p50, goodput */

int plan_validate_streams(FILE *out, const plan_cluster *c, const char *const *runs, int n,
                          const char *const *cal, int n_cal, double ttft_slo, double tpot_slo) {
    const int targets = ttft_slo > 0 && tpot_slo > 0;
    double *errors = xcalloc((size_t)N_ERR * (size_t)(n ? n : 1), sizeof *errors);
    for (int i = 0; i < N_ERR * n; i++)
        errors[i] = NAN; /* runs without a stream count in no summary */
    int rc = STATUS_OK, streams = 0;
    for (int i = 0; i < n && rc == STATUS_OK; i++) {
        run_stream st;
        const int has = run_stream_read(runs[i], &st);
        if (has < 0) rc = STATUS_BAD_INPUT;
        if (has <= 0) continue;
        plan_measured_run meas;
        plan_rates rates;
        if (plan_measured_read(runs[i], c, &meas) != STATUS_OK ||
            plan_rates_for_run(&rates, c, &meas.m, runs, n, i, cal, n_cal) != STATUS_OK) {
            run_stream_free(&st);
            rc = STATUS_BAD_INPUT;
            break;
        }
        if (streams++ == 0)
            fprintf(out,
                    "\narrival streams (each run's own arrivals through the simulated serve loop%s%s"
                    "):\n%-24s %-16s %6s %9s %9s %6s %9s %9s %6s %8s %8s %6s %8s %8s %6s\n",
                    targets ? "; goodput: requests/s within both targets" : "",
                    targets ? "" : "; --ttft and --tpot give the goodput", "run", "strategy",
                    "req/s", "TTFT p50", "measured", "err", "TTFT p90", "measured", "err",
                    "TPOT p50", "measured", "err", "goodput", "measured", "err");
        const plan_load load = {st.rate, st.duration, 0, targets ? ttft_slo : INFINITY,
                                targets ? tpot_slo : INFINITY};
        const plan_cluster placed = plan_measured_cluster(c, &meas);
        double *ttft = xcalloc((size_t)meas.w.batch + 1, sizeof *ttft);
        double *e2e = xcalloc((size_t)meas.w.batch + 1, sizeof *e2e);
        plan_serve_costs_fill(&meas.m, &meas.w, &placed, &rates, &meas.s, ttft, e2e);
        const plan_serve_costs k = {meas.w.batch, meas.w.new_tokens, ttft, e2e};
        plan_served p, m;
        plan_serve_simulate(&k, st.arrival, st.arrived, 2 * st.duration, &load, &p);
        stream_measured(&st, meas.w.new_tokens, &load, &m);
        double *e = &errors[N_ERR * i];
        e[0] = plan_rel_error(p.ttft_p50, m.ttft_p50);
        e[1] = plan_rel_error(p.ttft_p90, m.ttft_p90);
        e[2] = plan_rel_error(p.tpot_p50, m.tpot_p50);
        /* no request within the targets, predicted and measured: the prediction is right;
         * some predicted where none was measured: as wrong as it gets (inf, the worst) */
        e[3] = !targets                 ? NAN
               : m.goodput > 0          ? plan_rel_error(p.goodput, m.goodput)
               : p.goodput == 0         ? 0
                                        : INFINITY;
        const char *name = strrchr(runs[i], '/') ? strrchr(runs[i], '/') + 1 : runs[i];
        fprintf(out,
                "%-24.24s %-16.16s %6.2f %9.1f %9.1f %+5.0f%% %9.1f %9.1f %+5.0f%% %8.2f %8.2f "
                "%+5.0f%% %8.3f %8.3f %+5.0f%%\n",
                name, meas.label, st.rate, 1e3 * p.ttft_p50, 1e3 * m.ttft_p50, 100 * e[0],
                1e3 * p.ttft_p90, 1e3 * m.ttft_p90, 100 * e[1], 1e3 * p.tpot_p50,
                1e3 * m.tpot_p50, 100 * e[2], targets ? p.goodput : NAN,
                targets ? m.goodput : NAN, 100 * e[3]);
        free(ttft);
        free(e2e);
        run_stream_free(&st);
    }
    if (rc == STATUS_OK && streams > 0) {
        double med[N_ERR], worst[N_ERR];
        double *v = xcalloc((size_t)(n ? n : 1), sizeof *v);
        for (int q = 0; q < N_ERR; q++) {
            /* the summary skips what is not finite: an infinite error counts as the largest */
            for (int i = 0; i < n; i++)
                v[i] = isinf(errors[N_ERR * i + q]) ? 1e300 : errors[N_ERR * i + q];
            plan_error_summary(v, n, &med[q], &worst[q]);
            /* a median between a finite error and an infinite one is as large */
            if (med[q] >= 1e299) med[q] = INFINITY;
            if (worst[q] >= 1e299) worst[q] = INFINITY;
        }
        free(v);
        fprintf(out,
                "\n|relative error| over %d streams: TTFT p50 median %.0f%% worst %.0f%%; TTFT "
                "p90 median %.0f%% worst %.0f%%; TPOT p50 median %.0f%% worst %.0f%%; goodput "
                "median %.0f%% worst %.0f%%\n",
                streams, 100 * med[0], 100 * worst[0], 100 * med[1], 100 * worst[1], 100 * med[2],
                100 * worst[2], 100 * med[3], 100 * worst[3]);
    }
    free(errors);
    return rc;
}
