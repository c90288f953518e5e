/* `tripar explain BASE OTHER...`: attributes the difference in TTFT, TPOT and end-to-end
 * latency between run files to additive buckets (phases by layer, communication kinds, host
 * gaps) that sum exactly to it, plus a structure split and a verdict in words. The method is
 * docs/explain.md; explain_attr.c computes, explain_verdict.c words, cli/explain.c prints. */
#pragma once
#include <stddef.h>

#include "io/runread.h"
#include "metrics/timing.h"
#include "analysis/run_roofline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The measured quantities, means over the measured iterations. */
typedef enum { EXPLAIN_TTFT = 0, EXPLAIN_TPOT, EXPLAIN_E2E, EXPLAIN_QTY_COUNT } explain_qty;

/* Bucket kinds: every leaf phase, plus the host gap (instants no leaf covers). step,
 * iteration, weight_init and tp_allreduce are not leaves (they enclose other phases; the
 * exposed part of a TP all-reduce is its tp_wait), so their kinds stay empty. */
#define EXPLAIN_HOST_GAP PHASE_COUNT
enum { EXPLAIN_KIND_COUNT = PHASE_COUNT + 1 };

/* One run file reduced to what explain compares. */
typedef struct {
    run_data run;
    char label[96];                     /* strategy, run_data_label */
    char arch[32], embd[32], vocab[32]; /* the model identity explain checks */
    int model_layers;                   /* model.layers (0 when not recorded) */
    int steps;                          /* steps per generation: max(new_tokens, 1) */
    int iterations;                     /* measured iterations every rank recorded */
    double measured[EXPLAIN_QTY_COUNT]; /* from the events, seconds */
    double metrics[EXPLAIN_QTY_COUNT];  /* the /metrics means (NaN when absent) */
    int slots;                         /* layer slots: model layers + 1 (slot 0 = outside layers) */
    double *bucket[EXPLAIN_QTY_COUNT]; /* (EXPLAIN_KIND_COUNT, slots) mean seconds each */
    /* the critical rank: whose iteration ends last; the one most often so */
    int critical_rank, critical_iterations;
    int critical_layers; /* distinct layers in its events: the structure's layer count */
    /* why it is slow, over each rank's own iteration window (mean seconds) */
    int median_rank;                            /* the rank of median E2E window */
    int busiest_kind;                           /* the critical rank's largest bucket kind */
    double busiest_share, busiest_median_share; /* of its window; the median over ranks */
    int excess_kind; /* where it exceeds the median over ranks the most */
    double excess_seconds;
    /* roof holds the critical rank's roofline; 0 when the file could not be priced (the
     * attribution stands, without rates) */
    int has_roof;
    run_roofline roof;
} explain_run;

/* Loads and reduces path. Returns 0, or STATUS_BAD_INPUT with error_message() set to one
 * line naming path and the reason: not a run file, incomplete, no job attribute, no
 * layer-level timings, no measured iteration on every rank. */
int explain_run_load(explain_run *x, const char *path);
void explain_run_free(explain_run *x);

/* Whether two runs can be compared: same model.arch, embd and vocab. When not, error_message()
 * names both files and the first difference. */
int explain_runs_comparable(const explain_run *base, const explain_run *other);

/* Seconds of one bucket kind over all layer slots; of every kind; of the kinds inside layers. */
double explain_kind_seconds(const explain_run *x, explain_qty q, int kind);
double explain_total_seconds(const explain_run *x, explain_qty q);
double explain_layer_seconds(const explain_run *x, explain_qty q);

/* The structure of the per-layer work: total = layers x per-layer cost, and the difference
 * split exactly as (L_o - L_b) c_b (layer count) + L_o (c_o - c_b) (per-layer cost), with the
 * work outside layers as the rest. */
typedef struct {
    double layers_base, layers_other;                          /* L_b, L_o */
    double per_layer_base, per_layer_other;                    /* c_b, c_o seconds */
    double layer_count, per_layer_cost, outside_layers, total; /* diff parts, seconds */
} explain_structure;
void explain_structure_compute(const explain_run *base, const explain_run *other, explain_qty q,
                               explain_structure *out);

/* The row kinds of the table, in print order, and their words. */
extern const int explain_row_kinds[];
extern const int explain_row_count;
const char *explain_kind_name(int kind);     /* "mlp_gemm", "host_gap" */
const char *explain_kind_words(int kind);    /* "exposed TP all-reduce", ... ("" for phases) */
const char *explain_qty_name(explain_qty q); /* "ttft", "tpot", "e2e" */

/* The critical rank of x and why it is slow, in one line ("rank 3 (dp0 tp0 pp1), critical in
 * 5/5 iterations: 41% of its time is pp_recv_wait (median rank 12%); ..."). */
void explain_critical_words(const explain_run *x, char *out, size_t len);

/* A row's roofline in words for x's critical rank ("compute-bound, 81% of the GEMM ceiling"),
 * or "" when there is none for that kind. */
void explain_roof_words(const explain_run *x, int kind, char *out, size_t len);

/* The roofline totals of a kind on x's critical rank over both periods, per iteration:
 * bytes and FLOPs, achieved GB/s and GFLOP/s, and the label (a roof_bound) of the period it
 * spends most time in. 0 when x has no roofline or the kind no events. */
int explain_roof_total(const explain_run *x, int kind, double *bytes, double *flops, double *gbs,
                       double *gflops, int *bound);

/* The verdict: OTHER against BASE, ranking the causes by |contribution| to the end-to-end
 * difference, each clause naming a row of the table. */
void explain_verdict(const explain_run *base, const explain_run *other, char *out, size_t len);

#ifdef __cplusplus
}
#endif
