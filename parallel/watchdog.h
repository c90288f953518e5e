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
    WATCH_INIT,    /* MPI_Init: every rank of the job must start and reach it */
    WATCH_FINALIZE,
    WATCH_SETUP,      /* a phase: the mesh, the communicators, the clock alignment (collective) */
    WATCH_CHECKPOINT, /* a phase: reading or writing the checkpoint (collective) */
    WATCH_ALLTOALL,   /* a blocking all-to-all, or the wait on a non-blocking one */
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
 * writes (HDF5 calls MPI-IO itself, unmarked), WATCH_SETUP and WATCH_CHECKPOINT around the
 * set-up's collective stretches, WATCH_NONE after. In set-up a phase other than WATCH_NONE
 * counts as a marked wait. */
void watch_phase(watch_op op);

/* A step completed: progress, and its duration feeds the adaptive timeout. */
void watch_step(void);

/* The watchdog has two modes. From before MPI_Init until the run generates, and again between
 * a sweep's points and through MPI_Finalize, it guards set-up: it fires only while the rank is
 * in a marked wait (MPI_Init, a collective, a collective file open) with no progress for
 * floor_seconds, since set-up also holds long local work (synthetic weights, reading a
 * checkpoint part) that no timeout should cut. While the run generates and records it fires on
 * any stretch without progress longer than the larger of floor_seconds and 20 times the
 * slowest completed step.
 *
 * watch_init_begin is called before MPI_Init (no MPI call; the rank and world size come from
 * the launcher's environment) and marks the wait in MPI_Init, so a peer frozen or lost before
 * the job is up ends the job too; watch_init_end after it. floor_seconds <= 0 starts nothing. */
void watch_init_begin(double floor_seconds);
void watch_init_end(void);
/* Collective over MPI_COMM_WORLD the first time (it gathers the host names the report uses).
 * Enters the run mode, starting the thread when watch_init_begin did not and floor_seconds > 0
 * and the world has more than one rank. watch_stop returns to the set-up mode. */
void watch_start(double floor_seconds);
void watch_stop(void);
/* MPI_Finalize, marked; then the thread ends. */
void watch_finalize(void);

/* 1 once the watchdog has fired: a host wait that polls (the NCCL lane) stops waiting. */
int watch_expired(void);

/* A hook the thread calls after reporting and before ending the process: the NCCL backend
 * aborts its communicators there (ncclCommAbort may be called from another thread). */
void watch_on_stall(void (*hook)(void));

#ifdef __cplusplus
}
#endif
