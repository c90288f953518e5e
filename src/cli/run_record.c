/* What `tripar run` records (run_context.h): the engine's tokens, text and activations in the
 * run file, its timing events (flushed mid-run through the step callback), the metrics of the
 * protocol and of the arrival stream, and rank 0's result table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/stats.h"
#include "cli/run_context.h"
#include "cli/run_perplexity.h"
#include "io/prompt.h"
#include "io/run_text.h"
#include "parallel/watchdog.h"

double run_percentile(const double *values, int n, double q) {
    return stats_percentile_of(values, n, q);
}

void run_record_step(void *user, int step) {
    run_context *rc = user;
    watch_step(); /* progress for the stall watchdog */
    if (!rc->rf) return;
    /* Every rank decides alike: flush_every counts steps, and flush_seconds is rank 0's clock
     * agreed through runfile_flush_due (collective, so called at every step). */
    int due = runfile_flush_due(rc->rf, rc->j.flush_seconds);
    if (rc->j.flush_every > 0 && (step + 1) % rc->j.flush_every == 0) due = 1;
    if (due) { /* a killed job keeps what it measured */
        watch_phase(WATCH_RUNFILE);
        runfile_write_events(rc->rf, &rc->tm);
        runfile_write_sched(rc->rf, &rc->sched, &rc->tm);
        sched_threads_refresh(&rc->sched);
        runfile_write_telemetry(rc->rf, &rc->tel);
        watch_phase(WATCH_NONE);
    }
    /* A run file with no room left stops the run at the next stop vote, as a signal does:
     * nothing measured from here on could be kept. Every rank sees it at the same step. */
    if (runfile_failed(rc->rf) && rc->e.cfg.stop_flag) *rc->e.cfg.stop_flag = 1;
}

/* Tokens, their text when the checkpoint has a tokenizer, and the captured activations. The
 * last stage of each replica knows every generated token; its TP rank 0 writes them. */
static void record_outputs(run_context *rc) {
    const engine *e = &rc->e;
    const shard_geom *g = &e->m->geom;
    const int writer = g->last_stage && g->tp_rank == 0;
    const long rows = writer ? e->batch_local : 0;
    runfile_write_tokens(rc->rf, e->tokens, e->seq_global_begin, rows, rc->j.batch, e->total_len);
    runfile_write_generated(rc->rf, e->generated, e->seq_global_begin, rows, rc->j.batch);
    if (rc->tok) {
        char **texts = xcalloc((size_t)(rows > 0 ? rows : 1), sizeof(char *));
        for (long r = 0; r < rows; r++) /* up to the tokens generated: the rest reads -1 */
            prompt_decode_rows(rc->tok, e->tokens + r * e->total_len, 1,
                               e->prompt_len + e->generated[r], texts + r);
        runfile_write_text(rc->rf, (const char *const *)texts, e->seq_global_begin, rows,
                           rc->j.batch);
        for (long r = 0; r < rows; r++) { /* the generated part alone, without its eos */
            free(texts[r]);
            texts[r] = prompt_decode_generated(rc->tok, e->tokens + r * e->total_len +
                                                            e->prompt_len,
                                               e->generated[r], rc->j.eos_id);
        }
        runfile_write_strings(rc->rf, "generated_text", (const char *const *)texts,
                              e->seq_global_begin, rows, rc->j.batch);
        for (long r = 0; r < rows; r++)
            free(texts[r]);
        free(texts);
    }
    runfile_write_scalar(rc->rf, "output", "eos_id", e->cfg.stop_at_eos ? e->cfg.eos_id : -1);
    for (int p = 0; p < e->n_points; p++) {
        const activation_point *pt = &e->points[p];
        runfile_write_activation(rc->rf, pt->name, 3, pt->dims, pt->start, pt->count, pt->host);
    }
    run_perplexity_record(rc);
}

/* /moe/expert_load of the last generation (the last measured iteration: the warm-up and the
 * arrival stream run before it): per dp replica, since replicas route different tokens; each
 * stage's TP rank 0 writes its layers (every TP rank routes alike). Nothing for a dense
 * model. */
