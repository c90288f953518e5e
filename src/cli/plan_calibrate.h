/* Calibration of `tripar plan` from measured runs: each compute phase's time against its
 * roofline on the cluster's ceilings, and the overlap efficiency (docs/planner.md). */
#pragma once
#include "metrics/plan_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets r's per-phase efficiencies from the slowest rank of each run (recorded with
 * record.timings: layer): efficiency = roofline time / measured time over every run together,
 * per period and phase, the roofline on the ceilings a rank reached where the run placed it
 * (plan_ceilings_shared: the busy ranks on the slowest rank's host); and the overlap efficiency 1 -
 * tp_wait / tp_allreduce from the runs with parallel.overlap and tp > 1. Returns STATUS_OK, or
 * STATUS_BAD_INPUT with error_message() naming the file and why. */
int plan_calibrate(plan_rates *r, const plan_cluster *c, const plan_model *m,
                   const char *const *runs, int n);

#ifdef __cplusplus
}
#endif
