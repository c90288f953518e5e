/* What the planner's own files share and its users need not see (plan_cost.c,
 * plan_collectives.c, plan_placement.c, plan_validate.c, plan_published.c). */
#pragma once
#include "analysis/plan_cost.h"

/* The tier as `flows` flows crossing a node's links at once see it: beta x min(1, links_per_node
 * / flows) on inter tiers (a link per device when not given); the intra tier unchanged. */
plan_tier plan_tier_shared(const plan_cluster *c, plan_tier_kind kind, int flows);

/* The median and the largest |e[i]| over the finite values of e[0..n) (NAN when none): the
 * summary of `--validate` and `--validate-published`. */
void plan_error_summary(const double *e, int n, double *median, double *worst);

/* (predicted - measured) / measured; NAN when measured is not > 0. */
double plan_rel_error(double predicted, double measured);

/* The rates `--validate` predicts runs[i] with, for the model m: without calibration runs
 * (n_cal 0), the calibration of the other validated runs (leave one out); with them, the
 * calibration runs alone (held out), less runs[i] itself if it is one of them (the same file,
 * however named). The default rates when no run is left to calibrate. */
int plan_rates_for_run(plan_rates *rates, const plan_cluster *c, const plan_model *m,
                       const char *const *runs, int n, int i, const char *const *cal, int n_cal);

/* Cluster and published files (plan_cluster.c): "a, b, c" from a NULL-terminated key list, and
 * the check that m is a mapping whose keys are all in allowed (exit-2 message at the offending
 * node, naming `section` and the allowed keys). */
struct jnode;
void plan_keys_list(const char *const *keys, char *buf, size_t len);
int plan_section_check(const struct jnode *m, const struct jnode *at, const char *section,
                       const char *const *allowed);
