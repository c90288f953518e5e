/* `tripar plan --validate RUN.h5...`: the planner checked against tripar's own measured runs.
 * Each run is predicted from the cluster file and the calibration of the other runs (leave one
 * out: the run predicted never calibrates itself), or with `--calibrate` of those runs alone
 * (held out), then predicted and measured TTFT, TPOT and
 * tokens/s are printed with their relative errors (docs/planner.md "Validation"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/path.h"
#include "io/runread.h"
#include "analysis/plan.h"
#include "analysis/plan_calibrate.h"
#include "analysis/plan_internal.h"
#include "analysis/plan_runs.h"

double plan_rel_error(double predicted, double measured) {
    return measured > 0 ? (predicted - measured) / measured : NAN;
}

static int double_compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void plan_error_summary(const double *e, int n, double *median, double *worst) {
    double *v = xmalloc((unsigned long)(n ? n : 1) * sizeof *v);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(e[i])) v[k++] = fabs(e[i]);
    qsort(v, (size_t)k, sizeof *v, double_compare);
    *median = k ? (k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2])) : NAN;
    *worst = k ? v[k - 1] : NAN;
    free(v);
}

int plan_rates_for_run(plan_rates *rates, const plan_cluster *c, const plan_model *m,
                       const char *const *runs, int n, int i, const char *const *cal, int n_cal) {
    const char *const *from = n_cal ? cal : runs;
    const int n_from = n_cal ? n_cal : n;
    const char **others = xcalloc((unsigned long)(n_from ? n_from : 1), sizeof *others);
    int k = 0, which;
    for (int j = 0; j < n_from; j++)
        if (n_cal ? !path_is_any_of(cal[j], &runs[i], 1, &which) : j != i) others[k++] = from[j];
    plan_rates_default(rates);
    const int rc = k ? plan_calibrate(rates, c, m, others, k, NULL) : STATUS_OK;
    free(others);
    return rc;
}

int plan_validate(FILE *out, const plan_cluster *c, const char *const *runs, int n,
                  const char *const *cal, int n_cal) {
    plan_measured_run *meas = xcalloc((unsigned long)n, sizeof *meas);
    int rc = STATUS_OK;
    for (int i = 0; i < n && rc == STATUS_OK; i++)
        rc = plan_measured_read(runs[i], c, &meas[i]);
    double *errors = xcalloc(3UL * (unsigned long)(n ? n : 1), sizeof *errors);
    if (rc == STATUS_OK)
        fprintf(out, "%-28s %-22s %10s %10s %7s %10s %10s %7s %10s %10s %7s\n", "run", "strategy",
                "TTFT ms", "measured", "err", "TPOT ms", "measured", "err", "tokens/s", "measured",
                "err");
    for (int i = 0; i < n && rc == STATUS_OK; i++) {
        plan_rates rates;
        if (plan_rates_for_run(&rates, c, &meas[i].m, runs, n, i, cal, n_cal) != STATUS_OK) {
            rc = STATUS_BAD_INPUT;
            break;
        }
        /* predicted where it ran (mpirun --map-by node fills nodes less than blocks do) */
        const plan_cluster placed = plan_measured_cluster(c, &meas[i]);
        plan_prediction p;
        plan_predict(&meas[i].m, &meas[i].w, &placed, &rates, &meas[i].s, &p);
        double *e = &errors[3 * i];
        e[0] = plan_rel_error(p.ttft, meas[i].ttft);
        e[1] = plan_rel_error(p.tpot, meas[i].tpot);
        e[2] = plan_rel_error(p.tokens_per_s, meas[i].tokens_per_s);
        const char *name = strrchr(runs[i], '/') ? strrchr(runs[i], '/') + 1 : runs[i];
        fprintf(out,
                "%-28.28s %-22.22s %10.3f %10.3f %+6.0f%% %10.3f %10.3f %+6.0f%% %10.1f %10.1f "
                "%+6.0f%%\n",
                name, meas[i].label, 1e3 * p.ttft, 1e3 * meas[i].ttft, 100 * e[0], 1e3 * p.tpot,
                1e3 * meas[i].tpot, 100 * e[1], p.tokens_per_s, meas[i].tokens_per_s, 100 * e[2]);
    }
    if (rc == STATUS_OK) {
        double col[3][2];
        for (int q = 0; q < 3; q++) {
            double *v = xmalloc((unsigned long)(n ? n : 1) * sizeof *v);
            for (int i = 0; i < n; i++)
                v[i] = errors[3 * i + q];
            plan_error_summary(v, n, &col[q][0], &col[q][1]);
            free(v);
        }
        char from[96];
        if (n_cal)
            snprintf(from, sizeof from, "the %d calibration run%s, held out", n_cal,
                     n_cal > 1 ? "s" : "");
        else
            snprintf(from, sizeof from, "the other %d", n - 1);
        fprintf(out,
                "\n|relative error|: TTFT median %.0f%% worst %.0f%%; TPOT median %.0f%% worst "
                "%.0f%%; tokens/s median %.0f%% worst %.0f%% (%d runs, each predicted from %s)\n",
                100 * col[0][0], 100 * col[0][1], 100 * col[1][0], 100 * col[1][1], 100 * col[2][0],
                100 * col[2][1], n, from);
    }
    free(errors);
    free(meas);
    return rc;
}
