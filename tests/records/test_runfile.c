/* The run file under MPI (3 ranks): every dataset and attribute written by several ranks is
 * read back serially and checked, the complete/partial protocol holds, and the files are left
 * in argv[1] for the tool tests (report, diff, trace, plot.py) that run after this one. */
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "io/h5util.h"
#include "io/runfile.h"
#include "base/stats.h"

#define EXPECT_ABORTS
#include "../expect.h"

enum { ROWS = 5, COLS = 4, BATCH = 2, SEQ = 3, EMBD = 4 };
static const char *const points[] = {"logits", "layer.10.attn", "layer.1.mlp", "embed",
                                     "layer.0.attn", "layer.2.attn", "final"};
enum { N_POINTS = sizeof points / sizeof points[0] };

static int rank, size;

/* Rows of /output/tokens this rank writes: rank 0 [0,2), rank 1 [2,5), others none. */
static void token_rows(int r, long *begin, long *rows) {
    *begin = r == 0 ? 0 : 2;
    *rows = r == 0 ? 2 : r == 1 ? 3 : 0;
}

static float activation_value(int point, int b, int s, int e) {
    return (float)(point * 1000 + b * 100 + s * 10 + e) + 0.5f;
}

static void fake_mesh(mesh *m) {
    memset(m, 0, sizeof *m);
    m->world = MPI_COMM_WORLD;
    m->world_size = size;
    m->world_rank = rank;
    m->size[AXIS_TP] = 1;
    m->size[AXIS_PP] = size;
    m->size[AXIS_DP] = 1;
    m->coord[AXIS_PP] = rank;
    snprintf(m->order_text, sizeof m->order_text, "tp-pp-dp");
    m->local_rank = rank;
    m->local_size = size;
    m->node_count = 1;
    snprintf(m->host, sizeof m->host, "%s", rank == 2 ? "nodeB" : "nodeA");
    m->device = -1;
}

static void fake_job(job *j) {
    memset(j, 0, sizeof *j);
    j->microbatches = 2;
    snprintf(j->order, sizeof j->order, "tp-pp-dp");
    j->overlap = 1;
    j->backend = BACKEND_CPU;
    j->precision = PRECISION_FP32;
    /* longer than the 64 KiB compact attribute limit */
    size_t len = 100000;
    j->yaml = xmalloc(len + 1);
    for (size_t i = 0; i < len; i++) j->yaml[i] = i % 61 == 60 ? '\n' : (char)('a' + i % 26);
    j->yaml[len] = '\0';
}

/* Adds an event whose stored times are exactly [t0, t1] on the run clock. */
static void add_event(timer *t, phase p, int step, int mb, int layer, double t0, double t1) {
    double shift = t->run_start - t->clock_offset;
    timer_add_host(t, p, step, mb, layer, t0 + shift, t1 + shift);
}

/* A synthetic timeline. Rank r's mlp_gemm lasts 0.1 (r + 1) s, so the report has known totals;
 * stage > 0 waits on its input (pp_recv_wait). */
static void add_timeline_part(timer *t, int part) {
    double base = part * 10.0;
    add_event(t, PHASE_STEP, part, 0, TIMER_NO_LAYER, base, base + 2.0);
    add_event(t, PHASE_QKV_GEMM, part, 0, 0, base + 0.1, base + 0.2);
    add_event(t, PHASE_ATTENTION, part, 0, 0, base + 0.2, base + 0.25);
    add_event(t, PHASE_MLP_GEMM, part, 0, 0, base + 0.3, base + 0.3 + 0.1 * (rank + 1));
    add_event(t, PHASE_TP_ALLREDUCE, part, 0, 0, base + 0.9, base + 1.0);
    if (rank > 0) add_event(t, PHASE_PP_RECV_WAIT, part, 0, TIMER_NO_LAYER, base, base + 0.05);
}

