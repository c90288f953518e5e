/* commbench's collective sweep: where each axis's groups sit on the nodes, the collectives (one
 * CB_COLLS entry each), then every op on every group of an axis at once, filled with exactly
 * predictable data, timed and verified. */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "cli/commbench.h"
#include "metrics/timing.h"

const char *const CB_AXIS_NAMES[CB_AXIS_COUNT] = {"tp", "pp", "dp", "world"};

float cb_value(int rank, long i) { return (float)((rank + 1) * (int)(1 + i % 13)); }

void cb_upload(const cb_bench *b, long count) {
    if (b->send == b->hsend) return;
    b->be.ops->copy_to_device(b->be.ctx, b->send, b->hsend, (size_t)count * sizeof(float));
    b->be.ops->copy_to_device(b->be.ctx, b->recv, b->hrecv, (size_t)count * sizeof(float));
}

void cb_download(const cb_bench *b, long count) {
    if (b->recv == b->hrecv) return;
    b->be.ops->copy_to_host(b->be.ctx, b->hrecv, b->recv, (size_t)count * sizeof(float));
}

void cb_drain(const cb_bench *b) {
    /* NCCL waits make the compute stream wait on the NCCL stream, so the compute stream
     * finishing means every queued operation has */
    if (b->have_backend) b->be.ops->synchronize(b->be.ctx);
}

/* --- where the groups are ------------------------------------------------------------------ */

/* Every rank learns, per axis, whether its group spans nodes; the world then counts groups
 * (each group's rank 0 speaks for it). Collective over the world. */
void cb_nodes_measure(cb_bench *b) {
    for (int ax = 0; ax < CB_AXIS_COUNT; ax++) {
        comm *c = b->axes[ax];
        int lo = 0, hi = 0;
        MPI_CHECK(MPI_Allreduce(&b->m.node_index, &lo, 1, MPI_INT, MPI_MIN, c->mpi));
        MPI_CHECK(MPI_Allreduce(&b->m.node_index, &hi, 1, MPI_INT, MPI_MAX, c->mpi));
        int mine = c->rank == 0 && lo != hi, crossing = 0;
        MPI_CHECK(MPI_Allreduce(&mine, &crossing, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        cb_axis_nodes *n = &b->nodes[ax];
        snprintf(n->axis, sizeof n->axis, "%s", CB_AXIS_NAMES[ax]);
        n->ranks = c->size;
        n->groups = b->world_size / c->size;
        n->groups_crossing = crossing;
        snprintf(n->tier, sizeof n->tier, "%s",
                 crossing == 0           ? "intra"
                 : crossing == n->groups ? "inter"
                                         : "mixed");
    }
    /* rank 0 keeps every rank's place for the file and the header */
    cb_rank_place mine = {
        .rank = b->rank, .node_index = b->m.node_index, .local_rank = b->m.local_rank};
    snprintf(mine.host, sizeof mine.host, "%s", b->m.host);
    if (b->rank == 0) b->places = xcalloc((size_t)b->world_size, sizeof(cb_rank_place));
    MPI_CHECK(MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, b->places, (int)sizeof mine, MPI_BYTE,
                         0, MPI_COMM_WORLD));
}

/* Rank 0: one line per node (its host and ranks), then one per axis. */
void cb_nodes_print(const cb_bench *b) {
    if (b->rank != 0) return;
    printf("# nodes: %d\n", b->m.node_count);
    for (int node = 0; node < b->m.node_count; node++) {
        char ranks[256] = "";
        const char *host = "?";
        for (int r = 0; r < b->world_size; r++)
            if (b->places[r].node_index == node) {
                host = b->places[r].host;
                snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), "%s%d",
                         ranks[0] ? "," : "", r);
            }
        printf("#   node %d (%s): ranks %s\n", node, host, ranks);
    }
    for (int ax = 0; ax < CB_AXIS_COUNT; ax++) {
        const cb_axis_nodes *n = &b->nodes[ax];
        printf("# axis %-5s: %d groups of %d ranks, %d of %d cross nodes (%s-node)\n", n->axis,
               n->groups, n->ranks, n->groups_crossing, n->groups, n->tier);
    }
    printf("#\n");
}

/* --- the collectives, one entry each ------------------------------------------------------ */

/* Output buffers of total elements: all-reduce, send/recv and broadcast pass all of it. */
static void cb_counts_whole(long total, int ranks, long *count, long *used) {
    (void)ranks;
    *count = *used = total;
}

/* All-gather's count is per rank: the output holds count elements of every rank. */
static void cb_counts_per_rank(long total, int ranks, long *count, long *used) {
    *count = total / ranks;
    *used = *count * ranks;
}