static void record_expert_load(run_context *rc, int iteration) {
    const engine *e = &rc->e;
    const shard_geom *g = &e->m->geom;
    const moe_routing *r = &e->moe_host;
    const runfile_expert_load l = {
        .load = r->load, .replicas = MESH_DP(&rc->mesh), .replica = rc->mesh.coord[AXIS_DP],
        .steps = r->load_steps, .layers = e->m->cfg.layers, .experts = e->m->cfg.experts,
        .layer_begin = g->layer_begin, .n_layers = g->n_layers, .writer = g->tp_rank == 0,
        .top_k = e->m->cfg.experts_top_k, .shared = e->m->cfg.shared_mlp > 0, .ep = rc->j.ep,
        .iteration = iteration, .steps_run = e->steps_run};
    runfile_write_expert_load(rc->rf, &l);
}

/* Mean and percentiles of one per-request series as attributes of /metrics/arrival. */
static void stream_summary_write(runfile *rf, const char *name, const double *values, long n) {
    double *sorted = xcalloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (n > 0) memcpy(sorted, values, (size_t)n * sizeof(double));
    stats_sort(sorted, n);
    char attr[64];
    snprintf(attr, sizeof attr, "%s_mean", name);
    runfile_write_scalar(rf, "metrics/arrival", attr, stats_mean(sorted, n));
    static const struct {
        const char *suffix;
        double q;
    } points[] = {{"p50", 50}, {"p90", 90}, {"p99", 99}};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        snprintf(attr, sizeof attr, "%s_%s", name, points[i].suffix);
        runfile_write_scalar(rf, "metrics/arrival", attr, stats_percentile(sorted, n, points[i].q));
    }
    free(sorted);
}

/* /metrics/arrival (collective): see docs/benchmarks.md. */
static void stream_metrics_write(runfile *rf, const serve_result *r) {
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
    stream_summary_write(rf, "latency", r->latency, r->served);
    stream_summary_write(rf, "queue_delay", r->queue_delay, r->served);
    stream_summary_write(rf, "ttft", r->ttft, r->served);
}

/* Rank 0's arrival-stream lines, in the style of the run table. */
static void stream_print(const serve_result *r, int new_tokens) {
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
           "TTFT p50 %.3f p99 %.3f ms\n",
           "", stats_percentile_of(r->latency, n, 50) * 1e3,
           stats_percentile_of(r->latency, n, 90) * 1e3,
           stats_percentile_of(r->latency, n, 99) * 1e3,
           stats_percentile_of(r->queue_delay, n, 50) * 1e3,
           stats_percentile_of(r->queue_delay, n, 99) * 1e3,
           stats_percentile_of(r->ttft, n, 50) * 1e3, stats_percentile_of(r->ttft, n, 99) * 1e3);
}

/* How low-precision weights are stored and what the cpu does to activations at each product
 * (docs/kernels.md): one line, so a reader of the table knows which function ran. */
static void print_weights_line(const model_config *cfg, const model *mo, const job *j) {
    const char *head = cfg->quantize_head ? precision_kind_name(j->precision) : "fp32";
    if (j->precision != PRECISION_INT8W) {
        printf("  %-13s %s matrices, head %s%s\n", "weights", precision_kind_name(j->precision),
               head,
               j->precision == PRECISION_BF16 && j->backend == BACKEND_CPU
                   ? "; activations rounded to bf16 at each product"
               : j->precision == PRECISION_Q4_K
                   ? " (ggml's blocks of 256 in sub-blocks of 32); activations in int8 blocks of "
                     "32 at each product"
               : precision_is_block(j->precision)
                   ? " (ggml's blocks of 32); activations in int8 blocks of 32 at each product"
                   : "");
        return;
    }
    char scales[32], blocks[96];
    if (cfg->int8_group)
        snprintf(scales, sizeof scales, "per %d columns", cfg->int8_group);
    else
        snprintf(scales, sizeof scales, "per row");
    const int8_layout h = mo->int8[MATRIX_INPUT_HEADS], f = mo->int8[MATRIX_INPUT_MLP];
    snprintf(blocks, sizeof blocks,
             "; cpu activations in int8 blocks of 32 (attention out %s, "
             "mlp down %s)",
             h.act_block ? "too" : "fp32", f.act_block ? "too" : "fp32");
    printf("  %-13s int8w, scales %s, head %s%s\n", "weights", scales, head,
           j->backend == BACKEND_CPU ? blocks : "");
}

