/* Per-phase rates for `tripar plan` from runs recorded with record.timings: layer: the phase
 * times and analytic costs of cli/run_roofline.c, read against the cluster file's ceilings, so
 * the planner predicts what the code achieves rather than what the hardware peaks at. */
#include "cli/plan_calibrate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "io/runread.h"
#include "cli/run_roofline.h"

/* Sums over every run, so a phase measured in several is weighted by its time. */
typedef struct {
    double roof[2][PHASE_COUNT], seconds[2][PHASE_COUNT];
    double tp_wait, tp_allreduce;
} calibration_sums;

/* The ranks of a run on the node of its rank r, by the host names it recorded; block
 * placement on the cluster when it recorded none. */
static int ranks_on_host(const run_data *run, int r, const plan_cluster *c) {
    if (!run->ranks || !run->ranks[r].host[0]) return plan_node_ranks(c, run->world_size);
    int n = 0;
    for (int i = 0; i < run->world_size; i++)
        n += !strcmp(run->ranks[i].host, run->ranks[r].host);
    return n;
}

static int calibration_add(calibration_sums *sum, const plan_cluster *c, const char *path) {
    run_data run;
    if (run_data_load(&run, path) != STATUS_OK) return STATUS_BAD_INPUT;
    if (!run.complete) {
        error_set("%s is an incomplete run file (complete=0); calibrate from finished runs", path);
        run_data_free(&run);
        return STATUS_BAD_INPUT;
    }
    run_roofline table;
    const int slowest = run_roofline_slowest_rank(&run);
    int rc = run_roofline_compute(&run, slowest, &table);
    if (rc != STATUS_OK) {
        run_data_free(&run);
        return rc;
    }
    /* The roofline of the run's own placement: ranks busy at once on the slowest rank's node
     * time-shared its cores (or split its bandwidth) and reached less than the device's ceilings,
     * and its efficiencies are read against that, so that they carry over to runs with a core per
     * rank. */
    const int busy = plan_busy_ranks(ranks_on_host(&run, slowest, c), run.pp, run.microbatches);
    const plan_ceilings k = plan_ceilings_shared(c, busy);
    int any = 0;
    for (int period = 0; period < ROOF_PERIOD_COUNT; period++) {
        for (int p = 0; p < PHASE_COUNT; p++) {
            const roof_phase *ph = &table.phase[period][p];
            if (!phase_cost_modelled((phase)p) || ph->events == 0 || !(ph->seconds > 0)) continue;
            sum->roof[period][p] += fmax(ph->flops / k.flops, ph->bytes / k.bw);
            sum->seconds[period][p] += ph->seconds;
            any = 1;
        }
        if (run.overlap && run.tp > 1) {
            sum->tp_wait += table.phase[period][PHASE_TP_WAIT].seconds;
            sum->tp_allreduce += table.phase[period][PHASE_TP_ALLREDUCE].seconds;
        }
    }
    run_data_free(&run);
    if (!any) {
        error_set("%s has no timed compute phases; record it with record.timings: layer", path);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

int plan_calibrate(plan_rates *r, const plan_cluster *c, const plan_model *m,
                   const char *const *runs, int n) {
    (void)m; /* the efficiencies carry over between shapes: docs/planner.md says where not */
    calibration_sums sum;
    memset(&sum, 0, sizeof sum);
    for (int i = 0; i < n; i++)
        if (calibration_add(&sum, c, runs[i]) != STATUS_OK) return STATUS_BAD_INPUT;
    for (int period = 0; period < 2; period++)
        for (int p = 0; p < PHASE_COUNT; p++)
            if (sum.seconds[period][p] > 0 && sum.roof[period][p] > 0) {
                r->efficiency[period][p] = sum.roof[period][p] / sum.seconds[period][p];
                r->calibrated[period][p] = 1;
            }
    if (sum.tp_allreduce > 0)
        r->overlap_efficiency = fmin(1.0, fmax(0.0, 1.0 - sum.tp_wait / sum.tp_allreduce));
    return STATUS_OK;
}
