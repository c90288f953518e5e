/* `tripar commbench`: times all-reduce, all-gather, send/recv, broadcast and all-to-all over the
 * mesh's TP, PP and DP communicators and the world (commbench_ops.c), or point-to-point per link
 * tier with --tiers (commbench_tiers.c), over MPI on host buffers or NCCL on device buffers,
 * verifies every result against exactly predictable values and prints nccl-tests-like columns;
 * intra-node and inter-node figures apart. This file: arguments, set-up and the command. Layout:
 * docs/benchmarks.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/path.h"
#include "cli/cli.h"
#include "cli/commbench.h"
#include "job/job.h"
#include "parallel/comm_setup.h"
#include "parallel/device.h"
#include "parallel/mesh.h"

static void cb_usage(FILE *f) {
    fprintf(f,
            "usage: mpirun -n N tripar commbench [JOB.yaml | --dp D --tp T --pp P [--order O]]\n"
            "                 [--sizes MIN:MAX | --sizes model] [--iters N] [--warmup N]\n"
            "                 [--ops allreduce,allgather,sendrecv,bcast,alltoall]\n"
            "                 [--axes tp,pp,dp,world]\n"
            "                 [--tiers] [--comm mpi|nccl] [--out FILE.h5]\n"
            "Times each operation on every group of each axis at once, sizes doubling from MIN to\n"
            "MAX bytes (suffixes K, M, G; default 8:256M), checks every result and prints size,\n"
            "count, type, time(us), algbw and busbw (GB/s) and #wrong, as nccl-tests does; each\n"
            "table closes with its mean busbw, and the run with the mean of every row (\"Avg bus\n"
            "bandwidth\"). Each axis says how many of its groups cross nodes (intra-node,\n"
            "inter-node or mixed).\n"
            "--sizes model (with a job file) times the job's own messages instead: one decode\n"
            "step's and one prefill's activations (micro-batch rows x embd floats), the size\n"
            "of every TP all-reduce and PP send of a run of that model.\n"
            "--tiers times point-to-point ping-pong instead, between rank 0 and a rank of its\n"
            "node (tier intra) and rank 0 and the first rank of another node (tier inter), and\n"
            "fits t(n) = alpha + n / beta per tier (default sizes 8:1M; at least two sizes).\n"
            "--comm nccl (or a job's backend.comm: nccl) runs over NCCL on device buffers of the\n"
            "cuda backend, one GPU per rank; default mpi on host buffers.\n"
            "The mesh comes from a job file's parallel section or from --dp/--tp/--pp (default:\n"
            "one TP group of all ranks). Exit 0 when every result is right, 1 when any is wrong,\n"
            "2 on bad usage.\n");
}

static long cb_parse_size(const char *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return -1;
    long mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = 1L << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mult = 1L << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mult = 1L << 30, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    double bytes = v * (double)mult;
    return bytes > (double)(4L << 30) ? -1 : (long)bytes;
}

static const char *cb_op_name(int op) { return CB_COLLS[op].name; }
static const char *cb_axis_name(int ax) { return CB_AXIS_NAMES[ax]; }

/* Parses a comma list of names (name(0) .. name(n - 1)) into flags; returns -1 naming the bad
 * item. */
static int cb_parse_list(const char *text, const char *(*name)(int), int n, int *flags,
                         const char *option) {
    memset(flags, 0, (size_t)n * sizeof(int));
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(tok, name(i))) found = i;
        if (found < 0) {
            char list[128] = "";
            for (int i = 0; i < n; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                         name(i));
            error_set("tripar commbench: %s: '%s' is not allowed; allowed: %s", option, tok, list);
            return -1;
        }
        flags[found] = 1;
    }
    return 0;
}

