/* The NCCL comm backend: collectives of one group on GPU buffers. Every NCCL operation of the
 * process, of every communicator (TP and PP), runs on one shared stream after it waits on the
 * compute stream, so the host never blocks and no two NCCL kernels run at once on the device
 * (docs/cuda.md, "One NCCL stream"); a request is an event recorded on that stream, and waiting
 * makes the compute stream wait on it. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/check.h"
#include "parallel/comm.h"
#include "parallel/comm_nccl_module.h"
#include "parallel/comm_poll.h"
#include "parallel/watchdog.h"

/* A failed NCCL call names the result and NCCL's own last message (which peer, which
 * transport), besides rank, host and file:line. comm may be NULL before one exists. */
static const char *nccl_describe(ncclResult_t rc, ncclComm_t comm) {
    static char text[768];
    const char *last = ncclGetLastError(comm);
    snprintf(text, sizeof text, "%s (%s)", ncclGetErrorString(rc),
             last && *last ? last : "NCCL gave no detail; rerun with NCCL_DEBUG=WARN");
    return text;
}

#define CUDA_CHECK(call)                                                                     \
    TRIPAR_CHECK_GEN(call, cudaError_t, rc_ == cudaSuccess, cudaGetErrorString(rc_))
#define NCCL_CHECK_COMM(comm, call)                                                          \
    TRIPAR_CHECK_GEN(call, ncclResult_t, rc_ == ncclSuccess, nccl_describe(rc_, comm))
#define NCCL_CHECK(call) NCCL_CHECK_COMM(NULL, call)

/* Done-events are reused round robin. Reuse is safe because every event of the ring is only
 * ever recorded on the one lane stream: waiting on a later record of it also covers the
 * earlier operation. */
#define NCCL_EVENT_RING 64
/* Communicators sharing the lane: a process holds TP and PP (DP never uses NCCL). */
#define NCCL_LANE_COMMS 4

/* The process's one NCCL stream, shared by every NCCL communicator: NCCL documents that
 * communicators used concurrently can deadlock when their kernels cannot all be resident, and
 * one stream makes this rank's NCCL kernels run one at a time, in host call order. Created by
 * the first comm_nccl_init, destroyed by the last free. */
typedef struct {
    int refs;
    cudaStream_t stream;
    cudaStream_t compute; /* the backend's stream; not owned */
    cudaEvent_t ready;    /* recorded on compute right before the lane waits on it */
    cudaEvent_t done[NCCL_EVENT_RING];
    int next;
    ncclComm_t comms[NCCL_LANE_COMMS]; /* polled for asynchronous errors while waiting */
    int comm_sizes[NCCL_LANE_COMMS];
} nccl_lane;

static nccl_lane lane;

typedef struct {
    ncclComm_t nccl;
    MPI_Comm mpi; /* the group's communicator, for the host barrier; not owned */
    int size;     /* ranks of the group: the all-to-all's peers */
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

/* Joins the lane (creating it for the first communicator) and registers comm for polling. */
static void lane_join(cudaStream_t compute, ncclComm_t comm, int size) {
    if (lane.refs == 0) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&lane.ready, cudaEventDisableTiming));
        for (int i = 0; i < NCCL_EVENT_RING; i++)
            CUDA_CHECK(cudaEventCreateWithFlags(&lane.done[i], cudaEventDisableTiming));
        lane.next = 0;
        lane.compute = compute;
    }
    CHECK(lane.compute == compute, "comm: nccl: communicators of one process must share the "
          "backend's compute stream");
    CHECK(lane.refs < NCCL_LANE_COMMS, "comm: nccl: more than %d communicators in a process",
          NCCL_LANE_COMMS);
    lane.comms[lane.refs] = comm;
    lane.comm_sizes[lane.refs] = size;
    lane.refs++;
}

