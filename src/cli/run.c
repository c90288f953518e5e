/* `tripar run`: load and check the job, build the mesh, load the model shard, generate under
 * the benchmark protocol, write the run file and print rank 0's result table. */
#include "cli/cli.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "io/checkpoint.h"
#include "parallel/comm_setup.h"
#include "parallel/device.h"
#include "engine/engine.h"
#include "parallel/mesh.h"
#include "model/model.h"
#include "io/prompt.h"
#include "metrics/roofline.h"
#include "io/runfile.h"
#include "engine/serve.h"
#include "base/stats.h"
#include "job/sweep.h"
#include "metrics/timing.h"

#define MAX_OVERRIDES 256
#define PROGRESS_SECONDS 5.0

typedef struct {
    const char *job_path;
    const char *overrides[MAX_OVERRIDES];
    int n_overrides;
    const char *out;
    const char *save_checkpoint;
    int dry_run;
    sweep sweep;
} run_args;

/* What a sweep's summary table shows of one point (rank 0's values). */
typedef struct {
    char out[JOB_PATH_MAX + 512];
    double ttft_p50, tpot_p50, latency_p50, tokens_per_s, peak_memory_max;
} run_point;

static volatile sig_atomic_t stop_requested = 0;
static void on_stop_signal(int sig) { stop_requested = sig; }

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: tripar run JOB.yaml [--set SECTION.KEY=VALUE]... [--out RUN.h5]\n"
        "                  [--sweep KEY=V1,V2,...]... [--dry-run] [--save-checkpoint CKPT.h5]\n"
        "Runs the job under mpirun/srun: dp x tp x pp must equal the number of ranks.\n"
        "  --set K=V            override any job key (repeatable), e.g. --set parallel.tp=2\n"
        "  --sweep K=V1,V2      run every point of the cross product of the swept keys in\n"
        "                       this one mpirun; point files are OUT-STEM.K=V[.K2=V2].h5,\n"
        "                       V a file's stem for path keys (repeatable; see\n"
        "                       docs/benchmarks.md)\n"
        "  --out RUN.h5         run file (default: record.out of the job)\n"
        "  --dry-run            print the resolved job and the memory per rank; compute nothing\n"
        "  --save-checkpoint F  write the synthetic model to F as a tripar checkpoint\n"
        "Exit codes: 0 ok, 1 runtime failure, 2 bad usage, job, mesh or checkpoint.\n");
}

static int parse_args(run_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    sweep_init(&a->sweep);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(arg, "--set") && i + 1 < argc) {
            if (a->n_overrides == MAX_OVERRIDES) {
                error_set("too many --set options (at most %d)", MAX_OVERRIDES);
                return -1;
            }
            a->overrides[a->n_overrides++] = argv[++i];
        } else if (!strncmp(arg, "--set=", 6)) {
            if (a->n_overrides < MAX_OVERRIDES) a->overrides[a->n_overrides++] = arg + 6;
        } else if (!strcmp(arg, "--out") && i + 1 < argc) {
            a->out = argv[++i];
        } else if (!strcmp(arg, "--save-checkpoint") && i + 1 < argc) {
            a->save_checkpoint = argv[++i];
        } else if (!strcmp(arg, "--dry-run")) {
            a->dry_run = 1;
        } else if ((!strcmp(arg, "--sweep") && i + 1 < argc) || !strncmp(arg, "--sweep=", 8)) {
            if (sweep_add(&a->sweep, arg[7] == '=' ? arg + 8 : argv[++i]) != STATUS_OK) return -1;
        } else if (arg[0] == '-') {
            error_set("tripar run: unknown or incomplete option '%s' (see tripar run --help)", arg);
            return -1;
        } else if (!a->job_path) {
            a->job_path = arg;
        } else {
            error_set("tripar run: more than one job file given ('%s' and '%s')", a->job_path, arg);
            return -1;
        }
    }
    if (!a->job_path) {
        error_set("tripar run: no job file given (see tripar run --help)");
        return -1;
    }
    return 0;
}

