/* The communication-backend boundary: collectives and point-to-point over one group of ranks.
 * MPI implements it on the CPU (comm_mpi.c); NCCL on GPUs (comm_nccl.c). The forward pass
 * calls these as one-line visible operations (comm_allreduce_sum(tp, ...)). */
#pragma once
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A pending non-blocking operation. Backends keep their handle here; active is 0 once done. */
typedef struct {
    int active;
    MPI_Request mpi;
    void *handle;
    int watch_op, watch_peer; /* what waiting on it is, for the stall watchdog (watchdog.h) */
} comm_req;

typedef enum {
    COMM_FLOAT = 0,
    COMM_INT32 = 1,
    COMM_BYTE = 2,
    COMM_DOUBLE = 3,
    COMM_INT64 = 4,
} comm_type;

typedef enum { COMM_OP_SUM = 0, COMM_OP_MAX = 1 } comm_op;

/* One (value, index) pair of a MAXLOC reduction, laid out as MPI_FLOAT_INT. */
typedef struct {
    float value;
    int32_t index;
} comm_maxloc_pair;

struct comm;

/* Buffers are the comm's memory kind: backend memory for the device comms (nccl, mpi-staged),
 * host memory for mpi. The two exceptions, marked "host buffers", serve the host-side
 * sampler: every backend takes host memory there. */
typedef struct comm_ops {
    const char *name;
    /* frees the backend context (ctx); the communicator belongs to the mesh */
    void (*free)(void *ctx);
    /* in-place sum over the group (the hot path: TP all-reduces of activations) */
    void (*allreduce_sum)(void *ctx, float *buf, size_t count);
    void (*iallreduce_sum)(void *ctx, float *buf, size_t count, comm_req *req);
    /* in-place reduction of any type */
    void (*allreduce)(void *ctx, void *buf, size_t count, comm_type type, comm_op op);
    /* recv holds size * count elements, rank i's contribution at i * count */
    void (*allgather)(void *ctx, void *recv, const void *send, size_t count, comm_type type);
    /* host buffers: rank i contributes counts[i] elements, landing at recv + displs[i] */
    void (*allgatherv)(void *ctx, void *recv, const void *send, const int *counts,
                       const int *displs, comm_type type);
    /* host buffers: in place, the largest value of each pair and its index (lowest on ties),
     * NaN counting as larger than every number (the argmax's order, kernels/backend.h) */
    void (*allreduce_maxloc)(void *ctx, comm_maxloc_pair *pairs, size_t count);
    void (*bcast)(void *ctx, void *buf, size_t count, comm_type type, int root);
    /* All-to-all with a count per peer (expert parallelism's dispatch and combine): the
     * send_counts[p] elements at send + send_displs[p] go to group rank p, and the
     * recv_counts[p] elements from rank p land at recv + recv_displs[p]; recv outside those
     * blocks is left as it was. Counts and displacements are in elements of type, host arrays
     * of one entry per group rank that the call has read when it returns; zero counts are
     * fine (a rank may send nothing). send_counts[p] on this rank must equal recv_counts[me]
     * on rank p, as MPI_Alltoallv requires: every rank learns its recv counts first (an
     * all-to-all of the counts). The two buffers must not overlap. */
    void (*alltoallv)(void *ctx, const void *send, const size_t *send_counts,
                      const size_t *send_displs, void *recv, const size_t *recv_counts,
                      const size_t *recv_displs, comm_type type);
    /* Its non-blocking twin, completed by test or wait like isend/irecv (never cancelled): send
     * and recv stay untouched until then, the count arrays need not. */
    void (*ialltoallv)(void *ctx, const void *send, const size_t *send_counts,
                       const size_t *send_displs, void *recv, const size_t *recv_counts,
                       const size_t *recv_displs, comm_type type, comm_req *req);
    void (*isend)(void *ctx, const void *buf, size_t count, comm_type type, int peer, int tag,
                  comm_req *req);
    void (*irecv)(void *ctx, void *buf, size_t count, comm_type type, int peer, int tag,
                  comm_req *req);
    /* returns 1 when req is complete (and clears req->active) */
    int (*test)(void *ctx, comm_req *req);
    void (*wait)(void *ctx, comm_req *req);
    /* withdraws a pending receive that will never be matched (a run stopping early) and
     * clears req->active. Stream-ordered backends cannot withdraw enqueued work, so callers
     * enqueue their receives only right before waiting on them (docs/design.md). */
    void (*cancel)(void *ctx, comm_req *req);
    void (*barrier)(void *ctx);
} comm_ops;

