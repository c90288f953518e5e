/* The comm interface under mpirun (3 ranks): every comm_ops entry the engine relies on, for
 * the mpi backend and for the staged backend (run on the CPU backend, whose memory is host
 * memory), plus comm_setup's choice of backend from a comm plan. Each check knows the exact
 * result from the ranks' numbers. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "kernels/backend.h"
#include "parallel/comm_setup.h"
#include "parallel/mesh.h"

#include "../expect.h"

static int failures;

/* Typed in-place reductions: int32 max, double sum, int64 max. */
static void check_allreduce(comm *c, const char *name) {
    int32_t imax[2] = {c->rank, -c->rank};
    c->ops->allreduce(c->ctx, imax, 2, COMM_INT32, COMM_OP_MAX);
    EXPECT(imax[0] == c->size - 1 && imax[1] == 0, "%s: int32 max %d %d", name, imax[0], imax[1]);
    double dsum = 0.5 + c->rank;
    c->ops->allreduce(c->ctx, &dsum, 1, COMM_DOUBLE, COMM_OP_SUM);
    double want = 0.5 * c->size + c->size * (c->size - 1) / 2.0;
    EXPECT(dsum == want, "%s: double sum %g, want %g", name, dsum, want);
    int64_t big = ((int64_t)1 << 40) + c->rank;
    c->ops->allreduce(c->ctx, &big, 1, COMM_INT64, COMM_OP_MAX);
    EXPECT(big == ((int64_t)1 << 40) + c->size - 1, "%s: int64 max %lld", name, (long long)big);
}

/* Uneven contributions: rank r sends r + 1 values r * 10 + i. */
static void check_allgatherv(comm *c, const char *name) {
    int counts[8], displs[8], total = 0;
    for (int r = 0; r < c->size; r++) {
        counts[r] = r + 1;
        displs[r] = total;
        total += counts[r];
    }
    float send[8], recv[64];
    for (int i = 0; i < counts[c->rank]; i++)
        send[i] = (float)(c->rank * 10 + i);
    c->ops->allgatherv(c->ctx, recv, send, counts, displs, COMM_FLOAT);
    for (int r = 0; r < c->size; r++)
        for (int i = 0; i < counts[r]; i++)
            EXPECT(recv[displs[r] + i] == (float)(r * 10 + i), "%s: allgatherv [%d][%d] = %g", name,
                   r, i, recv[displs[r] + i]);
}

/* Pair 0: the largest value is on the last rank. Pair 1: every rank ties, so the lowest index
 * wins, as a single rank's argmax would pick it. */
static void check_maxloc(comm *c, const char *name) {
    comm_maxloc_pair pairs[2] = {{(float)c->rank, 100 + c->rank}, {7.0f, 50 - c->rank}};
    c->ops->allreduce_maxloc(c->ctx, pairs, 2);
    EXPECT(pairs[0].value == (float)(c->size - 1) && pairs[0].index == 100 + c->size - 1,
           "%s: maxloc (%g, %d)", name, pairs[0].value, pairs[0].index);
    EXPECT(pairs[1].value == 7.0f && pairs[1].index == 50 - (c->size - 1),
           "%s: maxloc tie index %d, want the lowest %d", name, pairs[1].index, 50 - (c->size - 1));
}

/* The argmax's NaN order (kernels/backend.h): NaN beats every number, the lowest index among
 * NaNs. Pair 0: only the last rank holds a NaN, the others larger numbers (MPI_MAXLOC would
 * keep whichever pair it met first). Pair 1: every rank from 1 on holds a NaN, so rank 1's
 * index wins, and rank 0's +inf loses. Pair 2: no NaN, an -inf everywhere: the lowest index.
 * Every rank must get the same pairs. */
static void check_maxloc_nan(comm *c, const char *name) {
    const float nan = __builtin_nanf(""), inf = __builtin_inff();
    const int last = c->size - 1;
    comm_maxloc_pair pairs[3] = {
        {c->rank == last ? nan : 1000.0f + (float)c->rank, 10 + c->rank},
        {c->rank == 0 ? inf : nan, 200 + c->rank},
        {-inf, 300 + c->rank},
    };
    c->ops->allreduce_maxloc(c->ctx, pairs, 3);
    EXPECT(isnan(pairs[0].value) && pairs[0].index == 10 + last,
           "%s: maxloc with a NaN on rank %d gave (%g, %d)", name, last, pairs[0].value,
           pairs[0].index);
    EXPECT(isnan(pairs[1].value) && pairs[1].index == 201,
           "%s: maxloc of NaNs gave (%g, %d), want (nan, 201)", name, pairs[1].value,
           pairs[1].index);
    EXPECT(pairs[2].value == -inf && pairs[2].index == 300, "%s: maxloc of -inf gave (%g, %d)",
           name, pairs[2].value, pairs[2].index);
}