static void print_table(const run_context *rc, const run_metrics *rm, const int32_t *first_row,
                        const double *peak) {
    const job *j = &rc->j;
    const model_config *cfg = &rc->cfg;
    const mesh *m = &rc->mesh;
    const engine *e = &rc->e;
    int n = rm->iterations;
    double ttft = run_percentile(rm->ttft, n, 50), lat = run_percentile(rm->latency, n, 50);
    double tpot = run_percentile(rm->tpot, n, 50);
    long params = 0;
    for (int i = 0; i < e->m->n_tensors; i++)
        params += tensor_global_elems(&e->m->tensors[i]);
    printf("tripar %s | %s -> %s\n", TRIPAR_VERSION, j->source, rc->out_path);
    printf("  %-13s dp=%d tp=%d pp=%d  microbatches=%d  overlap=%s  backend=%s  precision=%s  "
           "kv=%s\n",
           "strategy", MESH_DP(m), MESH_TP(m), MESH_PP(m), j->microbatches,
           j->overlap ? "on" : "off", backend_kind_name(j->backend),
           precision_kind_name(j->precision), kv_cache_kind_name(j->kv_cache));
    if (m->kernels[0]) /* rank 0's; every rank's is in /mesh */
        printf("  %-13s %s (%s), %d thread(s) per rank\n", "kernels", m->kernels,
               j->cpu_isa ? "backend.cpu_isa" : "detected", rc->threads);
    if (j->precision != PRECISION_FP32) print_weights_line(&e->m->cfg, e->m, j);
    printf("  %-13s arch=%s layers=%d heads=%d kv_heads=%d embd=%d mlp=%d vocab=%d ctx=%d norm=%s "
           "(%.2fM params)\n",
           "model", arch_kind_name(cfg->arch), cfg->layers, cfg->heads, cfg->kv_heads, cfg->embd,
           cfg->mlp, cfg->vocab, cfg->ctx, norm_kind_name(cfg->norm), params / 1e6);
    printf("  %-13s %d prompts x %d tokens, %d new tokens each; %d measured iteration(s)\n",
           "batch", j->batch, j->prompt_len, j->new_tokens, n);
    printf("  %-13s %9.3f ms   %10.1f tokens/s\n", "prefill", ttft * 1e3,
           ttft > 0 ? j->batch * (double)j->prompt_len / ttft : 0.0);
    if (j->new_tokens > 1)
        printf("  %-13s %9.3f ms/token %7.1f tokens/s\n", "decode", tpot * 1e3,
               tpot > 0 ? j->batch / tpot : 0.0);
    printf("  %-13s TTFT p50 %.3f ms | TPOT p50 %.3f ms | ITL p50 %.3f ms | latency p50 %.3f ms "
           "p99 %.3f ms\n",
           "latency", ttft * 1e3, tpot * 1e3,
           stats_percentile_of(rm->itl, rm->n_itl, 50) * 1e3, lat * 1e3,
           run_percentile(rm->latency, n, 99) * 1e3);
    int world = m->world_size, replicas = MESH_DP(m);
    double toks = lat > 0 ? (double)rm->generated_tokens / lat : 0.0;
    double reqs = lat > 0 ? (double)rm->requests / lat : 0.0;
    printf("  %-13s %.1f tokens/s, %.3f requests/s at latency p50 | per rank (/%d) %.1f "
           "tokens/s %.3f req/s | per replica (/%d) %.1f tokens/s\n",
           "throughput", toks, reqs, world, toks / world, reqs / world, replicas, toks / replicas);
    /* ITL pools every decode gap of every iteration (docs/benchmarks.md), the others one
     * value per iteration */
    static const char *const names[] = {"TTFT", "TPOT", "ITL", "latency"};
    const double *series[] = {rm->ttft, rm->tpot, rm->itl, rm->latency};
    const long counts[] = {n, n, rm->n_itl, n};
    for (int k = 0; k < 4; k++)
        printf("  %-13s %-7s mean %9.3f  p50 %9.3f  p90 %9.3f  p99 %9.3f ms\n",
               k ? "" : "percentiles", names[k], stats_mean(series[k], counts[k]) * 1e3,
               stats_percentile_of(series[k], counts[k], 50) * 1e3,
               stats_percentile_of(series[k], counts[k], 90) * 1e3,
               stats_percentile_of(series[k], counts[k], 99) * 1e3);
    if (n < STATS_TAIL_MIN_SAMPLES)
        printf("  %-13s percentiles of %d measured iteration%s: p90 and p99 need %d or more "
               "(bench.iterations)\n",
               "warning", n, n == 1 ? "" : "s", STATS_TAIL_MIN_SAMPLES);
    double pmin = peak[0], pmax = peak[0];
    for (int r = 1; r < world; r++)
        pmin = fmin(pmin, peak[r]), pmax = fmax(pmax, peak[r]);
    printf("  %-13s max %.2f MiB, min %.2f MiB over %d rank(s)", "peak memory", pmax / 1048576.0,
           pmin / 1048576.0, world);
    for (int r = 0; r < world && world > 1 && world <= 8; r++)
        printf("%s%.2f", r ? " " : " [MiB per rank: ", peak[r] / 1048576.0);
    printf("%s\n", world > 1 && world <= 8 ? "]" : "");
    printf("  %-13s %.3f s (process start to first token) | warm start (TTFT p50) %.3f ms\n",
           "cold start", rm->cold_start_seconds, ttft * 1e3);
    printf("  %-13s", "prompt 0");
    for (int i = 0; i < e->total_len && i < 48; i++)
        printf("%s%d", i == j->prompt_len ? " | " : " ", first_row[i]);
    printf("%s\n", e->total_len > 48 ? " ..." : "");
    if (rc->tok) {
        size_t len = 0;
        char *text =
            tokenizer_decode_text(rc->tok, first_row, e->total_len, TOKENIZER_SKIP_UNKNOWN, &len);
        printf("  %-13s ", "text 0");
        run_text_line_print(stdout, text, len, 400);
        free(text);
    }
}

