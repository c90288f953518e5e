/* `tripar run`: the command line and the sequence of one run: resolve the job, build the run
 * context (mesh, backend, comms, model, engine), measure, record. A sweep repeats the sequence
 * per point after checking every point first. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "cli/cli.h"
#include "cli/run_context.h"
#include "io/runfile_pad.h"
#include "parallel/agree.h"
#include "parallel/mesh.h"
#include "parallel/watchdog.h"

static volatile sig_atomic_t stop_requested = 0;

/* A stop is agreed through the ranks' vote (docs/design.md). A peer that is gone (its node lost,
 * its process stopped) never votes, and a rank waiting on it would wait until the launcher's
 * SIGKILL (Slurm's KillWait: 30 s by default). So from the first signal each rank allows itself
 * stop_grace_seconds (record.stop_grace_seconds) to finish the generation it is in; past that it
 * leaves by itself. The line it prints is made before the handlers go in: a handler may only
 * write(2) it. Armed while the run is built and measured, not while it records: writing the
 * results after an agreed stop may take as long as it takes. */
static volatile sig_atomic_t stop_grace_armed = 0;
static unsigned stop_grace_seconds;
static char stop_overdue_line[320];
static size_t stop_overdue_len;

static void on_stop_signal(int sig) {
    if (!stop_requested && stop_grace_armed && stop_grace_seconds) alarm(stop_grace_seconds);
    stop_requested = sig;
}

/* _exit, not MPI_Abort: a signal handler may call only async-signal-safe functions, and
 * MPI_Abort could wait on a lock the interrupted MPI call holds. The launcher then ends the
 * other ranks; the partial run file keeps what was flushed, complete = 0. */
static void on_stop_overdue(int sig) {
    (void)sig;
    runfile_pad_on_exit(); /* the flush this rank left may have stored an end not yet written */
    if (write(STDERR_FILENO, stop_overdue_line, stop_overdue_len) < 0) _exit(TRIPAR_EXIT_RUNTIME);
    _exit(TRIPAR_EXIT_RUNTIME);
}

static void stop_grace_arm(const job *j) {
    stop_grace_seconds = (unsigned)j->stop_grace_seconds;
    int n = snprintf(stop_overdue_line, sizeof stop_overdue_line,
                     "[rank %d host %s] tripar: error: not stopped %u s after the signal (a peer "
                     "that no longer answers?); leaving now (record.stop_grace_seconds); a "
                     "partial run file, once created, keeps what was flushed, complete = 0\n",
                     tripar_world_rank(), tripar_host(), stop_grace_seconds);
    if (n < 0) n = 0;
    /* snprintf says how long the line would have been: a cut line is the buffer less its NUL */
    stop_overdue_len =
        (size_t)n < sizeof stop_overdue_line ? (size_t)n : sizeof stop_overdue_line - 1;
    signal(SIGALRM, on_stop_overdue);
    stop_grace_armed = 1;
}

static void stop_grace_disarm(void) {
    stop_grace_armed = 0;
    alarm(0);
}

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

/* help_out: where --help prints the usage; NULL for the early read before MPI_Init
 * (run_read_early), so the usage is printed once, by run_main. */
