/* `tripar explain BASE OTHER...`: attributes the difference in TTFT, TPOT and end-to-end
 * latency between run files to additive buckets (phases by layer, communication kinds, host
 * gaps) that sum exactly to it, plus a structure split and a verdict in words. The method is
 * docs/explain.md; explain_attr.c computes, explain_verdict.c words, cli/explain.c prints. */
#pragma once
#include <stddef.h>

#include "io/runread.h"
#include "metrics/timing.h"
#include "analysis/moe_load.h"
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

/* A leaf kind is a wait (the rank blocked on another: every phase named *_wait, pp_send,
 * dp_gather) or the rank's own work (every other leaf). By name, so a wait phase added to the
 * enum (sample_wait) is one without a change here. The host gap is neither. */
int explain_kind_is_wait(int kind);
int explain_kind_is_work(int kind);
/* Leaves: every phase but step, iteration, weight_init and tp_allreduce (they enclose others). */
int explain_kind_is_leaf(int kind);

/* One rank's own iteration windows, means per measured iteration (docs/explain.md, "Ranks").
 * Its waits inside a group collective (the same phase, step, micro-batch, layer and
 * occurrence on every rank of its TP group) are split at the last peer's arrival and the
 * first peer's exit: before the last arrival it waited for a peer; from the first exit on it
 * was late itself (it left after a peer had already left: it was not running); between them
 * is the collective itself, shared by all. Waits without a match (PP, DP) are waited whole. */
typedef struct {
    double window;                     /* its iteration windows */
    double kind[EXPLAIN_KIND_COUNT];   /* its windows split by bucket kind */
    double waited[EXPLAIN_KIND_COUNT]; /* per wait kind: blocked for a peer */
    double late[EXPLAIN_KIND_COUNT];   /* per wait kind: blocked after a peer had left */
    double shared[EXPLAIN_KIND_COUNT]; /* per wait kind: once all arrived, until one left */
    double own;                        /* window - waited - shared: its work, gaps, late exits */
    double *own_it;                    /* (iterations) own per iteration, for the noise */
    double preempted;     /* /sched run_delay summed over its steps; NaN when not recorded */
    double *preempted_it; /* (iterations) per iteration; NULL when not recorded */
    double nivcsw;        /* /sched involuntary context switches; NaN when not recorded */
} explain_rank;

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
    /* its lead: mean over iterations of its iteration end minus the latest other rank's; the
     * noise it must exceed to be named (the lead's spread over iterations, 1% of E2E, twice
     * the clock uncertainty, the largest); named 0: the ranks finish together */
    double critical_lead, critical_noise;
    int critical_named;
    int critical_layers; /* distinct layers in its events: the structure's layer count */
    /* why it is slow, over each rank's own iteration window (mean seconds) */
    int busiest_kind;                           /* the critical rank's largest bucket kind */
    double busiest_share, busiest_median_share; /* of its window; the median over the others */
    int excess_kind; /* where it exceeds the median of the other ranks the most */
    double excess_seconds;
    explain_rank *ranks; /* (world_size) */
    int sched_present;   /* /sched recorded: the ranks' preempted times are measured */
    char sched_source[128];
    /* roof holds the critical rank's roofline; 0 when the file could not be priced (the
     * attribution stands, without rates) */
    int has_roof;
    run_roofline roof;
    /* a mixture of experts' recorded load (/moe); has_moe 0 for a dense run */
    int has_moe;
    moe_load moe;
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
 * split exactly as (L_o - L_b) c_b (layer count) + L_o (c_o - c_b) (per-layer cost), the
 * pipeline bubble (pp_recv_wait, outside layers), and the other work outside layers. */
typedef struct {
    double layers_base, layers_other;       /* L_b, L_o */
    double per_layer_base, per_layer_other; /* c_b, c_o seconds */
    double layer_count, per_layer_cost, pipeline_bubble, outside_layers, total; /* diff parts */
} explain_structure;
void explain_structure_compute(const explain_run *base, const explain_run *other, explain_qty q,
                               explain_structure *out);

/* The row kinds of the table in print order: the work kinds, the wait kinds (a wait phase
 * the enum gains joins them), the host gap. Returns the count; kinds gets them. */
int explain_row_kinds(int kinds[EXPLAIN_KIND_COUNT]);
const char *explain_kind_name(int kind);     /* "mlp_gemm", "host_gap" */
const char *explain_kind_words(int kind);    /* "exposed TP all-reduce", ... ("" for phases) */
const char *explain_qty_name(explain_qty q); /* "ttft", "tpot", "e2e" */