/* Mesh checks that depend on the model and the batch; the world-size check is separate so
 * --dry-run can plan a mesh larger than the processes it runs on. */
static int mesh_fits_model(const job *j) {
    char where[256];
    if (j->heads % j->tp != 0) {
        error_set("%s: parallel.tp = %d does not divide model heads = %d; tensor parallelism "
                  "splits whole heads",
                  job_key_origin(j, "parallel.tp", where, sizeof where), j->tp, j->heads);
        return -1;
    }
    if (j->layers < j->pp) {
        error_set("%s: parallel.pp = %d stages but the model has only %d layers; each stage "
                  "needs at least one layer",
                  job_key_origin(j, "parallel.pp", where, sizeof where), j->pp, j->layers);
        return -1;
    }
    if (j->batch < j->dp) {
        error_set("%s: parallel.dp = %d replicas but the input has only %d prompts; each "
                  "replica needs at least one",
                  job_key_origin(j, "parallel.dp", where, sizeof where), j->dp, j->batch);
        return -1;
    }
    return 0;
}

/* Every rank finds the same user error, so rank 0 alone prints it and all exit 2. */
static int user_error(int rank) {
    if (rank == 0) fprintf(stderr, "tripar: error: %s\n", error_message());
    return TRIPAR_EXIT_USAGE;
}

static int default_threads(const mesh *m) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int per_rank = (int)(cores / (m->local_size > 0 ? m->local_size : 1));
    return per_rank > 0 ? per_rank : 1;
}

static dtype weight_dtype_of(precision_kind p) {
    switch (p) {
    case PRECISION_INT8W: return DTYPE_INT8;
    case PRECISION_BF16: return DTYPE_BF16;
    case PRECISION_FP16: return DTYPE_F16;
    case PRECISION_FP32: break;
    }
    return DTYPE_F32;
}

/* Planned memory of one rank at the given coordinates, for --dry-run. */
static void print_memory_plan(const job *j, const model_config *cfg) {
    printf("# memory per rank (weights + activations + KV cache), backend %s\n",
           backend_kind_name(j->backend));
    printf("memory_per_rank:\n");
    for (int pp = 0; pp < j->pp; pp++)
        for (int tp = 0; tp < j->tp; tp++) {
            model m;
            shard_geom g;
            memset(&m, 0, sizeof m);
            shard_geom_init(&g, cfg, j->tp, tp, j->pp, pp);
            model_tensor_table(&m, cfg, &g, weight_dtype_of(j->precision));
            double weights = (double)model_weight_bytes(&m);
            int batch_local = (j->batch + j->dp - 1) / j->dp;
            int mb = j->microbatches < batch_local ? j->microbatches : batch_local;
            double rows = (double)((batch_local + mb - 1) / mb) * j->prompt_len;
            double act = rows * 4.0 *
                         (2.0 * mb * cfg->embd + 3.0 * cfg->embd + 4.0 * g.attn_dim + g.mlp_local +
                          g.vocab_local);
            double kv =
                2.0 * 4.0 * g.n_layers * batch_local * (j->prompt_len + j->new_tokens) * g.attn_dim;
            printf(
                "  - {pp_rank: %d, tp_rank: %d, layer_begin: %d, layer_end: %d, weights_mib: %.2f, "
                "activations_mib: %.2f, kv_cache_mib: %.2f, total_mib: %.2f}\n",
                pp, tp, g.layer_begin, g.layer_end, weights / 1048576.0, act / 1048576.0,
                kv / 1048576.0, (weights + act + kv) / 1048576.0);
        }
}

static double percentile_of(const double *values, int n, double q) {
    double sorted[n > 0 ? n : 1];
    memcpy(sorted, values, (size_t)n * sizeof(double));
    for (int i = 1; i < n; i++) /* insertion sort: n is the iteration count */
        for (int k = i; k > 0 && sorted[k - 1] > sorted[k]; k--) {
            double t = sorted[k];
            sorted[k] = sorted[k - 1];
            sorted[k - 1] = t;
        }
    return stats_percentile(sorted, n, q);
}

