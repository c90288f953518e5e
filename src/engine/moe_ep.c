/* Expert parallelism across replicas (parallel.ep > tp, docs/jobs.md "Expert parallelism"):
 * the two all-to-alls of a mixture-of-experts layer over the EP group, dispatch (each routed
 * row to the rank of its expert) and combine (the outputs back, added in with their weights),
 * and the order in which the received rows meet their experts. The experts' compute between
 * them stays in forward.c with the other products. */
#include <string.h>

#include "base/check.h"
#include "engine/engine.h"

/* The EP group's counts, carved from e->ep_counts: floats per peer and where they start, both
 * ways, then the expert counts' exchange (El per peer, the same both ways). */
typedef struct {
    size_t *send, *send_at, *recv, *recv_at, *meta, *meta_at;
} ep_counts;

static ep_counts counts_of(const engine *e) {
    const size_t P = (size_t)e->ep->size;
    size_t *c = e->ep_counts;
    return (ep_counts){c, c + P, c + 2 * P, c + 3 * P, c + 4 * P, c + 5 * P};
}

/* The routed entries (r->idx) of the experts peer p holds in this rank's TP column: block
 * p * tp + tp_rank of experts_local experts. Its entries are contiguous: idx is by expert. */
static int peer_first_expert(const engine *e, int p) {
    const shard_geom *g = &e->m->geom;
    return (p * g->tp + g->tp_rank) * g->experts_local;
}

/* One blocking all-to-all of the EP group; returns when it is complete. */
static void ep_alltoallv(engine *e, const void *send, const size_t *sc, const size_t *sd,
                         void *recv, const size_t *rc, const size_t *rd, comm_type type) {
    if (!e->ep->stream_ordered) e->be->ops->synchronize(e->be->ctx); /* MPI reads it now */
    comm_alltoallv(e->ep, send, sc, sd, recv, rc, rd, type);
}

void moe_ep_gather(engine *e, const float *h) {
    const moe_routing *r = &e->moe_host;
    const int P = e->ep->size, El = e->m->geom.experts_local;
    const size_t C = (size_t)e->m->cfg.embd;
    const ep_counts n = counts_of(e);
    int32_t *to = e->ep_experts;
    size_t rows_out = 0;
    for (int p = 0; p < P; p++) {
        const int first = peer_first_expert(e, p), at = r->offset[first];
        const int rows = r->offset[first + El] - at;
        for (int x = 0; x < El; x++)
            to[(size_t)p * El + x] = r->offset[first + x + 1] - r->offset[first + x];
        n.send[p] = (size_t)rows * C, n.send_at[p] = rows_out * C;
        n.meta[p] = (size_t)El, n.meta_at[p] = (size_t)p * El;
        if (rows > 0)
            e->be->ops->gather_rows(e->be->ctx, e->ep_send + rows_out * C, h, e->moe_idx + at, rows,
                                    (int)C);
        rows_out += (size_t)rows;
    }
}

void moe_ep_gather_none(engine *e) {
    const int P = e->ep->size, El = e->m->geom.experts_local;
    const ep_counts n = counts_of(e);
    memset(e->ep_experts, 0, (size_t)P * El * sizeof(int32_t));
    for (int p = 0; p < P; p++) {
        n.send[p] = n.send_at[p] = 0;
        n.meta[p] = (size_t)El, n.meta_at[p] = (size_t)p * El;
    }
}

/* The receivers learn how many rows of each of their experts come (a small blocking
 * all-to-all), then the rows' all-to-all starts. */
void moe_ep_dispatch_start(engine *e) {
    const int P = e->ep->size, El = e->m->geom.experts_local;
    const size_t C = (size_t)e->m->cfg.embd;
    const ep_counts n = counts_of(e);
    int32_t *to = e->ep_experts, *from = e->ep_experts + (size_t)P * El;
    e->ep_t0 = timer_host_seconds();
    /* its synchronize also orders the gather before the rows leave */
    ep_alltoallv(e, to, n.meta, n.meta_at, from, n.meta, n.meta_at, COMM_INT32);
    e->ep_t1 = timer_host_seconds();
    size_t rows_in = 0;
    for (int p = 0; p < P; p++) {
        size_t rows = 0;
        for (int x = 0; x < El; x++)
            rows += (size_t)from[(size_t)p * El + x];
        n.recv[p] = rows * C, n.recv_at[p] = rows_in * C;
        rows_in += rows;
    }
    comm_ialltoallv(e->ep, e->ep_send, n.send, n.send_at, e->ep_recv, n.recv, n.recv_at, COMM_FLOAT,
                    &e->ep_req);
}

