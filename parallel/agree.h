/* Agreements over a communicator: the small collectives that make every rank take the same
 * decision or write the same metadata (a verdict AND-ed over the ranks, rank 0's answer, the
 * largest or smallest value, every rank's sizes). Each is collective over comm: every rank
 * makes the same calls in the same order, or the ranks deadlock. Failed MPI calls abort
 * (MPI_CHECK). The engine's collectives go through comm_ops instead. */
#pragma once
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This rank's number and the number of ranks in comm (local queries, not collective). */
int agree_comm_rank(MPI_Comm comm);
int agree_comm_size(MPI_Comm comm);

/* 1 on every rank when every rank's ok is non-zero (the smallest ok over comm). */
int agree_all_ok(MPI_Comm comm, int ok);
/* Non-zero on every rank when any rank's bad is (the largest bad over comm). */
int agree_any_bad(MPI_Comm comm, int bad);

/* Every rank takes rank 0's value(s): an int, a long long, n doubles, size chars of text. */
void agree_root_int(MPI_Comm comm, int *value);
void agree_root_long(MPI_Comm comm, long long *value);
void agree_root_doubles(MPI_Comm comm, double *values, int n);
void agree_root_text(MPI_Comm comm, char *text, int size);

/* The largest / smallest of every rank's value. */
long long agree_max_long(MPI_Comm comm, long long mine);
long long agree_min_long(MPI_Comm comm, long long mine);
/* values[i] becomes the largest values[i] over comm (in place). */
void agree_max_floats(MPI_Comm comm, float *values, int n);

/* Every rank's n values (bytes), rank r's at all + r * n, on every rank. */
void agree_gather_longs(MPI_Comm comm, const long long *mine, int n, long long *all);
void agree_gather_doubles(MPI_Comm comm, const double *mine, int n, double *all);
void agree_gather_bytes(MPI_Comm comm, const void *mine, int bytes, void *all);

/* Returns once every rank of comm has called it. */
void agree_barrier(MPI_Comm comm);

/* MPI's wall clock in seconds, which rank 0 reads for verdicts on elapsed time. */
double agree_wtime(void);

/* A verdict of rank 0 in flight: started at one call and read at the next, so the ranks wait on
 * rank 0 only when they read it. It has its own duplicate of the communicator, so its
 * broadcasts never match another collective over comm. */
typedef struct {
    MPI_Comm comm;   /* the duplicate; MPI_COMM_NULL before agree_vote_init */
    MPI_Request req; /* the broadcast in flight; MPI_REQUEST_NULL when none */
    int verdict;     /* its buffer: stays put while it is in flight */
} agree_vote;
#define AGREE_VOTE_NONE                                                                            \
    { MPI_COMM_NULL, MPI_REQUEST_NULL, 0 }

/* Collective over comm (it duplicates it). */
void agree_vote_init(agree_vote *v, MPI_Comm comm);
/* Rank 0's verdict (the one passed to agree_vote_start on rank 0; others' is ignored) goes to
 * every rank; the caller reads it with agree_vote_wait at a later call. */
void agree_vote_start(agree_vote *v, int verdict);
/* 1 with *verdict set to the verdict started last, after waiting for it; 0 (and *verdict
 * untouched) when none is in flight. */
int agree_vote_wait(agree_vote *v, int *verdict);
/* Waits for a verdict still in flight, then frees the duplicate (collective); a vote never
 * initialised (AGREE_VOTE_NONE) is left alone. */
void agree_vote_free(agree_vote *v);

#ifdef __cplusplus
}
#endif
