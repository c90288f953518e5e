/* Arrival-rate mode (see serve.h): a seeded Poisson stream served in batches of the requests
 * that have arrived, with per-request latency, queueing delay and time to first token. */
#include "engine/serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/check.h"
#include "base/hash.h"

long serve_arrivals(double rate, double duration, uint64_t seed, double *times, long max) {
    if (!(rate > 0) || !(duration > 0)) return 0;
    double t = 0;
    long n = 0;
    for (uint64_t k = 0; n < max; k++) {
        /* 53 random bits; 1 - u is in (0, 1], so the log is finite */
        double u = (double)(hash_stream(seed, k) >> 11) * 0x1p-53;
        t += -log(1.0 - u) / rate;
        if (t >= duration) break;
        times[n++] = t;
    }
    return n;
}

long serve_arrivals_max(double rate, double duration) {
    const double expected = rate * duration;
    return expected * 2 + 64 < (double)SERVE_MAX_REQUESTS ? (long)(expected * 2 + 64)
                                                          : SERVE_MAX_REQUESTS;
}

static void sleep_seconds(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL);
}

/* New tokens of a batch of n requests: n * new_tokens, or with stop_at_eos what the sequences
 * really generated, summed over the replicas (collective then). */
static long long batch_tokens(engine *e, int n) {
    if (!e->cfg.stop_at_eos) return (long long)n * e->new_tokens;
    long long mine = 0;
    if (e->m->geom.last_stage && e->m->geom.tp_rank == 0)
        for (int mb = 0; mb < e->split.n_micro; mb++)
            for (int b = 0; b < e->split.size[mb]; b++) mine += e->generated[e->split.begin[mb] + b];
    e->world->ops->allreduce(e->world->ctx, &mine, 1, COMM_INT64, COMM_OP_SUM);
    return mine;
}

int serve_run(engine *e, const serve_config *sc, serve_result *r) {
    const int rank = e->cfg.mesh->world_rank, batch = e->cfg.batch;
    comm *world = e->world;
    memset(r, 0, sizeof *r);
    r->target_rate = sc->rate;
    r->duration = sc->duration;
    r->seed = sc->seed;

    const long max = serve_arrivals_max(sc->rate, sc->duration);
    double *arrival = xcalloc((size_t)max, sizeof(double));
    int64_t n_total = rank == 0 ? serve_arrivals(sc->rate, sc->duration, sc->seed, arrival, max) : 0;
    world->ops->bcast(world->ctx, &n_total, 1, COMM_INT64, 0);
    world->ops->bcast(world->ctx, arrival, (size_t)n_total, COMM_DOUBLE, 0);
    r->arrived = n_total;
    r->arrival = arrival;
    r->latency = xcalloc((size_t)(n_total + 1), sizeof(double));
    r->queue_delay = xcalloc((size_t)(n_total + 1), sizeof(double));
    r->ttft = xcalloc((size_t)(n_total + 1), sizeof(double));
    r->batch_size = xcalloc((size_t)(n_total + 1), sizeof(double));

    /* Times are on rank 0's clock: other ranks add their offset (timing.h). */
    const double offset = e->tm->clock_offset, bound = 2.0 * sc->duration;
    const int last_stage = e->m->geom.last_stage;
    world->ops->barrier(world->ctx);
    double t0 = 0;
    if (rank == 0) t0 = timer_host_seconds();
    long next = 0;
    long long tokens = 0; /* new tokens of the served batches */
    int stopped = 0;
    for (;;) {
        int n = -1; /* -1 ends the stream */
        double start = 0;
        if (rank == 0) {
            for (;;) {
                double now = timer_host_seconds() - t0;
                if (next == n_total || now >= bound) break;
                long waiting = 0;
                while (next + waiting < n_total && arrival[next + waiting] <= now) waiting++;
                if (waiting > 0) {
                    n = waiting < batch ? (int)waiting : batch;
                    start = now;
                    break;
                }
                /* nothing waits: sleep until the next arrival (or the bound) */
                double until = arrival[next] < bound ? arrival[next] : bound;
                sleep_seconds(until - now);
            }
        }
        world->ops->bcast(world->ctx, &n, 1, COMM_INT32, 0);
        if (n < 0) break;
        engine_set_active(e, n);
        if (engine_generate(e, -1, 0)) {
            /* every rank agrees: a batch cut short is no measurement, its requests unserved */
            stopped = 1;
            break;
        }
        tokens += batch_tokens(e, n);
        double local[2] = {last_stage && e->first_token_time > 0 ? e->first_token_time + offset : 0,
                           e->end_time + offset};
        double global[2] = {local[0], local[1]};
        world->ops->allreduce(world->ctx, global, 2, COMM_DOUBLE, COMM_OP_MAX);
        if (rank == 0) {
            if (r->batches == 0) r->first_token_time = global[0];
            double first = global[0] - t0, end = global[1] - t0;
            for (long i = next; i < next + n; i++) {
                r->queue_delay[r->served] = start - arrival[i];
                r->ttft[r->served] = first - arrival[i];
                r->latency[r->served] = end - arrival[i];
                r->served++;
            }
            r->batch_size[r->batches] = n;
            r->wall_seconds = end;
        }
        r->batches++;
        next += n;
    }
    engine_set_active(e, batch);
    if (rank == 0) {
        r->unserved = n_total - r->served;
        if (r->wall_seconds > 0) {
            r->achieved_requests_per_s = r->served / r->wall_seconds;
            r->achieved_tokens_per_s = (double)tokens / r->wall_seconds;
        }
    }
    return stopped;
}

void serve_result_free(serve_result *r) {
    free(r->arrival);
    free(r->latency);
    free(r->queue_delay);
    free(r->ttft);
    free(r->batch_size);
    memset(r, 0, sizeof *r);
}
