/* The NCCL comm backend: collectives of one group on GPU buffers. Collectives run on the
 * comm's own stream after it waits on the compute stream, so the host never blocks; a request
 * is an event recorded on that stream, and waiting makes the compute stream wait on it. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/check.h"
#include "parallel/comm.h"

#define CUDA_CHECK(call)                                                                     \
    TRIPAR_CHECK_GEN(call, cudaError_t, rc_ == cudaSuccess, cudaGetErrorString(rc_))
#define NCCL_CHECK(call)                                                                     \
    TRIPAR_CHECK_GEN(call, ncclResult_t, rc_ == ncclSuccess, ncclGetErrorString(rc_))

/* Done-events are reused round robin. Reuse is safe because an event of a ring is only ever
 * recorded on one stream: waiting on a later record of it also covers the earlier operation.
 */
#define NCCL_EVENT_RING 64

typedef struct {
    cudaStream_t stream;
    cudaEvent_t done[NCCL_EVENT_RING];
    int next;
} nccl_lane;

typedef struct {
    ncclComm_t nccl;
    MPI_Comm mpi;          /* the group's communicator, for the host barrier; not owned */
    cudaStream_t compute;  /* the backend's stream; not owned */
    cudaEvent_t ready;     /* recorded on compute right before a comm stream waits on it */
    nccl_lane coll;        /* all-reduce, all-gather, broadcast */
    nccl_lane p2p;         /* PP send/recv, so they do not queue behind TP collectives */
} nccl_ctx;

static ncclDataType_t nccl_type(comm_type type) {
    switch (type) {
    case COMM_FLOAT: return ncclFloat32;
    case COMM_INT32: return ncclInt32;
    case COMM_BYTE: return ncclUint8;
    case COMM_DOUBLE: return ncclFloat64;
    case COMM_INT64: return ncclInt64;
    }
    tripar_dief(__FILE__, __LINE__, "comm: nccl: unknown comm_type %d", (int)type);
}

static void lane_init(nccl_lane *lane) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&lane->stream, cudaStreamNonBlocking));
    for (int i = 0; i < NCCL_EVENT_RING; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(&lane->done[i], cudaEventDisableTiming));
    lane->next = 0;
}

static void lane_free(nccl_lane *lane) {
    CUDA_CHECK(cudaStreamSynchronize(lane->stream));
    for (int i = 0; i < NCCL_EVENT_RING; i++) CUDA_CHECK(cudaEventDestroy(lane->done[i]));
    CUDA_CHECK(cudaStreamDestroy(lane->stream));
}

/* The lane's stream starts after everything already queued on the compute stream. */
static void lane_fork(nccl_ctx *ctx, nccl_lane *lane) {
    CUDA_CHECK(cudaEventRecord(ctx->ready, ctx->compute));
    CUDA_CHECK(cudaStreamWaitEvent(lane->stream, ctx->ready, 0));
}

/* Records the completion of what was just queued on the lane into req. */
static void lane_finish(nccl_lane *lane, comm_req *req) {
    cudaEvent_t ev = lane->done[lane->next];
    lane->next = (lane->next + 1) % NCCL_EVENT_RING;
    CUDA_CHECK(cudaEventRecord(ev, lane->stream));
    req->handle = (void *)ev;
    req->active = 1;
}

static void nccl_wait(void *vctx, comm_req *req) {
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    // stream-ordered: later compute work waits on the GPU; the host does not block
    CUDA_CHECK(cudaStreamWaitEvent(ctx->compute, (cudaEvent_t)req->handle, 0));
    req->active = 0;
}

static int nccl_test(void *vctx, comm_req *req) {
    (void)vctx;
    cudaError_t rc = cudaEventQuery((cudaEvent_t)req->handle);
    if (rc == cudaErrorNotReady) {
        (void)cudaGetLastError(); // not an error: clear it so the next check is clean
        return 0;
    }
    CUDA_CHECK(rc);
    // complete on the device; compute must still order after it, which wait provides
    nccl_wait(vctx, req);
    return 1;
}

static void nccl_iallreduce(nccl_ctx *ctx, void *buf, size_t count, comm_type type, comm_op op,
                            comm_req *req) {
    lane_fork(ctx, &ctx->coll);
    NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(type), op == COMM_OP_MAX ? ncclMax : ncclSum,
                             ctx->nccl, ctx->coll.stream));
    lane_finish(&ctx->coll, req);
}

static void nccl_iallreduce_sum(void *vctx, float *buf, size_t count, comm_req *req) {
    nccl_iallreduce((nccl_ctx *)vctx, buf, count, COMM_FLOAT, COMM_OP_SUM, req);
}

static void nccl_allreduce(void *vctx, void *buf, size_t count, comm_type type, comm_op op) {
    comm_req req = {0};
    nccl_iallreduce((nccl_ctx *)vctx, buf, count, type, op, &req);
    nccl_wait(vctx, &req);
}

static void nccl_allreduce_sum(void *vctx, float *buf, size_t count) {
    nccl_allreduce(vctx, buf, count, COMM_FLOAT, COMM_OP_SUM);
}

