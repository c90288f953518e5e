/* Per-rank phase timings on a clock aligned to rank 0. The forward pass runs each phase in a
 * TIMER_SCOPE (timer_begin and timer_end around it); events live in a preallocated table
 * (nothing is allocated while generating) and are written to /timings/rank_NNNNN/events by
 * runfile_write_events. */
#pragma once
#include <mpi.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "job/job.h"
#include "metrics/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stored as an HDF5 enum; keep names and values stable (docs/schema.md). */
typedef enum {
    PHASE_EMBED = 0,
    PHASE_NORM,
    PHASE_QKV_GEMM,
    PHASE_ATTENTION,
    PHASE_ATTN_OUT_GEMM,
    PHASE_MLP_GEMM,       /* fc1 + gelu + fc2 */
    PHASE_TP_ALLREDUCE,   /* from starting a TP all-reduce until it is known complete */
    PHASE_TP_WAIT,        /* the part of it this rank spent blocked: exposed communication */
    PHASE_PP_SEND,
    PHASE_PP_RECV_WAIT,
    PHASE_HEAD,
    PHASE_SAMPLE,
    PHASE_DP_GATHER,
    PHASE_STEP,           /* one whole step (prefill or one decode step) of one micro-batch */
    PHASE_WEIGHT_INIT,
    PHASE_ITERATION,      /* one whole generation (benchmark iteration) */
    /* appended so the values above stay: each is the blocking part of a collective that
     * would otherwise count as the enclosing work */
    PHASE_SAMPLE_WAIT,    /* the sampler's TP collective (argmax MAXLOC, or the rows' gather) */
    PHASE_NLL_WAIT,       /* perplexity: the TP gather of row parts, the world sum after */
    PHASE_STOP_WAIT,      /* the stop vote's world all-reduce, completed after the next step */
    /* expert parallelism across replicas (parallel.ep > tp): the all-to-alls that move a
     * mixture of experts' rows to the ranks of their experts and back, each from its start
     * until known complete, the experts' compute on the rows received, and the part of the
     * all-to-alls this rank spent blocked */
    PHASE_EP_DISPATCH,
    PHASE_EP_EXPERT,
    PHASE_EP_COMBINE,
    PHASE_EP_WAIT,
    PHASE_COUNT
} phase;

const char *phase_name(phase p);
/* The phase with this name, or -1. */
int phase_from_name(const char *name);
/* Whether the phase counts as compute (gemm, attention, norm, embed, head, sample). */
int phase_is_compute(phase p);
/* timings_level_name() is declared in job.h. */

/* Layer value for events that are not inside a layer. */
#define TIMER_NO_LAYER (-1)

typedef struct {
    int32_t step;       /* 0 = prefill, s > 0 = decode step s */
    int32_t microbatch;
    int32_t layer;      /* global layer index, or -1 */
    int32_t phase;
    int32_t iteration;  /* benchmark iteration, -1 for warm-up excluded ones */
    double t_start;     /* seconds since run start on rank 0's clock */
    double t_end;
} timing_event;

typedef struct {
    timings_level level;
    const backend *be;
    timing_event *events;   /* capacity entries, preallocated */
    int *mark_slots;        /* two backend mark slots per event */
    uint64_t *range_ids;    /* per event, the backend's profiler range (NULL without one) */
    long count, capacity, flushed, dropped;
    int iteration;
    double clock_offset;     /* add to local monotonic seconds to get rank 0's clock */
    double clock_uncertainty;/* half the best round trip, seconds */
    double run_start;        /* rank 0's clock at the run's start */
    long max_marks;          /* backend mark slots usable (event i uses 2i, 2i+1); events past
                                max_marks / 2 fall back to the host clock. timer_init sets
                                2 * capacity: lower it if the backend has fewer slots */
    long resolved;           /* events before this index hold final times */
    sched_sampler *sched;    /* record.sched: sampled as each step event begins and ends;
                                NULL: not sampled */
} timer;

/* Monotonic seconds on this host. */
double timer_host_seconds(void);

/* Estimates this rank's offset to rank 0 with ping-pong exchanges over world (collective).
 * inject_offset is added to this rank's clock first (tests use it to plant a known skew). */
void clock_align(MPI_Comm world, double inject_offset, double *offset, double *uncertainty);

/* Timing events to preallocate for the job at its record.timings level: none when off; at
 * `step` the events outside layers; at `layer` every phase of every layer too; each for every
 * step of every generation the run may make, capped at TIMER_MAX_EVENTS (past it events are
 * counted as dropped). The backend needs 2 mark slots per event (backend_options.max_marks):
 * CUDA creates one event per slot at start-up, so `off` must cost none. */
enum { TIMER_MAX_EVENTS = 4000000 };
long timer_event_capacity(const job *j);
/* The step events (one per step per micro-batch per generation) the job may make: the rows
 * /sched preallocates (0 when record.timings is off, capped like the events). */
long timer_step_capacity(const job *j);

void timer_init(timer *t, timings_level level, const backend *be, long capacity, MPI_Comm world);
void timer_free(timer *t);

/* Whether a phase with this layer value is recorded at the timer's level. */
int timer_records(const timer *t, phase p, int layer);

/* Brackets a phase; returns a handle for timer_end, or -1 when not recorded. */
int timer_begin(timer *t, phase p, int step, int microbatch, int layer);
void timer_end(timer *t, int handle);

/* TIMER_SCOPE(t, p, step, microbatch, layer) { ... } runs the statement or block after it as
 * one phase: timer_begin on entry, timer_end on leaving it. The end is a cleanup of the scope's
 * variable, so every way out ends the phase (a return or goto too), never silently skips it.
 * A break or continue inside leaves only this scope, not an enclosing loop: keep the body to
 * the straight-line calls being timed. */
typedef struct {
    timer *t;
    int handle;
    int pending; /* the body has yet to run */
} timer_scope;

static inline timer_scope timer_scope_begin(timer *t, phase p, int step, int microbatch,
                                            int layer) {
    timer_scope s = {t, timer_begin(t, p, step, microbatch, layer), 1};
    return s;
}

static inline void timer_scope_end(timer_scope *s) { timer_end(s->t, s->handle); }

#define TIMER_SCOPE(t, p, step, microbatch, layer)                                                 \
    for (timer_scope timer_scope_ __attribute__((cleanup(timer_scope_end))) =                      \
             timer_scope_begin((t), (p), (step), (microbatch), (layer));                           \
         timer_scope_.pending; timer_scope_.pending = 0)

/* Adds an event measured by the caller on the host clock (timer_host_seconds()). */
void timer_add_host(timer *t, phase p, int step, int microbatch, int layer, double t0, double t1);
/* Converts pending backend marks into times (may synchronise the backend). */
void timer_resolve(timer *t);
/* Whether event i was begun and has not been ended yet (its times are not final). */
int timer_event_open(const timer *t, long i);
/* Seconds since the run's start on rank 0's clock, now. */
double timer_now(const timer *t);

#ifdef __cplusplus
}
#endif
