/* The MPI comm backend: host buffers, MPI collectives and non-blocking point-to-point.
 * Progress of non-blocking collectives is driven by MPI_Test calls that the forward pass
 * makes between chunks (docs/design.md explains why not a progress thread). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "parallel/comm.h"
#include "parallel/watchdog.h"

size_t comm_type_size(comm_type type) {
    switch (type) {
    case COMM_FLOAT: return sizeof(float);
    case COMM_INT32: return sizeof(int);
    case COMM_BYTE: return 1;
    case COMM_DOUBLE: return sizeof(double);
    case COMM_INT64: return sizeof(int64_t);
    }
    return 1;
}

MPI_Datatype comm_type_mpi(comm_type type) {
    switch (type) {
    case COMM_FLOAT: return MPI_FLOAT;
    case COMM_INT32: return MPI_INT;
    case COMM_BYTE: return MPI_BYTE;
    case COMM_DOUBLE: return MPI_DOUBLE;
    case COMM_INT64: return MPI_INT64_T;
    }
    return MPI_BYTE;
}

MPI_Op comm_op_mpi(comm_op op) { return op == COMM_OP_MAX ? MPI_MAX : MPI_SUM; }

/* The mpi backend's state: the group, and the int counts of each pending non-blocking
 * all-to-all. MPI reads an MPI_Ialltoallv's count arrays until it completes, so they live here
 * in slots, one per pending call, held from post to completion; comm_req.handle is the slot
 * index + 1 (the table may move when it grows). Slots are made at init for the chunks a
 * dispatch keeps in flight; more pending ones grow the table. */
typedef struct {
    int busy;
    int *ints; /* (4 * size): comm_mpi_alltoallv_ints' layout */
} a2a_slot;

typedef struct {
    MPI_Comm mpi; /* not owned: the mesh frees it */
    int size;
    int *sync_ints; /* (4 * size): the blocking all-to-all's */
    a2a_slot *slots;
    int n_slots;
} mpi_ctx;

enum { MPI_A2A_SLOTS = 4 };

static MPI_Comm group(void *ctx) { return ((mpi_ctx *)ctx)->mpi; }

/* MPI counts are int; tripar's largest message (a 256 MiB commbench buffer) fits. */
int comm_count_int(size_t count) {
    CHECK(count <= 0x7fffffff, "message of %zu elements exceeds MPI's int count", count);
    return (int)count;
}


static void mpi_iallreduce_sum(void *ctx, float *buf, size_t count, comm_req *req) {
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, comm_count_int(count), MPI_FLOAT, MPI_SUM,
                             group(ctx), &req->mpi));
    req->active = 1;
    req->handle = NULL;
    req->watch_op = WATCH_ALLREDUCE, req->watch_peer = -1;
}

static void mpi_allreduce(void *ctx, void *buf, size_t count, comm_type type, comm_op op) {
    WATCH_WAIT(WATCH_ALLREDUCE, group(ctx), -1,
               MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, comm_count_int(count),
                                       comm_type_mpi(type), comm_op_mpi(op), group(ctx))));
}

static void mpi_allreduce_sum(void *ctx, float *buf, size_t count) {
    mpi_allreduce(ctx, buf, count, COMM_FLOAT, COMM_OP_SUM);
}

void comm_mpi_allgatherv(MPI_Comm group, void *recv, const void *send, const int *counts,
                         const int *displs, comm_type type) {
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(group, &rank));
    WATCH_WAIT(WATCH_ALLGATHER, group, -1,
               MPI_CHECK(MPI_Allgatherv(send, counts[rank], comm_type_mpi(type), recv, counts,
                                        displs, comm_type_mpi(type), group)));
}

/* The greedy argmax's order (kernels/backend.h): NaN above every number, the lower index first
 * among equal values and among NaNs. Returns 1 when a comes before b. A total order, so the
 * reduction is commutative and associative: every rank gets the same pair whatever order MPI
 * combines them in, and the MAXLOC of the shards' argmaxes is the whole row's argmax. */