static int cb_parse_int(const char *s, int lo, int *out, const char *option) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > (1 << 24)) {
        error_set("tripar commbench: %s: expected an integer >= %d, got '%s'", option, lo, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* MIN:MAX (or one size) in bytes, 4 <= MIN <= MAX. */
static int cb_parse_sizes(const char *text, long *min_bytes, long *max_bytes) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", text);
    char *colon = strchr(buf, ':');
    if (colon) *colon = '\0';
    *min_bytes = cb_parse_size(buf);
    *max_bytes = colon ? cb_parse_size(colon + 1) : *min_bytes;
    if (*min_bytes < 4 || *max_bytes < *min_bytes) {
        error_set("tripar commbench: --sizes %s: expected MIN:MAX in bytes, 4 <= MIN <= MAX <= "
                  "4G, with K, M or G suffixes (e.g. 8:256M)",
                  text);
        return -1;
    }
    return 0;
}

static int cb_parse_args(cb_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->device = -1;
    a->min_bytes = 8, a->max_bytes = 256L << 20, a->iters = 20, a->warmup = 5;
    for (int i = 0; i < OP_COUNT; i++)
        a->ops[i] = 1;
    for (int i = 0; i < CB_AXIS_COUNT; i++)
        a->axes[i] = 1;
    snprintf(a->order, sizeof a->order, "tp-pp-dp");
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            cb_usage(stdout);
            return 1;
        } else if (!strcmp(arg, "--plant-error")) { /* hidden: proves the check catches errors */
            a->plant_error = 1;
        } else if (!strcmp(arg, "--tiers")) {
            a->tiers = 1;
        } else if (arg[0] == '-' && !val) {
            error_set("tripar commbench: unknown or incomplete option '%s' (see --help)", arg);
            return -1;
        } else if (!strcmp(arg, "--sizes") && !strcmp(val, "model")) {
            a->model_sizes = 1;
            a->sizes_given = 1;
            i++;
        } else if (!strcmp(arg, "--sizes")) {
            a->model_sizes = 0;
            a->sizes_given = 1;
            if (cb_parse_sizes(val, &a->min_bytes, &a->max_bytes)) return -1;
            i++;
        } else if (!strcmp(arg, "--iters") || !strcmp(arg, "--warmup") || !strcmp(arg, "--dp") ||
                   !strcmp(arg, "--tp") || !strcmp(arg, "--pp")) {
            int *dst = !strcmp(arg, "--iters")    ? &a->iters
                       : !strcmp(arg, "--warmup") ? &a->warmup
                       : !strcmp(arg, "--dp")     ? &a->dp
                       : !strcmp(arg, "--tp")     ? &a->tp
                                                  : &a->pp;
            if (cb_parse_int(val, !strcmp(arg, "--warmup") ? 0 : 1, dst, arg)) return -1;
            i++;
        } else if (!strcmp(arg, "--order")) {
            snprintf(a->order, sizeof a->order, "%s", val);
            i++;
        } else if (!strcmp(arg, "--ops")) {
            if (cb_parse_list(val, cb_op_name, OP_COUNT, a->ops, "--ops")) return -1;
            a->ops_given = 1;
            i++;
        } else if (!strcmp(arg, "--axes")) {
            if (cb_parse_list(val, cb_axis_name, CB_AXIS_COUNT, a->axes, "--axes")) return -1;
            a->axes_given = 1;
            i++;
        } else if (!strcmp(arg, "--comm")) {
            if (strcmp(val, "mpi") && strcmp(val, "nccl")) {
                error_set("tripar commbench: --comm: '%s' is not allowed; allowed: mpi, nccl", val);
                return -1;
            }
            a->comm = !strcmp(val, "nccl") ? CB_COMM_NCCL : CB_COMM_MPI;
            a->comm_given = 1;
            i++;
        } else if (!strcmp(arg, "--out")) {
            a->out = val;
            i++;
        } else if (arg[0] == '-') {
            error_set("tripar commbench: unknown option '%s' (see --help)", arg);
            return -1;
        } else if (!a->job_path) {
            a->job_path = arg;
        } else {
            error_set("tripar commbench: more than one job file given");
            return -1;
        }
    }
    if (a->model_sizes && !a->job_path) {
        error_set("tripar commbench: --sizes model needs a job file (its model and input give "
                  "the sizes)");
        return -1;
    }
    if (a->tiers && (a->ops_given || a->axes_given)) {
        error_set("tripar commbench: --tiers times point-to-point between chosen pairs of ranks; "
                  "--ops and --axes choose collectives and do not apply to it");
        return -1;
    }
    if (a->tiers && !a->sizes_given) a->max_bytes = 1L << 20; /* ping-pong: 8 B to 1 MiB */
    for (long bytes = a->min_bytes; bytes <= a->max_bytes && a->n_sizes < CB_SIZES_MAX; bytes *= 2)
        a->sizes[a->n_sizes++] = bytes;
    return 0;
}