static void print_table(const job *j, const model_config *cfg, const mesh *m, const engine *e,
                        const run_metrics *rm, const char *out_path, const int32_t *first_row,
                        const double *peak) {
    int n = rm->iterations;
    double ttft = percentile_of(rm->ttft, n, 50), lat = percentile_of(rm->latency, n, 50);
    double tpot = percentile_of(rm->tpot, n, 50);
    long params = 0;
    for (int i = 0; i < e->m->n_tensors; i++)
        params += tensor_global_elems(&e->m->tensors[i]);
    printf("tripar %s | %s -> %s\n", TRIPAR_VERSION, j->source, out_path);
    printf("  %-13s dp=%d tp=%d pp=%d  microbatches=%d  overlap=%s  backend=%s  precision=%s  "
           "kv=%s\n",
           "strategy", MESH_DP(m), MESH_TP(m), MESH_PP(m), j->microbatches,
           j->overlap ? "on" : "off", backend_kind_name(j->backend),
           precision_kind_name(j->precision), kv_cache_kind_name(j->kv_cache));
    printf("  %-13s layers=%d heads=%d embd=%d mlp=%d vocab=%d ctx=%d norm=%s (%.2fM params)\n",
           "model", cfg->layers, cfg->heads, cfg->embd, cfg->mlp, cfg->vocab, cfg->ctx,
           norm_kind_name(cfg->norm), params / 1e6);
    printf("  %-13s %d prompts x %d tokens, %d new tokens each; %d measured iteration(s)\n",
           "batch", j->batch, j->prompt_len, j->new_tokens, n);
    printf("  %-13s %9.3f ms   %10.1f tokens/s\n", "prefill", ttft * 1e3,
           ttft > 0 ? j->batch * (double)j->prompt_len / ttft : 0.0);
    if (j->new_tokens > 1)
        printf("  %-13s %9.3f ms/token %7.1f tokens/s\n", "decode", tpot * 1e3,
               tpot > 0 ? j->batch / tpot : 0.0);
    printf("  %-13s TTFT p50 %.3f ms | TPOT p50 %.3f ms | latency p50 %.3f ms p99 %.3f ms\n",
           "latency", ttft * 1e3, tpot * 1e3, lat * 1e3, percentile_of(rm->latency, n, 99) * 1e3);
    int world = m->world_size, replicas = MESH_DP(m);
    double toks = lat > 0 ? (double)rm->generated_tokens / lat : 0.0;
    double reqs = lat > 0 ? (double)rm->requests / lat : 0.0;
    printf("  %-13s %.1f tokens/s, %.3f requests/s at latency p50 | per rank (/%d) %.1f "
           "tokens/s %.3f req/s | per replica (/%d) %.1f tokens/s\n",
           "throughput", toks, reqs, world, toks / world, reqs / world, replicas, toks / replicas);
    static const char *const names[] = {"TTFT", "TPOT", "latency"};
    const double *series[] = {rm->ttft, rm->tpot, rm->latency};
    for (int k = 0; k < 3; k++)
        printf("  %-13s %-7s p50 %9.3f  p90 %9.3f  p99 %9.3f ms\n", k ? "" : "percentiles",
               names[k], percentile_of(series[k], n, 50) * 1e3,
               percentile_of(series[k], n, 90) * 1e3, percentile_of(series[k], n, 99) * 1e3);
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
    if (e->tok) {
        size_t len = 0;
        char *text = tokenizer_decode(e->tok, first_row, e->total_len, &len);
        printf("  %-13s %.*s\n", "text 0", (int)(len < 400 ? len : 400), text);
        free(text);
    }
}

/* One run: the job with the --set overrides and then those of sweep point `point`, written to
 * that point's run file. start is when this run began (the process start for the first run),
 * for the cold-start time. With check_only it stops once the job and mesh are known to be
 * valid, so a sweep reports a bad point before computing any. MPI stays initialised. */