static int maxloc_first(const comm_maxloc_pair *a, const comm_maxloc_pair *b) {
    const int a_nan = isnan(a->value) != 0, b_nan = isnan(b->value) != 0;
    if (a_nan != b_nan) return a_nan;
    if (!a_nan && a->value != b->value) return a->value > b->value;
    return a->index < b->index;
}

static void maxloc_reduce(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const comm_maxloc_pair *a = in;
    comm_maxloc_pair *b = inout;
    for (int i = 0; i < *len; i++)
        if (maxloc_first(&a[i], &b[i])) b[i] = a[i];
}

/* The op is created at first use and freed when MPI_Finalize deletes MPI_COMM_SELF's
 * attributes (the standard's hook for clean-up at finalize), so no caller manages it. */
static MPI_Op maxloc_op = MPI_OP_NULL;

static int maxloc_op_delete(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)keyval, (void)value, (void)extra;
    return MPI_Op_free(&maxloc_op);
}

static MPI_Op maxloc_op_get(void) {
    if (maxloc_op != MPI_OP_NULL) return maxloc_op;
    int key = MPI_KEYVAL_INVALID;
    MPI_CHECK(MPI_Op_create(maxloc_reduce, 1, &maxloc_op));
    MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, maxloc_op_delete, &key, NULL));
    MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL));
    MPI_CHECK(MPI_Comm_free_keyval(&key)); // the attribute keeps it alive until finalize
    return maxloc_op;
}

/* Not MPI_MAXLOC: it compares with > and ==, both false against a NaN, so a NaN pair would
 * win or lose depending on the order MPI combines pairs in, which may differ between ranks
 * (ranks could then pick different tokens). This op uses the argmax's total order. */
void comm_mpi_allreduce_maxloc(MPI_Comm group, comm_maxloc_pair *pairs, size_t count) {
    _Static_assert(sizeof(comm_maxloc_pair) == sizeof(float) + sizeof(int),
                   "comm_maxloc_pair must match MPI_FLOAT_INT");
    const MPI_Op op = maxloc_op_get();
    WATCH_WAIT(WATCH_ALLREDUCE, group, -1,
               MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, pairs, comm_count_int(count), MPI_FLOAT_INT,
                                       op, group)));
}

static void mpi_allgatherv(void *ctx, void *recv, const void *send, const int *counts,
                           const int *displs, comm_type type) {
    comm_mpi_allgatherv(group(ctx), recv, send, counts, displs, type);
}

static void mpi_allreduce_maxloc(void *ctx, comm_maxloc_pair *pairs, size_t count) {
    comm_mpi_allreduce_maxloc(group(ctx), pairs, count);
}

static void mpi_allgather(void *ctx, void *recv, const void *send, size_t count, comm_type type) {
    WATCH_WAIT(WATCH_ALLGATHER, group(ctx), -1,
               MPI_CHECK(MPI_Allgather(send, comm_count_int(count), comm_type_mpi(type), recv,
                                       comm_count_int(count), comm_type_mpi(type), group(ctx))));
}

static void mpi_bcast(void *ctx, void *buf, size_t count, comm_type type, int root) {
    WATCH_WAIT(WATCH_BCAST, group(ctx), -1,
               MPI_CHECK(MPI_Bcast(buf, comm_count_int(count), comm_type_mpi(type), root,
                                   group(ctx))));
}

/* An element count or displacement of peer p checked to fit MPI's int. */
static int a2a_int(size_t v, const char *what, int p) {
    CHECK(v <= 0x7fffffff, "all-to-all: %s %zu for peer %d exceeds MPI_Alltoallv's int counts",
          what, v, p);
    return (int)v;
}