/* --sizes model: the messages a run of job j sends, whatever the architecture. Every TP
 * all-reduce (after attention's output projection and after the MLP's down projection, one
 * each per layer) and every PP send carries one micro-batch's activations, rows x embd floats:
 * prompt length rows at prefill, one row per sequence at a decode step. A Llama's grouped
 * kv heads and its SwiGLU width stay inside a rank, so only embd, the batch split and the
 * prompt length size its messages. -1 with error_message() set when the job does not say them
 * (a checkpoint's shape is known only once the file is read). */
static int cb_model_sizes(cb_args *a, const job *j) {
    if (j->embd <= 0 || j->batch <= 0 || j->prompt_len <= 0) {
        error_set("tripar commbench: --sizes model: %s does not give the model's embd and the "
                  "prompt's batch and length before a run (a checkpoint or a text input); use "
                  "--sizes MIN:MAX",
                  a->job_path);
        return -1;
    }
    long per_replica = (j->batch + j->dp - 1) / j->dp;
    int mb = j->microbatches > 0 ? j->microbatches : 1;
    long rows = (per_replica + mb - 1) / mb; /* sequences in the largest micro-batch */
    a->sizes[0] = rows * j->embd * 4;
    a->sizes[1] = rows * j->prompt_len * j->embd * 4;
    a->n_sizes = a->sizes[1] > a->sizes[0] ? 2 : 1;
    a->min_bytes = a->sizes[0];
    a->max_bytes = a->sizes[a->n_sizes - 1];
    snprintf(a->sizes_note, sizeof a->sizes_note,
             "# sizes from the job's model (%s, embd %d): decode step %ld B = %ld x %d x 4, "
             "prefill %ld B = %ld x %d x %d x 4\n",
             arch_kind_name(j->arch), j->embd, a->sizes[0], rows, j->embd, a->sizes[1], rows,
             j->prompt_len, j->embd);
    return 0;
}

/* The mesh of a job file, or of --dp/--tp/--pp (default: one TP group of all ranks), checked
 * against the world size. -1 with error_message() set when it cannot be used. */
static int cb_mesh_resolve(cb_args *a, int world) {
    if (a->job_path) {
        job j;
        if (job_load(&j, a->job_path, NULL, 0) != STATUS_OK) return -1;
        a->dp = j.dp, a->tp = j.tp, a->pp = j.pp;
        snprintf(a->order, sizeof a->order, "%s", j.order);
        snprintf(a->job_inputs[0], JOB_PATH_MAX, "%s", j.checkpoint);
        snprintf(a->job_inputs[1], JOB_PATH_MAX, "%s", j.tokens_file);
        snprintf(a->job_inputs[2], JOB_PATH_MAX, "%s", j.text_file);
        if (!a->comm_given) a->comm = j.comm == COMM_NCCL ? CB_COMM_NCCL : CB_COMM_MPI;
        a->device = j.device;
        int bad = a->model_sizes && cb_model_sizes(a, &j) != 0;
        job_free(&j);
        if (bad) return -1;
    }
    if (a->tiers && world < 2) {
        error_set("tripar commbench: --tiers times pairs of ranks and needs at least 2; "
                  "launch it with mpirun -n 2 or more");
        return -1;
    }
    if (a->tiers && a->n_sizes < 2) {
        error_set("tripar commbench: --tiers fits alpha and beta over sizes and needs at least "
                  "two; give --sizes MIN:MAX with MIN < MAX");
        return -1;
    }
    if (!a->dp && !a->tp && !a->pp) a->tp = world;
    a->dp = a->dp ? a->dp : 1, a->tp = a->tp ? a->tp : 1, a->pp = a->pp ? a->pp : 1;
    return mesh_validate(world, a->dp, a->tp, a->pp, a->order) != 0 ? -1 : 0;
}

/* --out is checked before anything is measured (docs/cli.md): a regular file in an existing
 * directory that is none of the inputs. Rank 0 decides for every rank. 0, or -1 with
 * error_message() set on rank 0. */
