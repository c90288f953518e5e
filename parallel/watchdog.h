/* The stall watchdog (docs/jobs.md, record.stall_seconds): a thread per rank that ends a run in
 * which this rank has made no progress for too long, naming what it waits in and for whom. The
 * comm backends and the run file mark their blocking waits (watch_wait_begin/end); the step
 * callback marks completed steps. The thread makes no MPI call (tripar initialises MPI without
 * thread support): it reports, aborts the NCCL communicators and ends the process itself. */
#pragma once
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a rank blocks in; the words of the report line are in watchdog.c. */
typedef enum {
    WATCH_NONE = 0,  /* computing, or blocked outside a marked wait (a device sync) */
    WATCH_ALLREDUCE, /* a blocking all-reduce, or the wait on a non-blocking one */
    WATCH_ALLGATHER,
    WATCH_BCAST,
    WATCH_BARRIER,
    WATCH_RECV, /* from one peer */
    WATCH_SEND, /* to one peer */
    WATCH_RUNFILE, /* a collective write or flush of the run file */
    WATCH_NCCL,    /* the host waiting on the NCCL stream */
    WATCH_OP_COUNT
} watch_op;

/* Names a communicator for the report ("TP", "PP", "DP", "world") and remembers the world rank
 * of each of its members. Local (no communication); a comm never named reads "group". */
void watch_comm_name(MPI_Comm comm, const char *label);

/* Marks the start and the end of a blocking wait of this rank in op on comm; peer is the group
 * rank for WATCH_RECV/WATCH_SEND, -1 otherwise. The end counts as progress (a message arrived).
 * Cheap (two atomic stores): called on the hot path. */
void watch_wait_begin(watch_op op, MPI_Comm comm, int peer);
void watch_wait_end(void);
/* One blocking call, marked: WATCH_WAIT(WATCH_BARRIER, comm, -1, MPI_CHECK(MPI_Barrier(comm))). */
#define WATCH_WAIT(op, comm, peer, call)                                                     \
    do {                                                                                     \
        watch_wait_begin(op, comm, peer);                                                    \
        call;                                                                                \
        watch_wait_end();                                                                    \
    } while (0)

/* The phase reported while no wait is marked: WATCH_RUNFILE around the run file's collective
 * writes (HDF5 calls MPI-IO itself, unmarked), WATCH_NONE after. */
void watch_phase(watch_op op);

/* A step completed: progress, and its duration feeds the adaptive timeout. */
void watch_step(void);

/* Collective over MPI_COMM_WORLD (it gathers the host names the report uses). Starts the
 * thread when floor_seconds > 0 and the world has more than one rank: the timeout is the larger
 * of floor_seconds and 20 times the slowest completed step. watch_stop ends it; both may be
 * called when nothing was started. */
void watch_start(double floor_seconds);
void watch_stop(void);

/* 1 once the watchdog has fired: a host wait that polls (the NCCL lane) stops waiting. */
int watch_expired(void);

/* A hook the thread calls after reporting and before ending the process: the NCCL backend
 * aborts its communicators there (ncclCommAbort may be called from another thread). */
void watch_on_stall(void (*hook)(void));

#ifdef __cplusplus
}
#endif
