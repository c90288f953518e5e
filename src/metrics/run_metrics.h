/* What one run measured under the benchmark protocol: per-iteration latencies and the totals
 * the run table, the roofline lines and /metrics (docs/schema.md) are computed from. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int iterations;
    double *latency;        /* (iterations) seconds, end to end */
    double *ttft;           /* (iterations) time to first token */
    double *tpot;           /* (iterations) mean time per output token after the first */
    double prefill_seconds; /* of the last measured iteration, slowest rank */
    double decode_seconds;
    double cold_start_seconds; /* process start to first token of the first iteration */
    long prompt_tokens, generated_tokens, requests;
    double peak_memory_bytes;  /* this rank's */
    /* (n_itl) inter-token latencies: every gap between two decode steps' tokens, per replica
     * and measured iteration (docs/benchmarks.md, ITL); last, so
     * initialisers of the fields above stay valid */
    double *itl;
    long n_itl, cap_itl;
} run_metrics;

#ifdef __cplusplus
}
#endif
