/* `tripar commbench --tiers`: point-to-point ping-pong between rank 0 and a rank of its own
 * node (the intra-node tier) and rank 0 and the first rank of another node (the inter-node
 * tier), over a sweep of sizes, fitted to t(n) = alpha + n / beta: the two figures per link
 * tier that a network cost model needs. Every round trip's data is checked. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/check.h"
#include "cli/commbench.h"
#include "metrics/timing.h"

const char *const CB_TIER_NAMES[CB_TIER_COUNT] = {"intra", "inter"};

/* The pair of each tier, chosen on rank 0 from where the ranks run: rank 0 and the lowest other
 * rank of node 0 (intra), rank 0 and the lowest rank of any other node (inter); -1 and the
 * reason in b->tier_absent when the world has no such rank. Then every rank learns the peers. */
static void cb_tiers_pick(cb_bench *b, int peer[CB_TIER_COUNT]) {
    peer[CB_TIER_INTRA] = peer[CB_TIER_INTER] = -1;
    if (b->rank == 0) {
        const cb_rank_place *p = b->places;
        for (int r = b->world_size - 1; r > 0; r--)
            peer[p[r].node_index == p[0].node_index ? CB_TIER_INTRA : CB_TIER_INTER] = r;
        if (peer[CB_TIER_INTRA] < 0)
            snprintf(b->tier_absent[CB_TIER_INTRA], sizeof b->tier_absent[0],
                     "no intra-node pair: rank 0 is the only rank on its node (%s)", p[0].host);
        if (peer[CB_TIER_INTER] < 0)
            snprintf(b->tier_absent[CB_TIER_INTER], sizeof b->tier_absent[0],
                     "no inter-node pair: all %d ranks run on one node (%s)", b->world_size,
                     p[0].host);
    }
    MPI_CHECK(MPI_Bcast(peer, CB_TIER_COUNT, MPI_INT, 0, MPI_COMM_WORLD));
}

/* One round trip between ranks 0 and peer of world comm w: 0 sends and then receives, peer
 * receives and then sends its own data back. Both comm kinds run it in this order (NCCL
 * matches point-to-point by order, MPI by tag). Ranks outside the pair do nothing. */
static void cb_round_trip(const cb_bench *b, comm *w, int peer, long count) {
    comm_req rs = {0}, rr = {0};
    if (w->rank == 0) {
        w->ops->isend(w->ctx, b->send, (size_t)count, COMM_FLOAT, peer, 11, &rs);
        comm_wait(w, &rs);
        w->ops->irecv(w->ctx, b->recv, (size_t)count, COMM_FLOAT, peer, 12, &rr);
        comm_wait(w, &rr);
    } else if (w->rank == peer) {
        w->ops->irecv(w->ctx, b->recv, (size_t)count, COMM_FLOAT, 0, 11, &rr);
        comm_wait(w, &rr);
        w->ops->isend(w->ctx, b->send, (size_t)count, COMM_FLOAT, 0, 12, &rs);
        comm_wait(w, &rs);
    }
}

/* Each pair rank sends its own values and expects its partner's. */
static void cb_pair_fill(const cb_bench *b, long count) {
    for (long i = 0; i < count; i++)
        b->hsend[i] = cb_value(b->rank, i), b->hrecv[i] = -1.0f;
    cb_upload(b, count);
}

/* Where the ranks outside the pair wait while it ping-pongs: a barrier that they poll with a
 * sleep between tests. A rank blocked in a plain MPI call spins, and on a node with more ranks
 * than cores (an emulated cluster, a login node) those spinning bystanders take the pair's
 * cores: on 2 cores with 4 ranks the intra tier read 370 us instead of a few. The pair joins
 * the same barrier once it is done; on a cluster with a core per rank this changes nothing. */
static void cb_pair_done_barrier(int in_pair) {
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    if (in_pair) {
        MPI_CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        return;
    }
    const struct timespec nap = {0, 50 * 1000};
    for (int done = 0;;) {
        MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        nanosleep(&nap, NULL);
    }
}

/* One-way seconds (half the mean round trip, as rank 0 measures it) and, through *wrong, the
 * wrong elements of one more, checked round trip over all ranks. Collective over the world. */
