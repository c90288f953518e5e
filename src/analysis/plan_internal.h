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

/* The rates `--validate` predicts run i with: the calibration of the other runs (leave one
 * out), for the model m; the default rates when there is no other run. */
int plan_rates_leave_one_out(plan_rates *rates, const plan_cluster *c, const plan_model *m,
                             const char *const *runs, int n, int i);

/* Cluster and published files (plan_cluster.c): "a, b, c" from a NULL-terminated key list, and
 * the check that m is a mapping whose keys are all in allowed (exit-2 message at the offending
 * node, naming `section` and the allowed keys). */
struct jnode;
void plan_keys_list(const char *const *keys, char *buf, size_t len);
int plan_section_check(const struct jnode *m, const struct jnode *at, const char *section,
                       const char *const *allowed);
