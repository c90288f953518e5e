/* Calibration of `tripar plan` from measured runs: each compute phase's time against its
 * roofline on the cluster's ceilings, the cost of cores shared by replicas, and the overlap
 * efficiency (docs/planner.md "Calibration"). */
#pragma once
#include <stdio.h>

#include "analysis/plan_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets r from the slowest rank of each run (recorded with record.timings: layer): per period
 * and phase a curve of efficiency (roofline time / measured time) over arithmetic intensity,
 * the roofline on the ceilings of the rank's stage where the run placed it
 * (plan_stage_ceilings), from the ranks with a core to themselves wherever they measured the
 * phase; the cost of a core shared by replicas, from such runs' measured TTFT and TPOT against
 * their prediction; and the overlap efficiency 1 - tp_wait / tp_allreduce from the runs with
 * parallel.overlap and tp > 1. A run of another shape than m calibrates too, with one line
 * on warn naming both shapes (NULL: no warnings). Returns STATUS_OK, or STATUS_BAD_INPUT with
 * error_message() naming the file and why. */
int plan_calibrate(plan_rates *r, const plan_cluster *c, const plan_model *m,
                   const char *const *runs, int n, FILE *warn);

#ifdef __cplusplus
}
#endif