/* Writes a run file at path; *partial gets the name it had while written. */
static void write_run(const char *path, int diverge, int finish, char *partial, size_t len) {
    job j;
    mesh m;
    fake_job(&j);
    fake_mesh(&m);
    runfile *rf = runfile_create(path, &j, &m);
    EXPECT(rf, "create %s: %s", path, error_message());
    snprintf(partial, len, "%s", runfile_partial_path(rf));
    /* its own name: PATH.partial.HOST.PID of rank 0, the same on every rank */
    char expected[1200];
    snprintf(expected, sizeof expected, "%s.partial.%s.", path, tripar_host());
    EXPECT(!strncmp(partial, expected, strlen(expected)), "partial name %s", partial);
    char root[1200];
    snprintf(root, sizeof root, "%s", partial);
    MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
    EXPECT(!strcmp(root, partial), "rank %d writes %s, rank 0 %s", rank, partial, root);

    int32_t tokens[ROWS * COLS];
    long begin, rows;
    token_rows(rank, &begin, &rows);
    for (long r = 0; r < rows; r++)
        for (int c = 0; c < COLS; c++) {
            long row = begin + r;
            tokens[r * COLS + c] = (int32_t)(100 * row + c);
            if (diverge && row == 3 && c == 2) tokens[r * COLS + c] = -7;
        }
    runfile_write_tokens(rf, tokens, begin, rows, ROWS, COLS);
    runfile_write_tokens(rf, tokens, begin, rows, ROWS, COLS); /* rewriting is allowed */
    const char *texts[3] = {"first prompt", "the second one", ""};
    const char *mine[3];
    for (long r = 0; r < rows; r++) mine[r] = texts[(begin + r) % 3];
    runfile_write_text(rf, mine, begin, rows, ROWS);

    /* each rank < SEQ writes one sequence position of every point */
    long dims[3] = {BATCH, SEQ, EMBD};
    long start[3] = {0, rank, 0}, count[3] = {BATCH, rank < SEQ ? 1 : 0, EMBD};
    float block[BATCH * EMBD];
    for (int p = 0; p < N_POINTS; p++) {
        for (int b = 0; b < BATCH; b++)
            for (int e = 0; e < EMBD; e++) {
                float v = activation_value(p, b, rank, e);
                /* the divergence starts at layer.1.mlp and spreads downstream */
                int late = strcmp(points[p], "embed") && strcmp(points[p], "layer.0.attn");
                if (diverge && late && b == 1 && rank == 1 && e == 2) v += 0.25f;
                block[b * EMBD + e] = v;
            }
        runfile_write_activation(rf, points[p], 3, dims, start, count, block);
    }

    timer t;
    timer_init(&t, TIMINGS_LAYER, NULL, 64, MPI_COMM_WORLD);
    add_timeline_part(&t, 0);
    runfile_write_events(rf, &t);
    add_timeline_part(&t, 1);
    runfile_write_events(rf, &t);
    runfile_write_events(rf, &t); /* nothing new: appends nothing */

    double latency[4] = {4, 1, 3, 2}, ttft[4] = {0.5, 0.1, 0.3, 0.2}, tpot[4] = {1, 1, 1, 1};
    /* rank 0's gaps are the run's; the others' must not leak in */
    double itl[5] = {0.004, 0.001, 0.003, 0.002, rank ? 9.0 : 0.005};
    run_metrics met = {4, latency, ttft, tpot, 0.4, 2.1, 3.5, 40, 100, 5,
                       1000.0 * (rank + 1), itl, 5, 5};
    runfile_write_metrics(rf, &met);
    if (finish)
        EXPECT(runfile_finish(rf) == STATUS_OK, "finish %s: %s", path, error_message());
    else
        runfile_close_incomplete(rf);
    timer_free(&t);
    free(j.yaml);
}

static long long attr_long(hid_t obj, const char *name) {
    long long v = -999;
    EXPECT(h5_attr_read_long(obj, name, &v) == 0, "attribute %s", name);
    return v;
}

static double attr_double(hid_t obj, const char *name) {
    double v = NAN;
    EXPECT(h5_attr_read_double(obj, name, &v) == 0, "attribute %s", name);
    return v;
}