/* nccl-tests' bus bandwidth factors: what each link carries relative to the buffer size
 * (all-to-all's is all-gather's: each rank's (n-1)/n of its buffer leaves it). */
static double cb_bus_allreduce(int n) { return 2.0 * (n - 1) / n; }
static double cb_bus_allgather(int n) { return (double)(n - 1) / n; }
static double cb_bus_one(int n) {
    (void)n;
    return 1.0;
}

/* All-reduce: in place in recv; every element sums (r + 1) * (1 + i % 13) over the ranks. */
static void cb_fill_allreduce(float *send, float *recv, long count, int rank, int size) {
    (void)send, (void)size;
    for (long i = 0; i < count; i++)
        recv[i] = cb_value(rank, i);
}

static void cb_run_allreduce(comm *c, float *send, float *recv, long count, size_t *peers) {
    (void)send, (void)peers;
    c->ops->allreduce_sum(c->ctx, recv, (size_t)count);
}

static long cb_check_allreduce(const float *recv, long count, int rank, int size) {
    (void)rank;
    long wrong = 0;
    float ranks_sum = (float)(size * (size + 1) / 2);
    for (long i = 0; i < count; i++)
        wrong += recv[i] != ranks_sum * (float)(1 + i % 13);
    return wrong;
}

/* All-gather: count elements per rank, rank r's block at r * count. */
static void cb_fill_allgather(float *send, float *recv, long count, int rank, int size) {
    for (long i = 0; i < count; i++)
        send[i] = cb_value(rank, i);
    for (long i = 0; i < count * size; i++)
        recv[i] = -1.0f;
}

static void cb_run_allgather(comm *c, float *send, float *recv, long count, size_t *peers) {
    (void)peers;
    c->ops->allgather(c->ctx, recv, send, (size_t)count, COMM_FLOAT);
}

static long cb_check_allgather(const float *recv, long count, int rank, int size) {
    (void)rank;
    long wrong = 0;
    for (int r = 0; r < size; r++)
        for (long i = 0; i < count; i++)
            wrong += recv[(long)r * count + i] != cb_value(r, i);
    return wrong;
}

/* Send/recv: a ring shift, each rank receives the previous rank's data. */
static void cb_fill_sendrecv(float *send, float *recv, long count, int rank, int size) {
    (void)size;
    for (long i = 0; i < count; i++)
        send[i] = cb_value(rank, i), recv[i] = -1.0f;
}

/* Each rank sends to the next and receives from the previous. Over MPI both are posted at
 * once. A stream-ordered comm (NCCL) runs them in queue order and a receive holds its stream
 * until matched, so receive-first everywhere would deadlock: rank 0 sends first and every
 * other rank receives first, which unwinds the ring from rank 0. */
static void cb_run_sendrecv(comm *c, float *send, float *recv, long count, size_t *peers) {
    (void)peers;
    comm_req rs = {0}, rr = {0};
    int next = (c->rank + 1) % c->size, prev = (c->rank - 1 + c->size) % c->size;
    if (c->stream_ordered && c->rank == 0) {
        c->ops->isend(c->ctx, send, (size_t)count, COMM_FLOAT, next, 7, &rs);
        c->ops->irecv(c->ctx, recv, (size_t)count, COMM_FLOAT, prev, 7, &rr);
    } else {
        c->ops->irecv(c->ctx, recv, (size_t)count, COMM_FLOAT, prev, 7, &rr);
        c->ops->isend(c->ctx, send, (size_t)count, COMM_FLOAT, next, 7, &rs);
    }
    comm_wait(c, &rr);
    comm_wait(c, &rs);
}

static long cb_check_sendrecv(const float *recv, long count, int rank, int size) {
    long wrong = 0;
    int from = (rank - 1 + size) % size;
    for (long i = 0; i < count; i++)
        wrong += recv[i] != cb_value(from, i);
    return wrong;
}

/* Broadcast: in place in recv, from rank 0. */
static void cb_fill_bcast(float *send, float *recv, long count, int rank, int size) {
    (void)send, (void)size;
    for (long i = 0; i < count; i++)
        recv[i] = rank == 0 ? cb_value(0, i) : -1.0f;
}

static void cb_run_bcast(comm *c, float *send, float *recv, long count, size_t *peers) {
    (void)send, (void)peers;
    c->ops->bcast(c->ctx, recv, (size_t)count, COMM_FLOAT, 0);
}

static long cb_check_bcast(const float *recv, long count, int rank, int size) {
    (void)rank, (void)size;
    long wrong = 0;
    for (long i = 0; i < count; i++)
        wrong += recv[i] != cb_value(0, i);
    return wrong;
}

