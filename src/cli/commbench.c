/* `tripar commbench`: times all-reduce, all-gather, send/recv and broadcast over the mesh's TP,
 * PP and DP communicators and the world, verifies every result against exactly predictable
 * values, and prints nccl-tests-like columns (algbw, busbw, #wrong). Layout: docs/benchmarks.md. */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/path.h"
#include "io/h5util.h"
#include "job/job.h"
#include "parallel/mesh.h"
#include "metrics/timing.h"
#include "cli/cli.h"

enum { OP_ALLREDUCE = 0, OP_ALLGATHER, OP_SENDRECV, OP_BCAST, OP_COUNT };
static const char *const OP_NAMES[] = {"allreduce", "allgather", "sendrecv", "bcast"};
enum { CB_AXIS_TP = 0, CB_AXIS_PP, CB_AXIS_DP, CB_AXIS_WORLD, CB_AXIS_COUNT };
static const char *const AXIS_NAMES[] = {"tp", "pp", "dp", "world"};

enum { CB_SIZES_MAX = 40 }; /* 8 B doubling to 4 GiB is 30 sizes */
typedef struct {
    long min_bytes, max_bytes;
    int model_sizes;          /* --sizes model: the job's own message sizes (cb_model_sizes) */
    long sizes[CB_SIZES_MAX]; /* the sizes timed, ascending */
    int n_sizes;
    char sizes_note[200]; /* where model sizes come from, printed in the header */
    int iters, warmup;
    int ops[OP_COUNT], axes[CB_AXIS_COUNT];
    int dp, tp, pp;
    char order[16];
    const char *job_path, *out;
    /* what the job file names (model.checkpoint, input.tokens_file, input.text_file; "" when
     * unused): inputs --out may not replace */
    char job_inputs[3][JOB_PATH_MAX];
    int plant_error;
} cb_args;

/* One row of the table and of /commbench/results (packed in the file). */
typedef struct {
    char op[16];
    char axis[8];
    int32_t ranks;
    int64_t size_bytes, count;
    char type[8];
    double time_us, algbw_gbs, busbw_gbs;
    int64_t wrong;
} cb_row;

