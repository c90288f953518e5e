/* `tripar run`: load and check the job, build the mesh, load the model shard, generate under
 * the benchmark protocol, write the run file and print rank 0's result table. */
#include "run.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint.h"
#include "comm_setup.h"
#include "engine.h"
#include "mesh.h"
#include "model.h"
#include "prompt.h"
#include "roofline.h"
#include "runfile.h"
#include "stats.h"
#include "timing.h"

#define MAX_OVERRIDES 256

typedef struct {
    const char *job_path;
    const char *overrides[MAX_OVERRIDES];
    int n_overrides;
    const char *out;
    const char *save_checkpoint;
    int dry_run;
} run_args;

static volatile sig_atomic_t stop_requested = 0;
static void on_stop_signal(int sig) { stop_requested = sig; }

static void usage(FILE *f) {
    fprintf(f, "usage: tripar run JOB.yaml [--set SECTION.KEY=VALUE]... [--out RUN.h5]\n"
               "                  [--dry-run] [--save-checkpoint CKPT.h5]\n"
               "Runs the job under mpirun/srun: dp x tp x pp must equal the number of ranks.\n"
               "  --set K=V            override any job key (repeatable), e.g. --set parallel.tp=2\n"
               "  --out RUN.h5         run file (default: record.out of the job)\n"
               "  --dry-run            print the resolved job and the memory per rank; compute nothing\n"
               "  --save-checkpoint F  write the synthetic model to F as a tripar checkpoint\n"
               "Exit codes: 0 ok, 1 runtime failure, 2 bad usage, job, mesh or checkpoint.\n");
}

