/* comm_ops' all-to-all (alltoallv, ialltoallv) under mpirun on 1 to 4 ranks, for the mpi and
 * the staged backends (the staged one on the CPU backend, whose memory is host memory): counts
 * that differ per pair, zeros among them, and a rank that sends nothing; every type; blocking,
 * and non-blocking with more calls in flight than the mpi backend starts with slots for and the
 * caller's count arrays overwritten before the wait. Each received element and each gap
 * between blocks is checked against the exact permutation.
 *   test_alltoallv            the checks above
 *   test_alltoallv too-large  a count past MPI's int: dies naming it (the test expects that) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "kernels/backend.h"
#include "parallel/comm_setup.h"

#include "../expect.h"

static int failures;

enum { MAX_RANKS = 4, TYPES = 5, GAP = 2 };
static const comm_type TYPE_OF[TYPES] = {COMM_FLOAT, COMM_INT32, COMM_BYTE, COMM_DOUBLE,
                                         COMM_INT64};
static const char *const TYPE_NAME[TYPES] = {"float", "int32", "byte", "double", "int64"};

/* Elements rank src sends rank dst: 0 to 3, zero for some pairs; the last of two or more ranks
 * sends nothing at all (it still receives). */
static size_t pair_count(int src, int dst, int size) {
    if (size > 1 && src == size - 1) return 0;
    return (size_t)((src * 3 + dst * 5 + 1) % 4);
}

/* Element k of the block src sends dst: distinct per (src, dst, k), small enough for a byte. */
static long pair_value(int src, int dst, size_t k) { return src * 60 + dst * 12 + (long)k + 1; }

static const long SENTINEL = 250; /* in recv's gaps: no pair_value reaches it */

static void put(void *buf, comm_type t, size_t i, long v) {
    switch (t) {
    case COMM_FLOAT: ((float *)buf)[i] = (float)v; break;
    case COMM_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case COMM_BYTE: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case COMM_DOUBLE: ((double *)buf)[i] = (double)v; break;
    case COMM_INT64: ((int64_t *)buf)[i] = (int64_t)v * ((int64_t)1 << 33); break;
    }
}

/* The value put stored, or -1 when it is not one put could store. */
static long get(const void *buf, comm_type t, size_t i) {
    switch (t) {
    case COMM_FLOAT: return (long)((const float *)buf)[i];
    case COMM_INT32: return ((const int32_t *)buf)[i];
    case COMM_BYTE: return ((const uint8_t *)buf)[i];
    case COMM_DOUBLE: return (long)((const double *)buf)[i];
    case COMM_INT64: {
        const int64_t v = ((const int64_t *)buf)[i];
        return v % ((int64_t)1 << 33) ? -1 : (long)(v >> 33);
    }
    }
    return -1;
}

/* One exchange's layout: send blocks in reverse peer order with a one-element gap, recv blocks
 * in peer order with GAP-element gaps holding SENTINEL, so a block landing one place off or a
 * write past a block shows. */
typedef struct {
    size_t send_counts[MAX_RANKS], send_displs[MAX_RANKS];
    size_t recv_counts[MAX_RANKS], recv_displs[MAX_RANKS];
    size_t send_len, recv_len;
    unsigned char send[64 * 8], recv[64 * 8];
} exchange;

static void exchange_fill(exchange *x, const comm *c, comm_type t) {
    memset(x, 0, sizeof *x);
    for (int dst = c->size - 1; dst >= 0; dst--) {
        x->send_counts[dst] = pair_count(c->rank, dst, c->size);
        x->send_displs[dst] = x->send_len;
        for (size_t k = 0; k < x->send_counts[dst]; k++)
            put(x->send, t, x->send_len + k, pair_value(c->rank, dst, k));
        x->send_len += x->send_counts[dst] + 1;
    }
    x->recv_len = GAP;
    for (int src = 0; src < c->size; src++) {
        x->recv_counts[src] = pair_count(src, c->rank, c->size);
        x->recv_displs[src] = x->recv_len;
        x->recv_len += x->recv_counts[src] + GAP;
    }
    for (size_t i = 0; i < x->recv_len; i++)
        put(x->recv, t, i, SENTINEL);
}