void comm_mpi_alltoallv_ints(int size, const size_t *send_counts, const size_t *send_displs,
                             const size_t *recv_counts, const size_t *recv_displs, int *ints,
                             size_t *send_end, size_t *recv_end) {
    *send_end = *recv_end = 0;
    for (int p = 0; p < size; p++) {
        ints[p] = a2a_int(send_counts[p], "send count", p);
        ints[size + p] = a2a_int(send_displs[p], "send displacement", p);
        ints[2 * size + p] = a2a_int(recv_counts[p], "recv count", p);
        ints[3 * size + p] = a2a_int(recv_displs[p], "recv displacement", p);
        if (send_counts[p] && send_displs[p] + send_counts[p] > *send_end)
            *send_end = send_displs[p] + send_counts[p];
        if (recv_counts[p] && recv_displs[p] + recv_counts[p] > *recv_end)
            *recv_end = recv_displs[p] + recv_counts[p];
    }
}

static void mpi_alltoallv(void *vctx, const void *send, const size_t *send_counts,
                          const size_t *send_displs, void *recv, const size_t *recv_counts,
                          const size_t *recv_displs, comm_type type) {
    mpi_ctx *ctx = vctx;
    int *ints = ctx->sync_ints, n = ctx->size;
    size_t send_end = 0, recv_end = 0;
    comm_mpi_alltoallv_ints(n, send_counts, send_displs, recv_counts, recv_displs, ints,
                            &send_end, &recv_end);
    const MPI_Datatype t = comm_type_mpi(type);
    WATCH_WAIT(WATCH_ALLTOALL, ctx->mpi, -1,
               MPI_CHECK(MPI_Alltoallv(send, ints, ints + n, t, recv, ints + 2 * n, ints + 3 * n,
                                       t, ctx->mpi)));
}

/* A free slot, growing the table when every one is pending. */
static int a2a_slot_acquire(mpi_ctx *ctx) {
    for (int i = 0; i < ctx->n_slots; i++)
        if (!ctx->slots[i].busy) {
            ctx->slots[i].busy = 1;
            return i;
        }
    a2a_slot *grown = realloc(ctx->slots, (size_t)(ctx->n_slots + 1) * sizeof *grown);
    CHECK(grown != NULL, "comm: mpi: out of host memory for all-to-all slot %d", ctx->n_slots);
    ctx->slots = grown;
    a2a_slot *s = &ctx->slots[ctx->n_slots];
    s->ints = xmalloc(4 * (size_t)ctx->size * sizeof(int));
    s->busy = 1;
    return ctx->n_slots++;
}

static void mpi_ialltoallv(void *vctx, const void *send, const size_t *send_counts,
                           const size_t *send_displs, void *recv, const size_t *recv_counts,
                           const size_t *recv_displs, comm_type type, comm_req *req) {
    mpi_ctx *ctx = vctx;
    const int index = a2a_slot_acquire(ctx), n = ctx->size;
    int *ints = ctx->slots[index].ints;
    size_t send_end = 0, recv_end = 0;
    comm_mpi_alltoallv_ints(n, send_counts, send_displs, recv_counts, recv_displs, ints,
                            &send_end, &recv_end);
    const MPI_Datatype t = comm_type_mpi(type);
    MPI_CHECK(MPI_Ialltoallv(send, ints, ints + n, t, recv, ints + 2 * n, ints + 3 * n, t,
                             ctx->mpi, &req->mpi));
    req->handle = (void *)(intptr_t)(index + 1);
    req->active = 1;
    req->watch_op = WATCH_ALLTOALL, req->watch_peer = -1;
}

/* A completed request gives back its all-to-all slot, if it holds one. */
static void mpi_complete(mpi_ctx *ctx, comm_req *req) {
    const intptr_t index = (intptr_t)req->handle - 1;
    if (index >= 0) {
        CHECK(index < ctx->n_slots, "comm: mpi: request names all-to-all slot %ld of %d",
              (long)index, ctx->n_slots);
        ctx->slots[index].busy = 0;
    }
    req->handle = NULL;
    req->active = 0;
}

