/* Serial reader of run files for the tools (report, trace, and later baselines): the root
 * attributes, /mesh, every rank's timing events and the /metrics summary. */
#pragma once
#include <hdf5.h>

#include "metrics/timing.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rank, dp_rank, pp_rank, tp_rank, device;
    char host[64];
    double clock_offset, clock_uncertainty;
} run_rank;

typedef struct {
    int present; /* 0 when the file has no /metrics */
    int iterations;
    double latency_mean, latency_p50, latency_p90, latency_p99;
    double ttft_mean, ttft_p50, tpot_mean, tpot_p50;
    double tokens_per_s, requests_per_s, peak_memory_bytes_max;
    double prefill_seconds, decode_seconds, cold_start_seconds;
    long long generated_tokens, requests;
} run_headline;

typedef struct {
    char path[1024];
    hid_t file;
    int complete;
    int world_size, dp, tp, pp, microbatches, overlap;
    char order[16], backend[16], precision[16], created[32], version[32];
    int n_hosts;
    run_rank *ranks;          /* (world_size) */
    long *n_events;           /* (world_size) */
    timing_event **events;    /* (world_size) arrays of n_events[r] */
    run_headline metrics;
} run_data;

/* Opens and reads path. Returns 0, or STATUS_BAD_INPUT with error_message() set when the file
 * is missing, not HDF5, or not a tripar run file. The file stays open for run_data_free. */
int run_data_load(run_data *run, const char *path);
void run_data_free(run_data *run);

/* "dp2-tp1-pp2 m4 overlap": the strategy label used by every tool. */
void run_data_label(const run_data *run, char *out, size_t len);

#ifdef __cplusplus
}
#endif