/* Every element of recv: each block the permutation puts there, SENTINEL in every gap. */
static void exchange_check(const exchange *x, const comm *c, comm_type t, const char *what) {
    for (size_t i = 0; i < x->recv_len; i++) {
        long want = SENTINEL;
        for (int src = 0; src < c->size; src++)
            if (i >= x->recv_displs[src] && i < x->recv_displs[src] + x->recv_counts[src])
                want = pair_value(src, c->rank, i - x->recv_displs[src]);
        const long got = get(x->recv, t, i);
        EXPECT(got == want, "%s: rank %d of %d: recv[%zu] = %ld, want %ld", what, c->rank,
               c->size, i, got, want);
    }
}

static void check_blocking(comm *c, const char *name) {
    for (int ti = 0; ti < TYPES; ti++) {
        exchange x;
        exchange_fill(&x, c, TYPE_OF[ti]);
        comm_alltoallv(c, x.send, x.send_counts, x.send_displs, x.recv, x.recv_counts,
                       x.recv_displs, TYPE_OF[ti]);
        char what[64];
        snprintf(what, sizeof what, "%s alltoallv %s", name, TYPE_NAME[ti]);
        exchange_check(&x, c, TYPE_OF[ti], what);
    }
}

/* Every type at once plus a second float exchange: six in flight, past the mpi backend's four
 * initial slots. The first is polled with comm_test, the rest waited on in reverse order. The
 * count arrays are overwritten once posted: the backend must have taken its own copy. */
static void check_nonblocking(comm *c, const char *name) {
    enum { N = TYPES + 1 };
    static exchange x[N];
    comm_req req[N];
    for (int i = 0; i < N; i++) {
        const comm_type t = TYPE_OF[i % TYPES];
        exchange_fill(&x[i], c, t);
        comm_ialltoallv(c, x[i].send, x[i].send_counts, x[i].send_displs, x[i].recv,
                        x[i].recv_counts, x[i].recv_displs, t, &req[i]);
    }
    exchange kept[N];
    memcpy(kept, x, sizeof kept);
    for (int i = 0; i < N; i++)
        for (int p = 0; p < MAX_RANKS; p++)
            x[i].send_counts[p] = x[i].recv_counts[p] = x[i].send_displs[p] =
                x[i].recv_displs[p] = 999;
    while (!comm_test(c, &req[0])) {
    }
    EXPECT(!req[0].active, "%s: ialltoallv still active after comm_test said done", name);
    for (int i = N - 1; i > 0; i--) {
        comm_wait(c, &req[i]);
        EXPECT(!req[i].active, "%s: ialltoallv %d still active after comm_wait", name, i);
    }
    for (int i = 0; i < N; i++) {
        memcpy(kept[i].recv, x[i].recv, sizeof kept[i].recv);
        char what[64];
        snprintf(what, sizeof what, "%s ialltoallv %s (#%d)", name, TYPE_NAME[i % TYPES], i);
        exchange_check(&kept[i], c, TYPE_OF[i % TYPES], what);
    }
}

static void check_comm(comm *c, const char *name) {
    check_blocking(c, name);
    check_nonblocking(c, name);
    check_blocking(c, name); /* slots given back: a second round reuses them */
    check_nonblocking(c, name);
}

/* One count one past MPI's int: the call must die naming it, before touching any buffer. */
static void too_large(comm *c) {
    size_t counts[MAX_RANKS] = {0}, displs[MAX_RANKS] = {0};
    counts[0] = (size_t)0x7fffffff + 1;
    float one = 0;
    comm_alltoallv(c, &one, counts, displs, &one, counts, displs, COMM_FLOAT);
    EXPECT(0, "an all-to-all count past MPI's int was accepted");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT(size >= 1 && size <= MAX_RANKS, "run with 1 to %d ranks, not %d", MAX_RANKS, size);

    comm c;
    comm_mpi_init(&c, MPI_COMM_WORLD);
    if (argc > 1 && !strcmp(argv[1], "too-large")) too_large(&c);
    check_comm(&c, "mpi");
    comm_free(&c);

    backend be;
    backend_options opt = {.threads = 1, .max_marks = 16};
    CHECK(backend_cpu_init(&be, &opt) == 0, "cpu backend: %s", error_message());
    comm_staged_init(&c, MPI_COMM_WORLD, &be, 4096, 2);
    check_comm(&c, "mpi-staged");
    comm_free(&c);
    backend_free(&be);

    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_alltoallv: %d failure(s) over %d ranks\n", all, size);
    MPI_Finalize();
    return all ? 1 : 0;
}