/* New tokens of the whole batch in the last generation: batch * new_tokens, or fewer when
 * sequences stopped at eos (the sum of /output/generated; collective). */
static long generated_total(run_context *rc) {
    const engine *e = &rc->e;
    if (!e->cfg.stop_at_eos) return (long)rc->j.batch * rc->j.new_tokens;
    long long mine = 0;
    if (e->m->geom.last_stage && e->m->geom.tp_rank == 0)
        for (int s = 0; s < e->batch_local; s++) mine += e->generated[s];
    comm *world = &rc->mesh.world_host;
    world->ops->allreduce(world->ctx, &mine, 1, COMM_INT64, COMM_OP_SUM);
    return (long)mine;
}

/* The first prompt's tokens on every rank, for the table (timed as dp_gather). */
static void gather_first_row(run_context *rc, int32_t *first_row) {
    comm *world = &rc->mesh.world_host;
    const engine *e = &rc->e;
    double t0 = timer_host_seconds();
    int holder = e->m->geom.last_stage && e->m->geom.tp_rank == 0 && e->seq_global_begin == 0;
    int src = holder ? rc->mesh.world_rank : 0;
    world->ops->allreduce(world->ctx, &src, 1, COMM_INT32, COMM_OP_MAX);
    if (holder) memcpy(first_row, e->tokens, (size_t)e->total_len * sizeof(int32_t));
    world->ops->bcast(world->ctx, first_row, (size_t)e->total_len, COMM_INT32, src);
    rc->tm.iteration = -1;
    timer_add_host(&rc->tm, PHASE_DP_GATHER, -1, -1, TIMER_NO_LAYER, t0, timer_host_seconds());
}

