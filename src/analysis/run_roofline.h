/* Per-phase rooflines of a recorded run: for one rank, each phase's summed time per period,
 * the analytic FLOPs and bytes of exactly those events (metrics/phase_cost.h), the achieved
 * rates and a label against the ceilings the run stored in /metrics/roofline. */
#pragma once
#include "io/runread.h"
#include "metrics/timing.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ROOF_PERIOD_PREFILL = 0, ROOF_PERIOD_DECODE = 1, ROOF_PERIOD_COUNT } roof_period;
typedef enum {
    ROOF_COMPUTE = 0,
    ROOF_MEMORY,
    ROOF_COMMUNICATION,
    ROOF_OVERHEAD,
    ROOF_NONE /* no events, or no ceilings to label against */
} roof_bound;

typedef struct {
    double seconds;      /* summed durations of the phase's events in the period, measured
                          * iterations, this rank */
    double flops, bytes; /* analytic totals for those same events (0 for comm phases' flops) */
    double weight_bytes, kv_bytes, act_bytes; /* the parts of bytes */
    double gflops, gbs; /* achieved = flops / seconds / 1e9, bytes / seconds / 1e9 (NaN when
                         * seconds == 0; gflops NaN for comm phases and both NaN for phases
                         * without a cost model: step) */
    roof_bound bound;   /* the label */
    double efficiency;  /* achieved / the ceiling of its bound (NaN when the file has no
                         * ceilings) */
    long events;        /* how many events were summed */
} roof_phase;

typedef struct {
    int has_ceilings;             /* the run recorded them (bench.roofline) */
    double peak_gflops, peak_gbs; /* the ceilings */
    int rank;                     /* the rank the table is for */
    roof_phase phase[ROOF_PERIOD_COUNT][PHASE_COUNT];
    char weight_dtype[16], kv_cache[16];  /* "fp32"/"int8w"/..., "contiguous"/"paged" */
    char gflops_probe[64], gbs_probe[64]; /* which probe produced the ceilings */
    model_config cfg;                     /* the model the run ran, as its job records it */
    precision_kind precision;             /* its weights' */
} run_roofline;

/* An overhead-bound label needs efficiency below this fraction of its ceiling ... */
#define ROOF_OVERHEAD_EFFICIENCY 0.10
/* ... and events shorter than this on average (seconds): launch and host overhead dominate. */
#define ROOF_OVERHEAD_EVENT_SECONDS 50e-6

/* Computes the table for one rank of a loaded run (run_data_load). Returns 0, or
 * STATUS_BAD_INPUT with error_message() set when the file lacks what it needs (no job
 * attribute, timings not at layer level). */
int run_roofline_compute(const run_data *run, int rank, run_roofline *out);

/* "compute-bound", "memory-bound", "communication-bound", "overhead-bound", "-" */
const char *roof_bound_name(roof_bound b);

/* The busiest rank, as `tripar report` names the slowest: the most compute seconds (phases
 * with phase_is_compute) in measured iterations. It sets the latency. */
int run_roofline_slowest_rank(const run_data *run);

#ifdef __cplusplus
}
#endif