/* Unregisters comm; the last one out destroys the lane (drained by the caller). */
static void lane_leave(ncclComm_t comm) {
    for (int i = 0; i < lane.refs; i++)
        if (lane.comms[i] == comm) {
            lane.comms[i] = lane.comms[lane.refs - 1];
            lane.comm_sizes[i] = lane.comm_sizes[lane.refs - 1];
            lane.refs--;
            break;
        }
    if (lane.refs > 0) return;
    for (int i = 0; i < NCCL_EVENT_RING; i++) CUDA_CHECK(cudaEventDestroy(lane.done[i]));
    CUDA_CHECK(cudaEventDestroy(lane.ready));
    CUDA_CHECK(cudaStreamDestroy(lane.stream));
    lane.compute = NULL;
}

/* 1 when more than one communicator of this process moves data (size > 1): only then can
 * NCCL kernels of two communicators meet on the device. */
static int lane_shared(void) {
    int active = 0;
    for (int i = 0; i < lane.refs; i++) active += lane.comm_sizes[i] > 1;
    return active > 1;
}

/* The folded asynchronous state of every communicator on the lane. */
static poll_comm_state lane_comm_state(ncclComm_t *failed, ncclResult_t *failed_rc) {
    poll_comm_state worst = POLL_COMM_OK;
    for (int i = 0; i < lane.refs; i++) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t rc = ncclCommGetAsyncError(lane.comms[i], &async);
        if (rc != ncclSuccess) async = rc; // the query itself failed: as bad as an error
        const poll_comm_state st = async == ncclSuccess      ? POLL_COMM_OK
                                   : async == ncclInProgress ? POLL_COMM_IN_PROGRESS
                                                             : POLL_COMM_FAILED;
        if (st == POLL_COMM_FAILED && worst != POLL_COMM_FAILED) {
            *failed = lane.comms[i];
            *failed_rc = async;
        }
        worst = comm_poll_worst(worst, st);
    }
    return worst;
}

/* Aborts every communicator on the lane (so peers stuck in a collective with us get an error
 * instead of hanging) and dies through MPI_Abort with what failed. */
static void lane_abort(void) {
    for (int i = 0; i < lane.refs; i++) (void)ncclCommAbort(lane.comms[i]);
}

static void __attribute__((noreturn)) lane_fail(const char *what, const char *why) {
    lane_abort();
    tripar_dief(__FILE__, __LINE__, "comm: nccl: %s failed: %s; aborted the NCCL communicators",
                what, why);
}

/* Waits on the host until stream has finished, polling the communicators' asynchronous
 * errors meanwhile instead of blocking in cudaStreamSynchronize: a peer's failure leaves this
 * rank's NCCL kernels waiting forever, and only ncclCommAbort frees them. what names the wait
 * in the message. */
static void lane_host_wait(cudaStream_t stream, const char *what) {
    long sleep_ns = 0;
    watch_wait_begin(WATCH_NCCL, MPI_COMM_NULL, -1);
    for (;;) {
        /* the stall watchdog fired (record.stall_seconds): a peer stopped answering */
        if (watch_expired()) lane_fail(what, "no progress within record.stall_seconds");
        const cudaError_t q = cudaStreamQuery(stream);
        const poll_stream_state st = q == cudaSuccess         ? POLL_STREAM_DONE
                                     : q == cudaErrorNotReady ? POLL_STREAM_BUSY
                                                              : POLL_STREAM_FAILED;
        if (q == cudaErrorNotReady) (void)cudaGetLastError(); // not an error: clear it
        ncclComm_t failed = NULL;
        ncclResult_t failed_rc = ncclSuccess;
        switch (comm_poll_decide(st, lane_comm_state(&failed, &failed_rc))) {
        case POLL_ACTION_DONE: watch_wait_end(); return;
        case POLL_ACTION_WAIT: break;
        case POLL_ACTION_FAIL_COMM: lane_fail(what, nccl_describe(failed_rc, failed));
        case POLL_ACTION_FAIL_CUDA: lane_fail(what, cudaGetErrorString(q));
        }
        sleep_ns = comm_poll_backoff(sleep_ns);
        struct timespec ts = {0, sleep_ns};
        (void)nanosleep(&ts, NULL); // woken early by a signal: just poll sooner
    }
}

