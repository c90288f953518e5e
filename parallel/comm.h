/* The communication-backend boundary: collectives and point-to-point over one group of ranks.
 * MPI implements it on the CPU (comm_mpi.c); NCCL on GPUs (comm_nccl.c). The forward pass
 * calls these as one-line visible operations (comm_allreduce_sum(tp, ...)). */
#pragma once
#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A pending non-blocking operation. Backends keep their handle here; active is 0 once done. */
typedef struct {
    int active;
    MPI_Request mpi;
    void *handle;
} comm_req;

typedef enum {
    COMM_FLOAT = 0,
    COMM_INT32 = 1,
    COMM_BYTE = 2,
} comm_type;

typedef struct comm_ops {
    const char *name;
    /* in-place sum over the group */
    void (*allreduce_sum)(void *ctx, float *buf, size_t count);
    void (*iallreduce_sum)(void *ctx, float *buf, size_t count, comm_req *req);
    /* recv holds size * count elements, rank i's contribution at i * count */
    void (*allgather)(void *ctx, void *recv, const void *send, size_t count, comm_type type);
    void (*bcast)(void *ctx, void *buf, size_t count, comm_type type, int root);
    void (*isend)(void *ctx, const void *buf, size_t count, comm_type type, int peer, int tag,
                  comm_req *req);
    void (*irecv)(void *ctx, void *buf, size_t count, comm_type type, int peer, int tag,
                  comm_req *req);
    /* returns 1 when req is complete (and clears req->active) */
    int (*test)(void *ctx, comm_req *req);
    void (*wait)(void *ctx, comm_req *req);
    void (*barrier)(void *ctx);
} comm_ops;

typedef struct {
    const comm_ops *ops;
    void *ctx;
    MPI_Comm mpi; /* the MPI communicator of the group, always present */
    int size;
    int rank;
    /* 1 when operations are ordered on the compute stream (NCCL): callers then neither
     * synchronise the backend before a call nor poll comm_test for progress */
    int stream_ordered;
} comm;

/* Wraps an MPI communicator (not duplicated; the mesh owns it). */
void comm_mpi_init(comm *c, MPI_Comm mpi_comm);
void comm_mpi_free(comm *c);

/* NCCL over the same group: the group root creates the unique id and broadcasts it over
 * c->mpi. stream is the backend's cudaStream_t passed as void *. Returns 0 on success. */
int comm_nccl_init(comm *c, MPI_Comm mpi_comm, void *compute_stream);
void comm_nccl_free(comm *c);

size_t comm_type_size(comm_type type);
/* The MPI datatype of a comm_type, and an element count checked to fit MPI's int counts; for
 * the MPI-based backends (comm_mpi.c, comm_staged.c). */
MPI_Datatype comm_type_mpi(comm_type type);
int comm_count_int(size_t count);

/* Short-hands so call sites read as one line. */
static inline void comm_allreduce_sum(comm *c, float *buf, size_t count) {
    if (c->size > 1) c->ops->allreduce_sum(c->ctx, buf, count);
}
static inline void comm_iallreduce_sum(comm *c, float *buf, size_t count, comm_req *req) {
    req->active = 0;
    if (c->size > 1) c->ops->iallreduce_sum(c->ctx, buf, count, req);
}
static inline void comm_wait(comm *c, comm_req *req) {
    if (req->active) c->ops->wait(c->ctx, req);
}
static inline int comm_test(comm *c, comm_req *req) {
    return req->active ? c->ops->test(c->ctx, req) : 1;
}

#ifdef __cplusplus
}
#endif
