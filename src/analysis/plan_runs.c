/* Measured runs for the planner: the job a run file records, loaded as a job file, gives the
 * model, workload and strategy; /metrics the measured medians; the host names the placement. */
#include "analysis/plan_runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "io/h5util.h"
#include "analysis/plan.h"

int plan_run_host_ranks(const run_data *run, int r) {
    if (!run->ranks || !run->ranks[r].host[0]) return 0;
    int n = 0;
    for (int i = 0; i < run->world_size; i++)
        n += !strcmp(run->ranks[i].host, run->ranks[r].host);
    return n;
}

/* The most ranks of the run on one host (0: no host names recorded). */
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

plan_strategy plan_run_strategy(const run_data *run) {
    plan_strategy s = {.dp = run->dp,
                       .tp = run->tp,
                       .pp = run->pp,
                       .microbatches = run->microbatches,
                       .overlap = run->overlap,
                       .ep = run->ep};
    for (int i = 0; i < PLAN_ORDER_COUNT; i++)
        if (!strcmp(run->order, plan_order_names[i])) s.order = i;
    return s;
}

int plan_measured_from(const run_data *run, const plan_cluster *c, plan_measured_run *out) {
    memset(out, 0, sizeof *out);
    int rc = STATUS_OK;
    job j;
    if (!run->complete) {
        error_set("%s is an incomplete run file (complete=0); validate against finished runs",
                  run->path);
        rc = STATUS_BAD_INPUT;
    } else if (!run->metrics.present || !(run->metrics.ttft_p50 > 0)) {
        error_set("%s has no measured TTFT (/metrics)", run->path);
        rc = STATUS_BAD_INPUT;
    } else if ((rc = run_job_load(run, &j)) == STATUS_OK) {
        rc = plan_model_from_job(&j, &out->m, &out->w);
        job_free(&j);
    }
    if (rc == STATUS_OK) {
        out->s = plan_run_strategy(run);
        out->ttft = run->metrics.ttft_p50;
        out->tpot = run->metrics.tpot_p50;
        out->tokens_per_s = run->metrics.tokens_per_s;
        run_data_label(run, out->label, sizeof out->label);
        out->node_ranks = run_node_ranks(run);
        if (run->world_size > c->nodes * c->devices_per_node) {
            error_set("%s ran %d ranks, more than the cluster's %d devices (devices_per_node "
                      "is the ranks a node may hold; cores_per_node the cores they share)",
                      run->path, run->world_size, c->nodes * c->devices_per_node);
            rc = STATUS_BAD_INPUT;
        }
    }
    return rc;
}

int plan_measured_read(const char *path, const plan_cluster *c, plan_measured_run *out) {
    run_data run;
    memset(out, 0, sizeof *out);
    if (run_data_load(&run, path) != STATUS_OK) return STATUS_BAD_INPUT;
    const int rc = plan_measured_from(&run, c, out);
    run_data_free(&run);
    return rc;
}

plan_cluster plan_measured_cluster(const plan_cluster *c, const plan_measured_run *run) {
    plan_cluster placed = *c;
    if (run->node_ranks > 0 && run->node_ranks < c->devices_per_node) {
        const int world = run->s.dp * run->s.tp * run->s.pp;
        placed.devices_per_node = run->node_ranks;
        placed.nodes = (world + run->node_ranks - 1) / run->node_ranks;
        if (placed.nodes < c->nodes) placed.nodes = c->nodes;
    }
    return placed;
}