static void check_run(const char *path, const char *partial, int diverge) {
    EXPECT(access(path, F_OK) == 0 && access(partial, F_OK) != 0, "%s renamed", path);
    hid_t f = h5_open_read(path);
    EXPECT(f >= 0, "%s", error_message());
    char text[64];
    EXPECT(h5_attr_read_string(f, "format", text, sizeof text) == 0 &&
               strcmp(text, "tripar-run") == 0, "format %s", text);
    EXPECT(attr_long(f, "format_version") == 1, "format_version");
    EXPECT(attr_long(f, "complete") == 1, "complete");
    EXPECT(attr_long(f, "world_size") == size && attr_long(f, "pp") == size &&
               attr_long(f, "tp") == 1 && attr_long(f, "dp") == 1 &&
               attr_long(f, "microbatches") == 2, "strategy attributes");
    EXPECT(h5_attr_read_string(f, "backend", text, sizeof text) == 0 && !strcmp(text, "cpu"),
           "backend %s", text);
    EXPECT(h5_attr_read_string(f, "order", text, sizeof text) == 0 && !strcmp(text, "tp-pp-dp"),
           "order %s", text);
    char *yaml = h5_attr_read_string_alloc(f, "job");
    EXPECT(yaml && strlen(yaml) == 100000 && yaml[0] == 'a' && yaml[60] == '\n', "job yaml");
    free(yaml);
    char created[64];
    EXPECT(h5_attr_read_string(f, "created", created, sizeof created) == 0 &&
               strlen(created) == 20 && created[10] == 'T' && created[19] == 'Z', "created %s",
           created);

    /* hosts: unique, in rank order */
    hid_t attr = H5Aopen(f, "hosts", H5P_DEFAULT);
    hid_t space = H5Aget_space(attr);
    EXPECT(H5Sget_simple_extent_npoints(space) == (size > 2 ? 2 : 1), "host count");
    char hosts[2][64];
    hid_t st = h5_string_type(64);
    H5_CHECK(H5Aread(attr, st, hosts));
    EXPECT(!strcmp(hosts[0], "nodeA") && (size < 3 || !strcmp(hosts[1], "nodeB")), "hosts");
    H5Sclose(space);
    H5Aclose(attr);
    H5Tclose(st);

    /* tokens */
    int32_t tokens[ROWS][COLS];
    hid_t d = H5Dopen2(f, "output/tokens", H5P_DEFAULT);
    H5_CHECK(H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens));
    H5Dclose(d);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            int32_t want = (diverge && r == 3 && c == 2) ? -7 : 100 * r + c;
            EXPECT(tokens[r][c] == want, "token (%d,%d) = %d, want %d", r, c, tokens[r][c], want);
        }
    d = H5Dopen2(f, "output/text", H5P_DEFAULT);
    hid_t ftype = H5Dget_type(d);
    size_t width = H5Tget_size(ftype);
    char *texts = xcalloc(ROWS, width);
    H5_CHECK(H5Dread(d, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, texts));
    EXPECT(!strcmp(texts, "first prompt") && !strcmp(texts + width, "the second one") &&
               !strcmp(texts + 2 * width, "") && !strcmp(texts + 3 * width, "first prompt"),
           "text rows");
    free(texts);
    H5Tclose(ftype);
    H5Dclose(d);

    /* activations, named with dots directly under /activations */
    for (int p = 0; p < N_POINTS; p++) {
        char path_p[128];
        snprintf(path_p, sizeof path_p, "activations/%s", points[p]);
        float a[BATCH][SEQ][EMBD];
        d = H5Dopen2(f, path_p, H5P_DEFAULT);
        EXPECT(d >= 0, "%s", path_p);
        H5_CHECK(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a));
        H5Dclose(d);
        for (int b = 0; b < BATCH; b++)
            for (int s = 0; s < SEQ && s < size; s++)
                for (int e = 0; e < EMBD; e++) {
                    float want = activation_value(p, b, s, e);
                    int late = strcmp(points[p], "embed") && strcmp(points[p], "layer.0.attn");
                    if (diverge && late && b == 1 && s == 1 && e == 2) want += 0.25f;
                    EXPECT(a[b][s][e] == want, "%s[%d][%d][%d] = %g", points[p], b, s, e,
                           a[b][s][e]);
                }
    }

    /* mesh rows */
    typedef struct { int32_t rank, pp_rank; char host[64]; double off, unc; } row;
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(row));
    hid_t hs = h5_string_type(64);
    H5Tinsert(mt, "rank", HOFFSET(row, rank), H5T_NATIVE_INT32);
    H5Tinsert(mt, "pp_rank", HOFFSET(row, pp_rank), H5T_NATIVE_INT32);
    H5Tinsert(mt, "host", HOFFSET(row, host), hs);
    H5Tinsert(mt, "clock_offset", HOFFSET(row, off), H5T_NATIVE_DOUBLE);
    H5Tinsert(mt, "clock_uncertainty", HOFFSET(row, unc), H5T_NATIVE_DOUBLE);
    row *rows = xcalloc((unsigned long)size, sizeof(row));
    d = H5Dopen2(f, "mesh", H5P_DEFAULT);
    H5_CHECK(H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows));
    H5Dclose(d);
    for (int r = 0; r < size; r++)
        EXPECT(rows[r].rank == r && rows[r].pp_rank == r &&
                   !strcmp(rows[r].host, r == 2 ? "nodeB" : "nodeA") &&
                   (r == 0 ? rows[r].unc == 0 : rows[r].unc > 0) && fabs(rows[r].off) < 1.0,
               "mesh row %d", r);
    free(rows);
    H5Tclose(mt);
    H5Tclose(hs);

    /* events: two appends per rank, phase stored as an enum with the phase names */
    hid_t g = H5Gopen2(f, "timings", H5P_DEFAULT);
    char level[16];
    EXPECT(h5_attr_read_string(g, "level", level, sizeof level) == 0 && !strcmp(level, "layer"),
           "level");
    long n_off = 0;
    double *offsets = h5_attr_read_doubles(g, "clock_offset", &n_off);
    EXPECT(offsets && n_off == size && offsets[0] == 0, "clock_offset attribute");
    free(offsets);
    H5Gclose(g);
    for (int r = 0; r < size; r++) {
        char path_e[64];
        snprintf(path_e, sizeof path_e, "timings/rank_%05d/events", r);
        d = H5Dopen2(f, path_e, H5P_DEFAULT);
        EXPECT(d >= 0, "%s", path_e);
        hid_t fs = H5Dget_space(d);
        hssize_t n = H5Sget_simple_extent_npoints(fs);
        long want = 2 * (r > 0 ? 6 : 5);
        EXPECT(n == want, "%s has %lld rows, want %ld", path_e, (long long)n, want);
        hid_t et = H5Dget_type(d);
        hid_t pt = H5Tget_member_type(et, (unsigned)H5Tget_member_index(et, "phase"));
        EXPECT(H5Tget_class(pt) == H5T_ENUM, "phase is an enum");
        char name[32];
        int32_t v = PHASE_PP_RECV_WAIT;
        H5_CHECK(H5Tenum_nameof(pt, &v, name, sizeof name));
        EXPECT(!strcmp(name, "pp_recv_wait"), "enum name %s", name);
        timing_event *ev = xcalloc((unsigned long)n, sizeof(timing_event));
        hid_t mt_e = H5Tcreate(H5T_COMPOUND, sizeof(timing_event));
        H5Tinsert(mt_e, "step", HOFFSET(timing_event, step), H5T_NATIVE_INT32);
        H5Tinsert(mt_e, "layer", HOFFSET(timing_event, layer), H5T_NATIVE_INT32);
        H5Tinsert(mt_e, "phase", HOFFSET(timing_event, phase), pt);
        H5Tinsert(mt_e, "t_start", HOFFSET(timing_event, t_start), H5T_NATIVE_DOUBLE);
        H5Tinsert(mt_e, "t_end", HOFFSET(timing_event, t_end), H5T_NATIVE_DOUBLE);
        H5_CHECK(H5Dread(d, mt_e, H5S_ALL, H5S_ALL, H5P_DEFAULT, ev));
        for (long i = 0; i < n; i++) {
            int part = i < n / 2 ? 0 : 1;
            EXPECT(ev[i].step == part && ev[i].t_end >= ev[i].t_start, "event %ld", i);
        }
        long mlp = 3;
        EXPECT(ev[mlp].phase == PHASE_MLP_GEMM && ev[mlp].layer == 0 &&
                   fabs(ev[mlp].t_end - ev[mlp].t_start - 0.1 * (r + 1)) < 1e-6 &&
                   ev[n / 2].phase == PHASE_STEP && fabs(ev[n / 2].t_start - 10.0) < 1e-6,
               "event fields of rank %d", r);
        free(ev);
        H5Tclose(mt_e);
        H5Tclose(pt);
        H5Tclose(et);
        H5Sclose(fs);
        H5Dclose(d);
    }

    /* metrics: series, gathered peaks, numpy-compatible percentiles */
    g = H5Gopen2(f, "metrics", H5P_DEFAULT);
    double lat[4], peak[8];
    d = H5Dopen2(g, "latency", H5P_DEFAULT);
    H5_CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, lat));
    H5Dclose(d);
    EXPECT(lat[0] == 4 && lat[3] == 2, "latency series");
    d = H5Dopen2(g, "peak_memory_bytes", H5P_DEFAULT);
    H5_CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, peak));
    H5Dclose(d);
    for (int r = 0; r < size; r++) EXPECT(peak[r] == 1000.0 * (r + 1), "peak %d", r);
    EXPECT(fabs(attr_double(g, "latency_p50") - 2.5) < 1e-12 &&
               fabs(attr_double(g, "latency_p90") - 3.7) < 1e-12 &&
               fabs(attr_double(g, "latency_p99") - 3.97) < 1e-12 &&
               fabs(attr_double(g, "latency_mean") - 2.5) < 1e-12, "latency summary");
    double gaps[5];
    d = H5Dopen2(g, "itl", H5P_DEFAULT);
    H5_CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, gaps));
    H5Dclose(d);
    EXPECT(gaps[0] == 0.004 && gaps[4] == 0.005, "itl series");
    EXPECT(fabs(attr_double(g, "itl_mean") - 0.003) < 1e-12 &&
               fabs(attr_double(g, "itl_p50") - 0.003) < 1e-12 &&
               fabs(attr_double(g, "itl_p90") - 0.0046) < 1e-12, "itl summary");
    EXPECT(fabs(attr_double(g, "tokens_per_s") - 40.0) < 1e-12 &&
               fabs(attr_double(g, "requests_per_s") - 2.0) < 1e-12, "throughput");
    EXPECT(attr_long(g, "generated_tokens") == 100 && attr_long(g, "iterations") == 4 &&
               fabs(attr_double(g, "cold_start_seconds") - 3.5) < 1e-12, "scalars");
    H5Gclose(g);
    H5Fclose(f);
}

