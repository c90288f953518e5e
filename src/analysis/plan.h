/* What `tripar plan` computes around the cost model (analysis/plan_cost.h): the cluster file
 * (plan_cluster.c), the model and workload of a job or a preset (plan_model.c), the ranking and
 * its reasons (plan_rank.c), and the validation against measured runs (plan_validate.c). The
 * command's arguments and output are cli/plan.c and cli/plan_output.c. */
#pragma once
#include <stdio.h>

#include "job/job.h"
#include "analysis/plan_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads a cluster description (docs/planner.md "Cluster files"). Returns STATUS_OK, or
 * STATUS_BAD_INPUT with error_message() = "file:line: ..." naming the allowed keys or values. */
int plan_cluster_load(plan_cluster *c, const char *path);

/* Loads a job file to plan: one that names only a model (no input section) loads as if it
 * gave a one-token synthetic prompt, with *no_input = 1, so the flags give the workload.
 * Returns job_load's status. */
int plan_job_load(job *j, const char *path, int *no_input);

/* The model and workload of a loaded job (its checkpoint's shape when it names one). */
int plan_model_from_job(const job *j, plan_model *m, plan_workload *w);
/* The model of a preset (fp32 weights, which `tripar plan` replaces by the cluster's default
 * precision; job.c's defaults for the KV cache and chunks) and the
 * default workload: batch 1, prompt 128, 32 new tokens. Returns STATUS_OK, or
 * STATUS_BAD_INPUT with error_message() listing the presets. */
int plan_model_from_preset(const char *preset, plan_model *m, plan_workload *w);

/* `tripar plan --validate RUN.h5...`: predicts each run's strategy from the cluster and the
 * calibration of the other runs (leave one out), or, with calibration runs (n_cal > 0), of
 * those alone (held-out strategies: `--calibrate CAL.h5...`), and prints predicted against
 * measured TTFT, TPOT and tokens/s with their relative errors. Returns STATUS_OK or
 * STATUS_BAD_INPUT. */
int plan_validate(FILE *out, const plan_cluster *c, const char *const *runs, int n,
                  const char *const *cal, int n_cal);

/* The arrival-rate runs among runs (those with /metrics/arrival), each predicted by the
 * simulated serve loop (plan_goodput.h) on its own recorded arrivals, with the rates of the
 * other runs (or of the calibration runs, as plan_validate), against what it measured: p50 and p90 TTFT, p50 TPOT and the goodput for the
 * targets (seconds, > 0). Prints nothing when no run has a stream. Returns STATUS_OK or
 * STATUS_BAD_INPUT. */
int plan_validate_streams(FILE *out, const plan_cluster *c, const char *const *runs, int n,
                          const char *const *cal, int n_cal, double ttft_slo, double tpot_slo);

/* `tripar plan --validate-published DIR`: reads every *.yaml file of DIR (one publication each:
 * its source and measured rows; docs/planner.md "Validation against published results"),
 * predicts each row's metric with its cluster file, uncalibrated, and prints predicted against
 * published with the relative error per row, then the median and worst over all rows, the
 * held-out third (id % 3 == 0) and each source. *n_rows (may be NULL) gets the rows predicted.
 * Returns STATUS_OK, or STATUS_BAD_INPUT with error_message() = "file:line: ..." naming the
 * allowed keys or values. */
int plan_validate_published(FILE *out, const char *dir, int *n_rows);

typedef enum { PLAN_OBJ_LATENCY = 0, PLAN_OBJ_THROUGHPUT, PLAN_OBJ_GOODPUT } plan_objective;
const char *plan_objective_name(plan_objective o);

/* What was asked, as the output names it. */
typedef struct {
    const char *model_name; /* the job file or the preset */
    const char *cluster_path;
    plan_workload w;
    int gpus;
    plan_objective objective;
    double ttft_slo, tpot_slo; /* seconds; 0 = none */
    double rate;               /* --rate: requests/s of a Poisson stream; 0 = none */
    double stream_seconds;     /* the simulated stream's length (plan_goodput.h) */
    int n_calibrations;
    double seconds;            /* how long planning took */
    precision_kind precision;  /* the weights' */
    const char *precision_why; /* where it came from, in words */
    kv_dtype_kind kv_dtype;    /* the KV cache's */
    const char *kv_dtype_why;  /* where it came from, in words */
    int experts;               /* a mixture of experts' experts; 0 for a dense model */
    int expert_runs;           /* calibration runs whose recorded routing priced them (0:
                                  uniform routing) */
    double expert_hottest;     /* then the hottest expert's rows over its layer's mean */
} plan_summary;

/* Whether a prediction meets the SLOs (1 when none is set). */
int plan_meets_slo(const plan_summary *q, const plan_prediction *p);

/* Sorts the predictions best first: fitting first; under goodput with a rate by the goodput
 * (then the p90 TTFT under that load), without one those meeting the SLOs first; then by q's
 * objective; ties by the strategy, so the order is the same on every machine. */
void plan_rank(plan_prediction *list, int n, const plan_summary *q);

/* The ranked list's verdict on the request: STATUS_OK, or STATUS_BAD_INPUT with
 * error_message() saying why when nothing fits or nothing meets the SLOs (with a rate: no
 * strategy serves any request of the stream within them). */
int plan_ranked_check(const plan_summary *q, const plan_cluster *c, const plan_prediction *ranked,
                      int n);

/* Why a strategy wins or loses, in a few words from its largest cost beyond compute:
 * "pp=8 bubble 47% at 4 micro-batches", "TP all-reduce crosses nodes: 38% exposed". */
void plan_reason(const plan_prediction *p, const plan_cluster *c, char *buf, int len);

#ifdef __cplusplus
}
#endif
