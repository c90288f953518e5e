/* Measured runs as the planner reads them: what a run file says was run (the model, workload
 * and strategy of the job it records, its ranks per host) and what it measured, for
 * `tripar plan --validate` and the calibration (docs/planner.md). */
#pragma once
#include "io/runread.h"
#include "analysis/plan_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    plan_model m;
    plan_workload w;
    plan_strategy s;
    double ttft, tpot, tokens_per_s; /* measured medians (throughput: the mean) */
    int node_ranks;                  /* the most ranks the run put on one host (0: unknown) */
    double tp_allreduce[2]; /* its blocking TP all-reduces per generation, prefill and decode,
                               on its busiest rank (plan_calibrate; 0: none measured) */
    char label[64];
} plan_measured_run;

/* The ranks of the run on the host of its rank r, by the host names it recorded; 0 when it
 * recorded none. */
int plan_run_host_ranks(const run_data *run, int r);

/* The strategy the run file records (its mesh, micro-batches, overlap and order). */
plan_strategy plan_run_strategy(const run_data *run);

/* What a loaded run file says was run and measured: a finished run with /metrics and a job
 * that still loads, on a cluster with room for its ranks. Returns STATUS_OK, or
 * STATUS_BAD_INPUT with error_message() saying why. */
int plan_measured_from(const run_data *run, const plan_cluster *c, plan_measured_run *out);
/* The same, from the file at path. */
int plan_measured_read(const char *path, const plan_cluster *c, plan_measured_run *out);

/* The cluster as the run placed its ranks: a run that filled its nodes less than block
 * placement would (mpirun --map-by node) gets the ranks per node it had. */
plan_cluster plan_measured_cluster(const plan_cluster *c, const plan_measured_run *run);

#ifdef __cplusplus
}
#endif