/* The incomplete file keeps its own name; it is then moved to PATH.partial, the name the tool
 * tests read. */
static void check_incomplete(const char *path, const char *partial) {
    EXPECT(access(path, F_OK) != 0 && access(partial, F_OK) == 0, "%s stays partial", path);
    hid_t f = h5_open_read(partial);
    EXPECT(f >= 0, "%s", error_message());
    EXPECT(attr_long(f, "complete") == 0, "complete=0");
    EXPECT(h5_exists(f, "output/tokens") && h5_exists(f, "metrics"), "data kept");
    H5Fclose(f);
    char fixed[1200];
    snprintf(fixed, sizeof fixed, "%s.partial", path);
    EXPECT(rename(partial, fixed) == 0, "rename %s to %s", partial, fixed);
}

/* runfile_flush_due: rank 0's clock decides and every rank gets the same answers, each one
 * call late, so the ranks flush together. Rank 0 takes 60 ms per call against a 100 ms
 * interval: some calls answer yes (however slow the machine), never the first. */
static void check_flush_due(const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/run_flush.h5", dir);
    job j;
    mesh m;
    fake_job(&j);
    fake_mesh(&m);
    runfile *rf = runfile_create(path, &j, &m);
    EXPECT(rf, "create %s: %s", path, error_message());
    enum { CALLS = 8 };
    int due[CALLS], yes = 0;
    for (int i = 0; i < CALLS; i++) {
        if (rank == 0) usleep(60000);
        due[i] = runfile_flush_due(rf, 0.1);
        yes += due[i];
    }
    EXPECT(runfile_flush_due(rf, 0) == 0, "interval 0 never flushes");
    int *all = calloc((size_t)size * CALLS, sizeof(int));
    MPI_Allgather(due, CALLS, MPI_INT, all, CALLS, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        EXPECT(!memcmp(all + r * CALLS, due, sizeof due), "rank %d answers differ from rank %d",
               r, rank);
    EXPECT(due[0] == 0 && yes >= 1, "%d of %d calls due", yes, CALLS);
    free(all);
    char partial[1200];
    snprintf(partial, sizeof partial, "%s", runfile_partial_path(rf));
    runfile_close_incomplete(rf);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) unlink(partial);
    free(j.yaml);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT(argc == 2 && size >= 3 && size <= 8, "usage: mpirun -n 3 %s OUTDIR", argv[0]);
    char a[1024], b[1024], c[1024], bad[1100];
    snprintf(a, sizeof a, "%s/run_a.h5", argv[1]);
    snprintf(b, sizeof b, "%s/run_b.h5", argv[1]);
    snprintf(c, sizeof c, "%s/run_incomplete.h5", argv[1]);
    snprintf(bad, sizeof bad, "%s/no/such/dir/run.h5", argv[1]);
    if (rank == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && rm -f '%s'/run_*.h5*", argv[1], argv[1]);
        EXPECT(system(cmd) == 0, "%s", cmd);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    job j;
    mesh m;
    fake_job(&j);
    fake_mesh(&m);
    error_clear();
    EXPECT(runfile_create(bad, &j, &m) == NULL && strstr(error_message(), "cannot create"),
           "an unwritable path fails on every rank: %s", error_message());
    free(j.yaml);

    char pa[1200], pb[1200], pc[1200];
    write_run(a, 0, 1, pa, sizeof pa);
    write_run(b, 1, 1, pb, sizeof pb);
    write_run(c, 0, 0, pc, sizeof pc);
    check_flush_due(argv[1]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        check_run(a, pa, 0);
        check_run(b, pb, 1);
        check_incomplete(c, pc);
        printf("test_runfile: ok (%d ranks)\n", size);
    }
    MPI_Finalize();
    return 0;
}