typedef struct comm {
    const comm_ops *ops;
    void *ctx;
    MPI_Comm mpi; /* the MPI communicator of the group, always present; set-up code only */
    int size;
    int rank;
    /* 1 when operations are ordered on the compute stream (NCCL): callers then neither
     * synchronise the backend before a call nor poll comm_test for progress */
    int stream_ordered;
} comm;

/* Wraps an MPI communicator (not duplicated; the mesh owns it). */
void comm_mpi_init(comm *c, MPI_Comm mpi_comm);

/* NCCL over the same group: the group root creates the unique id and broadcasts it over
 * c->mpi. stream is the backend's cudaStream_t passed as void *. Returns 0 on success. */
int comm_nccl_init(comm *c, MPI_Comm mpi_comm, void *compute_stream);

/* Frees whatever backend c holds (c->ops->free) and clears c; an unset comm is fine. */
void comm_free(comm *c);

size_t comm_type_size(comm_type type);
/* The MPI datatype and op of a comm_type and comm_op, and an element count checked to fit
 * MPI's int counts; for the MPI-based backends (comm_mpi.c, comm_staged.c, comm_nccl.c). */
MPI_Datatype comm_type_mpi(comm_type type);
MPI_Op comm_op_mpi(comm_op op);
int comm_count_int(size_t count);
/* The host-buffer operations over an MPI communicator, shared by every backend. */
void comm_mpi_allgatherv(MPI_Comm group, void *recv, const void *send, const int *counts,
                         const int *displs, comm_type type);
void comm_mpi_allreduce_maxloc(MPI_Comm group, comm_maxloc_pair *pairs, size_t count);
/* An all-to-all's counts and displacements as MPI takes them: ints[0 .. 4 size) holds the send
 * counts, send displacements, recv counts and recv displacements of size peers each, checked
 * to fit MPI's int (a message too large for MPI_Alltoallv dies naming the peer and the
 * value). Also returns in *send_end and *recv_end the elements the blocks span (the largest
 * displacement + count), for the staged backend's copies. */
void comm_mpi_alltoallv_ints(int size, const size_t *send_counts, const size_t *send_displs,
                             const size_t *recv_counts, const size_t *recv_displs, int *ints,
                             size_t *send_end, size_t *recv_end);

/* Short-hands so call sites read as one line. */
static inline void comm_allreduce_sum(comm *c, float *buf, size_t count) {
    if (c->size > 1) c->ops->allreduce_sum(c->ctx, buf, count);
}
static inline void comm_iallreduce_sum(comm *c, float *buf, size_t count, comm_req *req) {
    req->active = 0;
    if (c->size > 1) c->ops->iallreduce_sum(c->ctx, buf, count, req);
}
static inline void comm_alltoallv(comm *c, const void *send, const size_t *send_counts,
                                  const size_t *send_displs, void *recv,
                                  const size_t *recv_counts, const size_t *recv_displs,
                                  comm_type type) {
    c->ops->alltoallv(c->ctx, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                      type);
}
static inline void comm_ialltoallv(comm *c, const void *send, const size_t *send_counts,
                                   const size_t *send_displs, void *recv,
                                   const size_t *recv_counts, const size_t *recv_displs,
                                   comm_type type, comm_req *req) {
    req->active = 0;
    c->ops->ialltoallv(c->ctx, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                       type, req);
}
static inline void comm_wait(comm *c, comm_req *req) {
    if (req->active) c->ops->wait(c->ctx, req);
}
static inline int comm_test(comm *c, comm_req *req) {
    return req->active ? c->ops->test(c->ctx, req) : 1;
}
static inline void comm_cancel(comm *c, comm_req *req) {
    if (req->active) c->ops->cancel(c->ctx, req);
}

#ifdef __cplusplus
}
#endif