static int cb_out_check(const cb_args *a, int rank) {
    int bad = 0;
    if (rank == 0 && a->out) {
        char why[PATH_WHY_MAX];
        const char *inputs[4] = {a->job_path, a->job_inputs[0], a->job_inputs[1], a->job_inputs[2]};
        int which = -1;
        if (path_check_output(a->out, why, sizeof why) != 0) {
            error_set("--out '%s' %s", a->out, why);
            bad = 1;
        } else if (path_is_any_of(a->out, inputs, 4, &which)) {
            error_set("--out '%s' is the same file as '%s', an input of the job; an output may "
                      "not replace an input, so give it another path",
                      a->out, inputs[which]);
            bad = 1;
        }
    }
    MPI_CHECK(MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return bad ? -1 : 0;
}

/* Over NCCL: the cuda backend on this rank's device (every rank must start, or all exit 2
 * with the reason, as `tripar run` does), NCCL on TP and PP through comm_setup (which refuses
 * a shared GPU), and NCCL of commbench's own on DP and the world, which a run keeps on MPI.
 * Returns 0, or TRIPAR_EXIT_USAGE with the message printed. */
static int cb_nccl_start(cb_bench *b, const cb_args *a) {
    backend_options opt = {.threads = 1, .device = device_select(&b->m, a->device)};
    int bad = backend_init(&b->be, "cuda", &opt) != 0, n_bad = 0;
    int first_bad = bad ? b->rank : b->world_size;
    MPI_CHECK(MPI_Allreduce(&bad, &n_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    b->have_backend = !bad;
    if (n_bad) { /* once, by the first rank that failed, for all of them */
        if (b->rank == first_bad)
            fprintf(stderr,
                    "tripar: error: [rank %d host %s] commbench --comm nccl needs the cuda "
                    "backend, one GPU per rank: %s (%d of %d ranks could not start it)\n",
                    b->rank, b->m.host, error_message(), n_bad, b->world_size);
        return TRIPAR_EXIT_USAGE;
    }
    device_record(&b->m, opt.device);
    comm_plan plan = {.choice = COMM_CHOICE_NCCL,
                      .choice_name = "nccl",
                      .choice_origin = a->comm_given ? "--comm" : a->job_path,
                      .max_message_bytes = (size_t)a->max_bytes,
                      .microbatches = 1};
    if (comm_setup(&b->m, &plan, &b->be) != 0) {
        if (b->rank == 0) fprintf(stderr, "tripar: error: %s\n", error_message());
        return TRIPAR_EXIT_USAGE;
    }
    b->have_comms = 1;
    void *stream = b->be.ops->stream(b->be.ctx);
    if (comm_nccl_init(&b->nccl_dp, b->m.axis_mpi[AXIS_DP], stream) != 0 ||
        comm_nccl_init(&b->nccl_world, b->m.world, stream) != 0) {
        if (b->rank == 0) fprintf(stderr, "tripar: error: %s\n", error_message());
        return TRIPAR_EXIT_USAGE;
    }
    b->axes[CB_AXIS_DP] = &b->nccl_dp;
    b->axes[CB_AXIS_WORLD] = &b->nccl_world;
    return TRIPAR_EXIT_OK;
}

/* The mesh, the comms of the chosen kind and the buffers for the largest operation (an
 * all-gather's output of max_bytes), so nothing is allocated while timing. Returns 0, or
 * TRIPAR_EXIT_USAGE (on every rank) when NCCL cannot start; cb_bench_free cleans up either
 * way. */
static int cb_bench_init(cb_bench *b, const cb_args *a) {
    memset(b, 0, sizeof *b);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &b->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &b->world_size));
    /* --order auto refuses a tp that fits no node, which only the built mesh can tell: the same
     * answer on every rank, printed once */
    if (mesh_try_init(&b->m, MPI_COMM_WORLD, a->dp, a->tp, a->pp, a->order) != 0) {
        if (b->rank == 0) fprintf(stderr, "tripar: error: %s\n", error_message());
        return TRIPAR_EXIT_USAGE;
    }
    b->comm = a->comm;
    b->axes[CB_AXIS_TP] = &b->m.axis[AXIS_TP];
    b->axes[CB_AXIS_PP] = &b->m.axis[AXIS_PP];
    b->axes[CB_AXIS_DP] = &b->m.axis[AXIS_DP];
    b->axes[CB_AXIS_WORLD] = &b->m.world_host;
    const size_t bytes = ((size_t)(a->max_bytes / 4) + 1) * sizeof(float);
    b->hsend = xcalloc(1, bytes);
    b->hrecv = xcalloc(1, bytes);
    b->rows = xcalloc((size_t)a->n_sizes * OP_COUNT * CB_AXIS_COUNT + 1, sizeof(cb_row));
    b->peers = xcalloc(2 * (size_t)b->world_size, sizeof *b->peers);
    if (a->comm == CB_COMM_MPI) {
        mesh_attach_mpi(&b->m); /* MPI on every axis and world_host */
        b->send = b->hsend, b->recv = b->hrecv;
        return TRIPAR_EXIT_OK;
    }
    int code = cb_nccl_start(b, a);
    if (code != TRIPAR_EXIT_OK) return code;
    b->send = b->be.ops->alloc(b->be.ctx, bytes);
    b->recv = b->be.ops->alloc(b->be.ctx, bytes);
    return TRIPAR_EXIT_OK;
}

static void cb_bench_free(cb_bench *b) {
    if (b->have_backend && b->send != b->hsend) {
        if (b->send) b->be.ops->release(b->be.ctx, b->send);
        if (b->recv) b->be.ops->release(b->be.ctx, b->recv);
    }
    comm_free(&b->nccl_dp);
    comm_free(&b->nccl_world);
    if (b->have_comms) comm_teardown(&b->m);
    if (b->have_backend) backend_free(&b->be);
    mesh_free(&b->m); /* frees what mesh_attach_mpi attached */
    free(b->samples);
    free(b->places);
    free(b->rows);
    free(b->peers);
    free(b->hsend);
    free(b->hrecv);
}

/* Rank 0 writes --out; every rank learns whether it worked. Returns 1 when it did (or no
 * file was asked for). */
static int cb_results_save(const cb_bench *b, const cb_args *a) {
    int write_ok = 1;
    if (a->out && b->rank == 0) {
        write_ok = cb_write(a->out, b, a) == 0;
        if (!write_ok)
            fprintf(stderr, "tripar: error: %s\n", error_message());
        else
            printf("# wrote %s\n", a->out);
    }
    MPI_CHECK(MPI_Bcast(&write_ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return write_ok;
}

int commbench_main(int argc, char **argv) {
    int rank = 0, world = 1;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    cb_args a;
    int rc = cb_parse_args(&a, argc, argv);
    if (rc > 0) return TRIPAR_EXIT_OK;
    if (rc == 0) rc = cb_mesh_resolve(&a, world);
    if (rc == 0) rc = cb_out_check(&a, rank);
    if (rc < 0) {
        if (rank == 0) fprintf(stderr, "tripar: error: %s\n", error_message());
        return TRIPAR_EXIT_USAGE;
    }

    cb_bench b;
    int code = cb_bench_init(&b, &a);
    if (code != TRIPAR_EXIT_OK) {
        cb_bench_free(&b);
        return code;
    }
    cb_nodes_measure(&b);
    if (rank == 0)
        printf("# tripar commbench: %d ranks on %d node%s, mesh dp=%d tp=%d pp=%d (%s), comm %s "
               "(%s buffers), %d iters after %d warm-up, float32\n#\n",
               world, b.m.node_count, b.m.node_count == 1 ? "" : "s", a.dp, a.tp, a.pp,
               b.m.order_text, a.comm == CB_COMM_NCCL ? "nccl" : "mpi",
               b.have_backend ? "device" : "host", a.iters, a.warmup);
    cb_nodes_print(&b);
    if (rank == 0 && a.sizes_note[0]) printf("%s#\n", a.sizes_note);
    if (a.tiers)
        cb_tiers_run(&b, &a);
    else
        for (int ax = 0; ax < CB_AXIS_COUNT; ax++)
            if (a.axes[ax]) cb_run_axis(&b, &a, ax);
    if (rank == 0)
        printf("#\n# #wrong total: %ld%s\n", b.wrong_total, b.wrong_total ? "  FAILED" : "");
    /* nccl-tests closes with the mean busbw of its rows; --tiers has no busbw, its fits are
     * its summary */
    if (rank == 0 && b.n_rows > 0)
        printf("# Avg bus bandwidth : %.6g GB/s, the mean busbw of the %ld rows above\n",
               cb_rows_busbw_mean(b.rows, b.n_rows), b.n_rows);
    int write_ok = cb_results_save(&b, &a);
    long wrong_total = b.wrong_total;
    cb_bench_free(&b);
    if (!write_ok) return TRIPAR_EXIT_USAGE;
    return wrong_total ? TRIPAR_EXIT_RUNTIME : TRIPAR_EXIT_OK;
}
