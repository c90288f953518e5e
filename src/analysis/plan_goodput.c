/* Goodput under an arrival rate: tripar's serve loop simulated event by event. A simulation
 * rather than a queueing formula because the loop serves static batches of whatever waits
 * (1..batch requests, each size its own service time), which M/D/1 or M/G/1 with batching only
 * approximate; the simulation is exact for that rule, deterministic for a seed, and costs a
 * few microseconds per request. */
#include "analysis/plan_goodput.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/stats.h"
#include "engine/serve.h"

void plan_serve_simulate(const plan_serve_costs *k, const double *arrival, long n, double bound,
                         const plan_load *load, plan_served *out) {
    memset(out, 0, sizeof *out);
    out->arrived = n;
    out->capacity = k->e2e[k->batch] > 0 ? k->batch / k->e2e[k->batch] : 0;
    double *ttft = xcalloc((size_t)(n + 1), sizeof *ttft);
    double *tpot = xcalloc((size_t)(n + 1), sizeof *tpot);
    double now = 0;
    long next = 0;
    while (next < n && now < bound) {
        if (arrival[next] > now) { /* nothing waits: idle until the next arrival */
            now = arrival[next] < bound ? arrival[next] : bound;
            continue;
        }
        long waiting = 0;
        while (next + waiting < n && arrival[next + waiting] <= now)
            waiting++;
        const int b = waiting < k->batch ? (int)waiting : k->batch;
        const double per_token =
            k->new_tokens > 1 ? (k->e2e[b] - k->ttft[b]) / (k->new_tokens - 1) : 0;
        for (long i = next; i < next + b; i++) {
            ttft[out->served] = now + k->ttft[b] - arrival[i];
            tpot[out->served] = per_token;
            out->met += ttft[out->served] <= load->ttft_slo && per_token <= load->tpot_slo;
            out->served++;
        }
        next += b;
        now += k->e2e[b];
        out->batches++;
    }
    if (n > 0) {
        out->attainment = (double)out->met / (double)n;
        out->goodput = load->rate * out->attainment;
    }
    if (out->served > 0) {
        out->mean_batch = (double)out->served / (double)out->batches;
        out->ttft_p50 = stats_percentile_of(ttft, out->served, 50);
        out->ttft_p90 = stats_percentile_of(ttft, out->served, 90);
        out->tpot_p50 = stats_percentile_of(tpot, out->served, 50);
        out->tpot_p90 = stats_percentile_of(tpot, out->served, 90);
    }
    free(ttft);
    free(tpot);
}

/* The sizes predicted: every n up to 8, then the powers of two below the batch and the batch
 * (returns batch + 1 past it), so a batch of 512 costs 15 predictions, not 512. */
static int next_size(int n, int batch) {
    if (n < 8) return n + 1;
    if (2 * n < batch) return 2 * n;
    return n < batch ? batch : batch + 1;
}

/* A generation's cost grows about linearly in its requests between the sizes predicted. */
void plan_serve_costs_fill(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                           const plan_rates *r, const plan_strategy *s, double *ttft, double *e2e) {
    const int batch = w->batch;
    int last = 0;
    for (int n = 1; n <= batch; n = next_size(n, batch)) {
        /* n requests split over dp replicas as engine_set_active splits them; fewer than dp
         * are costed as one a replica (the largest replica's share is what times a step) */
        plan_workload wn = *w;
        wn.batch = n < s->dp ? s->dp : n;
        plan_strategy sn = *s;
        const int smallest = wn.batch / s->dp;
        if (sn.microbatches > smallest) sn.microbatches = smallest;
        plan_prediction p;
        plan_predict(m, &wn, c, r, &sn, &p);
        ttft[n] = p.ttft;
        e2e[n] = p.e2e;
        for (int i = last + 1; last > 0 && i < n; i++) {
            const double f = (double)(i - last) / (double)(n - last);
            ttft[i] = ttft[last] + f * (ttft[n] - ttft[last]);
            e2e[i] = e2e[last] + f * (e2e[n] - e2e[last]);
        }
        last = n;
    }
}

void plan_goodput_predict(const plan_model *m, const plan_workload *w, const plan_cluster *c,
                          const plan_rates *r, const plan_strategy *s, const plan_load *load,
                          plan_served *out) {
    double *ttft = xcalloc((size_t)w->batch + 1, sizeof *ttft);
    double *e2e = xcalloc((size_t)w->batch + 1, sizeof *e2e);
    plan_serve_costs_fill(m, w, c, r, s, ttft, e2e);
    const plan_serve_costs k = {w->batch, w->new_tokens, ttft, e2e};
    const long max = serve_arrivals_max(load->rate, load->duration);
    double *arrival = xcalloc((size_t)max, sizeof *arrival);
    const long n = serve_arrivals(load->rate, load->duration, load->seed, arrival, max);
    plan_serve_simulate(&k, arrival, n, 2 * load->duration, load, out);
    free(arrival);
    free(ttft);
    free(e2e);
}