void moe_ep_poll(engine *e) {
    if (!e->ep->stream_ordered && e->ep_req.active) comm_test(e->ep, &e->ep_req);
}

void moe_ep_dispatch_finish(engine *e, int step, int mb, int layer, int overlapped) {
    const double w0 = timer_host_seconds();
    comm_wait(e->ep, &e->ep_req);
    const double t1 = timer_host_seconds();
    timer_add_host(e->tm, PHASE_EP_DISPATCH, step, mb, layer, e->ep_t0, t1);
    /* blocked: in the counts' exchange, and waiting for the rows; one span when nothing ran
     * between them */
    if (overlapped) {
        timer_add_host(e->tm, PHASE_EP_WAIT, step, mb, layer, e->ep_t0, e->ep_t1);
        timer_add_host(e->tm, PHASE_EP_WAIT, step, mb, layer, w0, t1);
    } else {
        timer_add_host(e->tm, PHASE_EP_WAIT, step, mb, layer, e->ep_t0, t1);
    }
}

void moe_ep_dispatch(engine *e, int step, int mb, int layer) {
    moe_ep_dispatch_start(e);
    moe_ep_dispatch_finish(e, step, mb, layer, 0);
}

int moe_ep_order(engine *e) {
    const int P = e->ep->size, El = e->m->geom.experts_local;
    const size_t C = (size_t)e->m->cfg.embd;
    const int32_t *from = e->ep_experts + (size_t)P * El;
    const ep_counts n = counts_of(e);
    int k = 0;
    for (int x = 0; x < El; x++)
        for (int p = 0; p < P; p++) {
            size_t row = n.recv_at[p] / C; /* source p's rows of expert x start here */
            for (int y = 0; y < x; y++)
                row += (size_t)from[(size_t)p * El + y];
            CHECK((size_t)k + (size_t)from[(size_t)p * El + x] <= e->ep_served,
                  "EP: more rows served than the %zu sized at set-up", e->ep_served);
            for (int i = 0; i < from[(size_t)p * El + x]; i++)
                e->ep_perm_host[k++] = (int32_t)(row + i);
        }
    if (k > 0)
        e->be->ops->copy_to_device(e->be->ctx, e->ep_perm, e->ep_perm_host,
                                   (size_t)k * sizeof(int32_t));
    return k;
}

void moe_ep_combine(engine *e, int step, int mb, int layer) {
    const ep_counts n = counts_of(e);
    const double t0 = timer_host_seconds();
    /* the outputs go back the way the rows came, landing where they were sent from */
    ep_alltoallv(e, e->ep_send, n.recv, n.recv_at, e->ep_recv, n.send, n.send_at, COMM_FLOAT);
    const double t1 = timer_host_seconds(); /* blocking: all of it blocked */
    timer_add_host(e->tm, PHASE_EP_COMBINE, step, mb, layer, t0, t1);
    timer_add_host(e->tm, PHASE_EP_WAIT, step, mb, layer, t0, t1);
}

void moe_ep_scatter(engine *e, float *o) {
    const moe_routing *r = &e->moe_host;
    const int P = e->ep->size, El = e->m->geom.experts_local;
    const size_t C = (size_t)e->m->cfg.embd;
    const ep_counts n = counts_of(e);
    /* expert by expert, in index order as forward.c adds its own: a token may pick two experts
     * of one block, and one scatter adds each row at most once */
    for (int p = 0; p < P; p++) {
        const int first = peer_first_expert(e, p), base = r->offset[first];
        for (int x = first; x < first + El; x++) {
            const int at = r->offset[x], rows = r->offset[x + 1] - at;
            if (rows > 0)
                e->be->ops->scatter_add_rows(e->be->ctx, o,
                                             e->ep_recv + n.send_at[p] + (size_t)(at - base) * C,
                                             e->moe_idx + at, e->moe_wts + at, rows, (int)C);
        }
    }
}