static void mpi_isend(void *ctx, const void *buf, size_t count, comm_type type, int peer, int tag,
                      comm_req *req) {
    MPI_CHECK(MPI_Isend(buf, comm_count_int(count), comm_type_mpi(type), peer, tag, group(ctx),
                        &req->mpi));
    req->active = 1;
    req->handle = NULL;
    req->watch_op = WATCH_SEND, req->watch_peer = peer;
}

static void mpi_irecv(void *ctx, void *buf, size_t count, comm_type type, int peer, int tag,
                      comm_req *req) {
    MPI_CHECK(MPI_Irecv(buf, comm_count_int(count), comm_type_mpi(type), peer, tag, group(ctx),
                        &req->mpi));
    req->active = 1;
    req->handle = NULL;
    req->watch_op = WATCH_RECV, req->watch_peer = peer;
}

static int mpi_test(void *ctx, comm_req *req) {
    int done = 0;
    MPI_CHECK(MPI_Test(&req->mpi, &done, MPI_STATUS_IGNORE));
    if (done) mpi_complete(ctx, req);
    return done;
}

static void mpi_wait(void *ctx, comm_req *req) {
    WATCH_WAIT(req->watch_op, group(ctx), req->watch_peer,
               MPI_CHECK(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE)));
    mpi_complete(ctx, req);
}

/* A cancelled receive still completes: waiting on it releases the request. */
static void mpi_cancel(void *ctx, comm_req *req) {
    MPI_CHECK(MPI_Cancel(&req->mpi));
    MPI_CHECK(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE));
    mpi_complete(ctx, req);
}

static void mpi_barrier(void *ctx) {
    WATCH_WAIT(WATCH_BARRIER, group(ctx), -1, MPI_CHECK(MPI_Barrier(group(ctx))));
}

static void mpi_free(void *vctx) {
    mpi_ctx *ctx = vctx;
    if (!ctx) return;
    for (int i = 0; i < ctx->n_slots; i++)
        free(ctx->slots[i].ints);
    free(ctx->slots);
    free(ctx->sync_ints);
    free(ctx);
}

static const comm_ops mpi_ops = {
    .name = "mpi",
    .free = mpi_free,
    .allreduce_sum = mpi_allreduce_sum,
    .iallreduce_sum = mpi_iallreduce_sum,
    .allreduce = mpi_allreduce,
    .allgather = mpi_allgather,
    .allgatherv = mpi_allgatherv,
    .allreduce_maxloc = mpi_allreduce_maxloc,
    .bcast = mpi_bcast,
    .alltoallv = mpi_alltoallv,
    .ialltoallv = mpi_ialltoallv,
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .test = mpi_test,
    .wait = mpi_wait,
    .cancel = mpi_cancel,
    .barrier = mpi_barrier,
};

void comm_mpi_init(comm *c, MPI_Comm mpi_comm) {
    mpi_ctx *ctx = xcalloc(1, sizeof *ctx);
    ctx->mpi = mpi_comm;
    c->ops = &mpi_ops;
    c->ctx = ctx;
    c->mpi = mpi_comm;
    c->stream_ordered = 0; /* host-blocking: the caller synchronises the backend first */
    MPI_CHECK(MPI_Comm_size(mpi_comm, &c->size));
    MPI_CHECK(MPI_Comm_rank(mpi_comm, &c->rank));
    ctx->size = c->size;
    ctx->sync_ints = xmalloc(4 * (size_t)c->size * sizeof(int));
    ctx->slots = xcalloc(MPI_A2A_SLOTS, sizeof *ctx->slots);
    ctx->n_slots = MPI_A2A_SLOTS;
    for (int i = 0; i < ctx->n_slots; i++)
        ctx->slots[i].ints = xmalloc(4 * (size_t)c->size * sizeof(int));
}

void comm_free(comm *c) {
    if (c->ops) c->ops->free(c->ctx);
    memset(c, 0, sizeof *c);
}