/* The lane starts after everything already queued on the compute stream. */
static void lane_fork(void) {
    CUDA_CHECK(cudaEventRecord(lane.ready, lane.compute));
    CUDA_CHECK(cudaStreamWaitEvent(lane.stream, lane.ready, 0));
}

/* Records the completion of what was just queued on the lane into req. */
static void lane_finish(comm_req *req) {
    cudaEvent_t ev = lane.done[lane.next];
    lane.next = (lane.next + 1) % NCCL_EVENT_RING;
    CUDA_CHECK(cudaEventRecord(ev, lane.stream));
    req->handle = (void *)ev;
    req->active = 1;
}

static void nccl_wait(void *vctx, comm_req *req) {
    (void)vctx;
    // stream-ordered: later compute work waits on the GPU; the host does not block
    CUDA_CHECK(cudaStreamWaitEvent(lane.compute, (cudaEvent_t)req->handle, 0));
    req->active = 0;
}

static int nccl_test(void *vctx, comm_req *req) {
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
    lane_fork();
    NCCL_CHECK_COMM(ctx->nccl, ncclAllReduce(buf, buf, count, nccl_type(type),
                                             op == COMM_OP_MAX ? ncclMax : ncclSum, ctx->nccl,
                                             lane.stream));
    lane_finish(req);
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
    lane_fork();
    NCCL_CHECK_COMM(ctx->nccl, ncclAllGather(send, recv, count, nccl_type(type), ctx->nccl,
                                             lane.stream));
    lane_finish(&req);
    nccl_wait(vctx, &req);
}

static void nccl_bcast(void *vctx, void *buf, size_t count, comm_type type, int root) {
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    comm_req req = {0};
    lane_fork();
    NCCL_CHECK_COMM(ctx->nccl, ncclBroadcast(buf, buf, count, nccl_type(type), root, ctx->nccl,
                                             lane.stream));
    lane_finish(&req);
    nccl_wait(vctx, &req);
}

/* All-to-all as NCCL has none: one group of a send and a receive per peer with a non-zero
 * count (oneself included: inside one group NCCL pairs them), queued on the lane as one
 * operation. Like the all-reduce, and unlike isend, the compute stream does not wait for it at
 * once: chunked dispatch overlaps it with compute. The caller must therefore wait on it before
 * replaying a CUDA graph that holds another communicator's collectives (a captured decode
 * step's TP all-reduces), which would otherwise meet it on the device ("One NCCL stream",
 * docs/cuda.md). */
static void nccl_ialltoallv(void *vctx, const void *send, const size_t *send_counts,
                            const size_t *send_displs, void *recv, const size_t *recv_counts,
                            const size_t *recv_displs, comm_type type, comm_req *req) {
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    const size_t esize = comm_type_size(type);
    const ncclDataType_t t = nccl_type(type);
    lane_fork();
    NCCL_CHECK_COMM(ctx->nccl, ncclGroupStart());
    for (int p = 0; p < ctx->size; p++) {
        if (send_counts[p])
            NCCL_CHECK_COMM(ctx->nccl, ncclSend((const char *)send + send_displs[p] * esize,
                                                send_counts[p], t, p, ctx->nccl, lane.stream));
        if (recv_counts[p])
            NCCL_CHECK_COMM(ctx->nccl, ncclRecv((char *)recv + recv_displs[p] * esize,
                                                recv_counts[p], t, p, ctx->nccl, lane.stream));
    }
    NCCL_CHECK_COMM(ctx->nccl, ncclGroupEnd());
    lane_finish(req);
}

static void nccl_alltoallv(void *vctx, const void *send, const size_t *send_counts,
                           const size_t *send_displs, void *recv, const size_t *recv_counts,
                           const size_t *recv_displs, comm_type type) {
    comm_req req = {0};
    nccl_ialltoallv(vctx, send, send_counts, send_displs, recv, recv_counts, recv_displs, type,
                    &req);
    nccl_wait(vctx, &req);
}