static void cb_usage(FILE *f) {
    fprintf(f,
            "usage: mpirun -n N tripar commbench [JOB.yaml | --dp D --tp T --pp P [--order O]]\n"
            "                 [--sizes MIN:MAX | --sizes model] [--iters N] [--warmup N]\n"
            "                 [--ops allreduce,allgather,sendrecv,bcast] [--axes tp,pp,dp,world]\n"
            "                 [--out FILE.h5]\n"
            "Times each operation on every group of each axis at once, sizes doubling from MIN to\n"
            "MAX bytes (suffixes K, M, G; default 8:256M), checks every result and prints size,\n"
            "count, type, time(us), algbw and busbw (GB/s) and #wrong, as nccl-tests does.\n"
            "--sizes model (with a job file) times the job's own messages instead: one decode\n"
            "step's and one prefill's activations (micro-batch rows x embd floats), the size\n"
            "of every TP all-reduce and PP send of a run of that model.\n"
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

/* Parses a comma list of names into flags; returns -1 naming the bad item. */
static int cb_parse_list(const char *text, const char *const *names, int n, int *flags,
                         const char *option) {
    memset(flags, 0, (size_t)n * sizeof(int));
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(tok, names[i])) found = i;
        if (found < 0) {
            char list[128] = "";
            for (int i = 0; i < n; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                         names[i]);
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
        } else if (arg[0] == '-' && !val) {
            error_set("tripar commbench: unknown or incomplete option '%s' (see --help)", arg);
            return -1;
        } else if (!strcmp(arg, "--sizes") && !strcmp(val, "model")) {
            a->model_sizes = 1;
            i++;
        } else if (!strcmp(arg, "--sizes")) {
            a->model_sizes = 0;
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
            if (cb_parse_list(val, OP_NAMES, OP_COUNT, a->ops, "--ops")) return -1;
            i++;
        } else if (!strcmp(arg, "--axes")) {
            if (cb_parse_list(val, AXIS_NAMES, CB_AXIS_COUNT, a->axes, "--axes")) return -1;
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

/* The exact values each operation should produce; small integers, so float sums are exact. */
static float cb_value(int rank, long i) { return (float)((rank + 1) * (int)(1 + i % 13)); }

static void cb_fill(int op, float *send, float *recv, long count, int rank, int size) {
    switch (op) {
    case OP_ALLREDUCE:
        for (long i = 0; i < count; i++)
            recv[i] = cb_value(rank, i);
        break;
    case OP_ALLGATHER: /* count elements per rank */
        for (long i = 0; i < count; i++)
            send[i] = cb_value(rank, i);
        for (long i = 0; i < count * size; i++)
            recv[i] = -1.0f;
        break;
    case OP_SENDRECV:
        for (long i = 0; i < count; i++)
            send[i] = cb_value(rank, i), recv[i] = -1.0f;
        break;
    case OP_BCAST:
        for (long i = 0; i < count; i++)
            recv[i] = rank == 0 ? cb_value(0, i) : -1.0f;
        break;
    }
}

static long cb_check(int op, const float *recv, long count, int rank, int size) {
    long wrong = 0;
    switch (op) {
    case OP_ALLREDUCE: {
        float ranks_sum = (float)(size * (size + 1) / 2);
        for (long i = 0; i < count; i++)
            wrong += recv[i] != ranks_sum * (float)(1 + i % 13);
        break;
    }
    case OP_ALLGATHER:
        for (int r = 0; r < size; r++)
            for (long i = 0; i < count; i++)
                wrong += recv[(long)r * count + i] != cb_value(r, i);
        break;
    case OP_SENDRECV: {
        int from = (rank - 1 + size) % size;
        for (long i = 0; i < count; i++)
            wrong += recv[i] != cb_value(from, i);
        break;
    }
    case OP_BCAST:
        for (long i = 0; i < count; i++)
            wrong += recv[i] != cb_value(0, i);
        break;
    }
    return wrong;
}

/* One operation of count elements (allgather: count per rank) on comm c. Send/recv is a ring
 * shift: each rank sends to the next and receives from the previous, all at once. */
static void cb_run_op(comm *c, int op, float *send, float *recv, long count) {
    switch (op) {
    case OP_ALLREDUCE: c->ops->allreduce_sum(c->ctx, recv, (size_t)count); break;
    case OP_ALLGATHER: c->ops->allgather(c->ctx, recv, send, (size_t)count, COMM_FLOAT); break;
    case OP_SENDRECV: {
        comm_req rs = {0}, rr = {0};
        int next = (c->rank + 1) % c->size, prev = (c->rank - 1 + c->size) % c->size;
        c->ops->irecv(c->ctx, recv, (size_t)count, COMM_FLOAT, prev, 7, &rr);
        c->ops->isend(c->ctx, send, (size_t)count, COMM_FLOAT, next, 7, &rs);
        comm_wait(c, &rr);
        comm_wait(c, &rs);
        break;
    }
    case OP_BCAST: c->ops->bcast(c->ctx, recv, (size_t)count, COMM_FLOAT, 0); break;
    }
}

/* nccl-tests' bus bandwidth factors: what each link carries relative to the buffer size. */
static double cb_bus_factor(int op, int n) {
    switch (op) {
    case OP_ALLREDUCE: return 2.0 * (n - 1) / n;
    case OP_ALLGATHER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

static hid_t cb_row_type(void) {
    hid_t s16 = h5_string_type(16), s8 = h5_string_type(8);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(cb_row));
    H5Tinsert(t, "op", HOFFSET(cb_row, op), s16);
    H5Tinsert(t, "axis", HOFFSET(cb_row, axis), s8);
    H5Tinsert(t, "ranks", HOFFSET(cb_row, ranks), H5T_NATIVE_INT32);
    H5Tinsert(t, "size_bytes", HOFFSET(cb_row, size_bytes), H5T_NATIVE_INT64);
    H5Tinsert(t, "count", HOFFSET(cb_row, count), H5T_NATIVE_INT64);
    H5Tinsert(t, "type", HOFFSET(cb_row, type), s8);
    H5Tinsert(t, "time_us", HOFFSET(cb_row, time_us), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "algbw_gbs", HOFFSET(cb_row, algbw_gbs), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "busbw_gbs", HOFFSET(cb_row, busbw_gbs), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "wrong", HOFFSET(cb_row, wrong), H5T_NATIVE_INT64);
    H5Tclose(s16);
    H5Tclose(s8);
    return t;
}

/* Rank 0 writes the table serially (the other ranks have nothing of their own to add). */
static int cb_write(const char *path, const cb_row *rows, long n, const mesh *m, const cb_args *a) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t f;
    H5E_BEGIN_TRY { f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl); }
    H5E_END_TRY;
    H5Pclose(fapl);
    if (f < 0) {
        error_set("%s: cannot create the commbench file", path);
        return -1;
    }
    h5_attr_write_string(f, "format", "tripar-commbench");
    h5_attr_write_int(f, "format_version", 1);
    h5_attr_write_string(f, "tripar_version", TRIPAR_VERSION);
    h5_attr_write_int(f, "world_size", m->world_size);
    h5_attr_write_int(f, "dp", MESH_DP(m));
    h5_attr_write_int(f, "tp", MESH_TP(m));
    h5_attr_write_int(f, "pp", MESH_PP(m));
    h5_attr_write_string(f, "order", m->order_text);
    h5_attr_write_int(f, "iters", a->iters);
    h5_attr_write_int(f, "warmup", a->warmup);
    h5_attr_write_string(f, "comm", "mpi");
    hid_t mtype = cb_row_type(), ftype = H5Tcopy(mtype);
    H5Tpack(ftype);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t d = H5Dcreate2(f, "commbench/results", ftype, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(d);
    if (n > 0) H5_CHECK(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows));
    long long wrong = 0;
    for (long i = 0; i < n; i++)
        wrong += rows[i].wrong;
    h5_attr_write_int(f, "wrong_total", wrong);
    H5Dclose(d);
    H5Pclose(lcpl);
    H5Sclose(space);
    H5Tclose(ftype);
    H5Tclose(mtype);
    H5_CHECK(H5Fclose(f));
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
        int bad = a->model_sizes && cb_model_sizes(a, &j) != 0;
        job_free(&j);
        if (bad) return -1;
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

/* What a run holds: the mesh and its axes' communicators, buffers for the largest operation
 * and the table, so the loop over operations allocates nothing. */
typedef struct {
    int rank, world_size;
    mesh m;
    comm *axes[CB_AXIS_COUNT];
    float *send, *recv; /* (max_bytes/4 + 1) */
    cb_row *rows;       /* (sizes * OP_COUNT * CB_AXIS_COUNT + 1) */
    long n_rows, wrong_total;
} cb_bench;

static void cb_bench_init(cb_bench *b, const cb_args *a) {
    memset(b, 0, sizeof *b);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &b->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &b->world_size));
    mesh_init(&b->m, MPI_COMM_WORLD, a->dp, a->tp, a->pp, a->order);
    mesh_attach_mpi(&b->m);
    b->axes[CB_AXIS_TP] = &b->m.axis[AXIS_TP];
    b->axes[CB_AXIS_PP] = &b->m.axis[AXIS_PP];
    b->axes[CB_AXIS_DP] = &b->m.axis[AXIS_DP];
    b->axes[CB_AXIS_WORLD] = &b->m.world_host; /* mesh_attach_mpi attached it */
    /* the largest buffer: an all-gather's output of max_bytes */
    long max_count = a->max_bytes / 4;
    b->send = xcalloc((size_t)max_count + 1, sizeof(float));
    b->recv = xcalloc((size_t)max_count + 1, sizeof(float));
    long max_rows = 0;
    max_rows = (long)a->n_sizes * OP_COUNT * CB_AXIS_COUNT;
    b->rows = xcalloc((size_t)max_rows + 1, sizeof(cb_row));
}

static void cb_bench_free(cb_bench *b) {
    free(b->rows);
    free(b->send);
    free(b->recv);
    mesh_free(&b->m);
}

/* Seconds per operation of the slowest rank, over iters after warmup. */
static double cb_time_op(const cb_bench *b, const cb_args *a, comm *c, int op, long count) {
    cb_fill(op, b->send, b->recv, count, c->rank, c->size);
    for (int it = 0; it < a->warmup; it++)
        cb_run_op(c, op, b->send, b->recv, count);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = timer_host_seconds();
    for (int it = 0; it < a->iters; it++)
        cb_run_op(c, op, b->send, b->recv, count);
    double mine = (timer_host_seconds() - t0) / a->iters, slowest = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return slowest;
}

/* Wrong elements over all ranks of one more run. Repeated all-reduces grow the data, so the
 * checked run starts from fresh data. used: elements of the output buffer. */
static long cb_verify_op(const cb_bench *b, const cb_args *a, comm *c, int op, long count,
                         long used) {
    cb_fill(op, b->send, b->recv, count, c->rank, c->size);
    cb_run_op(c, op, b->send, b->recv, count);
    if (a->plant_error && b->rank == 0) b->recv[used / 2] += 1.0f;
    long wrong = cb_check(op, b->recv, count, c->rank, c->size), all_wrong = 0;
    MPI_CHECK(MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    return all_wrong;
}

static void cb_row_fill(cb_row *r, int op, int ax, int ranks, long used, long count, double slowest,
                        long wrong) {
    snprintf(r->op, sizeof r->op, "%s", OP_NAMES[op]);
    snprintf(r->axis, sizeof r->axis, "%s", AXIS_NAMES[ax]);
    snprintf(r->type, sizeof r->type, "float");
    r->ranks = ranks;
    r->size_bytes = used * 4;
    r->count = count;
    r->time_us = slowest * 1e6;
    r->algbw_gbs = slowest > 0 ? (double)r->size_bytes / slowest / 1e9 : 0;
    r->busbw_gbs = r->algbw_gbs * cb_bus_factor(op, ranks);
    r->wrong = wrong;
}

static void cb_row_print(const cb_row *r) {
    printf("%12lld %12lld %6s %10.2f %10.3f %10.3f %8lld\n", (long long)r->size_bytes,
           (long long)r->count, r->type, r->time_us, r->algbw_gbs, r->busbw_gbs,
           (long long)r->wrong);
}

/* One operation on every group of axis ax at once, sizes doubling: fill, time, verify. */
static void cb_run_sizes(cb_bench *b, const cb_args *a, int ax, int op) {
    comm *c = b->axes[ax];
    if (b->rank == 0) {
        printf("# %s over %s: %d groups of %d ranks, running at once\n", OP_NAMES[op],
               AXIS_NAMES[ax], b->world_size / c->size, c->size);
        printf("%12s %12s %6s %10s %10s %10s %8s\n", "size(B)", "count", "type", "time(us)",
               "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    }
    for (int k = 0; k < a->n_sizes; k++) {
        long bytes = a->sizes[k];
        /* size is the whole output buffer, as in nccl-tests; all-gather's count is per rank,
         * so sizes below one element per rank are skipped */
        long total = bytes / 4;
        long count = op == OP_ALLGATHER ? total / c->size : total;
        if (count < 1) continue;
        long used = op == OP_ALLGATHER ? count * c->size : count;
        double slowest = cb_time_op(b, a, c, op, count);
        long wrong = cb_verify_op(b, a, c, op, count, used);
        b->wrong_total += wrong;
        cb_row *r = &b->rows[b->n_rows++];
        cb_row_fill(r, op, ax, c->size, used, count, slowest, wrong);
        if (b->rank == 0) cb_row_print(r);
    }
}

static void cb_run_axis(cb_bench *b, const cb_args *a, int ax) {
    if (b->axes[ax]->size < 2) {
        if (b->rank == 0) printf("# axis %s: 1 rank per group, skipped\n", AXIS_NAMES[ax]);
        return;
    }
    for (int op = 0; op < OP_COUNT; op++)
        if (a->ops[op]) cb_run_sizes(b, a, ax, op);
}

/* Rank 0 writes --out; every rank learns whether it worked. Returns 1 when it did (or no
 * file was asked for). */
static int cb_results_save(const cb_bench *b, const cb_args *a) {
    int write_ok = 1;
    if (a->out && b->rank == 0) {
        write_ok = cb_write(a->out, b->rows, b->n_rows, &b->m, a) == 0;
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
    cb_bench_init(&b, &a);
    if (rank == 0)
        printf("# tripar commbench: %d ranks, mesh dp=%d tp=%d pp=%d (%s), comm mpi, %d iters "
               "after %d warm-up, float32\n#\n",
               world, a.dp, a.tp, a.pp, b.m.order_text, a.iters, a.warmup);
    if (rank == 0 && a.sizes_note[0]) printf("%s#\n", a.sizes_note);
    for (int ax = 0; ax < CB_AXIS_COUNT; ax++)
        if (a.axes[ax]) cb_run_axis(&b, &a, ax);
    if (rank == 0)
        printf("#\n# #wrong total: %ld%s\n", b.wrong_total, b.wrong_total ? "  FAILED" : "");
    int write_ok = cb_results_save(&b, &a);
    long wrong_total = b.wrong_total;
    cb_bench_free(&b);
    if (!write_ok) return TRIPAR_EXIT_USAGE;
    return wrong_total ? TRIPAR_EXIT_RUNTIME : TRIPAR_EXIT_OK;
}