static int parse_args(run_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
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
    if (j->heads % j->tp != 0) {
        error_set("%s:%d: parallel.tp = %d does not divide model heads = %d; tensor parallelism "
                  "splits whole heads (try tp in {%s})",
                  j->source, job_key_line(j, "parallel.tp"), j->tp, j->heads,
                  j->heads % 2 == 0 ? "1, 2, ... divisors of heads" : "1 or a divisor of heads");
        return -1;
    }
    if (j->layers < j->pp) {
        error_set("%s:%d: parallel.pp = %d stages but the model has only %d layers; each stage "
                  "needs at least one layer",
                  j->source, job_key_line(j, "parallel.pp"), j->pp, j->layers);
        return -1;
    }
    if (j->batch < j->dp) {
        error_set("%s:%d: parallel.dp = %d replicas but the input has only %d prompts; each "
                  "replica needs at least one",
                  j->source, job_key_line(j, "parallel.dp"), j->dp, j->batch);
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
            double kv = 2.0 * 4.0 * g.n_layers * batch_local * (j->prompt_len + j->new_tokens) *
                        g.attn_dim;
            printf("  - {pp_rank: %d, tp_rank: %d, layers: [%d, %d), weights_mib: %.2f, "
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
                        const run_metrics *rm, const char *out_path, const int32_t *first_row) {
    int n = rm->iterations;
    double ttft = percentile_of(rm->ttft, n, 50), lat = percentile_of(rm->latency, n, 50);
    double tpot = percentile_of(rm->tpot, n, 50);
    long params = 0;
    for (int i = 0; i < e->m->n_tensors; i++) params += tensor_global_elems(&e->m->tensors[i]);
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
    printf("  %-13s %.3f s (process start to first token)\n", "cold start", rm->cold_start_seconds);
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

int run_main(int argc, char **argv, double process_start) {
    run_args args;
    int world_rank = 0, world_size = 1;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    int rc = parse_args(&args, argc, argv);
    if (rc > 0) return TRIPAR_EXIT_OK;
    if (rc < 0) return user_error(world_rank);

    job j;
    if (job_load(&j, args.job_path, args.overrides, args.n_overrides) != STATUS_OK)
        return user_error(world_rank);
    if (j.checkpoint[0]) {
        model_config ck;
        if (checkpoint_read_config(j.checkpoint, &ck) != STATUS_OK) {
            job_free(&j);
            return user_error(world_rank);
        }
        j.layers = ck.layers, j.heads = ck.heads, j.embd = ck.embd, j.vocab = ck.vocab;
        j.ctx = ck.ctx, j.mlp = ck.mlp, j.ln_eps = ck.ln_eps, j.norm = ck.norm;
        free(j.yaml); /* the resolved job records the shape the checkpoint gave */
        j.yaml = job_dump_string(&j);
    }
    if (j.synthetic_input) job_fill_synthetic_tokens(&j, j.vocab);
    tokenizer *tok = NULL;
    if (prompt_tokenize(&j, &tok) != STATUS_OK) {
        job_free(&j);
        return user_error(world_rank);
    }
    if (job_validate_model(&j) != STATUS_OK || mesh_fits_model(&j) != 0) {
        tokenizer_free(tok);
        job_free(&j);
        return user_error(world_rank);
    }
    model_config cfg;
    model_config_from_job(&cfg, &j);
    if (args.dry_run) {
        if (world_rank == 0) {
            job_dump(&j, stdout);
            print_memory_plan(&j, &cfg);
        }
        tokenizer_free(tok);
        job_free(&j);
        return TRIPAR_EXIT_OK;
    }
    if (mesh_validate(world_size, j.dp, j.tp, j.pp, j.order) != 0) {
        error_set("%s:%d: %s", j.source, job_key_line(&j, "parallel.dp"), error_message());
        tokenizer_free(tok);
        job_free(&j);
        return user_error(world_rank);
    }

    const char *out_path = args.out ? args.out : j.out;
    signal(SIGTERM, on_stop_signal);
    signal(SIGINT, on_stop_signal);

    mesh mesh;
    mesh_init(&mesh, MPI_COMM_WORLD, j.dp, j.tp, j.pp, j.order);

    backend be;
    backend_options bopt = {.threads = j.threads > 0 ? j.threads : default_threads(&mesh),
                            .device = j.device, .allow_tf32 = j.allow_tf32, .max_marks = 0};
    long steps = j.new_tokens > 0 ? j.new_tokens : 1;
    long per_step = (long)(j.microbatches) * ((long)j.layers * 16 + 16);
    long capacity = 64 + (long)(j.warmup + j.iterations) * steps * per_step;
    if (capacity > 4000000) capacity = 4000000; /* beyond this, events are counted as dropped */
    bopt.max_marks = (int)(2 * capacity);
    int bad = j.backend == BACKEND_CUDA ? backend_cuda_init(&be, &bopt) : backend_cpu_init(&be, &bopt);
    int any_bad = 0;
    MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_bad) {
        if (!bad) error_set("backend %s could not start on another rank", backend_kind_name(j.backend));
        if (bad || world_rank == 0) fprintf(stderr, "tripar: error: [rank %d host %s] %s\n",
                                            world_rank, mesh.host, error_message());
        mesh_free(&mesh);
        job_free(&j);
        return TRIPAR_EXIT_USAGE;
    }

    if (comm_setup(&mesh, &j, &be) != 0) {
        int code = user_error(world_rank);
        MPI_Finalize();
        exit(code);
    }

    timer tm;
    timer_init(&tm, j.timings, &be, capacity, MPI_COMM_WORLD);

    model m;
    memset(&m, 0, sizeof m);
    shard_geom g;
    shard_geom_init(&g, &cfg, j.tp, mesh.coord[AXIS_TP], j.pp, mesh.coord[AXIS_PP]);
    model_tensor_table(&m, &cfg, &g, weight_dtype_of(j.precision));
    model_alloc(&m, &be);
    double w0 = timer_host_seconds();
    if (j.checkpoint[0]) {
        if (checkpoint_load(&m, &be, j.checkpoint, MPI_COMM_WORLD, &mesh.axis[AXIS_TP]) != STATUS_OK) {
            int code = user_error(world_rank);
            MPI_Finalize();
            exit(code);
        }
    } else {
        model_fill_synthetic(&m, &be, j.seed, &mesh.axis[AXIS_TP]);
    }
    timer_add_host(&tm, PHASE_WEIGHT_INIT, -1, -1, TIMER_NO_LAYER, w0, timer_host_seconds());
    if (args.save_checkpoint) {
        if (checkpoint_save(&m, j.seed, args.save_checkpoint, &mesh) != STATUS_OK)
            CHECK(0, "could not write checkpoint %s: %s", args.save_checkpoint, error_message());
        if (world_rank == 0) printf("tripar: wrote checkpoint %s\n", args.save_checkpoint);
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
    int stopped = 0;
    for (int it = 0; it < j.warmup + j.iterations && !stopped; it++) {
        int measured = it - j.warmup;
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = timer_host_seconds();
        int ev = timer_begin(&tm, PHASE_ITERATION, -1, -1, TIMER_NO_LAYER);
        stopped = engine_generate(&e, measured >= 0 ? measured : -1, measured == 0);
        timer_end(&tm, ev);
        double local[2] = {e.end_time - t0, m.geom.last_stage ? e.first_token_time - t0 : 0.0};
        double global[2];
        MPI_CHECK(MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        if (it == 0) {
            double first = m.geom.last_stage ? e.first_token_time : 0.0, latest = 0.0;
            MPI_CHECK(MPI_Allreduce(&first, &latest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
            rm.cold_start_seconds = latest - process_start;
        }
        if (measured >= 0 && !stopped) {
            rm.latency[measured] = global[0];
            rm.ttft[measured] = global[1];
            rm.tpot[measured] = j.new_tokens > 1 ? (global[0] - global[1]) / (j.new_tokens - 1) : 0.0;
        }
        int flag = stop_requested != 0, any = 0;
        MPI_CHECK(MPI_Allreduce(&flag, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        stopped |= any;
    }

    /* Gather the generated tokens to rank 0 for the table (and the text output). */
    int32_t *first_row = xcalloc((size_t)e.total_len, sizeof(int32_t));
    {
        double t0 = timer_host_seconds();
        int holder = m.geom.last_stage && m.geom.tp_rank == 0 && e.seq_global_begin == 0;
        int holder_rank = holder ? world_rank : 0, src = 0;
        MPI_CHECK(MPI_Allreduce(&holder_rank, &src, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        if (holder) memcpy(first_row, e.tokens, (size_t)e.total_len * sizeof(int32_t));
        MPI_CHECK(MPI_Bcast(first_row, e.total_len, MPI_INT, src, MPI_COMM_WORLD));
        timer_add_host(&tm, PHASE_DP_GATHER, -1, -1, TIMER_NO_LAYER, t0, timer_host_seconds());
    }
    rm.prompt_tokens = (long)j.batch * j.prompt_len;
    rm.generated_tokens = (long)j.batch * j.new_tokens;
    rm.requests = j.batch;
    rm.peak_memory_bytes = (double)be.ops->peak_memory(be.ctx);
    if (j.iterations > 0) {
        rm.prefill_seconds = rm.ttft[j.iterations - 1];
        rm.decode_seconds = rm.latency[j.iterations - 1] - rm.ttft[j.iterations - 1];
    }

    engine_write_outputs(&e, rf);
    runfile_write_events(rf, &tm);
    runfile_write_metrics(rf, &rm);
    int exit_code = TRIPAR_EXIT_OK;
    if (stopped) {
        runfile_close_incomplete(rf);
        if (world_rank == 0)
            fprintf(stderr, "tripar: stopped by signal; %s.partial holds what was measured "
                            "(complete=0)\n", out_path);
        exit_code = TRIPAR_EXIT_RUNTIME;
    } else {
        runfile_finish(rf);
        if (world_rank == 0) print_table(&j, &cfg, &mesh, &e, &rm, out_path, first_row);
        if (j.roofline && world_rank == 0) {
            roofline r;
            double model_bytes = 0; /* a decode step streams every weight of every stage */
            for (int i = 0; i < m.n_tensors; i++) {
                const tensor_desc *t = &m.tensors[i];
                model_bytes += (double)tensor_global_elems(t) *
                               (t->is_matrix ? (double)dtype_size(m.weight_dtype) : 4.0);
            }
            roofline_measure(&r, &cfg, j.batch, j.prompt_len, model_bytes);
            roofline_print(&r, &rm, j.batch, j.prompt_len, j.new_tokens);
        }
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    }

    free(first_row);
    free(rm.latency);
    free(rm.ttft);
    free(rm.tpot);
    engine_free(&e);
    timer_free(&tm);
    model_free(&m, &be);
    if (j.backend == BACKEND_CUDA) backend_cuda_free(&be);
    else backend_cpu_free(&be);
    comm_teardown(&mesh);
    mesh_free(&mesh);
    tokenizer_free(tok);
    job_free(&j);
    return exit_code;
}