static int parse_args(run_args *a, int argc, char **argv, FILE *help_out) {
    memset(a, 0, sizeof *a);
    sweep_init(&a->sweep);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            if (help_out) usage(help_out);
            return 1;
        } else if (!strcmp(arg, "--set") && i + 1 < argc) {
            if (a->n_overrides == RUN_MAX_OVERRIDES) {
                error_set("too many --set options (at most %d)", RUN_MAX_OVERRIDES);
                return -1;
            }
            a->overrides[a->n_overrides++] = argv[++i];
        } else if (!strncmp(arg, "--set=", 6)) {
            if (a->n_overrides < RUN_MAX_OVERRIDES) a->overrides[a->n_overrides++] = arg + 6;
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

/* Resolves the job of one sweep point, checks the mesh against the world, names the run file
 * and checks the point's files (run_files_check), so a bad output path costs no model set-up.
 * Fills files when given. Returns an exit code (the reason printed once). */
static int run_plan(run_context *rc, const run_args *a, long point, run_files *files) {
    if (run_job_resolve(a, point, &rc->j, &rc->tok) != STATUS_OK) return run_user_error();
    model_config_from_job(&rc->cfg, &rc->j);
    if (a->dry_run) return TRIPAR_EXIT_OK; /* plans any mesh, whatever the world size */
    const int world_size = agree_comm_size(MPI_COMM_WORLD);
    const job *j = &rc->j;
    if (mesh_validate(world_size, j->dp, j->tp, j->pp, j->order) != 0) {
        char reason[1024], where[256];
        snprintf(reason, sizeof reason, "%s", error_message());
        error_set("%s: %s", job_key_origin(j, "parallel.dp", where, sizeof where), reason);
        return run_user_error();
    }
    /* auto's tp must fit inside a node: known here already, so a sweep refuses such a point
     * before its first point computes (run_context_build's mesh_try_init would only find it
     * when that point's turn came) */
    if (mesh_layout_check(MPI_COMM_WORLD, j->dp, j->tp, j->pp, j->order) != 0) {
        char reason[2048], where[256];
        snprintf(reason, sizeof reason, "%s", error_message());
        error_set("%s: %s", job_key_origin(j, "parallel.order", where, sizeof where), reason);
        return run_user_error();
    }
    if (sweep_point_path(&a->sweep, point, a->out ? a->out : j->out, rc->out_path,
                         sizeof rc->out_path) != 0) {
        error_set("run file name of sweep point %ld is too long", point);
        return run_user_error();
    }
    run_files own;
    if (!files) files = &own;
    memset(files, 0, sizeof *files);
    snprintf(files->out, sizeof files->out, "%s", rc->out_path);
    snprintf(files->inputs[RUN_INPUT_JOB], JOB_PATH_MAX, "%s", a->job_path);
    snprintf(files->inputs[RUN_INPUT_CHECKPOINT], JOB_PATH_MAX, "%s", j->checkpoint);
    snprintf(files->inputs[RUN_INPUT_TOKENS], JOB_PATH_MAX, "%s", j->tokens_file);
    snprintf(files->inputs[RUN_INPUT_TEXT], JOB_PATH_MAX, "%s", j->text_file);
    return run_files_check(a, files, 1);
}

/* One run: the job with the --set overrides and then those of sweep point `point`, written to
 * that point's run file. process_start is when this run began (the process start for the
 * first run), for the cold-start time. With check_only it stops once the job and mesh are
 * known to be valid, so a sweep reports a bad point before computing any (and fills files
 * when given). MPI stays initialised. */
static int run_one(const run_args *a, long point, double process_start, int check_only,
                   run_point *result, run_files *files) {
    run_context rc;
    memset(&rc, 0, sizeof rc);
    int code = run_plan(&rc, a, point, files);
    if (code == TRIPAR_EXIT_OK && a->dry_run && tripar_world_rank() == 0) {
        job_dump(&rc.j, stdout);
        run_print_memory_plan(&rc.j, &rc.cfg);
    }
    if (code == TRIPAR_EXIT_OK && check_only && result)
        snprintf(result->out, sizeof result->out, "%s", rc.out_path);
    if (code == TRIPAR_EXIT_OK && !a->dry_run && !check_only) {
        stop_grace_arm(&rc.j);
        signal(SIGTERM, on_stop_signal);
        signal(SIGINT, on_stop_signal);
        code = run_context_build(&rc, a, &stop_requested);
        if (code == TRIPAR_EXIT_OK) {
            /* from here every rank only computes and communicates: a peer that stops
             * answering ends the run (record.stall_seconds) */
            watch_start(rc.j.stall_seconds);
            run_metrics rm;
            serve_result stream;
            int stopped = run_measure(&rc, &rm, &stream, process_start, &stop_requested);
            stop_grace_disarm(); /* every rank agreed on the stop, or there was none */
            code = run_record(&rc, &rm, &stream, stopped, result);
            free(rm.latency);
            free(rm.ttft);
            free(rm.tpot);
            free(rm.itl);
            serve_result_free(&stream);
            watch_stop(); /* back to guarding set-up: a sweep's next point, MPI_Finalize */
        }
        stop_grace_disarm();
    }
    run_context_free(&rc);
    return code;
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
static int sweep_check_paths(const sweep *spec, const run_point *results, long points) {
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
    return run_user_error();
}

/* Whether a job's TP all-reduces are MPI's and overlapped, with tripar asked to tune MPI for
 * it: the CPU backend's, or CUDA's with backend.comm: mpi (NCCL's are not MPI's). */
static int wants_mpi_tuning(const job *j) {
    const int tp_on_mpi = j->backend == BACKEND_CPU || j->comm == COMM_MPI;
    return j->mpi_tuning && j->overlap && j->tp > 1 && tp_on_mpi;
}

run_early run_read_early(int argc, char **argv) {
    run_early early = {.stall_seconds = JOB_STALL_SECONDS_DEFAULT, .tune_mpi = 0};
    run_args args;
    if (parse_args(&args, argc, argv, NULL) != 0) {
        sweep_free(&args.sweep);
        return early;
    }
    /* the first point's watchdog; the MPI tuning for any point that wants it, since MPI is
     * set up once for every point of a sweep */
    const long points = sweep_points(&args.sweep);
    for (long p = 0; p < points; p++) {
        job j;
        memset(&j, 0, sizeof j);
        if (run_job_load_point(&args, p, &j) == STATUS_OK) {
            if (p == 0 && j.stall_seconds >= 0) early.stall_seconds = j.stall_seconds;
            early.tune_mpi |= wants_mpi_tuning(&j);
        }
        job_free(&j);
    }
    sweep_free(&args.sweep);
    return early;
}

int run_main(int argc, char **argv, double process_start) {
    run_args args;
    const int world_rank = agree_comm_rank(MPI_COMM_WORLD);
    int rc = parse_args(&args, argc, argv, stdout);
    if (rc != 0) {
        sweep_free(&args.sweep);
        return rc > 0 ? TRIPAR_EXIT_OK : run_user_error();
    }
    long points = sweep_points(&args.sweep);
    if (args.sweep.n_axes == 0) {
        rc = run_one(&args, 0, process_start, 0, NULL, NULL);
        sweep_free(&args.sweep);
        return rc;
    }
    /* every point is checked before any computes, so a bad value costs no compute */
    run_point *results = xcalloc((size_t)points, sizeof(run_point));
    run_files *files = xcalloc((size_t)points, sizeof(run_files));
    for (long p = 0; p < points && !args.dry_run && rc == TRIPAR_EXIT_OK; p++)
        rc = run_one(&args, p, process_start, 1, &results[p], &files[p]);
    if (rc == TRIPAR_EXIT_OK && !args.dry_run) rc = sweep_check_paths(&args.sweep, results, points);
    /* one point's run file must not be another point's input either */
    if (rc == TRIPAR_EXIT_OK && !args.dry_run) rc = run_files_check(&args, files, points);
    free(files);
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
        rc = run_one(&args, p, p == 0 ? process_start : timer_host_seconds(), 0, &results[p], NULL);
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
