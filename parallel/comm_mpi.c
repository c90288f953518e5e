/* The MPI comm backend: host buffers, MPI collectives and non-blocking point-to-point.
 * Progress of non-blocking collectives is driven by MPI_Test calls that the forward pass
 * makes between chunks (docs/design.md explains why not a progress thread). */
#include <math.h>
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

static MPI_Comm group(void *ctx) { return *(MPI_Comm *)ctx; }

/* MPI counts are int; tripar's largest message (a 256 MiB commbench buffer) fits. */
int comm_count_int(size_t count) {
    CHECK(count <= 0x7fffffff, "message of %zu elements exceeds MPI's int count", count);
    return (int)count;
}


static void mpi_iallreduce_sum(void *ctx, float *buf, size_t count, comm_req *req) {
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, comm_count_int(count), MPI_FLOAT, MPI_SUM,
                             group(ctx), &req->mpi));
    req->active = 1;
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

static void mpi_isend(void *ctx, const void *buf, size_t count, comm_type type, int peer, int tag,
                      comm_req *req) {
    MPI_CHECK(MPI_Isend(buf, comm_count_int(count), comm_type_mpi(type), peer, tag, group(ctx),
                        &req->mpi));
    req->active = 1;
    req->watch_op = WATCH_SEND, req->watch_peer = peer;
}

static void mpi_irecv(void *ctx, void *buf, size_t count, comm_type type, int peer, int tag,
                      comm_req *req) {
    MPI_CHECK(MPI_Irecv(buf, comm_count_int(count), comm_type_mpi(type), peer, tag, group(ctx),
                        &req->mpi));
    req->active = 1;
    req->watch_op = WATCH_RECV, req->watch_peer = peer;
}

static int mpi_test(void *ctx, comm_req *req) {
    int done = 0;
    MPI_CHECK(MPI_Test(&req->mpi, &done, MPI_STATUS_IGNORE));
    if (done) req->active = 0;
    return done;
}

static void mpi_wait(void *ctx, comm_req *req) {
    WATCH_WAIT(req->watch_op, group(ctx), req->watch_peer,
               MPI_CHECK(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE)));
    req->active = 0;
}

/* A cancelled receive still completes: waiting on it releases the request. */
static void mpi_cancel(void *ctx, comm_req *req) {
    MPI_CHECK(MPI_Cancel(&req->mpi));
    MPI_CHECK(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE));
    req->active = 0;
}

static void mpi_barrier(void *ctx) {
    WATCH_WAIT(WATCH_BARRIER, group(ctx), -1, MPI_CHECK(MPI_Barrier(group(ctx))));
}

static void mpi_free(void *ctx) { free(ctx); }

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
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .test = mpi_test,
    .wait = mpi_wait,
    .cancel = mpi_cancel,
    .barrier = mpi_barrier,
};

void comm_mpi_init(comm *c, MPI_Comm mpi_comm) {
    MPI_Comm *ctx = xmalloc(sizeof *ctx);
    *ctx = mpi_comm;
    c->ops = &mpi_ops;
    c->ctx = ctx;
    c->mpi = mpi_comm;
    c->stream_ordered = 0; /* host-blocking: the caller synchronises the backend first */
    MPI_CHECK(MPI_Comm_size(mpi_comm, &c->size));
    MPI_CHECK(MPI_Comm_rank(mpi_comm, &c->rank));
}

void comm_free(comm *c) {
    if (c->ops) c->ops->free(c->ctx);
    memset(c, 0, sizeof *c);
}