static double cb_pingpong(cb_bench *b, const cb_args *a, int peer, long count, long *wrong) {
    comm *w = b->axes[CB_AXIS_WORLD];
    const int in_pair = w->rank == 0 || w->rank == peer;
    if (in_pair) cb_pair_fill(b, count);
    for (int it = 0; it < a->warmup; it++)
        cb_round_trip(b, w, peer, count);
    cb_drain(b);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = timer_host_seconds();
    for (int it = 0; it < a->iters; it++)
        cb_round_trip(b, w, peer, count);
    cb_drain(b);
    double one_way = (timer_host_seconds() - t0) / (2.0 * a->iters);

    long mine = 0;
    if (in_pair) cb_pair_fill(b, count);
    cb_round_trip(b, w, peer, count);
    cb_drain(b);
    if (in_pair) {
        cb_download(b, count);
        if (a->plant_error && b->rank == 0) b->hrecv[count / 2] += 1.0f;
        const int partner = w->rank == 0 ? peer : 0;
        for (long i = 0; i < count; i++)
            mine += b->hrecv[i] != cb_value(partner, i);
    }
    cb_pair_done_barrier(in_pair);
    MPI_CHECK(MPI_Allreduce(&mine, wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    return one_way;
}

/* Least squares of t = alpha + n * slope, each point weighted by 1 / t^2, so that every size
 * counts by its relative error: unweighted, the largest sizes (milliseconds) would decide the
 * fit alone and alpha (microseconds) would be their rounding noise. */
static void cb_fit(const cb_tier_sample *s, int n, double *alpha, double *beta) {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double w = 1.0 / (s[i].time_s * s[i].time_s), x = (double)s[i].size_bytes;
        sw += w, sx += w * x, sy += w * s[i].time_s;
        sxx += w * x * x, sxy += w * x * s[i].time_s;
    }
    double det = sw * sxx - sx * sx;
    double slope = det > 0 ? (sw * sxy - sx * sy) / det : 0;
    *alpha = (sy - slope * sx) / sw;
    *beta = slope > 0 ? 1.0 / slope : INFINITY; /* no measurable cost per byte */
}

static void cb_tier_measure(cb_bench *b, const cb_args *a, int tier, int peer) {
    cb_tier_sample *first = &b->samples[b->n_samples];
    cb_tier_fit *f = &b->tiers[tier];
    if (b->rank == 0) {
        printf("# tier %s: ranks 0 (%s, node %d) <-> %d (%s, node %d)\n", CB_TIER_NAMES[tier],
               b->places[0].host, b->places[0].node_index, peer, b->places[peer].host,
               b->places[peer].node_index);
        printf("%12s %12s %12s %8s\n", "size(B)", "time(us)", "bw(GB/s)", "#wrong");
    }
    /* one untimed pass at the smallest size first: the pair's first exchange after the
     * world barrier pays for connection set-up (TCP across nodes), which would otherwise
     * land in the smallest size, the one alpha_small reads. Its data is checked too, but
     * --plant-error marks only the printed rows. */
    cb_args unplanted = *a;
    unplanted.plant_error = 0;
    long discarded = 0;
    (void)cb_pingpong(b, &unplanted, peer, a->sizes[0] / 4, &discarded);
    b->wrong_total += discarded;
    int n = 0;
    long wrong_tier = discarded;
    for (int k = 0; k < a->n_sizes; k++) {
        long count = a->sizes[k] / 4;
        long wrong = 0;
        double t = cb_pingpong(b, a, peer, count, &wrong);
        cb_tier_sample *s = &first[n++];
        snprintf(s->tier, sizeof s->tier, "%s", CB_TIER_NAMES[tier]);
        s->size_bytes = count * 4;
        s->time_s = t;
        s->wrong = wrong;
        wrong_tier += wrong;
        if (b->rank == 0)
            printf("%12lld %12.2f %12.3f %8ld\n", (long long)s->size_bytes, t * 1e6,
                   t > 0 ? (double)s->size_bytes / t / 1e9 : 0.0, wrong);
    }
    b->n_samples += n;
    b->wrong_total += wrong_tier;
    snprintf(f->tier, sizeof f->tier, "%s", CB_TIER_NAMES[tier]);
    f->rank_a = 0, f->rank_b = peer;
    f->n_sizes = n;
    f->wrong = wrong_tier;
    f->alpha_small_s = first[0].time_s;
    cb_fit(first, n, &f->alpha_s, &f->beta_bytes_s);
    b->tier_present[tier] = 1;
    if (b->rank == 0) {
        snprintf(f->host_a, sizeof f->host_a, "%s", b->places[0].host);
        snprintf(f->host_b, sizeof f->host_b, "%s", b->places[peer].host);
        printf("# tier %s: alpha %.2f us (fit), %.2f us (half round trip at %lld B), beta "
               "%.3f GB/s\n#\n",
               f->tier, f->alpha_s * 1e6, f->alpha_small_s * 1e6, (long long)first[0].size_bytes,
               f->beta_bytes_s / 1e9);
    }
}

void cb_tiers_run(cb_bench *b, const cb_args *a) {
    int peer[CB_TIER_COUNT];
    cb_tiers_pick(b, peer);
    b->samples = xcalloc((size_t)CB_TIER_COUNT * (size_t)a->n_sizes, sizeof(cb_tier_sample));
    if (b->rank == 0)
        printf("# tiers: point-to-point ping-pong over %s, one way = half the mean round trip "
               "over %d iters after %d warm-up; t(n) = alpha + n / beta, fitted by least "
               "squares in relative error\n#\n",
               b->axes[CB_AXIS_WORLD]->ops->name, a->iters, a->warmup);
    for (int tier = 0; tier < CB_TIER_COUNT; tier++) {
        if (peer[tier] >= 0)
            cb_tier_measure(b, a, tier, peer[tier]);
        else if (b->rank == 0)
            printf("# tier %s: %s\n#\n", CB_TIER_NAMES[tier], b->tier_absent[tier]);
    }
}
