/* The staged MPI comm backend: device buffers travel through page-locked host memory, so plain
 * MPI (no CUDA-aware build, several ranks sharing one GPU) can serve the CUDA backend. Every
 * operation synchronises the compute stream first, so it is host-blocking, not stream-ordered. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "parallel/comm_setup.h"
#include "parallel/watchdog.h"

/* One staging buffer. A slot is held by one pending isend/irecv from post to completion;
 * handle in comm_req is the slot index + 1 (the slot table may move when it grows). */
typedef struct {
    void *host; /* (bytes) page-locked when the backend has host_alloc */
    size_t bytes;
    int busy;
    void *device; /* irecv: the device buffer the message is copied into on completion */
    size_t msg_bytes;
} staged_slot;

typedef struct {
    MPI_Comm mpi;      /* not owned: the mesh frees it */
    const backend *be; /* copies go through its ops, which order after its compute stream */
    /* be->ops at init, kept because the staging is freed through it and comm_teardown may
     * follow backend_free (which clears be): then host_free gets a NULL ctx */
    const backend_ops *ops;
    int size, rank;
    staged_slot *slots;
    int n_slots;
    staged_slot sync; /* blocking collectives */
    int *a2a_ints;    /* (4 * size): an all-to-all's counts as MPI takes them */
    long grows;       /* buffers allocated after init: 0 when init was sized right */
} staged_ctx;

/* Pinned when the backend offers it (cuda), so the copies run at full bus speed; plain memory
 * otherwise (cpu, in tests), where backend memory already is host memory. */
static void *host_alloc(staged_ctx *ctx, size_t bytes) {
    return ctx->ops->host_alloc ? ctx->ops->host_alloc(ctx->be->ctx, bytes)
                                : xcalloc(1, bytes ? bytes : 1);
}

static void host_free(staged_ctx *ctx, void *ptr) {
    if (ctx->ops->host_alloc)
        ctx->ops->host_free(ctx->be->ctx, ptr);
    else
        free(ptr);
}

/* Makes slot hold at least bytes. Growing frees and reallocates: pinned allocation is slow
 * and synchronises the device, so init sizes slots for the largest message the engine sends
 * (the prefill's), and the decode loop never gets here. */
static void slot_reserve(staged_ctx *ctx, staged_slot *s, size_t bytes, int counted) {
    if (s->host && s->bytes >= bytes) return;
    host_free(ctx, s->host);
    s->host = host_alloc(ctx, bytes);
    s->bytes = bytes;
    ctx->grows += counted;
}

static int slot_acquire(staged_ctx *ctx, size_t bytes) {
    int pick = -1;
    for (int i = 0; i < ctx->n_slots && pick < 0; i++)
        if (!ctx->slots[i].busy && ctx->slots[i].bytes >= bytes) pick = i;
    for (int i = 0; i < ctx->n_slots && pick < 0; i++)
        if (!ctx->slots[i].busy) pick = i;
    if (pick < 0) {
        staged_slot *grown = realloc(ctx->slots, (size_t)(ctx->n_slots + 1) * sizeof *grown);
        CHECK(grown != NULL, "comm: mpi-staged: out of host memory for slot %d", ctx->n_slots);
        ctx->slots = grown;
        pick = ctx->n_slots++;
        memset(&ctx->slots[pick], 0, sizeof ctx->slots[pick]);
    }
    staged_slot *s = &ctx->slots[pick];
    slot_reserve(ctx, s, bytes, 1);
    s->busy = 1;
    s->device = NULL;
    s->msg_bytes = bytes;
    return pick;
}

static staged_slot *slot_of(staged_ctx *ctx, const comm_req *req) {
    intptr_t index = (intptr_t)req->handle - 1;
    CHECK(index >= 0 && index < ctx->n_slots, "comm: mpi-staged: request without a slot");
    return &ctx->slots[index];
}

static void to_host(staged_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes) ctx->be->ops->copy_to_host(ctx->be->ctx, dst, src, bytes);
}

static void to_device(staged_ctx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes) ctx->be->ops->copy_to_device(ctx->be->ctx, dst, src, bytes);
}

/* The backend's copies wait for the compute stream, so the data is what the kernels queued
 * before this call wrote; the copy back completes before it returns. */
static void staged_allreduce(void *vctx, void *buf, size_t count, comm_type type, comm_op op) {
    staged_ctx *ctx = vctx;
    size_t bytes = count * comm_type_size(type);
    slot_reserve(ctx, &ctx->sync, bytes, 1);
    to_host(ctx, ctx->sync.host, buf, bytes);
    WATCH_WAIT(WATCH_ALLREDUCE, ctx->mpi, -1,
               MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, ctx->sync.host, comm_count_int(count),
                                       comm_type_mpi(type), comm_op_mpi(op), ctx->mpi)));
    to_device(ctx, buf, ctx->sync.host, bytes);
}

static void staged_allreduce_sum(void *vctx, float *buf, size_t count) {
    staged_allreduce(vctx, buf, count, COMM_FLOAT, COMM_OP_SUM);
}

