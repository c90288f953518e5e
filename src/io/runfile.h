/* The run file: one HDF5 file per run, written by all ranks through the MPI-IO driver.
 * Created as PATH.partial.HOST.PID with complete=0; runfile_finish sets complete=1 last and
 * renames it to PATH. Every write below is collective over the world: every rank calls it,
 * with zero rows when it holds nothing of that dataset. A write that finds no room on the file
 * system marks the file failed on every rank at once; later writes are skipped, and the run
 * ends with the file incomplete. Layout: docs/schema.md. */
#pragma once
#include <mpi.h>
#include <stdint.h>

#include "base/check.h"
#include "job/job.h"
#include "parallel/mesh.h"
#include "metrics/run_metrics.h"
#include "metrics/telemetry.h"
#include "metrics/timing.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct runfile runfile;

/* Collective. Writes root attributes (format "tripar-run", versions, the resolved job YAML,
 * creation time, world size, dp/tp/pp/microbatches, backend, precision, host list,
 * complete=0) and /mesh, and flushes them, so the file opens from the start. Returns NULL
 * with error_message() set if the file cannot be created or the file system has no room
 * (same answer on every rank). */
runfile *runfile_create(const char *path, const job *j, const mesh *m);

/* The file being written: PATH.partial.HOST.PID (HOST and PID of rank 0). */
const char *runfile_partial_path(const runfile *rf);

/* 1 once a write found no room (the same on every rank); runfile_finish then reports why. */
int runfile_failed(const runfile *rf);

/* Collective: whether to flush the timing events now, every interval_seconds of rank 0's
 * clock (0: never). Every rank calls it at the same points (the engine's step callback);
 * rank 0's answer travels in a broadcast that completes at the next call, so the ranks flush
 * together one call after rank 0 finds the interval passed. */
int runfile_flush_due(runfile *rf, double interval_seconds);

/* /output/tokens int32 (total_rows, cols): this rank writes rows [row_begin, row_begin+rows). */
void runfile_write_tokens(runfile *rf, const int32_t *tokens, long row_begin, long rows,
                          long total_rows, long cols);
/* /output/generated int32 (total_rows): how many new tokens each row really produced (the
 * rest of its /output/tokens row is -1); rows as for the tokens. */
void runfile_write_generated(runfile *rf, const int32_t *counts, long row_begin, long rows,
                             long total_rows);
/* /output/text: fixed-length strings, one per prompt row (when a tokenizer exists). */
void runfile_write_text(runfile *rf, const char *const *texts, long row_begin, long rows,
                        long total_rows);
/* /output/<name>: the same, under another name (/output/generated_text). */
void runfile_write_strings(runfile *rf, const char *name, const char *const *texts,
                           long row_begin, long rows, long total_rows);

/* /activations/<name>: float32 global tensor of dims (ndims <= 4); this rank writes the block
 * at start with extent count (count may be all zeros). Creation and write are collective. */
void runfile_write_activation(runfile *rf, const char *name, int ndims, const long *dims,
                              const long *start, const long *count, const float *data);

/* /output/nll float64 (total_rows, cols): each prompt position's negative log-likelihood of
 * the next token (NaN where not scored), and the attributes of /output/nll: perplexity,
 * count (the tokens scored) and first (the first scored position of a window). This rank
 * writes rows [row_begin, row_begin+rows); the attributes are rank 0's. */
void runfile_write_nll(runfile *rf, const double *nll, long row_begin, long rows, long total_rows,
                       long cols, double perplexity, long count, int first);

/* /timings/rank_NNNNN/events for every rank, plus clock offset attributes. Appends the events
 * not yet flushed, so it can be called every N steps and at the end. */
void runfile_write_events(runfile *rf, timer *t);

/* /telemetry/rank_NNNNN for every rank and the /telemetry attributes (rate, sources, nvml,
 * drops). Appends the samples taken since the last call, so it runs at every timing flush
 * and at the end. Nothing is written when record.telemetry is 0 (t NULL or rate 0 on rank 0). */
void runfile_write_telemetry(runfile *rf, telemetry *t);

/* /sched/rank_NNNNN for every rank and the /sched attributes (source, threads, dropped): one
 * row per step event ended since the last call, its iteration, step, micro-batch and times
 * taken from the timer's event (call after runfile_write_events, which resolves them). Nothing
 * is written when record.sched is off or record.timings is (s->on 0 on rank 0). */
void runfile_write_sched(runfile *rf, sched_sampler *s, timer *t);

/* /moe: a mixture of experts' load in the last generation (docs/schema.md "/moe"). */
typedef struct {
    const int32_t *load;        /* (steps, n_layers, experts) this rank's record, or NULL */
    int replicas, replica;      /* dp, and this rank's dp coordinate */
    int steps, layers, experts; /* the dataset's shape after its replicas: every layer */
    int layer_begin, n_layers;  /* this stage's layers */
    int writer;                 /* one rank per replica and stage writes its block */
    int top_k, shared, ep;      /* shared: 1 when a shared expert (not counted) gates in */
    int iteration, steps_run;   /* the generation recorded: its measured iteration, its steps */
} runfile_expert_load;
/* /moe/expert_load int32 (replicas, steps, layers, experts) and the /moe attributes; nothing
 * when experts is 0 (a dense model: the same on every rank). Collective. */
void runfile_write_expert_load(runfile *rf, const runfile_expert_load *l);

/* /metrics. */
void runfile_write_metrics(runfile *rf, const run_metrics *metrics);

/* A float64 1-D dataset at path (e.g. "metrics/arrival/latency") holding rank 0's n values,
 * and a float64 attribute of the group at group_path (created when absent) holding rank 0's
 * value. Collective; the other ranks' arguments are ignored. */
void runfile_write_series(runfile *rf, const char *path, const double *values, long n);
void runfile_write_scalar(runfile *rf, const char *group_path, const char *name, double value);
/* A string attribute of the group at group_path (created when absent) holding rank 0's value
 * (at most 255 characters). Collective; the other ranks' value is ignored. */
void runfile_write_text_attr(runfile *rf, const char *group_path, const char *name,
                             const char *value);

/* Sets complete=1 as the last write, closes and renames the partial file to PATH. Collective.
 * Returns STATUS_OK, or STATUS_RUNTIME with error_message() set when a write found no room
 * (the file is then closed incomplete) or the rename failed. Frees rf either way. */
status runfile_finish(runfile *rf);
/* Closes leaving complete=0 (signal or failure path). Collective. Frees rf. */
void runfile_close_incomplete(runfile *rf);

#ifdef __cplusplus
}
#endif
