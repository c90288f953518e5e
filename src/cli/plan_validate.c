/* `tripar plan --validate RUN.h5...`: the planner checked against tripar's own measured runs.
 * Each run is predicted from the cluster file and the calibration of the other runs (leave one
 * out: the run predicted never calibrates itself), then predicted and measured TTFT, TPOT and
 * tokens/s are printed with their relative errors (docs/planner.md "Validation"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "io/h5util.h"
#include "io/runread.h"
#include "cli/plan.h"
#include "cli/plan_calibrate.h"

typedef struct {
    plan_model m;
    plan_workload w;
    plan_strategy s;
    double ttft, tpot, tokens_per_s; /* measured medians (throughput: the mean) */
    int node_ranks;                  /* the most ranks the run put on one host (0: unknown) */
    char label[64];
} measured_run;

/* The most ranks of the run on one host, by the host names it recorded (0: none recorded). */
static int run_node_ranks(const run_data *run) {
    int most = 0;
    for (int r = 0; r < run->world_size; r++) {
        const int n = plan_run_host_ranks(run, r);
        if (n == 0) return 0;
        if (n > most) most = n;
    }
    return most;
}

/* The run's job, as its file records it (the resolved YAML), loaded like a job file. */
static int run_job_load(const run_data *run, job *j) {
    char *text = h5_attr_read_string_alloc(run->file, "job");
    if (!text) {
        error_set("%s: the run file records no job attribute", run->path);
        return STATUS_BAD_INPUT;
    }
    char tmp[] = "/tmp/tripar-plan-job-XXXXXX";
    int fd = mkstemp(tmp);
    size_t len = strlen(text);
    int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
    if (fd >= 0) close(fd);
    free(text);
    int rc = ok ? job_load(j, tmp, NULL, 0) : STATUS_BAD_INPUT;
    if (fd >= 0) unlink(tmp);
    if (!ok)
        error_set("%s: cannot stage its job in %s", run->path, tmp);
    else if (rc != STATUS_OK) {
        char why[1200];
        snprintf(why, sizeof why, "%s", error_message());
        error_set("%s: its job does not load (%s)", run->path, why);
    }
    return rc;
}

static int measured_read(const char *path, const plan_cluster *c, measured_run *out) {
    run_data run;
    memset(out, 0, sizeof *out);
    if (run_data_load(&run, path) != STATUS_OK) return STATUS_BAD_INPUT;
    int rc = STATUS_OK;
    job j;
    if (!run.complete) {
        error_set("%s is an incomplete run file (complete=0); validate against finished runs",
                  path);
        rc = STATUS_BAD_INPUT;
    } else if (!run.metrics.present || !(run.metrics.ttft_p50 > 0)) {
        error_set("%s has no measured TTFT (/metrics)", path);
        rc = STATUS_BAD_INPUT;
    } else if ((rc = run_job_load(&run, &j)) == STATUS_OK) {
        rc = plan_model_from_job(&j, &out->m, &out->w);
        job_free(&j);
    }
    if (rc == STATUS_OK) {
        out->s = (plan_strategy){.dp = run.dp,
                                 .tp = run.tp,
                                 .pp = run.pp,
                                 .microbatches = run.microbatches,
                                 .overlap = run.overlap};
        for (int i = 0; i < PLAN_ORDER_COUNT; i++)
            if (!strcmp(run.order, plan_order_names[i])) out->s.order = i;
        out->ttft = run.metrics.ttft_p50;
        out->tpot = run.metrics.tpot_p50;
        out->tokens_per_s = run.metrics.tokens_per_s;
        run_data_label(&run, out->label, sizeof out->label);
        out->node_ranks = run_node_ranks(&run);
        if (run.world_size > c->nodes * c->devices_per_node) {
            error_set("%s ran %d ranks, more than the cluster's %d devices (devices_per_node "
                      "is the ranks a node may hold; cores_per_node the cores they share)",
                      path, run.world_size, c->nodes * c->devices_per_node);
            rc = STATUS_BAD_INPUT;
        }
    }
    run_data_free(&run);
    return rc;
}

static double rel_error(double predicted, double measured) {
    return measured > 0 ? (predicted - measured) / measured : NAN;
}

static int double_compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and largest |error| of the finite values. */
static void error_summary(const double *e, int n, double *median, double *worst) {
    double *v = xmalloc((unsigned long)(n ? n : 1) * sizeof *v);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(e[i])) v[k++] = fabs(e[i]);
    qsort(v, (size_t)k, sizeof *v, double_compare);
    *median = k ? (k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2])) : NAN;
    *worst = k ? v[k - 1] : NAN;
    free(v);
}

int plan_validate(FILE *out, const plan_cluster *c, const char *const *runs, int n) {
    measured_run *meas = xcalloc((unsigned long)n, sizeof *meas);
    int rc = STATUS_OK;
    for (int i = 0; i < n && rc == STATUS_OK; i++)
        rc = measured_read(runs[i], c, &meas[i]);
    double *errors = xcalloc(3UL * (unsigned long)(n ? n : 1), sizeof *errors);
    const char **others = xcalloc((unsigned long)(n ? n : 1), sizeof *others);
    if (rc == STATUS_OK)
        fprintf(out, "%-28s %-22s %10s %10s %7s %10s %10s %7s %10s %10s %7s\n", "run", "strategy",
                "TTFT ms", "measured", "err", "TPOT ms", "measured", "err", "tokens/s", "measured",
                "err");
    for (int i = 0; i < n && rc == STATUS_OK; i++) {
        int k = 0;
        for (int j = 0; j < n; j++)
            if (j != i) others[k++] = runs[j];
        plan_rates rates;
        plan_rates_default(&rates);
        if (k && plan_calibrate(&rates, c, &meas[i].m, others, k) != STATUS_OK) {
            rc = STATUS_BAD_INPUT;
            break;
        }
        /* predicted where it ran: a run that filled its nodes less than block placement
         * would (mpirun --map-by node) is costed with the ranks per node it had */
        plan_cluster placed = *c;
        if (meas[i].node_ranks > 0 && meas[i].node_ranks < c->devices_per_node) {
            const int world = meas[i].s.dp * meas[i].s.tp * meas[i].s.pp;
            placed.devices_per_node = meas[i].node_ranks;
            placed.nodes = (world + meas[i].node_ranks - 1) / meas[i].node_ranks;
            if (placed.nodes < c->nodes) placed.nodes = c->nodes;
        }
        plan_prediction p;
        plan_predict(&meas[i].m, &meas[i].w, &placed, &rates, &meas[i].s, &p);
        double *e = &errors[3 * i];
        e[0] = rel_error(p.ttft, meas[i].ttft);
        e[1] = rel_error(p.tpot, meas[i].tpot);
        e[2] = rel_error(p.tokens_per_s, meas[i].tokens_per_s);
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
            error_summary(v, n, &col[q][0], &col[q][1]);
            free(v);
        }
        fprintf(out,
                "\n|relative error|: TTFT median %.0f%% worst %.0f%%; TPOT median %.0f%% worst "
                "%.0f%%; tokens/s median %.0f%% worst %.0f%% (%d runs, each predicted from the "
                "other %d)\n",
                100 * col[0][0], 100 * col[0][1], 100 * col[1][0], 100 * col[1][1], 100 * col[2][0],
                100 * col[2][1], n, n - 1);
    }
    free(others);
    free(errors);
    free(meas);
    return rc;
}
