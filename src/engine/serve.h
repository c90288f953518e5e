/* Arrival-rate mode (like MLPerf's Server scenario): requests arrive as a seeded Poisson
 * stream at bench.arrival_rate per second for bench.duration seconds; the runner serves them
 * in batches of those that have arrived and records each request's latency. */
#pragma once
#include <stdint.h>

#include "engine/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SERVE_MAX_REQUESTS (1L << 20)

typedef struct {
    double target_rate, duration;
    uint64_t seed;
    long arrived;            /* requests that arrived in [0, duration) */
    long served, unserved;   /* unserved: still queued when the stream was cut at its bound */
    long batches;
    double wall_seconds;     /* stream start to the last completion */
    double achieved_requests_per_s, achieved_tokens_per_s;
    double *arrival;         /* (arrived) seconds since the stream started */
    double *latency;         /* (served) completion - arrival */
    double *queue_delay;     /* (served) start of its batch - arrival */
    double *ttft;            /* (served) first token of its batch - arrival */
    double *batch_size;      /* (batches) requests per generation */
    double first_token_time; /* rank 0's clock (timer_host_seconds) of the first token, or 0 */
} serve_result;

/* Poisson arrival times in [0, duration): exponential gaps of mean 1/rate drawn from a
 * counter-based generator of seed, so the stream depends on nothing else. Writes at most max
 * ascending times and returns how many. */
long serve_arrivals(double rate, double duration, uint64_t seed, double *times, long max);

/* Room for the arrivals of a stream: twice those expected plus 64, at most
 * SERVE_MAX_REQUESTS (the planner's simulation draws the same stream). */
long serve_arrivals_max(double rate, double duration);

/* The stream: bench.arrival_rate, bench.duration and bench.arrival_seed. */
typedef struct {
    double rate, duration;
    uint64_t seed;
} serve_config;

/* Runs the stream (collective over the world). Rank 0 draws and broadcasts the arrivals and
 * decides every batch: the first min(waiting, input batch) requests, or a wait for the next
 * arrival when none waits. Every rank runs the same generations with engine_set_active(n).
 * The stream ends when every arrival is served or, as a bound, at 2 * duration; the rest are
 * unserved. Results are rank 0's (the others get zeros). Returns 1 when stopped early (a
 * signal, or non-finite logits); the batch cut short counts as unserved. Leaves the engine
 * with the whole batch active. */
int serve_run(engine *e, const serve_config *sc, serve_result *r);
void serve_result_free(serve_result *r);

#ifdef __cplusplus
}
#endif