/* Rank 0's summary of one sweep point. */
static void point_fill(run_point *point, const run_context *rc, const run_metrics *rm,
                       const double *peak) {
    int n = rm->iterations;
    snprintf(point->out, sizeof point->out, "%s", rc->out_path);
    point->ttft_p50 = run_percentile(rm->ttft, n, 50);
    point->tpot_p50 = run_percentile(rm->tpot, n, 50);
    point->latency_p50 = run_percentile(rm->latency, n, 50);
    point->tokens_per_s =
        point->latency_p50 > 0 ? (double)rm->generated_tokens / point->latency_p50 : 0;
    point->peak_memory_max = 0;
    for (int r = 0; r < rc->mesh.world_size; r++)
        point->peak_memory_max = fmax(point->peak_memory_max, peak[r]);
}

/* The ceilings after the run (bench.roofline): the GEMM ceiling again and the read bandwidth
 * that bounds a decode step, which streams every weight of every stage (int8 scales included)
 * except the lookup tables: a step reads one row of wpe, and one row of the fp32 wte when the
 * head is another tensor (untied, or a tied one's copy in the weight dtype: Llama 3 8B's
 * untied wte is 1 GB it never streams); a tied wte that is the head is read whole. Rank 0
 * measures; every rank then writes them to /metrics/roofline (collective; docs/schema.md). A
 * device backend is measured through its own matmul and memory (roofline_backend_*). */
static void roofline_finish(run_context *rc) {
    const model *m = &rc->m;
    const int device = roofline_backend_is_device(&rc->be);
    if (rc->mesh.world_rank == 0) {
        double model_bytes = 0;
        for (int i = 0; i < m->n_tensors; i++) {
            const tensor_desc *t = &m->tensors[i];
            const int head_elsewhere = !m->cfg.tie_embeddings || m->cfg.quantize_head;
            const int lookup_only = !strcmp(t->name, "wpe") ||
                                    (!strcmp(t->name, "wte") && !t->is_matrix && head_elsewhere);
            if (lookup_only) continue;
            const double elems = (double)tensor_global_elems(t);
            model_bytes += (t->is_matrix ? (double)dtype_bytes(m->weight_dtype, (size_t)elems) : elems * 4.0);
            if (t->is_matrix && m->weight_dtype == DTYPE_INT8) {
                const double k = (double)t->global_shape[t->ndims - 1];
                const int group = m->int8[t->input].group;
                model_bytes += elems / k * (group ? ceil(k / group) : 1.0) * 4.0;
            }
        }
        if (device) {
            rc->roof.sgemm_gflops_after =
                roofline_backend_gemm(&rc->roof, &rc->be, &rc->cfg, rc->j.batch, rc->j.prompt_len);
            roofline_backend_bandwidth(&rc->roof, &rc->be, model_bytes);
        } else {
            rc->roof.sgemm_gflops_after =
                roofline_sgemm(&rc->roof, &rc->cfg, rc->j.batch, rc->j.prompt_len);
            roofline_bandwidth(&rc->roof, model_bytes, rc->threads);
        }
    }
    const char *group = "metrics/roofline";
    runfile_write_scalar(rc->rf, group, "sgemm_gflops_before", rc->roof.sgemm_gflops_before);
    runfile_write_scalar(rc->rf, group, "sgemm_gflops_after", rc->roof.sgemm_gflops_after);
    runfile_write_scalar(rc->rf, group, "stream_gbs", rc->roof.stream_gbs);
    runfile_write_scalar(rc->rf, group, "stream_gbs_one_thread",
                         device ? rc->roof.stream_gbs : rc->roof.stream_gbs_one);
    runfile_write_text_attr(rc->rf, group, "gflops_probe",
                            device ? ROOFLINE_PROBE_BACKEND_GEMM : ROOFLINE_PROBE_SGEMM);
    runfile_write_text_attr(rc->rf, group, "gbs_probe",
                            device ? ROOFLINE_PROBE_BACKEND_STREAM : ROOFLINE_PROBE_STREAM);
}

