/* `tripar plan`'s output (plan_output.c): the ranked table, CSV and JSON. What the planner
 * computes is analysis/plan.h, the cost model analysis/plan_cost.h. */
#pragma once
#include <stdio.h>

#include "analysis/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ranked strategies: the first top rows as a table on out (strategies that differ only in
 * the order, with the same figures, share a row), and every one to CSV or JSON (format "csv"
 * or "json") on out instead when format is not "text". *written: the strategies written. */
int plan_output_write(FILE *out, const char *format, const plan_summary *q, const plan_cluster *c,
                      const plan_prediction *ranked, int n, int top, int *written);

#ifdef __cplusplus
}
#endif
