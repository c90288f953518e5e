/* Serial reader of run files for the tools (report, diff, trace, explain): the one check that
 * a file is a tripar run file this build reads, the root attributes, /mesh, every rank's timing
 * events, the /metrics summary, and the identity of the model a run ran. */
#pragma once
#include <hdf5.h>
#include <stddef.h>

#include "metrics/timing.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUN_FORMAT "tripar-run"
/* The newest run-file format_version (the layout's major version; docs/schema.md) this build
 * reads. It reads every version from 1 up to this one and refuses newer ones. */
#define RUN_FORMAT_VERSION 1

/* Opens path read-only and checks that it is a tripar run file this build reads: an HDF5 file
 * whose root attribute format is "tripar-run", whose format_version is 1..RUN_FORMAT_VERSION,
 * and whose top-level objects present (/mesh, /output, /output/tokens, /activations, /timings,
 * /metrics) have their documented kinds. Returns the open file (caller closes) with *complete
 * set from the root attribute complete (0 when absent), or -1 with error_message() set to one
 * line naming path, what was found and what is expected. No HDF5 error is printed. Every tool
 * that reads run files opens them here, so they all accept and refuse the same files. */
hid_t run_file_open(const char *path, int *complete);

/* Prints, to stderr, the warning about a file with complete=0 (docs/schema.md promises it):
 * "tripar TOOL: warning: PATH is an incomplete run file (complete=0): ...". */
void run_file_warn_incomplete(const char *tool, const char *path);

typedef struct {
    int rank, dp_rank, pp_rank, tp_rank, device;
    char host[64];
    double clock_offset, clock_uncertainty;
} run_rank;

typedef struct {
    int present; /* 0 when the file has no /metrics */
    int iterations;
    double latency_mean, latency_p50, latency_p90, latency_p99;
    double ttft_mean, ttft_p50, ttft_p90, ttft_p99, tpot_mean, tpot_p50, tpot_p90, tpot_p99;
    double itl_mean, itl_p50, itl_p90, itl_p99; /* NaN in files written before ITL */
    double tokens_per_s, requests_per_s, peak_memory_bytes_max;
    double prefill_seconds, decode_seconds, cold_start_seconds;
    long long generated_tokens, requests;
} run_headline;

typedef struct {
    char path[1024];
    hid_t file;
    int complete, format_version;
    int world_size, dp, tp, pp, microbatches, overlap;
    int ep; /* parallel.ep: 1 when the run has no expert blocks (or predates the attribute) */
    char order[16], backend[16], precision[16], created[32], version[32];
    int n_hosts;
    run_rank *ranks;          /* (world_size) */
    long *n_events;           /* (world_size) */
    timing_event **events;    /* (world_size) arrays of n_events[r] */
    run_headline metrics;
    char timings_level[16]; /* /timings' level: "off", "step", "layer"; "" when not recorded */
    /* (world_size) per rank, the measured iterations whose iteration event it wrote (an
     * iteration event is written once it ends), or -1 when it wrote no iteration event */
    int *iterations_done;
} run_data;

/* Which events the per-phase summaries count (docs/schema.md, "Derived metrics"): with
 * measured_only, those of measured iterations (iteration >= 0), else all; either way not those
 * of an iteration that never finished on the rank (a partial file flushed its steps, but the
 * iteration event, still open when the run was cut, never): a step total would otherwise
 * exceed the iteration total. */
int run_event_counts(const run_data *run, int rank, const timing_event *e, int measured_only);
/* 1 when some rank has a counted event of a measured iteration: the summaries then leave the
 * warm-up out. */
int run_measured_only(const run_data *run);
/* 1 when the phases inside layers were timed (record.timings: layer); a file without the level
 * attribute is judged by its events (any with layer >= 0). */
int run_layer_timed(const run_data *run);

/* Opens (run_file_open) and reads path. Returns 0, or STATUS_BAD_INPUT with error_message()
 * set when the file is missing, not HDF5, not a tripar run file this build reads, or damaged
 * (an object of the wrong kind). The file stays open for run_data_free. Prints nothing. */
int run_data_load(run_data *run, const char *path);
void run_data_free(run_data *run);

/* "dp2-tp1-pp2 m4 overlap": the strategy label used by every tool. */
void run_data_label(const run_data *run, char *out, size_t len);

/* The model a run ran, as the resolved job in the root attribute job records it: every
 * model.* key that defines the weights and the shape (model.synthetic.seed, model.checkpoint,
 * model.norm, ...; for a checkpoint also the shape the runner noted from it), as key/value
 * pairs in file order. model.precision, model.kv_cache, model.kv_block and model.kv_dtype are left out: they
 * say how the model ran, not which model it is. */
typedef struct {
    int n, cap;
    char **keys, **values; /* (n) each, malloc'ed */
    int checkpoint;        /* 1 when the run loaded a checkpoint, 0 for synthetic weights */
} run_model;

/* Reads the model identity of an open run file. Returns 0, or STATUS_BAD_INPUT with
 * error_message() set when the file has no job attribute or the job has no model section. */
int run_model_read(hid_t file, const char *path, run_model *m);
void run_model_free(run_model *m);

/* A model key: the synthetic shape key (name "heads" finds model.synthetic.heads), the shape
 * the runner noted from a checkpoint (model.checkpoint_shape.heads), or a full key
 * ("model.arch"). NULL when none is recorded. */
const char *run_model_key(const run_model *m, const char *name);

/* The scalar at a dotted key of a run file's job text (the root attribute job), e.g.
 * "generate.new_tokens", outside sequences, copied into out. Returns 0 when found, -1 when the
 * key is absent or the text is not YAML. */
int run_job_scalar(const char *job_text, const char *key, char *out, size_t len);

/* Whether a and b are the same model: both synthetic or both from a checkpoint, and every key
 * both record equal. Checkpoints match when their paths name the same file or the same file
 * name (a checkpoint copied to another machine), with the same recorded shape. When they
 * differ, why gets the first difference ("model.synthetic.seed: 5 vs 6"). */
int run_model_same(const run_model *a, const run_model *b, char *why, size_t len);

#ifdef __cplusplus
}
#endif
