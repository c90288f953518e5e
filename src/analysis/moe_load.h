/* A mixture of experts' recorded load (/moe/expert_load, docs/schema.md "/moe") and its
 * imbalance: how far the busiest expert's tokens are above the mean expert's, per step, and
 * what that does to the EP block holding it. Read by `tripar report` and `tripar explain`. */
#pragma once
#include <hdf5.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Max/mean tokens per expert (mean over steps) at or above this is called unbalanced. */
#define MOE_IMBALANCE_HIGH 1.25

typedef struct {
    int replicas, steps, layers, experts;
    int top_k, shared, ep, iteration, steps_run;
    int32_t *load; /* (replicas, steps, layers, experts) rows routed to each expert */
} moe_load;

/* Reads /moe of an open run file. Returns 1 with out filled, 0 when the file has no /moe (a
 * dense model, or a file from before it), -1 with error_message() set when it is damaged. */
int moe_load_read(hid_t file, moe_load *out);
void moe_load_free(moe_load *l);

/* The two periods: step 0, and the decode steps 1 .. steps_run - 1. */
typedef enum { MOE_PREFILL = 0, MOE_DECODE, MOE_PERIODS } moe_period;
const char *moe_period_name(moe_period p); /* "prefill", "decode" */

/* The imbalance of one layer (or of every layer, layer = -1) in one period. A sample is one
 * replica's step in one layer with rows routed; its ratio is the most rows any expert served
 * over the mean (rows x top_k / experts). The block ratio is the same over the ep blocks of
 * experts / ep adjacent experts (1 when ep is 1): the EP rank whose block serves the most
 * rows sets the layer's pace, as the TP all-reduce after it waits for every block. */
typedef struct {
    int samples;                  /* 0: nothing routed in the period (then the rest is NaN / -1) */
    double ratio_mean, ratio_max; /* over the samples */
    double block_ratio_mean;      /* over the samples; 1 when ep is 1 */
    long long rows;               /* routed rows (top-k assignments) summed over the samples */
    int hottest_layer, hottest_expert; /* the (layer, expert) with the most rows summed */
    double hottest_share;              /* its share of the rows of its layer */
    int hottest_block;                 /* the ep block holding it: experts / ep per block */
} moe_imbalance;

void moe_imbalance_compute(const moe_load *l, moe_period p, int layer, moe_imbalance *out);

/* The layer with the largest ratio_mean in the period, or -1 when nothing was routed. */
int moe_worst_layer(const moe_load *l, moe_period p);

/* Adds the rows routed to each (layer, expert), over every replica and recorded step (prefill
 * and decode alike), into counts (layers x experts, the load's own shape). */
void moe_load_counts_add(const moe_load *l, double *counts);

/* moe_load_read and moe_load_counts_add for a model of `layers` x `experts`: returns 1 when
 * the file's load was added, 0 when it has none or one of another shape (a dense run, another
 * model), -1 with error_message() set when /moe is damaged. */
int moe_load_counts_read(hid_t file, int layers, int experts, double *counts);

/* Each layer's share of its routed rows per expert, from counts (layers x experts): share[l e]
 * = counts[l e] / the layer's sum; a layer with nothing routed gets uniform shares, 1 /
 * experts (phase_step.expert_share, metrics/phase_cost.h). */
void moe_load_shares(const double *counts, int layers, int experts, float *share);

#ifdef __cplusplus
}
#endif