int run_record(run_context *rc, run_metrics *rm, const serve_result *stream, int stopped,
               run_point *point) {
    const job *j = &rc->j;
    comm *world = &rc->mesh.world_host;
    const int rank0 = rc->mesh.world_rank == 0;
    int32_t *first_row = xcalloc((size_t)rc->e.total_len, sizeof(int32_t));
    gather_first_row(rc, first_row);
    /* per measured iteration, of which rm->iterations completed: none after an early stop
     * claims tokens, and no latency of a step that never ran is written (docs/schema.md) */
    const int measured = rm->iterations > 0;
    rm->prompt_tokens = measured ? (long)j->batch * j->prompt_len : 0;
    rm->generated_tokens = measured ? generated_total(rc) : 0;
    rm->requests = measured ? j->batch : 0;
    rm->peak_memory_bytes = (double)rc->be.ops->peak_memory(rc->be.ctx);
    double *peak = xcalloc((size_t)rc->mesh.world_size, sizeof(double));
    world->ops->allgather(world->ctx, peak, &rm->peak_memory_bytes, 1, COMM_DOUBLE);
    rm->prefill_seconds = rm->decode_seconds = NAN;
    if (measured) {
        rm->prefill_seconds = rm->ttft[rm->iterations - 1];
        rm->decode_seconds = rm->latency[rm->iterations - 1] - rm->ttft[rm->iterations - 1];
    }

    watch_phase(WATCH_RUNFILE); /* the stall report's words while HDF5 writes collectively */
    record_outputs(rc);
    record_expert_load(rc, rm->iterations - 1);
    runfile_write_events(rc->rf, &rc->tm);
    runfile_write_sched(rc->rf, &rc->sched, &rc->tm);
    telemetry_stop(&rc->tel); /* the last samples, then the file is finalised */
    runfile_write_telemetry(rc->rf, &rc->tel);
    runfile_write_metrics(rc->rf, rm);
    if (j->roofline && measured && !stopped) roofline_finish(rc); /* before complete=1 */
    if (j->arrival_rate > 0) stream_metrics_write(rc->rf, stream);
    int code = TRIPAR_EXIT_OK;
    char partial[sizeof rc->out_path + 128];
    snprintf(partial, sizeof partial, "%s", runfile_partial_path(rc->rf));
    if (stopped && !runfile_failed(rc->rf)) {
        runfile_close_incomplete(rc->rf);
        if (rank0 && rc->e.nonfinite_step >= 0) {
            char site[64];
            engine_site_describe(&rc->e, rc->e.nonfinite_site, site, sizeof site);
            fprintf(stderr,
                    "tripar: the logits went non-finite (NaN or Inf) at step %d%s; the first "
                    "output to do so in that step is that of %s. Stopped; %s holds the tokens "
                    "before it (complete=0)\n",
                    rc->e.nonfinite_step, rc->e.nonfinite_step == 0 ? " (prefill)" : "", site,
                    partial);
        } else if (rank0) {
            fprintf(stderr, "tripar: stopped by signal; %s holds what was measured (complete=0)\n",
                    partial);
        }
        code = TRIPAR_EXIT_RUNTIME;
    } else if (runfile_finish(rc->rf) != STATUS_OK) { /* the same answer on every rank */
        if (rank0) fprintf(stderr, "tripar: error: %s\n", error_message());
        code = TRIPAR_EXIT_RUNTIME;
    } else {
        if (rank0) {
            print_table(rc, rm, first_row, peak);
            run_perplexity_print(rc);
            run_text_print_path(stdout, rc->out_path); /* the answers, read back */
            if (j->arrival_rate > 0) stream_print(stream, j->new_tokens);
            if (point) point_fill(point, rc, rm, peak);
            if (j->roofline && measured)
                roofline_print(&rc->roof, rm, j->batch, j->prompt_len, j->new_tokens);
        }
        world->ops->barrier(world->ctx);
    }
    watch_phase(WATCH_NONE);
    rc->rf = NULL; /* finished or closed: run_context_free has nothing to close */
    free(first_row);
    free(peak);
    return code;
}