/* NCCL matches point-to-point by order between a pair of ranks, not by tag: callers must post
 * sends and receives between two peers in the same order on both sides (the pipeline does).
 * When another communicator of this process also moves data (tp > 1 and pp > 1), the compute
 * stream waits for the send at once: a TP all-reduce replayed from a CUDA graph runs off the
 * compute stream, not the lane, and would otherwise meet the send on the device. The price is
 * that the next micro-batch's compute starts once the next stage has taken the message. */
static void nccl_isend(void *vctx, const void *buf, size_t count, comm_type type, int peer,
                       int tag, comm_req *req) {
    (void)tag;
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    lane_fork();
    NCCL_CHECK_COMM(ctx->nccl, ncclGroupStart());
    NCCL_CHECK_COMM(ctx->nccl, ncclSend(buf, count, nccl_type(type), peer, ctx->nccl,
                                        lane.stream));
    NCCL_CHECK_COMM(ctx->nccl, ncclGroupEnd());
    lane_finish(req);
    if (lane_shared()) CUDA_CHECK(cudaStreamWaitEvent(lane.compute, (cudaEvent_t)req->handle, 0));
}

static void nccl_irecv(void *vctx, void *buf, size_t count, comm_type type, int peer, int tag,
                       comm_req *req) {
    (void)tag;
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    lane_fork();
    NCCL_CHECK_COMM(ctx->nccl, ncclGroupStart());
    NCCL_CHECK_COMM(ctx->nccl, ncclRecv(buf, count, nccl_type(type), peer, ctx->nccl,
                                        lane.stream));
    NCCL_CHECK_COMM(ctx->nccl, ncclGroupEnd());
    lane_finish(req);
}

/* Work enqueued on a stream cannot be withdrawn: the engine enqueues a receive only right
 * before it waits on it, so none is ever pending when a run stops. */
static void nccl_cancel(void *vctx, comm_req *req) {
    (void)vctx;
    (void)req;
    tripar_dief(__FILE__, __LINE__, "comm: nccl: a receive already enqueued on the stream cannot "
                "be cancelled");
}

/* A host barrier: everything this rank queued is finished, then the group meets. The waits
 * poll the communicators so that a peer's failure ends in an abort, not a hang. */
static void nccl_barrier(void *vctx) {
    nccl_ctx *ctx = (nccl_ctx *)vctx;
    lane_host_wait(lane.stream, "barrier (nccl stream)");
    lane_host_wait(lane.compute, "barrier (compute stream)");
    WATCH_WAIT(WATCH_BARRIER, ctx->mpi, -1, MPI_CHECK(MPI_Barrier(ctx->mpi)));
}

/* Drains the lane while polling (a failed peer aborts instead of hanging teardown), then
 * destroys the communicator: with nothing queued, ncclCommDestroy does not wait on peers. */
static void nccl_free(void *vctx) {
    nccl_ctx *ctx = vctx;
    if (!ctx) return;
    lane_host_wait(lane.stream, "teardown");
    lane_leave(ctx->nccl);
    NCCL_CHECK_COMM(ctx->nccl, ncclCommDestroy(ctx->nccl));
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
    .alltoallv = nccl_alltoallv,
    .ialltoallv = nccl_ialltoallv,
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
    ctx->mpi = mpi_comm;
    ctx->size = c->size;
    // the group root makes the id; every member learns it over the group's MPI communicator
    ncclUniqueId id;
    if (c->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpi_comm));
    // ncclCommInitRank binds to the current device, which backend_cuda_init selected
    NCCL_CHECK(ncclCommInitRank(&ctx->nccl, c->size, id, c->rank));
    lane_join((cudaStream_t)compute_stream, ctx->nccl, c->size);
    watch_on_stall(lane_abort); /* the watchdog's thread frees kernels stuck on a lost peer */
    c->ops = &nccl_ops;
    c->ctx = ctx;
    c->stream_ordered = 1; /* queued on the compute stream's order: no host sync needed */
    return 0;
}

/* The module's entry for the core's comm setup (parallel/comm_nccl_module.c). */
TRIPAR_MODULE_EXPORT const nccl_comm_module tripar_nccl_comm = {
    .abi = TRIPAR_CUDA_MODULE_ABI,
    .comm_size = sizeof(comm),
    .init = comm_nccl_init,
};