/* All-to-all, uniform: count elements per rank's send, count / ranks to each peer (oneself
 * included), as nccl-tests' alltoall; the block for rank p at p * (count / ranks) of send, the
 * block from rank p at the same place of recv. Element i of rank r's send is cb_value(r, i). */
static void cb_counts_all_peers(long total, int ranks, long *count, long *used) {
    *count = *used = total / ranks * ranks;
}

static void cb_fill_alltoall(float *send, float *recv, long count, int rank, int size) {
    (void)size;
    for (long i = 0; i < count; i++)
        send[i] = cb_value(rank, i), recv[i] = -1.0f;
}

/* Runs through comm_ops.alltoallv, the call expert dispatch makes, with equal counts. */
static void cb_run_alltoall(comm *c, float *send, float *recv, long count, size_t *peers) {
    const size_t block = (size_t)(count / c->size);
    size_t *counts = peers, *displs = peers + c->size;
    for (int p = 0; p < c->size; p++)
        counts[p] = block, displs[p] = (size_t)p * block;
    c->ops->alltoallv(c->ctx, send, counts, displs, recv, counts, displs, COMM_FLOAT);
}

/* recv's block p is rank p's block for this rank: its elements rank * block + i. */
static long cb_check_alltoall(const float *recv, long count, int rank, int size) {
    const long block = count / size;
    long wrong = 0;
    for (int p = 0; p < size; p++)
        for (long i = 0; i < block; i++)
            wrong += recv[p * block + i] != cb_value(p, rank * block + i);
    return wrong;
}

/* A stream-ordered send to oneself would need the send and the receive in one NCCL group,
 * which comm_ops does not express, so a one-rank send/recv is skipped there. */
const cb_coll CB_COLLS[OP_COUNT] = {
    [OP_ALLREDUCE] = {.name = "allreduce",
                      .counts = cb_counts_whole,
                      .fill = cb_fill_allreduce,
                      .run = cb_run_allreduce,
                      .check = cb_check_allreduce,
                      .bus_factor = cb_bus_allreduce,
                      .place = "in place"},
    [OP_ALLGATHER] = {.name = "allgather",
                      .counts = cb_counts_per_rank,
                      .fill = cb_fill_allgather,
                      .run = cb_run_allgather,
                      .check = cb_check_allgather,
                      .bus_factor = cb_bus_allgather,
                      .place = "out of place"},
    [OP_SENDRECV] = {.name = "sendrecv",
                     .counts = cb_counts_whole,
                     .fill = cb_fill_sendrecv,
                     .run = cb_run_sendrecv,
                     .check = cb_check_sendrecv,
                     .bus_factor = cb_bus_one,
                     .solo_stream_skip = "a ring of one rank",
                     .place = "out of place"},
    [OP_BCAST] = {.name = "bcast",
                  .counts = cb_counts_whole,
                  .fill = cb_fill_bcast,
                  .run = cb_run_bcast,
                  .check = cb_check_bcast,
                  .bus_factor = cb_bus_one,
                  .place = "in place"},
    [OP_ALLTOALL] = {.name = "alltoall",
                     .counts = cb_counts_all_peers,
                     .fill = cb_fill_alltoall,
                     .run = cb_run_alltoall,
                     .check = cb_check_alltoall,
                     .bus_factor = cb_bus_allgather,
                     .place = "out of place"},
};

/* --- one operation ------------------------------------------------------------------------- */

/* Seconds per operation of the slowest rank, over iters after warmup. used: elements of the
 * output buffer (what is uploaded). */
static double cb_time_op(const cb_bench *b, const cb_args *a, comm *c, const cb_coll *coll,
                         long count, long used) {
    coll->fill(b->hsend, b->hrecv, count, c->rank, c->size);
    cb_upload(b, used);
    for (int it = 0; it < a->warmup; it++)
        coll->run(c, b->send, b->recv, count, b->peers);
    cb_drain(b);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = timer_host_seconds();
    for (int it = 0; it < a->iters; it++)
        coll->run(c, b->send, b->recv, count, b->peers);
    cb_drain(b);
    double mine = (timer_host_seconds() - t0) / a->iters, slowest = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return slowest;
}

/* Wrong elements over all ranks of one more run. Repeated all-reduces grow the data, so the
 * checked run starts from fresh data. used: elements of the output buffer. */