/* Completes before returning (req stays inactive): a host-staged all-reduce cannot overlap the
 * compute stream without a progress thread, and the forward pass then simply finds it done. */
static void staged_iallreduce_sum(void *vctx, float *buf, size_t count, comm_req *req) {
    staged_allreduce_sum(vctx, buf, count);
    req->active = 0;
}

static void staged_allgather(void *vctx, void *recv, const void *send, size_t count,
                             comm_type type) {
    staged_ctx *ctx = vctx;
    size_t bytes = count * comm_type_size(type);
    slot_reserve(ctx, &ctx->sync, bytes * (size_t)ctx->size, 1);
    char *host = ctx->sync.host;
    to_host(ctx, host + (size_t)ctx->rank * bytes, send, bytes);
    WATCH_WAIT(WATCH_ALLGATHER, ctx->mpi, -1,
               MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host,
                                       comm_count_int(count), comm_type_mpi(type), ctx->mpi)));
    to_device(ctx, recv, host, bytes * (size_t)ctx->size);
}

/* Host buffers: nothing to stage. */
static void staged_allgatherv(void *vctx, void *recv, const void *send, const int *counts,
                              const int *displs, comm_type type) {
    comm_mpi_allgatherv(((staged_ctx *)vctx)->mpi, recv, send, counts, displs, type);
}

static void staged_allreduce_maxloc(void *vctx, comm_maxloc_pair *pairs, size_t count) {
    comm_mpi_allreduce_maxloc(((staged_ctx *)vctx)->mpi, pairs, count);
}

static void staged_bcast(void *vctx, void *buf, size_t count, comm_type type, int root) {
    staged_ctx *ctx = vctx;
    size_t bytes = count * comm_type_size(type);
    slot_reserve(ctx, &ctx->sync, bytes, 1);
    if (ctx->rank == root) to_host(ctx, ctx->sync.host, buf, bytes);
    WATCH_WAIT(WATCH_BCAST, ctx->mpi, -1,
               MPI_CHECK(MPI_Bcast(ctx->sync.host, comm_count_int(count), comm_type_mpi(type),
                                   root, ctx->mpi)));
    if (ctx->rank != root) to_device(ctx, buf, ctx->sync.host, bytes);
}

/* Stages the whole send span out in one copy (the gaps between blocks ride along unread) and
 * copies back each received block alone, so recv outside the blocks keeps what it held. The
 * staging buffer holds the send span, then the recv span. */
static void staged_alltoallv(void *vctx, const void *send, const size_t *send_counts,
                             const size_t *send_displs, void *recv, const size_t *recv_counts,
                             const size_t *recv_displs, comm_type type) {
    staged_ctx *ctx = vctx;
    const int n = ctx->size;
    const size_t esize = comm_type_size(type);
    size_t send_end = 0, recv_end = 0;
    int *ints = ctx->a2a_ints;
    comm_mpi_alltoallv_ints(n, send_counts, send_displs, recv_counts, recv_displs, ints,
                            &send_end, &recv_end);
    /* at least one element, so the two host pointers below are never offsets of NULL */
    slot_reserve(ctx, &ctx->sync, (send_end + recv_end + 1) * esize, 1);
    char *host_send = ctx->sync.host, *host_recv = host_send + send_end * esize;
    to_host(ctx, host_send, send, send_end * esize);
    const MPI_Datatype t = comm_type_mpi(type);
    WATCH_WAIT(WATCH_ALLTOALL, ctx->mpi, -1,
               MPI_CHECK(MPI_Alltoallv(host_send, ints, ints + n, t, host_recv, ints + 2 * n,
                                       ints + 3 * n, t, ctx->mpi)));
    for (int p = 0; p < n; p++)
        if (recv_counts[p])
            to_device(ctx, (char *)recv + recv_displs[p] * esize,
                      host_recv + recv_displs[p] * esize, recv_counts[p] * esize);
}

/* Completes before returning (req stays inactive), as the all-reduce does: the staging copies
 * synchronise the compute stream anyway, and without a progress thread nothing would move. */
static void staged_ialltoallv(void *vctx, const void *send, const size_t *send_counts,
                              const size_t *send_displs, void *recv, const size_t *recv_counts,
                              const size_t *recv_displs, comm_type type, comm_req *req) {
    staged_alltoallv(vctx, send, send_counts, send_displs, recv, recv_counts, recv_displs, type);
    req->active = 0;
}

/* The send buffer is copied out at once, so the caller may reuse buf when this returns; the
 * slot stays held until the MPI send completes. */
static void staged_isend(void *vctx, const void *buf, size_t count, comm_type type, int peer,
                         int tag, comm_req *req) {
    staged_ctx *ctx = vctx;
    size_t bytes = count * comm_type_size(type);
    int index = slot_acquire(ctx, bytes);
    to_host(ctx, ctx->slots[index].host, buf, bytes);
    MPI_CHECK(MPI_Isend(ctx->slots[index].host, comm_count_int(count), comm_type_mpi(type), peer,
                        tag, ctx->mpi, &req->mpi));
    req->handle = (void *)(intptr_t)(index + 1);
    req->active = 1;
    req->watch_op = WATCH_SEND, req->watch_peer = peer;
}