/* A receive that no send will ever match is withdrawn; the next exchange is unaffected. */
static void check_cancel(comm *c, const char *name) {
    float never = -1.0f, got = -1.0f;
    const int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    comm_req pending = {0}, recv = {0}, send = {0};
    c->ops->irecv(c->ctx, &never, 1, COMM_FLOAT, left, 99, &pending);
    comm_cancel(c, &pending);
    EXPECT(!pending.active && never == -1.0f, "%s: cancelled receive active %d, wrote %g", name,
           pending.active, never);
    float mine = (float)c->rank;
    c->ops->irecv(c->ctx, &got, 1, COMM_FLOAT, left, 7, &recv);
    c->ops->isend(c->ctx, &mine, 1, COMM_FLOAT, right, 7, &send);
    comm_wait(c, &recv);
    comm_wait(c, &send);
    EXPECT(got == (float)left, "%s: after a cancel, received %g from %d", name, got, left);
}

static void check_comm(comm *c, const char *name) {
    check_allreduce(c, name);
    check_allgatherv(c, name);
    check_maxloc(c, name);
    check_maxloc_nan(c, name);
    check_cancel(c, name);
    c->ops->barrier(c->ctx);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT(size >= 2 && size <= 8, "run with 2 to 8 ranks, not %d", size);

    comm c;
    comm_mpi_init(&c, MPI_COMM_WORLD);
    EXPECT(!strcmp(c.ops->name, "mpi") && c.size == size && c.rank == rank, "mpi comm");
    check_comm(&c, "mpi");
    comm_free(&c);
    EXPECT(c.ops == NULL && c.ctx == NULL, "comm_free clears the comm");
    comm_free(&c); /* an unset comm is fine */

    backend be;
    backend_options opt = {.threads = 1, .max_marks = 16};
    CHECK(backend_cpu_init(&be, &opt) == 0, "cpu backend: %s", error_message());
    comm_staged_init(&c, MPI_COMM_WORLD, &be, 4096, 2);
    EXPECT(!strcmp(c.ops->name, "mpi-staged"), "staged comm");
    check_comm(&c, "mpi-staged");
    comm_free(&c);

    /* comm_setup from a plan: host memory takes MPI on every axis, the staged hook the staged
     * comm on the device axes; the host comms are always MPI. */
    mesh m;
    mesh_init(&m, MPI_COMM_WORLD, 1, size, 1, "tp-pp-dp");
    comm_plan plan = {.choice = COMM_CHOICE_AUTO, .choice_name = "auto", .choice_origin = "test",
                      .max_message_bytes = 4096, .microbatches = 1};
    EXPECT(comm_setup(&m, &plan, &be) == 0, "comm_setup: %s", error_message());
    EXPECT(!strcmp(m.axis[AXIS_TP].ops->name, "mpi") && !strcmp(m.axis[AXIS_PP].ops->name, "mpi"),
           "cpu backend: tp over %s", m.axis[AXIS_TP].ops->name);
    EXPECT(m.world_host.ops && m.world_host.size == size && m.pp_host.ops, "host comms attached");
    check_comm(&m.axis[AXIS_TP], "comm_setup tp");
    comm_teardown(&m);
    EXPECT(!m.axis[AXIS_TP].ops && !m.world_host.ops && !m.pp_host.ops, "teardown clears comms");
    setenv("TRIPAR_COMM_STAGED", "1", 1);
    EXPECT(comm_setup(&m, &plan, &be) == 0, "comm_setup staged: %s", error_message());
    EXPECT(!strcmp(m.axis[AXIS_TP].ops->name, "mpi-staged"), "staged hook: tp over %s",
           m.axis[AXIS_TP].ops->name);
    EXPECT(!strcmp(m.axis[AXIS_DP].ops->name, "mpi"), "dp stays mpi");
    check_comm(&m.axis[AXIS_TP], "comm_setup staged tp");
    comm_teardown(&m);
    mesh_free(&m);
    backend_free(&be);

    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_comm: %d failure(s) over %d ranks\n", all, size);
    MPI_Finalize();
    return all ? 1 : 0;
}