static long cb_verify_op(const cb_bench *b, const cb_args *a, comm *c, const cb_coll *coll,
                         long count, long used) {
    coll->fill(b->hsend, b->hrecv, count, c->rank, c->size);
    cb_upload(b, used);
    coll->run(c, b->send, b->recv, count, b->peers);
    cb_drain(b);
    cb_download(b, used);
    if (a->plant_error && b->rank == 0) b->hrecv[used / 2] += 1.0f;
    long wrong = coll->check(b->hrecv, count, c->rank, c->size), all_wrong = 0;
    MPI_CHECK(MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    return all_wrong;
}

static void cb_row_fill(cb_row *r, const cb_coll *coll, const cb_axis_nodes *nodes, long used,
                        long count, double slowest, long wrong) {
    snprintf(r->op, sizeof r->op, "%s", coll->name);
    snprintf(r->axis, sizeof r->axis, "%s", nodes->axis);
    snprintf(r->type, sizeof r->type, "float");
    snprintf(r->tier, sizeof r->tier, "%s", nodes->tier);
    r->ranks = nodes->ranks;
    r->groups = nodes->groups;
    r->groups_crossing = nodes->groups_crossing;
    r->size_bytes = used * 4;
    r->count = count;
    r->time_us = slowest * 1e6;
    r->algbw_gbs = slowest > 0 ? (double)r->size_bytes / slowest / 1e9 : 0;
    r->busbw_gbs = r->algbw_gbs * coll->bus_factor(nodes->ranks);
    r->wrong = wrong;
}

static void cb_row_print(const cb_row *r) {
    printf("%12lld %12lld %6s %10.2f %10.3f %10.3f %8lld\n", (long long)r->size_bytes,
           (long long)r->count, r->type, r->time_us, r->algbw_gbs, r->busbw_gbs,
           (long long)r->wrong);
}

double cb_rows_busbw_mean(const cb_row *rows, long n) {
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += rows[i].busbw_gbs;
    return n > 0 ? sum / (double)n : 0;
}

/* One operation on every group of axis ax at once, sizes doubling: fill, time, verify; the
 * table closes with its mean busbw, as an nccl-tests run of one collective does. */
static void cb_run_sizes(cb_bench *b, const cb_args *a, int ax, const cb_coll *coll) {
    comm *c = b->axes[ax];
    const cb_axis_nodes *nodes = &b->nodes[ax];
    if (b->rank == 0) {
        printf("# %s over %s: %d groups of %d ranks, running at once; %d of %d cross nodes "
               "(%s-node)\n",
               coll->name, CB_AXIS_NAMES[ax], nodes->groups, c->size, nodes->groups_crossing,
               nodes->groups, nodes->tier);
        printf("%12s %12s %6s %10s %10s %10s %8s\n", "size(B)", "count", "type", "time(us)",
               "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    }
    const long first = b->n_rows;
    for (int k = 0; k < a->n_sizes; k++) {
        long bytes = a->sizes[k];
        /* size is the whole output buffer, as in nccl-tests; all-gather's count is per rank
         * and all-to-all's a whole element per peer, so sizes below one element per rank are
         * skipped */
        long count = 0, used = 0;
        coll->counts(bytes / 4, c->size, &count, &used);
        if (count < 1) continue;
        double slowest = cb_time_op(b, a, c, coll, count, used);
        long wrong = cb_verify_op(b, a, c, coll, count, used);
        b->wrong_total += wrong;
        cb_row *r = &b->rows[b->n_rows++];
        cb_row_fill(r, coll, nodes, used, count, slowest, wrong);
        if (b->rank == 0) cb_row_print(r);
    }
    const long rows = b->n_rows - first;
    if (b->rank == 0 && rows > 0)
        printf("# %s over %s: avg busbw %.6g GB/s over %ld sizes (%s)\n", coll->name,
               CB_AXIS_NAMES[ax], cb_rows_busbw_mean(b->rows + first, rows), rows, coll->place);
}

/* Every asked op over axis ax. An axis of one rank per group moves nothing and is skipped,
 * except the world of a one-rank run: like nccl-tests on one GPU, it times the local path
 * (and proves a communicator of one works), less the ops that cannot run on one rank of a
 * stream-ordered comm (cb_coll.solo_stream_skip). */
void cb_run_axis(cb_bench *b, const cb_args *a, int ax) {
    comm *c = b->axes[ax];
    const int solo_world = ax == CB_AXIS_WORLD && b->world_size == 1;
    if (c->size < 2 && !solo_world) {
        if (b->rank == 0) printf("# axis %s: 1 rank per group, skipped\n", CB_AXIS_NAMES[ax]);
        return;
    }
    for (int op = 0; op < OP_COUNT; op++) {
        const cb_coll *coll = &CB_COLLS[op];
        if (!a->ops[op]) continue;
        if (coll->solo_stream_skip && c->size < 2 && c->stream_ordered) {
            if (b->rank == 0)
                printf("# %s over %s: %s over %s, skipped\n", coll->name, CB_AXIS_NAMES[ax],
                       coll->solo_stream_skip, c->ops->name);
            continue;
        }
        cb_run_sizes(b, a, ax, coll);
    }
}
