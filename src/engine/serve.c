/* Arrival-rate mode (see serve.h): a seeded Poisson stream served in batches of the requests
 * that have arrived, with per-request latency, queueing delay and time to first token. */
#include "engine/serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/check.h"
#include "base/stats.h"

static uint64_t serve_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

long serve_arrivals(double rate, double duration, uint64_t seed, double *times, long max) {
    if (!(rate > 0) || !(duration > 0)) return 0;
    double t = 0;
    long n = 0;
    for (uint64_t k = 0; n < max; k++) {
        /* 53 random bits; 1 - u is in (0, 1], so the log is finite */
        double u = (double)(serve_mix64(seed + 0x9E3779B97F4A7C15ull * (k + 1)) >> 11) * 0x1p-53;
        t += -log(1.0 - u) / rate;
        if (t >= duration) break;
        times[n++] = t;
    }
    return n;
}

static void sleep_seconds(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL);
}

int serve_run(engine *e, const job *j, serve_result *r) {
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    memset(r, 0, sizeof *r);
    r->target_rate = j->arrival_rate;
    r->duration = j->duration;
    r->seed = j->arrival_seed;

    double expected = (double)j->arrival_rate * j->duration;
    long max = expected * 2 + 64 < (double)SERVE_MAX_REQUESTS ? (long)(expected * 2 + 64)
                                                                : SERVE_MAX_REQUESTS;
    double *arrival = xcalloc((size_t)max, sizeof(double));
    long n_total = rank == 0 ? serve_arrivals(j->arrival_rate, j->duration, j->arrival_seed,
                                              arrival, max) : 0;
    MPI_CHECK(MPI_Bcast(&n_total, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Bcast(arrival, (int)n_total, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    r->arrived = n_total;
    r->arrival = arrival;
    r->latency = xcalloc((size_t)(n_total + 1), sizeof(double));
    r->queue_delay = xcalloc((size_t)(n_total + 1), sizeof(double));
    r->ttft = xcalloc((size_t)(n_total + 1), sizeof(double));
    r->batch_size = xcalloc((size_t)(n_total + 1), sizeof(double));

    /* Times are on rank 0's clock: other ranks add their offset (timing.h). */
    const double offset = e->tm->clock_offset, bound = 2.0 * j->duration;
    const int last_stage = e->m->geom.last_stage;
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = 0;
    if (rank == 0) t0 = timer_host_seconds();
    long next = 0;
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
                    n = waiting < j->batch ? (int)waiting : j->batch;
                    start = now;
                    break;
                }
                /* nothing waits: sleep until the next arrival (or the bound) */
                double until = arrival[next] < bound ? arrival[next] : bound;
                sleep_seconds(until - now);
            }
        }
        MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (n < 0) break;
        engine_set_active(e, n);
        int stop = engine_generate(e, -1, 0);
        double local[2] = {last_stage && e->first_token_time > 0 ? e->first_token_time + offset : 0,
                           e->end_time + offset};
        double global[2];
        MPI_CHECK(MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
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
        if (stop) {
            stopped = 1;
            break;
        }
    }
    engine_set_active(e, j->batch);
    if (rank == 0) {
        r->unserved = n_total - r->served;
        if (r->wall_seconds > 0) {
            r->achieved_requests_per_s = r->served / r->wall_seconds;
            r->achieved_tokens_per_s = (double)r->served * j->new_tokens / r->wall_seconds;
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

/* Mean and percentiles of one per-request series as attributes of /metrics/arrival. */
static void serve_summary_write(runfile *rf, const char *name, const double *values, long n) {
    double *sorted = xcalloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (n > 0) memcpy(sorted, values, (size_t)n * sizeof(double));
    stats_sort(sorted, n);
    char attr[64];
    snprintf(attr, sizeof attr, "%s_mean", name);
    runfile_write_scalar(rf, "metrics/arrival", attr, stats_mean(sorted, n));
    static const struct { const char *suffix; double q; } points[] = {
        {"p50", 50}, {"p90", 90}, {"p99", 99}};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        snprintf(attr, sizeof attr, "%s_%s", name, points[i].suffix);
        runfile_write_scalar(rf, "metrics/arrival", attr, stats_percentile(sorted, n, points[i].q));
    }
    free(sorted);
}

void serve_write_metrics(runfile *rf, const serve_result *r) {
    /* series lengths are rank 0's; the writers broadcast them */
    runfile_write_series(rf, "metrics/arrival/arrival", r->arrival, r->arrived);
    runfile_write_series(rf, "metrics/arrival/latency", r->latency, r->served);
    runfile_write_series(rf, "metrics/arrival/queue_delay", r->queue_delay, r->served);
    runfile_write_series(rf, "metrics/arrival/ttft", r->ttft, r->served);
    runfile_write_series(rf, "metrics/arrival/batch_size", r->batch_size, r->batches);
    static const char *const G = "metrics/arrival";
    runfile_write_scalar(rf, G, "target_rate", r->target_rate);
    runfile_write_scalar(rf, G, "duration", r->duration);
    runfile_write_scalar(rf, G, "seed", (double)r->seed);
    runfile_write_scalar(rf, G, "arrived", (double)r->arrived);
    runfile_write_scalar(rf, G, "served", (double)r->served);
    runfile_write_scalar(rf, G, "unserved", (double)r->unserved);
    runfile_write_scalar(rf, G, "batches", (double)r->batches);
    runfile_write_scalar(rf, G, "mean_batch", r->batches ? (double)r->served / r->batches : 0);
    runfile_write_scalar(rf, G, "wall_seconds", r->wall_seconds);
    runfile_write_scalar(rf, G, "achieved_requests_per_s", r->achieved_requests_per_s);
    runfile_write_scalar(rf, G, "achieved_tokens_per_s", r->achieved_tokens_per_s);
    serve_summary_write(rf, "latency", r->latency, r->served);
    serve_summary_write(rf, "queue_delay", r->queue_delay, r->served);
    serve_summary_write(rf, "ttft", r->ttft, r->served);
}

static double serve_pct(const double *values, long n, double q) {
    double *sorted = xcalloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (n > 0) memcpy(sorted, values, (size_t)n * sizeof(double));
    stats_sort(sorted, n);
    double v = stats_percentile(sorted, n, q);
    free(sorted);
    return v;
}

void serve_print(const serve_result *r, int new_tokens) {
    long n = r->served;
    printf("  %-13s target %.2f req/s for %.1f s (seed %llu): %ld arrived, %ld served in %ld "
           "batches (mean %.2f), %ld unserved\n",
           "arrival", r->target_rate, r->duration, (unsigned long long)r->seed, r->arrived,
           r->served, r->batches, r->batches ? (double)n / r->batches : 0.0, r->unserved);
    printf("  %-13s achieved %.2f req/s (%.1f%% of target), %.1f tokens/s (%d new each)\n", "",
           r->achieved_requests_per_s,
           r->target_rate > 0 ? 100 * r->achieved_requests_per_s / r->target_rate : 0.0,
           r->achieved_tokens_per_s, new_tokens);
    printf("  %-13s latency p50 %.3f p90 %.3f p99 %.3f ms | queue p50 %.3f p99 %.3f ms | "
           "TTFT p50 %.3f p99 %.3f ms\n", "",
           serve_pct(r->latency, n, 50) * 1e3, serve_pct(r->latency, n, 90) * 1e3,
           serve_pct(r->latency, n, 99) * 1e3, serve_pct(r->queue_delay, n, 50) * 1e3,
           serve_pct(r->queue_delay, n, 99) * 1e3, serve_pct(r->ttft, n, 50) * 1e3,
           serve_pct(r->ttft, n, 99) * 1e3);
}