/* The benchmark protocol: bench.warmup generations, then bench.iterations measured ones (with
 * the arrival-rate stream before them when asked). Latency and TTFT of an iteration are the
 * slowest rank's; cold start runs from process start to the first token. Returns 1 when a stop
 * signal ended the run early (every rank agrees). */
static int measure_iterations(engine *e, const job *jp, timer *tm, run_metrics *rm,
                              serve_result *stream_result, double process_start) {
    const int last_stage = e->m->geom.last_stage;
    int world_rank = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    int stopped = 0, cold_done = 0;
    double last_progress = timer_host_seconds();
    for (int it = 0; it < jp->warmup + jp->iterations && !stopped; it++) {
        int measured = it - jp->warmup;
        if (measured == 0 && jp->arrival_rate > 0) {
            /* the arrival stream runs warm, after the warm-up and before the measured
             * iterations, so the output tokens still come from whole-batch generations */
            stopped = serve_run(e, jp, stream_result);
            if (!cold_done && stream_result->batches > 0) {
                rm->cold_start_seconds = stream_result->first_token_time - process_start;
                MPI_CHECK(MPI_Bcast(&rm->cold_start_seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
                cold_done = 1;
            }
            if (stopped) break;
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = timer_host_seconds();
        tm->iteration = measured >= 0 ? measured : -1; /* before the event opens, so it is tagged */
        int ev = timer_begin(tm, PHASE_ITERATION, -1, -1, TIMER_NO_LAYER);
        stopped = engine_generate(e, measured >= 0 ? measured : -1, measured == 0);
        timer_end(tm, ev);
        double local[2] = {e->end_time - t0, last_stage ? e->first_token_time - t0 : 0.0};
        double global[2];
        MPI_CHECK(MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        if (!cold_done) {
            double first = last_stage ? e->first_token_time : 0.0, latest = 0.0;
            MPI_CHECK(MPI_Allreduce(&first, &latest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
            rm->cold_start_seconds = latest - process_start;
            cold_done = 1;
        }
        if (measured >= 0 && !stopped) {
            rm->latency[measured] = global[0];
            rm->ttft[measured] = global[1];
            rm->tpot[measured] =
                jp->new_tokens > 1 ? (global[0] - global[1]) / (jp->new_tokens - 1) : 0.0;
        }
        int flag = stop_requested != 0, any = 0;
        MPI_CHECK(MPI_Allreduce(&flag, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        stopped |= any;
        /* Long benchmarks show they are alive: a line every few seconds from rank 0. */
        if (world_rank == 0 && timer_host_seconds() - last_progress > PROGRESS_SECONDS &&
            it + 1 < jp->warmup + jp->iterations) {
            fprintf(stderr, "tripar: %s %d/%d done, latency %.3f s\n",
                    measured < 0 ? "warm-up" : "iteration", measured < 0 ? it + 1 : measured + 1,
                    measured < 0 ? jp->warmup : jp->iterations, global[0]);
            last_progress = timer_host_seconds();
        }
    }

    return stopped;
}

/* Loads the job of one sweep point and checks everything that needs no compute: keys, the
 * checkpoint's shape, the prompt (tokenized when given as text), and the mesh against the
 * model. Returns STATUS_OK, or STATUS_BAD_INPUT with error_message() set (same on every rank). */
static int job_resolve(const run_args *a, long point, job *out, tokenizer **tok) {
    const char *overrides[MAX_OVERRIDES + SWEEP_MAX_KEYS];
    char point_sets[SWEEP_MAX_KEYS][SWEEP_TEXT_MAX];
    int n_overrides = 0;
    for (int i = 0; i < a->n_overrides; i++)
        overrides[n_overrides++] = a->overrides[i];
    for (int k = 0; k < a->sweep.n_axes; k++) { /* the point's values win over --set */
        sweep_override(&a->sweep, point, k, point_sets[k], sizeof point_sets[k]);
        overrides[n_overrides++] = point_sets[k];
    }
    *tok = NULL;
    job *j = out;
    if (job_load(j, a->job_path, overrides, n_overrides) != STATUS_OK) return STATUS_BAD_INPUT;
    if (j->checkpoint[0]) {
        model_config ck;
        if (checkpoint_read_config(j->checkpoint, &ck) != STATUS_OK) goto bad;
        j->layers = ck.layers, j->heads = ck.heads, j->embd = ck.embd, j->vocab = ck.vocab;
        j->ctx = ck.ctx, j->mlp = ck.mlp, j->ln_eps = ck.ln_eps, j->norm = ck.norm;
        free(j->yaml); /* the resolved job records the shape the checkpoint gave */
        j->yaml = job_dump_string(j);
    }
    if (j->synthetic_input) job_fill_synthetic_tokens(j, j->vocab);
    if (prompt_tokenize(j, tok) != STATUS_OK) goto bad;
    if (job_validate_model(j) != STATUS_OK || mesh_fits_model(j) != 0) goto bad;
    return STATUS_OK;
bad:
    tokenizer_free(*tok);
    *tok = NULL;
    job_free(j);
    return STATUS_BAD_INPUT;
}

static int run_job(const run_args *a, long point, double process_start, int check_only,
                   run_point *result) {
    int world_rank = 0, world_size = 1;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size));

    job j;
    tokenizer *tok = NULL;
    if (job_resolve(a, point, &j, &tok) != STATUS_OK) return user_error(world_rank);
    model_config cfg;
    model_config_from_job(&cfg, &j);
    if (a->dry_run) {
        if (world_rank == 0) {
            job_dump(&j, stdout);
            print_memory_plan(&j, &cfg);
        }
        tokenizer_free(tok);
        job_free(&j);
        return TRIPAR_EXIT_OK;
    }
    if (mesh_validate(world_size, j.dp, j.tp, j.pp, j.order) != 0) {
        char reason[1024], where[256];
        snprintf(reason, sizeof reason, "%s", error_message());
        error_set("%s: %s", job_key_origin(&j, "parallel.dp", where, sizeof where), reason);
        tokenizer_free(tok);
        job_free(&j);
        return user_error(world_rank);
    }

    char out_path[JOB_PATH_MAX + 512];
    if (sweep_point_path(&a->sweep, point, a->out ? a->out : j.out, out_path, sizeof out_path) !=
        0) {
        error_set("run file name of sweep point %ld is too long", point);
        tokenizer_free(tok);
        job_free(&j);
        return user_error(world_rank);
    }
    if (check_only) {
        if (result) snprintf(result->out, sizeof result->out, "%s", out_path);
        tokenizer_free(tok);
        job_free(&j);
        return TRIPAR_EXIT_OK;
    }
    signal(SIGTERM, on_stop_signal);
    signal(SIGINT, on_stop_signal);

    mesh mesh;
    mesh_init(&mesh, MPI_COMM_WORLD, j.dp, j.tp, j.pp, j.order);

    backend be;
    backend_options bopt = {.threads = j.threads > 0 ? j.threads : default_threads(&mesh),
                            .device =
                                j.backend == BACKEND_CUDA ? device_select(&mesh, j.device) : -1,
                            .allow_tf32 = j.allow_tf32,
                            .max_marks = 0};
    long steps = j.new_tokens > 0 ? j.new_tokens : 1;
    long per_step = (long)(j.microbatches) * ((long)j.layers * 16 + 16);
    /* an arrival stream may run up to one generation per request */
    long stream = j.arrival_rate > 0 ? (long)(2.0 * j.arrival_rate * j.duration) + 64 : 0;
    long capacity = 64 + (long)(j.warmup + j.iterations + stream) * steps * per_step;
    if (capacity > 4000000) capacity = 4000000; /* beyond this, events are counted as dropped */
    bopt.max_marks = (int)(2 * capacity);
    int bad =
        j.backend == BACKEND_CUDA ? backend_cuda_init(&be, &bopt) : backend_cpu_init(&be, &bopt);
    int any_bad = 0;
    MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_bad) {
        if (!bad)
            error_set("backend %s could not start on another rank", backend_kind_name(j.backend));
        if (bad || world_rank == 0)
            fprintf(stderr, "tripar: error: [rank %d host %s] %s\n", world_rank, mesh.host,
                    error_message());
        mesh_free(&mesh);
        tokenizer_free(tok);
        job_free(&j);
        return TRIPAR_EXIT_USAGE;
    }

    if (j.backend == BACKEND_CUDA) device_record(&mesh, bopt.device); /* /mesh; warns if shared */
    if (comm_setup(&mesh, &j, &be) != 0) {
        int code = user_error(world_rank);
        MPI_Finalize();
        exit(code);
    }

    timer tm;
    timer_init(&tm, j.timings, &be, capacity, MPI_COMM_WORLD);
    tm.iteration = -1; /* set-up events belong to no measured iteration */

    model m;
    memset(&m, 0, sizeof m);
    shard_geom g;
    shard_geom_init(&g, &cfg, j.tp, mesh.coord[AXIS_TP], j.pp, mesh.coord[AXIS_PP]);
    model_tensor_table(&m, &cfg, &g, weight_dtype_of(j.precision));
    model_alloc(&m, &be);
    double w0 = timer_host_seconds();
    if (world_rank == 0 && m.weight_bytes > (256u << 20))
        fprintf(stderr, "tripar: %s weights, %.0f MiB on rank 0\n",
                j.checkpoint[0] ? "loading" : "generating", m.weight_bytes / 1048576.0);
    if (j.checkpoint[0]) {
        if (checkpoint_load(&m, &be, j.checkpoint, MPI_COMM_WORLD, &mesh.axis[AXIS_TP]) !=
            STATUS_OK) {
            int code = user_error(world_rank);
            MPI_Finalize();
            exit(code);
        }
    } else {
        model_fill_synthetic(&m, &be, j.seed, &mesh.axis[AXIS_TP]);
    }
    timer_add_host(&tm, PHASE_WEIGHT_INIT, -1, -1, TIMER_NO_LAYER, w0, timer_host_seconds());
    if (a->save_checkpoint) {
        if (checkpoint_save(&m, j.seed, a->save_checkpoint, &mesh) != STATUS_OK)
            CHECK(0, "could not write checkpoint %s: %s", a->save_checkpoint, error_message());
        if (world_rank == 0) printf("tripar: wrote checkpoint %s\n", a->save_checkpoint);
    }

    engine e;
    engine_init(&e, &j, &m, &be, &mesh, &tm);
    runfile *rf = runfile_create(out_path, &j, &mesh);
    CHECK(rf != NULL, "cannot create run file %s: %s", out_path, error_message());
    e.rf = rf;
    e.tok = tok;
    e.stop_flag = &stop_requested;

    run_metrics rm;
    memset(&rm, 0, sizeof rm);
    rm.iterations = j.iterations;
    rm.latency = xcalloc((size_t)j.iterations, sizeof(double));
    rm.ttft = xcalloc((size_t)j.iterations, sizeof(double));
    rm.tpot = xcalloc((size_t)j.iterations, sizeof(double));
    /* the bare-sgemm ceiling brackets the run, so a change in machine speed shows */
    roofline roof;
    memset(&roof, 0, sizeof roof);
    if (j.roofline && world_rank == 0)
        roof.sgemm_gflops_before = roofline_sgemm(&roof, &cfg, j.batch, j.prompt_len);
    serve_result stream_result;
    memset(&stream_result, 0, sizeof stream_result);
    int stopped = measure_iterations(&e, &j, &tm, &rm, &stream_result, process_start);

    /* Gather the generated tokens to rank 0 for the table (and the text output). */
    int32_t *first_row = xcalloc((size_t)e.total_len, sizeof(int32_t));
    {
        double t0 = timer_host_seconds();
        int holder = m.geom.last_stage && m.geom.tp_rank == 0 && e.seq_global_begin == 0;
        int holder_rank = holder ? world_rank : 0, src = 0;
        MPI_CHECK(MPI_Allreduce(&holder_rank, &src, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        if (holder) memcpy(first_row, e.tokens, (size_t)e.total_len * sizeof(int32_t));
        MPI_CHECK(MPI_Bcast(first_row, e.total_len, MPI_INT, src, MPI_COMM_WORLD));
        tm.iteration = -1;
        timer_add_host(&tm, PHASE_DP_GATHER, -1, -1, TIMER_NO_LAYER, t0, timer_host_seconds());
    }
    rm.prompt_tokens = (long)j.batch * j.prompt_len;
    rm.generated_tokens = (long)j.batch * j.new_tokens;
    rm.requests = j.batch;
    rm.peak_memory_bytes = (double)be.ops->peak_memory(be.ctx);
    double *peak = xcalloc((size_t)world_size, sizeof(double));
    MPI_CHECK(
        MPI_Gather(&rm.peak_memory_bytes, 1, MPI_DOUBLE, peak, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (j.iterations > 0) {
        rm.prefill_seconds = rm.ttft[j.iterations - 1];
        rm.decode_seconds = rm.latency[j.iterations - 1] - rm.ttft[j.iterations - 1];
    }

    engine_write_outputs(&e, rf);
    runfile_write_events(rf, &tm);
    runfile_write_metrics(rf, &rm);
    if (j.arrival_rate > 0) serve_write_metrics(rf, &stream_result);
    int exit_code = TRIPAR_EXIT_OK;
    if (stopped) {
        runfile_close_incomplete(rf);
        if (world_rank == 0)
            fprintf(stderr,
                    "tripar: stopped by signal; %s.partial holds what was measured "
                    "(complete=0)\n",
                    out_path);
        exit_code = TRIPAR_EXIT_RUNTIME;
    } else {
        runfile_finish(rf);
        if (world_rank == 0) {
            print_table(&j, &cfg, &mesh, &e, &rm, out_path, first_row, peak);
            if (j.arrival_rate > 0) serve_print(&stream_result, j.new_tokens);
        }
        if (result && world_rank == 0) {
            int n = rm.iterations;
            snprintf(result->out, sizeof result->out, "%s", out_path);
            result->ttft_p50 = percentile_of(rm.ttft, n, 50);
            result->tpot_p50 = percentile_of(rm.tpot, n, 50);
            result->latency_p50 = percentile_of(rm.latency, n, 50);
            result->tokens_per_s =
                result->latency_p50 > 0 ? (double)rm.generated_tokens / result->latency_p50 : 0;
            result->peak_memory_max = 0;
            for (int r = 0; r < world_size; r++)
                result->peak_memory_max = fmax(result->peak_memory_max, peak[r]);
        }
        if (j.roofline && world_rank == 0) {
            double model_bytes = 0; /* a decode step streams every weight of every stage */
            for (int i = 0; i < m.n_tensors; i++) {
                const tensor_desc *t = &m.tensors[i];
                model_bytes += (double)tensor_global_elems(t) *
                               (t->is_matrix ? (double)dtype_size(m.weight_dtype) : 4.0);
            }
            roof.sgemm_gflops_after = roofline_sgemm(&roof, &cfg, j.batch, j.prompt_len);
            roofline_bandwidth(&roof, model_bytes);
            roofline_print(&roof, &rm, j.batch, j.prompt_len, j.new_tokens);
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }

    free(first_row);
    free(peak);
    serve_result_free(&stream_result);
    free(rm.latency);
    free(rm.ttft);
    free(rm.tpot);
    engine_graphs_free(&e);
    engine_free(&e);
    timer_free(&tm);
    model_free(&m, &be);
    if (j.backend == BACKEND_CUDA)
        backend_cuda_free(&be);
    else
        backend_cpu_free(&be);
    comm_teardown(&mesh);
    mesh_free(&mesh);
    tokenizer_free(tok);
    job_free(&j);
    return exit_code;
}

/* "KEY=v KEY2=w": the overrides of one sweep point, for the progress line and the table. */
static void sweep_point_label(const sweep *spec, long point, char *label, size_t len) {
    label[0] = '\0';
    for (int k = 0; k < spec->n_axes; k++) {
        char set[SWEEP_TEXT_MAX];
        sweep_override(spec, point, k, set, sizeof set);
        size_t used = strlen(label);
        snprintf(label + used, len - used, "%s%s", k ? " " : "", set);
    }
}

/* Two points that write one run file would leave only the later one's numbers, so a sweep
 * whose point files clash (two swept files with one stem, say) is refused before any computes.
 * results[p].out holds each point's file, from the checking pass. */
static int sweep_check_paths(const sweep *spec, const run_point *results, long points,
                             int rank) {
    char **paths = xcalloc((size_t)points, sizeof *paths);
    for (long p = 0; p < points; p++) paths[p] = (char *)results[p].out;
    long first = 0, clash = sweep_path_clash(paths, points, &first);
    free(paths);
    if (clash < 0) return TRIPAR_EXIT_OK;
    char a[SWEEP_MAX_KEYS * SWEEP_TEXT_MAX], b[SWEEP_MAX_KEYS * SWEEP_TEXT_MAX];
    sweep_point_label(spec, first, a, sizeof a);
    sweep_point_label(spec, clash, b, sizeof b);
    error_set("--sweep: points %ld (%s) and %ld (%s) would both write %s; give the swept values "
              "distinct names (files: distinct stems)",
              first + 1, a, clash + 1, b, results[clash].out);
    return user_error(rank);
}

int run_main(int argc, char **argv, double process_start) {
    run_args args;
    int world_rank = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    int rc = parse_args(&args, argc, argv);
    if (rc != 0) {
        sweep_free(&args.sweep);
        return rc > 0 ? TRIPAR_EXIT_OK : user_error(world_rank);
    }
    long points = sweep_points(&args.sweep);
    if (args.sweep.n_axes == 0) {
        rc = run_job(&args, 0, process_start, 0, NULL);
        sweep_free(&args.sweep);
        return rc;
    }
    /* every point is checked before any computes, so a bad value costs no compute */
    run_point *results = xcalloc((size_t)points, sizeof(run_point));
    for (long p = 0; p < points && !args.dry_run && rc == TRIPAR_EXIT_OK; p++)
        rc = run_job(&args, p, process_start, 1, &results[p]);
    if (rc == TRIPAR_EXIT_OK && !args.dry_run)
        rc = sweep_check_paths(&args.sweep, results, points, world_rank);
    if (rc != TRIPAR_EXIT_OK) {
        free(results);
        sweep_free(&args.sweep);
        return rc;
    }
    long done = 0;
    for (long p = 0; p < points; p++, done++) {
        char label[SWEEP_MAX_KEYS * SWEEP_TEXT_MAX];
        sweep_point_label(&args.sweep, p, label, sizeof label);
        if (world_rank == 0)
            printf("%s== sweep point %ld/%ld: %s\n", p ? "\n" : "", p + 1, points, label);
        fflush(stdout);
        /* later points start with MPI and the process warm: their cold start counts from the
         * point's own start (weights included) */
        rc = run_job(&args, p, p == 0 ? process_start : timer_host_seconds(), 0, &results[p]);
        if (rc != TRIPAR_EXIT_OK) break;
    }
    if (world_rank == 0 && !args.dry_run && done > 0) {
        printf("\n== sweep: %ld of %ld point(s)\n", done, points);
        printf("  %-40s %10s %10s %10s %11s %10s  %s\n", "point", "TTFT(ms)", "TPOT(ms)", "lat(ms)",
               "tokens/s", "peak(MiB)", "file");
        for (long p = 0; p < done; p++) {
            char label[SWEEP_MAX_KEYS * SWEEP_TEXT_MAX];
            sweep_point_label(&args.sweep, p, label, sizeof label);
            const run_point *r = &results[p];
            printf("  %-40s %10.3f %10.4f %10.3f %11.1f %10.2f  %s\n", label, r->ttft_p50 * 1e3,
                   r->tpot_p50 * 1e3, r->latency_p50 * 1e3, r->tokens_per_s,
                   r->peak_memory_max / 1048576.0, r->out);
        }
    }
    free(results);
    sweep_free(&args.sweep);
    return rc;
}