/* The critical rank of x and why it is slow, in one line ("rank 3 (dp0 tp0 pp1), critical in
 * 5/5 iterations, leading by 0.8 ms (noise 0.1 ms): 41% of its time is pp_recv_wait (median
 * of the other ranks 12%); ..."), or, when its lead is within the noise, that the TP group
 * (the ranks) finish together. */
void explain_critical_words(const explain_run *x, char *out, size_t len);

/* The per-rank accounting of x (explain_ranks.c): waits split at collectives, own time and its
 * per-iteration series, /sched's preempted time, the critical rank's lead and noise. Called
 * by explain_run_load once the windows and the per-rank kinds are in. */
void explain_ranks_account(explain_run *x, const double *it_start, const double *it_end);
void explain_ranks_free(explain_run *x);

/* A rank's own work in a work kind: the kind less what of it was a collective (sample, in
 * files that recorded the argmax all-reduce inside it). */
double explain_rank_work(const explain_rank *rk, int kind);

/* One rank of OTHER against the same rank of BASE (explain_straggler.c), seconds per
 * iteration. lead: its own-time change minus the smallest change among the other ranks of
 * its groups (TP group, pipeline, DP group); noise: what the lead must exceed (twice the
 * standard error of the per-iteration difference, in both runs, and 1% of BASE's E2E). When
 * both runs recorded /sched, the same lead of the preempted time counts too (time a rank
 * lost to other processes lands in whatever phase it was in, a collective's too, where
 * timestamps cannot tell whose it was): the one further beyond its noise is kept. */
typedef struct {
    int rank;
    double own, work, late, waited, shared, preempted; /* OTHER - BASE */
    double lead, noise;
    int by_preemption; /* lead and noise are of the preempted time (/sched), not own time */
    int straggler;     /* its lead is beyond the noise in one of its groups */
    int waiter;        /* shares a group with a straggler, and its waits grew */
} explain_rank_diff;

/* Fills out (world_size entries) and returns the count, or 0 when the runs' meshes differ
 * (ranks are then not comparable one to one). */
int explain_rank_diffs(const explain_run *base, const explain_run *other, explain_rank_diff *out);

/* The stragglers and the ranks that waited for them, in sentences ("In the TP group dp0 pp0
 * (ranks 0-1), rank 1 (host h, tp1 pp0) took 53.0 ms more of its own time ...; rank 0 waited
 * for it 48.8 ms more (tp_wait +40.1 ms), 38% of the E2E difference."), or what stands in
 * their place (no rank beyond the noise; the meshes differ). */
void explain_straggler_words(const explain_run *base, const explain_run *other, char *out,
                             size_t len);

/* A text being written: explain_say appends (printf-like), truncating at len. */
typedef struct {
    char *out;
    size_t len, used;
} explain_text;
void explain_say(explain_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "38% of the E2E difference" when 0 < part/total <= 1, else the parts in ms against the
 * difference, never a share over 100% ("+77.0 ms against a difference of +50.0 ms"). */
void explain_share_words(double part, double total, char *out, size_t len);

/* A row's roofline in words for x's critical rank ("compute-bound, 81% of the GEMM ceiling"),
 * or "" when there is none for that kind. */
void explain_roof_words(const explain_run *x, int kind, char *out, size_t len);

/* The roofline totals of a kind on x's critical rank over both periods, per iteration:
 * bytes and FLOPs, achieved GB/s and GFLOP/s, and the label (a roof_bound) of the period it
 * spends most time in. 0 when x has no roofline or the kind no events. */
int explain_roof_total(const explain_run *x, int kind, double *bytes, double *flops, double *gbs,
                       double *gflops, int *bound);

/* The expert-load verdict of one run (explain_moe.c, docs/explain.md "Expert load"): the
 * max/mean tokens per expert of prefill and decode, whether that is balanced
 * (MOE_IMBALANCE_HIGH), the worst layer and its hottest expert, what it costs with the run's
 * ep, and the layer's measured mlp_gemm; "" for a dense run. */
void explain_moe_words(const explain_run *x, char *out, size_t len);

/* The verdict: OTHER against BASE: the stragglers, then the causes ranked by |contribution|
 * to the end-to-end difference, each clause naming a row of the table (and, where the parts
 * cancel, the increases and savings apart), the structure, then the same per window (TTFT
 * and TPOT). */
void explain_verdict(const explain_run *base, const explain_run *other, char *out, size_t len);

#ifdef __cplusplus
}
#endif
