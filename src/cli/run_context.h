/* What `tripar run` sets up for one run, in order: the resolved job (keys, checkpoint shape,
 * prompts, mesh rules), then the run context (mesh, backend, comms, timer, model shard,
 * engine), and what the run measures and records. Shared by run.c (the sequence),
 * run_measure.c (the benchmark protocol) and run_record.c (the run file and the table). */
#pragma once
#include <signal.h>

#include "engine/engine.h"
#include "engine/serve.h"
#include "io/runfile.h"
#include "io/tokenizer.h"
#include "job/job.h"
#include "job/sweep.h"
#include "metrics/roofline.h"
#include "metrics/run_metrics.h"
#include "metrics/sched.h"

#define RUN_MAX_OVERRIDES 256

typedef struct {
    const char *job_path;
    const char *overrides[RUN_MAX_OVERRIDES];
    int n_overrides;
    const char *out;
    const char *save_checkpoint;
    int dry_run;
    sweep sweep;
} run_args;

/* The files one run reads and writes, for the checks made before any compute (docs/cli.md). */
enum { RUN_INPUT_JOB, RUN_INPUT_CHECKPOINT, RUN_INPUT_TOKENS, RUN_INPUT_TEXT, RUN_INPUTS };
typedef struct {
    char out[JOB_PATH_MAX + 512];          /* the run file */
    char inputs[RUN_INPUTS][JOB_PATH_MAX]; /* by RUN_INPUT_*; "" when unused */
} run_files;

/* Every rank finds the same user error, so rank 0 alone prints error_message() and every rank
 * returns TRIPAR_EXIT_USAGE. */
int run_user_error(void);

/* Loads the job of one sweep point as the YAML and the overrides alone give it (the --set
 * overrides, then the point's): no checkpoint, prompt or mesh check. */
int run_job_load_point(const run_args *a, long point, job *out);

/* Loads the job of one sweep point (the --set overrides, then the point's) and checks
 * everything that needs no compute: keys, the checkpoint's shape, the prompt (tokenized when
 * given as text) and the mesh against the model. Returns STATUS_OK, or STATUS_BAD_INPUT with
 * error_message() set (same on every rank); *tok is the checkpoint's tokenizer or NULL. */
int run_job_resolve(const run_args *a, long point, job *out, tokenizer **tok);

/* Checks the files of n runs (the points of a sweep, or one run) together, before any compute:
 * every run file and --save-checkpoint can be written as a regular file in an existing
 * directory (not a directory, device node or FIFO), none is an input of any run (the same file
 * by device and inode, however it is named) and --save-checkpoint is no run file. Rank 0 checks
 * and broadcasts its verdict, so every rank returns the same code: TRIPAR_EXIT_OK, or
 * TRIPAR_EXIT_USAGE after rank 0 printed why once. Collective. */
int run_files_check(const run_args *a, const run_files *runs, long n);

/* The engine's configuration from a job: the batch, the schedule, sampling and what to
 * capture. Comms and the model are filled in by the caller (engine_config_use_mesh). */
void engine_config_from_job(engine_config *cfg, const job *j);

/* --dry-run's memory plan: weights and the engine's arena per (pp, tp) coordinate. */
void run_print_memory_plan(const job *j, const model_config *cfg);

/* Bytes one rank plans to allocate: its weights (the model's size table) and the engine's
 * arena (engine_arena_plan), activations and KV cache apart, in backend memory; and the host
 * staging the loader holds while it stores weights (its largest tensor in fp32, plus the
 * converted copy when the weights are not fp32). What --dry-run prints. */
typedef struct {
    double weights, activations, kv, staging;
} run_memory_plan;

/* Everything one run holds, built in order and freed in reverse by one path. */
typedef struct {
    job j;
    tokenizer *tok;
    model_config cfg;
    mesh mesh;
    backend be;
    timer tm;
    telemetry tel; /* record.telemetry: sampled from the timer's start to run_record */
    sched_sampler sched; /* record.sched: sampled by the timer at each step event */
    model m;
    engine e;
    runfile *rf;
    roofline roof; /* bench.roofline: the sgemm ceiling brackets the run */
    int threads;   /* the backend's threads per rank, as started */
    char out_path[JOB_PATH_MAX + 512];
    /* what has been built, so run_context_free undoes exactly that */
    int have_mesh, have_backend, have_comms, have_timer, have_model, have_engine;
    int have_telemetry, have_sched;
} run_context;

/* Builds the mesh, backend, comms, timer, model shard (synthetic or from the checkpoint, then
 * --save-checkpoint) and engine, and creates the run file. Collective. Returns TRIPAR_EXIT_OK,
 * or an exit code after printing the reason once (every rank returns the same code). */
int run_context_build(run_context *rc, const run_args *a, volatile sig_atomic_t *stop_flag);
void run_context_free(run_context *rc);

/* The memory check (run_memory.c, docs/jobs.md "Memory check"): this rank's plan, summed over
 * the ranks of its node (cpu) or its device (cuda), against MemAvailable and the cgroup's room
 * or cudaMemGetInfo. Collective over the world, made after the backend starts and before the
 * comms, the model and the engine allocate. Returns TRIPAR_EXIT_OK on every rank, or
 * TRIPAR_EXIT_USAGE on every rank after the first rank of each node that does not fit printed
 * why. backend.memory_check: false returns TRIPAR_EXIT_OK without a collective. */
int run_memory_check(const run_context *rc, const run_memory_plan *plan);

/* The benchmark protocol: bench.warmup generations, then bench.iterations measured ones (the
 * arrival stream before them when asked). Fills rm (and stream). Returns 1 when a stop signal
 * ended the run early (every rank agrees). */
int run_measure(run_context *rc, run_metrics *rm, serve_result *stream, double process_start,
                volatile sig_atomic_t *stop_flag);

/* What a sweep's summary table shows of one point (rank 0's values). */
typedef struct {
    char out[JOB_PATH_MAX + 512];
    double ttft_p50, tpot_p50, latency_p50, tokens_per_s, peak_memory_max;
} run_point;

/* Writes outputs, events and metrics, then finishes the run file (or leaves it incomplete when
 * stopped) and prints rank 0's table; fills point when given. Collective. Returns the exit
 * code. */
int run_record(run_context *rc, run_metrics *rm, const serve_result *stream, int stopped,
               run_point *point);

/* The step callback: flushes the timing events every record.flush_every steps, so a killed
 * job keeps what it measured. user is the run_context. */
void run_record_step(void *user, int step);

/* Median (or any percentile) of n values, unsorted. */
double run_percentile(const double *values, int n, double q);
