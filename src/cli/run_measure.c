/* The benchmark protocol of `tripar run` (run_context.h): warm-up generations, then measured
 * ones, with the arrival stream before them when asked. Latency and TTFT of an iteration are
 * the slowest rank's; cold start runs from process start to the first token. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "cli/run_context.h"

#define PROGRESS_SECONDS 5.0

/* The latest first-token time of any last-stage rank, on every rank. */
static double first_token_latest(run_context *rc, double first) {
    comm *world = &rc->mesh.world_host;
    world->ops->allreduce(world->ctx, &first, 1, COMM_DOUBLE, COMM_OP_MAX);
    return first;
}

/* The arrival stream runs warm, after the warm-up and before the measured iterations, so the
 * output tokens still come from whole-batch generations. */
static int measure_stream(run_context *rc, run_metrics *rm, serve_result *stream,
                          double process_start, int *cold_done) {
    comm *world = &rc->mesh.world_host;
    serve_config sc = {rc->j.arrival_rate, rc->j.duration, rc->j.arrival_seed};
    sched_threads_refresh(&rc->sched); /* threads the warm-up started */
    int stopped = serve_run(&rc->e, &sc, stream);
    if (!*cold_done && stream->batches > 0) {
        rm->cold_start_seconds = stream->first_token_time - process_start;
        world->ops->bcast(world->ctx, &rm->cold_start_seconds, 1, COMM_DOUBLE, 0);
        *cold_done = 1;
    }
    return stopped;
}

/* One generation between barriers, timed as an `iteration` event. Returns 1 when stopped. */
static int measure_one(run_context *rc, int measured, double *latency, double *ttft,
                       double *first_token) {
    comm *world = &rc->mesh.world_host;
    engine *e = &rc->e;
    const int last_stage = e->m->geom.last_stage;
    sched_threads_refresh(&rc->sched); /* threads started since: BLAS's on first use, say */
    world->ops->barrier(world->ctx);
    double t0 = timer_host_seconds();
    rc->tm.iteration = measured >= 0 ? measured : -1; /* before the event opens: it is tagged */
    int ev = timer_begin(&rc->tm, PHASE_ITERATION, -1, -1, TIMER_NO_LAYER);
    int stopped = engine_generate(e, measured >= 0 ? measured : -1, measured == 0);
    timer_end(&rc->tm, ev);
    double slowest[2] = {e->end_time - t0, last_stage ? e->first_token_time - t0 : 0.0};
    world->ops->allreduce(world->ctx, slowest, 2, COMM_DOUBLE, COMM_OP_MAX);
    *latency = slowest[0];
    *ttft = slowest[1];
    *first_token = last_stage ? e->first_token_time : 0.0;
    return stopped;
}

/* Appends the inter-token gaps of the generation just measured to rm->itl: each replica's
 * writer (its last stage's TP rank 0) has the gaps between its steps' tokens, gathered to every
 * rank. A step after every sequence of the replica stopped gives no token, so no gap. */
static void measure_itl(run_context *rc, run_metrics *rm) {
    comm *world = &rc->mesh.world_host;
    const engine *e = &rc->e;
    const int gaps = rc->j.new_tokens - 1, world_size = rc->mesh.world_size;
    if (gaps < 1) return;
    const int writer = e->m->geom.last_stage && e->m->geom.tp_rank == 0;
    int produced = 0; /* steps the replica's longest sequence gave a token in */
    for (int s = 0; writer && s < e->batch_local; s++)
        if (e->generated[s] > produced) produced = e->generated[s];
    double *mine = xmalloc((size_t)gaps * sizeof(double));
    double *all = xmalloc((size_t)gaps * world_size * sizeof(double));
    for (int s = 1; s <= gaps; s++)
        mine[s - 1] = writer && s < produced ? e->token_time[s] - e->token_time[s - 1] : NAN;
    world->ops->allgather(world->ctx, all, mine, (size_t)gaps, COMM_DOUBLE);
    for (long i = 0; i < (long)gaps * world_size; i++)
        if (!isnan(all[i]) && rm->n_itl < rm->cap_itl) rm->itl[rm->n_itl++] = all[i];
    free(mine);
    free(all);
}

int run_measure(run_context *rc, run_metrics *rm, serve_result *stream, double process_start,
                volatile sig_atomic_t *stop_flag) {
    const job *j = &rc->j;
    comm *world = &rc->mesh.world_host;
    memset(rm, 0, sizeof *rm);
    memset(stream, 0, sizeof *stream);
    rm->iterations = 0; /* counts the measured iterations that complete */
    rm->latency = xcalloc((size_t)j->iterations, sizeof(double));
    rm->ttft = xcalloc((size_t)j->iterations, sizeof(double));
    rm->tpot = xcalloc((size_t)j->iterations, sizeof(double));
    /* at most one gap per decode step, replica and measured iteration */
    rm->cap_itl = (long)j->iterations * j->dp * (j->new_tokens > 1 ? j->new_tokens - 1 : 0);
    rm->itl = xcalloc((size_t)(rm->cap_itl > 0 ? rm->cap_itl : 1), sizeof(double));
    if (j->roofline && rc->mesh.world_rank == 0) /* a device's ceiling is its own GEMM's */
        rc->roof.sgemm_gflops_before =
            roofline_backend_is_device(&rc->be)
                ? roofline_backend_gemm(&rc->roof, &rc->be, &rc->cfg, j->batch, j->prompt_len)
                : roofline_sgemm(&rc->roof, &rc->cfg, j->batch, j->prompt_len);

    int stopped = 0, cold_done = 0;
    double last_progress = timer_host_seconds();
    for (int it = 0; it < j->warmup + j->iterations && !stopped; it++) {
        const int measured = it - j->warmup;
        if (measured == 0 && j->arrival_rate > 0 &&
            (stopped = measure_stream(rc, rm, stream, process_start, &cold_done)))
            break;
        double latency, ttft, first_token;
        stopped = measure_one(rc, measured, &latency, &ttft, &first_token);
        if (!cold_done) {
            rm->cold_start_seconds = first_token_latest(rc, first_token) - process_start;
            cold_done = 1;
        }
        if (measured >= 0 && !stopped) {
            rm->latency[measured] = latency;
            rm->ttft[measured] = ttft;
            /* per decode step that ran: fewer than new_tokens - 1 when every sequence met eos */
            const int decode_steps = rc->e.steps_run - 1;
            rm->tpot[measured] = decode_steps > 0 ? (latency - ttft) / decode_steps : 0.0;
            rm->iterations = measured + 1;
            measure_itl(rc, rm); /* collective: every rank agreed on stopped */
        }
        int any_signal = *stop_flag != 0;
        world->ops->allreduce(world->ctx, &any_signal, 1, COMM_INT32, COMM_OP_MAX);
        stopped |= any_signal;
        /* Long benchmarks show they are alive: a line every few seconds from rank 0. */
        if (rc->mesh.world_rank == 0 && timer_host_seconds() - last_progress > PROGRESS_SECONDS &&
            it + 1 < j->warmup + j->iterations) {
            fprintf(stderr, "tripar: %s %d/%d done, latency %.3f s\n",
                    measured < 0 ? "warm-up" : "iteration", measured < 0 ? it + 1 : measured + 1,
                    measured < 0 ? j->warmup : j->iterations, latency);
            last_progress = timer_host_seconds();
        }
    }
    return stopped;
}
