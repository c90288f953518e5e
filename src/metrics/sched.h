/* Preemption per step (record.sched): how long this rank's threads sat runnable but not running,
 * and how often they were switched out, between the start and the end of each `step` event.
 * The timer samples at those two points (timing.c); the rows are written to /sched/rank_NNNNN
 * at every timing flush (docs/schema.md "/sched"). */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Threads whose schedstat file is kept open: the main thread, BLAS workers, MPI's progress
 * threads, the telemetry and watchdog threads fit many times over. */
enum { SCHED_MAX_THREADS = 256 };

/* One step event's counters; iteration, step, micro-batch and times are the step event's,
 * filled in from the timer when written (the event's times may be resolved only then). */
typedef struct {
    long event;        /* index of the step event in the timer's table */
    double run_delay;  /* seconds runnable but not running, summed over the threads */
    int64_t nivcsw;    /* involuntary context switches, every thread */
    int64_t nvcsw;     /* voluntary context switches, every thread */
} sched_row;

/* What one sample reads: cumulative counters of the process. */
typedef struct {
    uint64_t run_delay_ns;
    int64_t nivcsw, nvcsw;
} sched_counters;

typedef struct {
    int on;                         /* rows are taken (record.sched with a timer that has steps) */
    int schedstat;                  /* /proc/self/task/TID/schedstat was readable at init */
    int fds[SCHED_MAX_THREADS];     /* open schedstat files, -1 once the thread has exited */
    int tids[SCHED_MAX_THREADS];
    uint64_t last_ns[SCHED_MAX_THREADS]; /* last run_delay read of each thread */
    uint64_t gone_ns;               /* run_delay of threads that exited, at their last read */
    int n_threads;                  /* slots used (exited ones included) */
    int live;                       /* threads sampled now */
    sched_row *rows;                /* (capacity), preallocated */
    long count, capacity, flushed, dropped;
    sched_counters open;            /* the counters at the open step's start */
    long open_event;                /* its timer event, -1 when none is open */
} sched_sampler;

/* What the group's `source` attribute says was read. */
extern const char SCHED_SOURCE[];

/* on: record.sched; capacity: the step events the run may make (timer_step_capacity). With on
 * = 0 or capacity = 0 nothing is opened and every call below does nothing. */
void sched_init(sched_sampler *s, int on, long capacity);
void sched_free(sched_sampler *s);

/* Opens the schedstat files of threads started since the last call (allocates: call it
 * outside the decode loop, e.g. before each generation and at each flush). A thread seen only
 * later has its run delay counted from then on. */
void sched_threads_refresh(sched_sampler *s);

/* The counters now: one pread per thread and one getrusage, no allocation. run_delay_ns is 0
 * without schedstat. */
void sched_read(sched_sampler *s, sched_counters *c);

/* Called by the timer when step event `event` begins and ends. */
void sched_step_begin(sched_sampler *s, long event);
void sched_step_end(sched_sampler *s, long event);

#ifdef __cplusplus
}
#endif