/* The message lands in the slot; completion (test or wait) copies it into buf, and cancel
 * releases the slot without copying. */
static void staged_irecv(void *vctx, void *buf, size_t count, comm_type type, int peer, int tag,
                         comm_req *req) {
    staged_ctx *ctx = vctx;
    size_t bytes = count * comm_type_size(type);
    int index = slot_acquire(ctx, bytes);
    ctx->slots[index].device = buf;
    MPI_CHECK(MPI_Irecv(ctx->slots[index].host, comm_count_int(count), comm_type_mpi(type), peer,
                        tag, ctx->mpi, &req->mpi));
    req->handle = (void *)(intptr_t)(index + 1);
    req->active = 1;
    req->watch_op = WATCH_RECV, req->watch_peer = peer;
}

static void staged_complete(staged_ctx *ctx, comm_req *req) {
    staged_slot *s = slot_of(ctx, req);
    if (s->device) to_device(ctx, s->device, s->host, s->msg_bytes);
    s->busy = 0;
    s->device = NULL;
    req->handle = NULL;
    req->active = 0;
}

static int staged_test(void *vctx, comm_req *req) {
    int done = 0;
    MPI_CHECK(MPI_Test(&req->mpi, &done, MPI_STATUS_IGNORE));
    if (done) staged_complete(vctx, req);
    return done;
}

static void staged_wait(void *vctx, comm_req *req) {
    WATCH_WAIT(req->watch_op, ((staged_ctx *)vctx)->mpi, req->watch_peer,
               MPI_CHECK(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE)));
    staged_complete(vctx, req);
}

static void staged_cancel(void *vctx, comm_req *req) {
    MPI_CHECK(MPI_Cancel(&req->mpi));
    MPI_CHECK(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE));
    slot_of(vctx, req)->device = NULL; /* nothing arrived: copy nothing back */
    staged_complete(vctx, req);
}

static void staged_barrier(void *vctx) {
    staged_ctx *ctx = vctx;
    ctx->be->ops->synchronize(ctx->be->ctx);
    WATCH_WAIT(WATCH_BARRIER, ctx->mpi, -1, MPI_CHECK(MPI_Barrier(ctx->mpi)));
}

/* Staging buffers are sized from the job at start-up, so one allocated later means a message
 * nobody planned for: worth a warning, not a failure. */
static void staged_free(void *vctx) {
    staged_ctx *ctx = vctx;
    if (!ctx) return;
    if (ctx->grows > 0)
        fprintf(stderr, "tripar: warning: [rank %d] mpi-staged comm allocated %ld staging "
                        "buffers after start-up\n", tripar_world_rank(), ctx->grows);
    for (int i = 0; i < ctx->n_slots; i++)
        host_free(ctx, ctx->slots[i].host);
    free(ctx->slots);
    host_free(ctx, ctx->sync.host);
    free(ctx->a2a_ints);
    free(ctx);
}

static const comm_ops staged_ops = {
    .name = "mpi-staged",
    .free = staged_free,
    .allreduce_sum = staged_allreduce_sum,
    .iallreduce_sum = staged_iallreduce_sum,
    .allreduce = staged_allreduce,
    .allgather = staged_allgather,
    .allgatherv = staged_allgatherv,
    .allreduce_maxloc = staged_allreduce_maxloc,
    .bcast = staged_bcast,
    .alltoallv = staged_alltoallv,
    .ialltoallv = staged_ialltoallv,
    .isend = staged_isend,
    .irecv = staged_irecv,
    .test = staged_test,
    .wait = staged_wait,
    .cancel = staged_cancel,
    .barrier = staged_barrier,
};

void comm_staged_init(comm *c, MPI_Comm mpi_comm, const backend *be, size_t max_bytes, int slots) {
    staged_ctx *ctx = xcalloc(1, sizeof *ctx);
    ctx->mpi = mpi_comm;
    ctx->be = be;
    ctx->ops = be->ops;
    MPI_CHECK(MPI_Comm_size(mpi_comm, &ctx->size));
    MPI_CHECK(MPI_Comm_rank(mpi_comm, &ctx->rank));
    ctx->a2a_ints = xmalloc(4 * (size_t)ctx->size * sizeof(int));
    // a group of one never communicates: no staging memory
    if (ctx->size > 1) {
        slot_reserve(ctx, &ctx->sync, max_bytes, 0);
        ctx->n_slots = slots > 0 ? slots : 0;
        ctx->slots = xcalloc((size_t)(ctx->n_slots ? ctx->n_slots : 1), sizeof *ctx->slots);
        for (int i = 0; i < ctx->n_slots; i++)
            slot_reserve(ctx, &ctx->slots[i], max_bytes, 0);
    }
    c->ops = &staged_ops;
    c->ctx = ctx;
    c->mpi = mpi_comm;
    c->size = ctx->size;
    c->rank = ctx->rank;
    c->stream_ordered = 0;
}