/* Host buffers (the sampler's): plain MPI over the same group. */
static void nccl_allgatherv(void *vctx, void *recv, const void *send, const int *counts,
                            const int *displs, comm_type type) {
    comm_mpi_allgatherv(((nccl_ctx *)vctx)->mpi, recv, send, counts, displs, type);
}

static void nccl_allreduce_maxloc(void *vctx, comm_maxloc_pair *pairs, size_t count) {
    comm_mpi_allreduce_maxloc(((nccl_ctx *)vctx)->mpi, pairs, count);
}

static void nccl_allgather(void *vctx, void *recv, const void *send, size_t count,
                           comm_type type) {
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    comm_req req = {0};
    lane_fork(ctx, &ctx->coll);
    NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(type), ctx->nccl, ctx->coll.stream));
    lane_finish(&ctx->coll, &req);
    nccl_wait(vctx, &req);
}

static void nccl_bcast(void *vctx, void *buf, size_t count, comm_type type, int root) {
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    comm_req req = {0};
    lane_fork(ctx, &ctx->coll);
    NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_type(type), root, ctx->nccl, ctx->coll.stream));
    lane_finish(&ctx->coll, &req);
    nccl_wait(vctx, &req);
}

/* NCCL matches point-to-point by order between a pair of ranks, not by tag: callers must post
 * sends and receives between two peers in the same order on both sides (the pipeline does). */
static void nccl_isend(void *vctx, const void *buf, size_t count, comm_type type, int peer,
                       int tag, comm_req *req) {
    (void)tag;
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    lane_fork(ctx, &ctx->p2p);
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(buf, count, nccl_type(type), peer, ctx->nccl, ctx->p2p.stream));
    NCCL_CHECK(ncclGroupEnd());
    lane_finish(&ctx->p2p, req);
}

static void nccl_irecv(void *vctx, void *buf, size_t count, comm_type type, int peer, int tag,
                       comm_req *req) {
    (void)tag;
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    lane_fork(ctx, &ctx->p2p);
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclRecv(buf, count, nccl_type(type), peer, ctx->nccl, ctx->p2p.stream));
    NCCL_CHECK(ncclGroupEnd());
    lane_finish(&ctx->p2p, req);
}

/* Work enqueued on a stream cannot be withdrawn: the engine enqueues a receive only right
 * before it waits on it, so none is ever pending when a run stops. */
static void nccl_cancel(void *vctx, comm_req *req) {
    (void)vctx;
    (void)req;
    tripar_dief(__FILE__, __LINE__, "comm: nccl: a receive already enqueued on the stream cannot "
                "be cancelled");
}

/* A host barrier: everything this rank queued is finished, then the group meets. */
static void nccl_barrier(void *vctx) {
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    CUDA_CHECK(cudaStreamSynchronize(ctx->coll.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->p2p.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->compute));
    MPI_CHECK(MPI_Barrier(ctx->mpi));
}

static void nccl_free(void *vctx) {
    nccl_ctx *ctx = vctx;
    if (!ctx) return;
    lane_free(&ctx->coll);
    lane_free(&ctx->p2p);
    CUDA_CHECK(cudaEventDestroy(ctx->ready));
    NCCL_CHECK(ncclCommDestroy(ctx->nccl));
    free(ctx);
}

static const comm_ops nccl_ops = {
    .name = "nccl",
    .free = nccl_free,
    .allreduce_sum = nccl_allreduce_sum,
    .iallreduce_sum = nccl_iallreduce_sum,
    .allreduce = nccl_allreduce,
    .allgather = nccl_allgather,
    .allgatherv = nccl_allgatherv,
    .allreduce_maxloc = nccl_allreduce_maxloc,
    .bcast = nccl_bcast,
    .isend = nccl_isend,
    .irecv = nccl_irecv,
    .test = nccl_test,
    .wait = nccl_wait,
    .cancel = nccl_cancel,
    .barrier = nccl_barrier,
};

int comm_nccl_init(comm *c, MPI_Comm mpi_comm, void *compute_stream) {
    if (!compute_stream) {
        error_set("backend.comm: nccl needs the cuda compute backend (no CUDA stream given)");
        return -1;
    }
    c->mpi = mpi_comm;
    MPI_CHECK(MPI_Comm_size(mpi_comm, &c->size));
    MPI_CHECK(MPI_Comm_rank(mpi_comm, &c->rank));

    nccl_ctx *ctx = xcalloc(1, sizeof(nccl_ctx));
    ctx->compute = (cudaStream_t)compute_stream;
    ctx->mpi = mpi_comm;
    // the group root makes the id; every member learns it over the group's MPI communicator
    ncclUniqueId id;
    if (c->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpi_comm));
    // ncclCommInitRank binds to the current device, which backend_cuda_init selected
    NCCL_CHECK(ncclCommInitRank(&ctx->nccl, c->size, id, c->rank));
    CUDA_CHECK(cudaEventCreateWithFlags(&ctx->ready, cudaEventDisableTiming));
    lane_init(&ctx->coll);
    lane_init(&ctx->p2p);
    c->ops = &nccl_ops;
    c->ctx = ctx;
    c->stream_ordered = 1; /* queued on the compute stream's order: no host sync needed */
    return 0;
}
