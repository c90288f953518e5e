/* Goodput under an arrival rate (`tripar plan --rate`, docs/planner.md "Goodput under an
 * arrival rate"): a strategy's per-generation times from the cost model, fed through a
 * deterministic simulation of tripar's own serve loop (engine/serve.c) over a seeded Poisson
 * stream, give each request's TTFT and TPOT and so the rate of requests meeting both targets. */
#pragma once
#include <stdint.h>

#include "analysis/plan_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one generation of n requests costs, n = 1..batch (index 0 unused). */
typedef struct {
    int batch;         /* the input batch: the most requests one generation serves */
    int new_tokens;    /* K: TPOT = (e2e - ttft) / (K - 1), 0 when K = 1 */
    const double *ttft; /* (batch + 1) seconds from the generation's start to its first token */
    const double *e2e;  /* (batch + 1) seconds from its start to its last token */
} plan_serve_costs;

/* The stream and the targets. */
typedef struct {
    double rate;     /* requests/s, > 0 */
    double duration; /* arrivals in [0, duration); the loop stops starting batches at 2 x it */
    uint64_t seed;   /* serve_arrivals' seed (bench.arrival_seed) */
    double ttft_slo, tpot_slo; /* seconds, > 0 */
} plan_load;

/* Serves the n ascending arrival times as serve_run decides batches: when the server is free
 * at time t it starts a generation of the min(waiting, batch) oldest requests that arrived by
 * t, which ends at t + e2e[b]; when none waits it idles until the next arrival; it starts
 * nothing at or after `bound` (those requests are unserved). Each request's TTFT is its
 * batch's start + ttft[b] - its arrival, its TPOT its batch's; it meets the targets when both
 * are within them. Fills out (goodput = rate x met / n). */
void plan_serve_simulate(const plan_serve_costs *k, const double *arrival, long n, double bound,
                         const plan_load *load, plan_served *out);

/* The times of generations of 1..w->batch requests for strategy s: plan_predict at each n of
 * 1..8, the powers of two above and the batch itself (dp replicas of at least one sequence
 * each, micro-batches at most the smallest replica's), linear in n between them. ttft and e2e
 * hold w->batch + 1 entries each. */
void plan_serve_costs_fill(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                           const plan_rates *r, const plan_strategy *s, double *ttft, double *e2e);

/* The stream of load (serve_arrivals) through strategy s's costs: out->served of the whole. */
void plan_goodput_predict(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                          const plan_rates *r, const plan_strategy *s, const plan_load *load,
                          plan_served *out);

#ifdef __cplusplus
}
#endif
