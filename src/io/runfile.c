/* The run file writer: one HDF5 file per run, written by every rank through the MPI-IO driver.
 * Metadata (groups, datasets, attributes) is created collectively with identical values on
 * every rank; bulk data goes as per-rank hyperslabs. Layout and protocol: docs/schema.md. */
#include "io/runfile.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"
#include "io/h5util.h"
#include "io/mpiio_guard.h"
#include "io/runfile_internal.h"
#include "io/runfile_pad.h"
#include "base/stats.h"
#include "parallel/agree.h"
#include "parallel/mpi_tuning.h"
#include "parallel/watchdog.h"

enum { RUNFILE_FORMAT_VERSION = 1, EVENT_CHUNK_ROWS = 1024 };

/* One /mesh row; the file type is this packed. */
typedef struct {
    int32_t rank;
    char host[64];
    int32_t local_rank, node, device;
    char pci_bus_id[32];
    char kernels[32]; /* the backend's kernel path (kernel_path), "" when it reports none */
    int32_t dp_rank, pp_rank, tp_rank;
    double clock_offset, clock_uncertainty;
} mesh_row;

struct runfile {
    hid_t file;
    hid_t dxpl_coll;  /* collective transfers */
    hid_t dxpl_indep; /* per-rank event rows */
    MPI_Comm comm;
    int rank, size;
    char path[JOB_PATH_MAX + 16];
    char partial[JOB_PATH_MAX + 128]; /* PATH.partial.HOST.PID: this run's own (partial_claim) */
    /* A write that found no room: set at the same call on every rank (space_agree), after which
     * every write is skipped and the file can only be closed incomplete. */
    int failed;
    char error[JOB_PATH_MAX + 256];
    /* the time-based flush decision (runfile_flush_due): rank 0's answer in flight */
    agree_vote vote;
    double last_flush;     /* rank 0's clock */
    mesh_row *rows;        /* (size), identical on every rank */
    long long *event_rows; /* (size) rows in each rank's events table so far */
    long *deferred;        /* this rank's events open at an earlier flush, written once ended */
    long n_deferred, cap_deferred;
    int events_created;
    int dp; /* replicas, for the per-replica rates of /metrics */
};

static hid_t mesh_row_type(void) {
    hid_t host = h5_string_type(64), bus = h5_string_type(32);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(mesh_row));
    H5_CHECK(t);
    H5Tinsert(t, "rank", HOFFSET(mesh_row, rank), H5T_NATIVE_INT32);
    H5Tinsert(t, "host", HOFFSET(mesh_row, host), host);
    H5Tinsert(t, "local_rank", HOFFSET(mesh_row, local_rank), H5T_NATIVE_INT32);
    H5Tinsert(t, "node", HOFFSET(mesh_row, node), H5T_NATIVE_INT32);
    H5Tinsert(t, "device", HOFFSET(mesh_row, device), H5T_NATIVE_INT32);
    H5Tinsert(t, "pci_bus_id", HOFFSET(mesh_row, pci_bus_id), bus);
    H5Tinsert(t, "kernels", HOFFSET(mesh_row, kernels), bus);
    H5Tinsert(t, "dp_rank", HOFFSET(mesh_row, dp_rank), H5T_NATIVE_INT32);
    H5Tinsert(t, "pp_rank", HOFFSET(mesh_row, pp_rank), H5T_NATIVE_INT32);
    H5Tinsert(t, "tp_rank", HOFFSET(mesh_row, tp_rank), H5T_NATIVE_INT32);
    H5Tinsert(t, "clock_offset", HOFFSET(mesh_row, clock_offset), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "clock_uncertainty", HOFFSET(mesh_row, clock_uncertainty), H5T_NATIVE_DOUBLE);
    H5Tclose(host);
    H5Tclose(bus);
    return t;
}

/* A packed copy for the file, so stored rows carry no struct padding. */
static hid_t packed_copy(hid_t mtype) {
    hid_t f = H5Tcopy(mtype);
    H5_CHECK(f);
    H5_CHECK(H5Tpack(f));
    return f;
}

/* Opens dataset path, or creates it with the given type and dims (collective). */
static hid_t dataset_open_or_create(hid_t file, const char *path, hid_t ftype, int ndims,
                                    const hsize_t *dims) {
    if (h5_exists(file, path)) {
        hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
        H5_CHECK(d);
        return d;
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1));
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    hid_t space = H5Screate_simple(ndims, dims, NULL);
    hid_t d = H5Dcreate2(file, path, ftype, space, lcpl, dcpl, H5P_DEFAULT);
    H5_CHECK(d);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    return d;
}

/* Collective write of this rank's block [start, start+count) of dataset d; a block with a zero
 * extent selects nothing, so ranks without data still take part. */
static void dataset_write_block(runfile *rf, hid_t d, hid_t mtype, int ndims, const hsize_t *start,
                                const hsize_t *count, const void *data) {
    hid_t fspace = H5Dget_space(d);
    H5_CHECK(fspace);
    hsize_t total = 1;
    for (int i = 0; i < ndims; i++)
        total *= count[i];
    hid_t mspace;
    static const char dummy[64];
    if (total == 0 || !data) {
        hsize_t one = 1;
        mspace = H5Screate_simple(1, &one, NULL);
        H5_CHECK(H5Sselect_none(mspace));
        H5_CHECK(H5Sselect_none(fspace));
        data = dummy;
    } else {
        mspace = H5Screate_simple(ndims, count, NULL);
        H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    }
    H5_CHECK(H5Dwrite(d, mtype, mspace, fspace, rf->dxpl_coll, data));
    H5Sclose(mspace);
    H5Sclose(fspace);
}

/* Rank 0 writes the whole 1-D dataset at path (created when absent); others join with none. */
static void write_rank0_1d(runfile *rf, const char *path, hid_t mtype, hid_t ftype, long n,
                           const void *data) {
    hsize_t dims[1] = {(hsize_t)n}, start[1] = {0};
    hsize_t count[1] = {rf->rank == 0 ? (hsize_t)n : 0};
    hid_t d = dataset_open_or_create(rf->file, path, ftype, 1, dims);
    /* an empty dataset has no storage to write to (n is the same on every rank) */
    if (n > 0) dataset_write_block(rf, d, mtype, 1, start, count, data);
    H5Dclose(d);
}

static void mesh_write(runfile *rf) {
    hid_t mtype = mesh_row_type();
    hid_t ftype = packed_copy(mtype);
    write_rank0_1d(rf, "mesh", mtype, ftype, rf->size, rf->rows);
    H5Tclose(ftype);
    H5Tclose(mtype);
}

/* Root attributes that describe the run; every value is made identical on every rank. */
static void root_attrs_write(runfile *rf, const job *j, const mesh *m) {
    hid_t root = rf->file; /* format, format_version, tripar_version: partial_skeleton */

    /* the job text and clock come from rank 0 so every rank writes the same metadata */
    long long len = (rf->rank == 0 && j->yaml) ? (long long)strlen(j->yaml) : 0;
    agree_root_long(rf->comm, &len);
    char *yaml = xcalloc((unsigned long)len + 1, 1);
    if (rf->rank == 0 && len) memcpy(yaml, j->yaml, (size_t)len);
    agree_root_text(rf->comm, yaml, (int)len + 1);
    h5_attr_write_string(root, "job", yaml);
    free(yaml);

    char created[32] = "";
    if (rf->rank == 0) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    agree_root_text(rf->comm, created, (int)sizeof created);
    h5_attr_write_string(root, "created", created);

    h5_attr_write_int(root, "world_size", rf->size);
    h5_attr_write_int(root, "dp", MESH_DP(m));
    h5_attr_write_int(root, "tp", MESH_TP(m));
    h5_attr_write_int(root, "pp", MESH_PP(m));
    h5_attr_write_int(root, "ep", j->ep);
    h5_attr_write_int(root, "microbatches", j->microbatches);
    h5_attr_write_string(root, "order", m->order_text[0] ? m->order_text : j->order);
    h5_attr_write_int(root, "overlap", j->overlap);
    /* what MPI ran with for overlap, as rank 0 found it (parallel/mpi_tuning.h) */
    char mpi_settings[1024] = "";
    if (rf->rank == 0) snprintf(mpi_settings, sizeof mpi_settings, "%s", mpi_tuning_summary());
    agree_root_text(rf->comm, mpi_settings, (int)sizeof mpi_settings);
    h5_attr_write_string(root, "mpi_settings", mpi_settings);
    h5_attr_write_string(root, "backend", backend_kind_name(j->backend));
    h5_attr_write_string(root, "precision", precision_kind_name(j->precision));

    /* unique hosts in rank order */
    const char **hosts = xcalloc((unsigned long)rf->size, sizeof(char *));
    int n_hosts = 0;
    for (int r = 0; r < rf->size; r++) {
        int seen = 0;
        for (int h = 0; h < n_hosts && !seen; h++)
            seen = strcmp(hosts[h], rf->rows[r].host) == 0;
        if (!seen) hosts[n_hosts++] = rf->rows[r].host;
    }
    h5_attr_write_strings(root, "hosts", hosts, n_hosts, 64);
    free(hosts);
    h5_attr_write_int(root, "complete", 0);
}

/* ---- failures and free space ---------------------------------------------------------- */

/* Marks the file failed with a message; the caller does it on every rank at the same call. */
static void fail_set(runfile *rf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_set(runfile *rf, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rf->error, sizeof rf->error, fmt, ap);
    va_end(ap);
    rf->failed = 1;
}

/* What HDF5 may write beyond the raw data of one call: object headers, chunk indexes and the
 * dirty metadata the cache holds (flushed at its 256 KiB threshold or at our flushes), per
 * rank's events table included. Generous: it is only compared with the free space. */
static double metadata_margin(const runfile *rf) { return 512.0 * 1024 + 8192.0 * rf->size; }

/* Collective, before every write: rank 0 compares the free space of the file system holding
 * the run file with the call's raw bytes plus the metadata margin, and every rank learns the
 * answer. So a full file system stops every rank at the same call, before HDF5 writes: a write
 * that fails inside HDF5 fails on some ranks only, and HDF5 then leaves them in different
 * collectives (a barrier and a broadcast of one H5Fflush) for ever. Returns 1 while there is
 * room; 0 (and failed set, same on every rank) otherwise. What fails anyway (space taken by
 * another writer meanwhile, EIO) is caught by mpiio_guard, which ends the job. */
static int space_agree(runfile *rf, double bytes, const char *what) {
    if (rf->failed) return 0;
    /* rank 0's numbers decide: {free (-1 unknown: no reason to stop), needed} */
    double v[2] = {-1, bytes + metadata_margin(rf)};
    if (rf->rank == 0) {
        struct statvfs sv;
        if (statvfs(rf->partial, &sv) == 0) /* root may use the blocks reserved for root */
            v[0] = (double)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) * (double)sv.f_frsize;
    }
    agree_root_doubles(rf->comm, v, 2);
    const double avail = v[0], need = v[1];
    if (avail < 0 || avail >= need) return 1;
    fail_set(rf, "no space left on device writing %s (%.2f MiB free, %.2f MiB needed for %s)",
             rf->partial, avail / 1048576.0, need / 1048576.0, what);
    return 0;
}

/* The file creation properties of a run file: the 1.8 object format stores large attributes
 * densely (the job YAML may exceed 64 KiB). */
static void run_file_plists(hid_t *fcpl, hid_t *fapl) {
    *fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_CHECK(*fapl);
    H5_CHECK(H5Pset_libver_bounds(*fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST));
    if (!fcpl) return;
    *fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5_CHECK(*fcpl);
    H5_CHECK(H5Pset_attr_phase_change(*fcpl, 0, 0));
}

/* Rank 0 makes the claimed, empty file a run file at once, alone and serially: the identity
 * attributes and complete = 0, closed. Until the collective open's first flush (the job, the
 * mesh) the file would otherwise stay empty, and a fault in between (a peer frozen or killed
 * during set-up; found by jobs/soak.sh) would leave a partial file no tool can open. What is
 * left is the moment of this write, a rank's own local work. 0, or -1. */
static int partial_skeleton(const char *partial) {
    hid_t fcpl, fapl;
    run_file_plists(&fcpl, &fapl);
    hid_t file;
    H5E_BEGIN_TRY { file = H5Fcreate(partial, H5F_ACC_TRUNC, fcpl, fapl); }
    H5E_END_TRY;
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (file < 0) return -1;
    h5_attr_write_string(file, "format", "tripar-run");
    h5_attr_write_int(file, "format_version", RUNFILE_FORMAT_VERSION);
    h5_attr_write_string(file, "tripar_version", TRIPAR_VERSION);
    h5_attr_write_int(file, "complete", 0);
    return H5Fclose(file) < 0 ? -1 : 0;
}

/* Rank 0 claims PATH.partial.HOST.PID (its own pid) by creating it exclusively, so two runs
 * writing one PATH at once never share a partial file, and each renames its own whole file
 * over PATH; a name already taken (a dead run's, the same pid on the same host) gets a .N
 * suffix. Every rank gets the name. Returns 0, or -1 with error_set (same on every rank). */
static int partial_claim(runfile *rf) {
    int err = 0;
    if (rf->rank == 0) {
        char host[64];
        snprintf(host, sizeof host, "%s", tripar_host());
        for (char *c = host; *c; c++) /* a file name, whatever the host is called */
            if (*c == '/' || *c <= ' ') *c = '_';
        err = EEXIST;
        for (int n = 0; n < 100 && err == EEXIST; n++) {
            char suffix[16] = "";
            if (n) snprintf(suffix, sizeof suffix, ".%d", n);
            snprintf(rf->partial, sizeof rf->partial, "%s.partial.%s.%ld%s", rf->path, host,
                     (long)getpid(), suffix);
            int fd = open(rf->partial, O_WRONLY | O_CREAT | O_EXCL, 0666);
            err = fd < 0 ? errno : 0;
            if (fd >= 0) close(fd);
        }
        if (err == 0 && partial_skeleton(rf->partial) != 0) err = EIO;
    }
    agree_root_int(rf->comm, &err);
    agree_root_text(rf->comm, rf->partial, (int)sizeof rf->partial);
    if (err == 0) return 0;
    error_set("%s: cannot create the run file: %s (does the directory exist and is it "
              "writable?)",
              rf->partial, strerror(err));
    return -1;
}

/* Rank 0 removes a claimed partial that never became a run file. */
static void partial_drop(runfile *rf) {
    if (rf->rank == 0) unlink(rf->partial);
}

runfile *runfile_create(const char *path, const job *j, const mesh *m) {
    MPI_Comm comm = m->world != MPI_COMM_NULL && m->world ? m->world : MPI_COMM_WORLD;
    runfile *rf = xcalloc(1, sizeof *rf);
    rf->comm = comm;
    rf->vote = (agree_vote)AGREE_VOTE_NONE;
    rf->rank = agree_comm_rank(comm);
    rf->size = agree_comm_size(comm);
    snprintf(rf->path, sizeof rf->path, "%s", path);
    if (partial_claim(rf) != 0) {
        free(rf);
        return NULL;
    }
    /* a rank that leaves mid-flush (stall watchdog; run.c's stop grace) pads the file first */
    runfile_pad_arm(rf->partial);
    watch_on_stall(runfile_pad_on_exit);
    /* the metadata written and flushed below: the job text, /mesh and the root attributes */
    const double first = (j->yaml ? (double)strlen(j->yaml) : 0) + 1024.0 * rf->size;
    if (!space_agree(rf, first, "the job and the mesh")) {
        error_set("%s", rf->error);
        partial_drop(rf);
        free(rf);
        return NULL;
    }

    hid_t fapl;
    run_file_plists(NULL, &fapl);
    H5_CHECK(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL));
    H5_CHECK(H5Pset_all_coll_metadata_ops(fapl, 1));
    H5_CHECK(H5Pset_coll_metadata_write(fapl, 1));
    mpiio_guard_install(); /* what still fails after space_agree ends the job, not a hang */
    hid_t file; /* the skeleton rank 0 wrote (partial_skeleton), opened by every rank */
    H5E_BEGIN_TRY { file = H5Fopen(rf->partial, H5F_ACC_RDWR, fapl); }
    H5E_END_TRY;
    H5Pclose(fapl);
    if (!agree_all_ok(comm, file >= 0)) {
        if (file >= 0) H5Fclose(file);
        error_set("%s: cannot create the run file (does the directory exist and is it "
                  "writable?)",
                  rf->partial);
        partial_drop(rf);
        free(rf);
        return NULL;
    }
    rf->file = file;
    rf->dxpl_coll = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(H5Pset_dxpl_mpio(rf->dxpl_coll, H5FD_MPIO_COLLECTIVE));
    rf->dxpl_indep = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(H5Pset_dxpl_mpio(rf->dxpl_indep, H5FD_MPIO_INDEPENDENT));

    mesh_row mine;
    memset(&mine, 0, sizeof mine);
    mine.rank = rf->rank;
    snprintf(mine.host, sizeof mine.host, "%s", m->host[0] ? m->host : tripar_host());
    mine.local_rank = m->local_rank;
    mine.node = m->node_index;
    mine.device = m->device;
    snprintf(mine.pci_bus_id, sizeof mine.pci_bus_id, "%s", m->pci_bus_id);
    snprintf(mine.kernels, sizeof mine.kernels, "%s", m->kernels);
    mine.dp_rank = m->coord[AXIS_DP];
    mine.pp_rank = m->coord[AXIS_PP];
    mine.tp_rank = m->coord[AXIS_TP];
    rf->rows = xcalloc((unsigned long)rf->size, sizeof(mesh_row));
    agree_gather_bytes(comm, &mine, (int)sizeof mine, rf->rows);
    rf->event_rows = xcalloc((unsigned long)rf->size, sizeof(long long));
    rf->dp = MESH_DP(m);

    agree_vote_init(&rf->vote, comm);

    root_attrs_write(rf, j, m);
    mesh_write(rf);
    /* On disk from the first second: a job killed before its first timing flush (SIGKILL, a
     * lost node) still leaves a file that opens, with the job, the mesh and complete=0. */
    H5_CHECK(H5Fflush(rf->file, H5F_SCOPE_GLOBAL));
    rf->last_flush = agree_wtime();
    return rf;
}

const char *runfile_partial_path(const runfile *rf) { return rf ? rf->partial : ""; }

int runfile_failed(const runfile *rf) { return rf && rf->failed; }

int runfile_flush_due(runfile *rf, double interval_seconds) {
    if (!rf || rf->file < 0 || interval_seconds <= 0) return 0;
    int due = 0;
    agree_vote_wait(&rf->vote, &due); /* rank 0's answer of the previous call, if any */
    int due_next = 0;
    if (rf->rank == 0) {
        const double now = agree_wtime();
        due_next = now - rf->last_flush >= interval_seconds;
        if (due_next) rf->last_flush = now; /* the flush it announces starts the interval */
    }
    /* In flight until the next call: the ranks wait on rank 0 no more than the step's stop
     * vote already makes them. */
    agree_vote_start(&rf->vote, due_next);
    return due && !rf->failed;
}

void runfile_write_tokens(runfile *rf, const int32_t *tokens, long row_begin, long rows,
                          long total_rows, long cols) {
    if (!rf || rf->file < 0 || rf->failed) return;
    hsize_t dims[2] = {(hsize_t)total_rows, (hsize_t)cols};
    hsize_t start[2] = {(hsize_t)row_begin, 0}, count[2] = {(hsize_t)rows, (hsize_t)cols};
    CHECK(rows == 0 || (row_begin >= 0 && row_begin + rows <= total_rows),
          "token rows [%ld, %ld) outside [0, %ld)", row_begin, row_begin + rows, total_rows);
    if (!space_agree(rf, 4.0 * (double)total_rows * (double)cols, "output/tokens")) return;
    hid_t d = dataset_open_or_create(rf->file, "output/tokens", H5T_STD_I32LE, 2, dims);
    dataset_write_block(rf, d, H5T_NATIVE_INT32, 2, start, count, tokens);
    H5Dclose(d);
}

void runfile_write_generated(runfile *rf, const int32_t *counts, long row_begin, long rows,
                             long total_rows) {
    if (!rf || rf->file < 0) return;
    hsize_t dims[1] = {(hsize_t)total_rows}, start[1] = {(hsize_t)row_begin};
    hsize_t count[1] = {(hsize_t)rows};
    CHECK(rows == 0 || (row_begin >= 0 && row_begin + rows <= total_rows),
          "generated rows [%ld, %ld) outside [0, %ld)", row_begin, row_begin + rows, total_rows);
    hid_t d = dataset_open_or_create(rf->file, "output/generated", H5T_STD_I32LE, 1, dims);
    dataset_write_block(rf, d, H5T_NATIVE_INT32, 1, start, count, counts);
    H5Dclose(d);
}

void runfile_write_strings(runfile *rf, const char *name, const char *const *texts,
                           long row_begin, long rows, long total_rows) {
    if (!rf || rf->file < 0 || rf->failed) return;
    char path[64];
    snprintf(path, sizeof path, "output/%s", name);
    /* fixed-length strings: parallel HDF5 cannot write variable-length data collectively */
    long long mine = 1;
    for (long i = 0; i < rows; i++) {
        long long len = (long long)strlen(texts[i] ? texts[i] : "") + 1;
        if (len > mine) mine = len;
    }
    const long long width = agree_max_long(rf->comm, mine);
    if (!space_agree(rf, (double)width * (double)total_rows, path)) return;
    char *packed = xcalloc((unsigned long)(rows > 0 ? rows : 1), (unsigned long)width);
    for (long i = 0; i < rows; i++)
        if (texts[i]) memcpy(packed + i * width, texts[i], strlen(texts[i]));
    hid_t type = h5_string_type((size_t)width);
    hsize_t dims[1] = {(hsize_t)total_rows}, start[1] = {(hsize_t)row_begin};
    hsize_t count[1] = {(hsize_t)rows};
    hid_t d = dataset_open_or_create(rf->file, path, type, 1, dims);
    dataset_write_block(rf, d, type, 1, start, count, packed);
    H5Dclose(d);
    H5Tclose(type);
    free(packed);
}

void runfile_write_text(runfile *rf, const char *const *texts, long row_begin, long rows,
                        long total_rows) {
    runfile_write_strings(rf, "text", texts, row_begin, rows, total_rows);
}

void runfile_write_block(runfile *rf, const char *path, hid_t ftype, hid_t mtype, size_t elem,
                         int ndims, const long *dims, const long *start, const long *count,
                         const void *data) {
    if (!rf || rf->file < 0 || rf->failed) return;
    CHECK(ndims >= 1 && ndims <= 4, "%s: %d dims (1..4 allowed)", path, ndims);
    hsize_t d_dims[4], d_start[4], d_count[4];
    for (int i = 0; i < ndims; i++) {
        d_dims[i] = (hsize_t)dims[i];
        d_start[i] = (hsize_t)start[i];
        d_count[i] = (hsize_t)count[i];
        CHECK(count[i] == 0 || (start[i] >= 0 && start[i] + count[i] <= dims[i]),
              "%s: block outside dim %d", path, i);
    }
    double bytes = (double)elem;
    for (int i = 0; i < ndims; i++)
        bytes *= (double)dims[i];
    if (!space_agree(rf, bytes, path)) return;
    hid_t d = dataset_open_or_create(rf->file, path, ftype, ndims, d_dims);
    dataset_write_block(rf, d, mtype, ndims, d_start, d_count, data);
    H5Dclose(d);
}

void runfile_write_activation(runfile *rf, const char *name, int ndims, const long *dims,
                              const long *start, const long *count, const float *data) {
    if (!rf || rf->file < 0 || rf->failed) return;
    CHECK(name[0] && !strchr(name, '/') && strlen(name) < 200,
          "activation name \"%s\" must be non-empty, under 200 characters, without '/'", name);
    char path[256];
    snprintf(path, sizeof path, "activations/%s", name);
    runfile_write_block(rf, path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, ndims, dims, start, count,
                        data);
}

static void events_create_all(runfile *rf, hid_t ftype) {
    hid_t timings = h5_group_open_or_create(rf->file, "timings");
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[1] = {EVENT_CHUNK_ROWS}, zero[1] = {0}, unlimited[1] = {H5S_UNLIMITED};
    H5_CHECK(H5Pset_chunk(dcpl, 1, chunk));
    H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    hid_t space = H5Screate_simple(1, zero, unlimited);
    for (int r = 0; r < rf->size; r++) {
        char name[64];
        snprintf(name, sizeof name, "rank_%05d", r);
        hid_t g = h5_group_open_or_create(timings, name);
        hid_t d = H5Dcreate2(g, "events", ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5_CHECK(d);
        H5Dclose(d);
        H5Gclose(g);
    }
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Gclose(timings);
    rf->events_created = 1;
}

static void deferred_push(runfile *rf, long i) {
    if (rf->n_deferred == rf->cap_deferred) {
        rf->cap_deferred = rf->cap_deferred ? 2 * rf->cap_deferred : 8;
        long *grown = realloc(rf->deferred, (size_t)rf->cap_deferred * sizeof(long));
        CHECK(grown != NULL, "out of memory keeping %ld open events", rf->cap_deferred);
        rf->deferred = grown;
    }
    rf->deferred[rf->n_deferred++] = i;
}

/* The events to append now: those open at an earlier flush that have ended since, then every
 * event since the last flush that has ended. An event still open (the iteration enclosing the
 * steps of a flush_every flush, say) is kept back for a later flush instead of holding back
 * everything after it, so periodic flushes write the steps as they finish. Returns the rows
 * (t->events itself when nothing is kept back, else *staged, which the caller frees). */
static const timing_event *events_collect(runfile *rf, timer *t, long long *n,
                                          timing_event **staged) {
    timer_resolve(t);
    *staged = NULL;
    int any_open = rf->n_deferred > 0;
    for (long i = t->flushed; i < t->count && !any_open; i++)
        any_open = timer_event_open(t, i);
    if (!any_open) { /* the common case: one contiguous run of ended events */
        *n = t->count - t->flushed;
        const timing_event *rows = t->events + t->flushed;
        t->flushed = t->count;
        return rows;
    }
    *staged = xmalloc((size_t)(rf->n_deferred + t->count - t->flushed + 1) * sizeof(timing_event));
    long k = 0, kept = 0;
    for (long d = 0; d < rf->n_deferred; d++) {
        long i = rf->deferred[d];
        if (timer_event_open(t, i))
            rf->deferred[kept++] = i;
        else
            (*staged)[k++] = t->events[i];
    }
    rf->n_deferred = kept;
    for (long i = t->flushed; i < t->count; i++) {
        if (timer_event_open(t, i))
            deferred_push(rf, i);
        else
            (*staged)[k++] = t->events[i];
    }
    t->flushed = t->count;
    *n = k;
    return *staged;
}

void runfile_write_events(runfile *rf, timer *t) {
    if (!rf || rf->file < 0 || rf->failed) return;
    long long fresh = 0;
    timing_event *staged = NULL;
    const timing_event *rows = t ? events_collect(rf, t, &fresh, &staged) : NULL;
    long long *counts = xcalloc((unsigned long)rf->size, sizeof(long long));
    agree_gather_longs(rf->comm, &fresh, 1, counts);

    hid_t mtype = h5_timing_event_type();
    hid_t ftype = packed_copy(mtype);
    /* the new rows fill whole chunks of each rank's table */
    const double chunk_bytes = (double)EVENT_CHUNK_ROWS * (double)H5Tget_size(ftype);
    double bytes = 0;
    for (int r = 0; r < rf->size; r++) {
        long long before = (rf->event_rows[r] + EVENT_CHUNK_ROWS - 1) / EVENT_CHUNK_ROWS;
        long long after = (rf->event_rows[r] + counts[r] + EVENT_CHUNK_ROWS - 1) / EVENT_CHUNK_ROWS;
        bytes += (double)(after - before) * chunk_bytes;
    }
    if (!space_agree(rf, bytes, "the timing events")) {
        free(staged);
        free(counts);
        H5Tclose(ftype);
        H5Tclose(mtype);
        return;
    }
    if (!rf->events_created) events_create_all(rf, ftype);

    /* extending is collective, so every rank extends every table; rows are then per rank */
    for (int r = 0; r < rf->size; r++) {
        char path[64];
        snprintf(path, sizeof path, "timings/rank_%05d/events", r);
        if (counts[r] == 0) continue; /* same decision on every rank: opens are collective */
        hid_t d = H5Dopen2(rf->file, path, H5P_DEFAULT);
        H5_CHECK(d);
        hsize_t size[1] = {(hsize_t)(rf->event_rows[r] + counts[r])};
        if (counts[r] > 0) H5_CHECK(H5Dset_extent(d, size));
        if (r == rf->rank && fresh > 0) {
            hid_t fspace = H5Dget_space(d);
            hsize_t start[1] = {(hsize_t)rf->event_rows[r]}, count[1] = {(hsize_t)fresh};
            H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
            hid_t mspace = H5Screate_simple(1, count, NULL);
            H5_CHECK(H5Dwrite(d, mtype, mspace, fspace, rf->dxpl_indep, rows));
            H5Sclose(mspace);
            H5Sclose(fspace);
        }
        H5Dclose(d);
        rf->event_rows[r] += counts[r];
    }
    free(staged);
    H5Tclose(ftype);
    H5Tclose(mtype);
    free(counts);

    /* clock offsets, drops and level: identical metadata on every rank */
    double mine[3] = {t ? t->clock_offset : 0, t ? t->clock_uncertainty : 0,
                      t ? (double)t->dropped : 0};
    double *all = xcalloc((unsigned long)rf->size * 3, sizeof(double));
    agree_gather_doubles(rf->comm, mine, 3, all);
    double *offsets = xcalloc((unsigned long)rf->size, sizeof(double));
    double *uncert = xcalloc((unsigned long)rf->size, sizeof(double));
    long long *dropped = xcalloc((unsigned long)rf->size, sizeof(long long));
    for (int r = 0; r < rf->size; r++) {
        offsets[r] = rf->rows[r].clock_offset = all[3 * r];
        uncert[r] = rf->rows[r].clock_uncertainty = all[3 * r + 1];
        dropped[r] = (long long)all[3 * r + 2];
    }
    int level = t ? (int)t->level : 0, level0 = level;
    agree_root_int(rf->comm, &level0);
    hid_t timings = h5_group_open_or_create(rf->file, "timings");
    h5_attr_write_doubles(timings, "clock_offset", offsets, rf->size);
    h5_attr_write_doubles(timings, "clock_uncertainty", uncert, rf->size);
    h5_attr_write_longs(timings, "dropped", dropped, rf->size);
    h5_attr_write_string(timings, "level", timings_level_name((timings_level)level0));
    H5Gclose(timings);
    mesh_write(rf);
    /* Without a flush the superblock and the metadata stay in memory, and a job killed
     * (SIGKILL, node loss) leaves a file no reader can open: flush_every would keep nothing. */
    H5_CHECK(H5Fflush(rf->file, H5F_SCOPE_GLOBAL));
    rf->last_flush = agree_wtime();
    free(all);
    free(offsets);
    free(uncert);
    free(dropped);
}

/* Writes the summary attributes (mean and percentiles) of one per-iteration series. */
static void series_summary_write(hid_t g, const char *name, const double *values, long n) {
    double *sorted = xcalloc((unsigned long)(n > 0 ? n : 1), sizeof(double));
    if (n > 0) memcpy(sorted, values, (size_t)n * sizeof(double));
    stats_sort(sorted, n);
    static const struct {
        const char *suffix;
        double q;
    } points[] = {{"p50", 50}, {"p90", 90}, {"p99", 99}};
    char attr[64];
    snprintf(attr, sizeof attr, "%s_mean", name);
    h5_attr_write_double(g, attr, stats_mean(sorted, n));
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        snprintf(attr, sizeof attr, "%s_%s", name, points[i].suffix);
        h5_attr_write_double(g, attr, stats_percentile(sorted, n, points[i].q));
    }
    free(sorted);
}

/* /metrics/itl and its mean and percentiles: rank 0's n gaps (n agreed), as the other series. */
static void itl_write(runfile *rf, hid_t g, const run_metrics *metrics, long long n) {
    double *itl = xcalloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (rf->rank == 0 && n > 0) memcpy(itl, metrics->itl, (size_t)n * sizeof(double));
    agree_root_doubles(rf->comm, itl, (int)n);
    write_rank0_1d(rf, "metrics/itl", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, (long)n, itl);
    series_summary_write(g, "itl", itl, (long)n);
    free(itl);
}

void runfile_write_metrics(runfile *rf, const run_metrics *metrics) {
    if (!rf || rf->file < 0 || rf->failed) return;
    /* rank 0's values are the run's; broadcast them so every rank writes identical metadata */
    int n = rf->rank == 0 ? metrics->iterations : 0;
    agree_root_int(rf->comm, &n);
    if (n < 0) n = 0;
    double *series = xcalloc((unsigned long)(3 * n + 1), sizeof(double));
    if (rf->rank == 0 && n > 0) {
        memcpy(series, metrics->latency, (size_t)n * sizeof(double));
        memcpy(series + n, metrics->ttft, (size_t)n * sizeof(double));
        memcpy(series + 2 * n, metrics->tpot, (size_t)n * sizeof(double));
    }
    agree_root_doubles(rf->comm, series, 3 * n);
    double scalars[6] = {metrics->prefill_seconds,          metrics->decode_seconds,
                         metrics->cold_start_seconds,       (double)metrics->prompt_tokens,
                         (double)metrics->generated_tokens, (double)metrics->requests};
    agree_root_doubles(rf->comm, scalars, 6);
    double *peak = xcalloc((unsigned long)rf->size, sizeof(double));
    agree_gather_doubles(rf->comm, &metrics->peak_memory_bytes, 1, peak);
    long long n_itl = rf->rank == 0 ? metrics->n_itl : 0;
    agree_root_long(rf->comm, &n_itl);
    if (n_itl < 0) n_itl = 0;
    if (!space_agree(rf, 8.0 * (3.0 * n + rf->size + (double)n_itl), "/metrics")) {
        free(series);
        free(peak);
        return;
    }

    hid_t g = h5_group_open_or_create(rf->file, "metrics");
    write_rank0_1d(rf, "metrics/latency", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, n, series);
    write_rank0_1d(rf, "metrics/ttft", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, n, series + n);
    write_rank0_1d(rf, "metrics/tpot", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, n, series + 2 * n);
    write_rank0_1d(rf, "metrics/peak_memory_bytes", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, rf->size,
                   peak);

    h5_attr_write_int(g, "iterations", n);
    h5_attr_write_double(g, "prefill_seconds", scalars[0]);
    h5_attr_write_double(g, "decode_seconds", scalars[1]);
    h5_attr_write_double(g, "cold_start_seconds", scalars[2]);
    h5_attr_write_int(g, "prompt_tokens", (long long)scalars[3]);
    h5_attr_write_int(g, "generated_tokens", (long long)scalars[4]);
    h5_attr_write_int(g, "requests", (long long)scalars[5]);
    series_summary_write(g, "latency", series, n);
    series_summary_write(g, "ttft", series + n, n);
    series_summary_write(g, "tpot", series + 2 * n, n);
    itl_write(rf, g, metrics, n_itl);
    double mean_latency = stats_mean(series, n);
    double tokens_per_s = n > 0 && mean_latency > 0 ? scalars[4] / mean_latency : 0;
    double requests_per_s = n > 0 && mean_latency > 0 ? scalars[5] / mean_latency : 0;
    h5_attr_write_double(g, "tokens_per_s", tokens_per_s);
    h5_attr_write_double(g, "requests_per_s", requests_per_s);
    /* Per rank divides by the world size, per replica by dp: the rate one GPU (or one model
     * copy) contributes. The percentiles are the rates at the latency percentiles, so p99 is
     * the slow tail: tokens_per_s_p99 = generated_tokens / latency_p99. */
    double replicas = rf->dp > 0 ? rf->dp : 1;
    h5_attr_write_int(g, "replicas", (long long)replicas);
    h5_attr_write_double(g, "tokens_per_s_per_rank", tokens_per_s / rf->size);
    h5_attr_write_double(g, "requests_per_s_per_rank", requests_per_s / rf->size);
    h5_attr_write_double(g, "tokens_per_s_per_replica", tokens_per_s / replicas);
    h5_attr_write_double(g, "requests_per_s_per_replica", requests_per_s / replicas);
    {
        double *sorted = xcalloc((unsigned long)(n > 0 ? n : 1), sizeof(double));
        if (n > 0) memcpy(sorted, series, (size_t)n * sizeof(double));
        stats_sort(sorted, n);
        static const struct {
            const char *suffix;
            double q;
        } tails[] = {{"p50", 50}, {"p90", 90}, {"p99", 99}};
        for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
            double lat = stats_percentile(sorted, n, tails[i].q);
            char attr[64];
            snprintf(attr, sizeof attr, "tokens_per_s_%s", tails[i].suffix);
            h5_attr_write_double(g, attr, n > 0 && lat > 0 ? scalars[4] / lat : 0);
            snprintf(attr, sizeof attr, "requests_per_s_%s", tails[i].suffix);
            h5_attr_write_double(g, attr, n > 0 && lat > 0 ? scalars[5] / lat : 0);
        }
        free(sorted);
    }
    /* warm start: the first token of a measured (warm) iteration, next to cold_start_seconds */
    {
        double *sorted = xcalloc((unsigned long)(n > 0 ? n : 1), sizeof(double));
        if (n > 0) memcpy(sorted, series + n, (size_t)n * sizeof(double));
        stats_sort(sorted, n);
        h5_attr_write_double(g, "warm_start_seconds", stats_percentile(sorted, n, 50));
        free(sorted);
    }
    double peak_max = 0;
    for (int r = 0; r < rf->size; r++)
        peak_max = peak[r] > peak_max ? peak[r] : peak_max;
    h5_attr_write_double(g, "peak_memory_bytes_max", peak_max);
    H5Gclose(g);
    free(series);
    free(peak);
}

void runfile_write_series(runfile *rf, const char *path, const double *values, long n) {
    if (!rf || rf->file < 0 || rf->failed) return;
    long long count = rf->rank == 0 ? n : 0;
    agree_root_long(rf->comm, &count);
    if (!space_agree(rf, 8.0 * (double)count, path)) return;
    write_rank0_1d(rf, path, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, (long)count,
                   rf->rank == 0 ? values : NULL);
}

void runfile_write_scalar(runfile *rf, const char *group_path, const char *name, double value) {
    if (!rf || rf->file < 0 || rf->failed) return;
    agree_root_doubles(rf->comm, &value, 1);
    if (!space_agree(rf, 0, group_path)) return;
    hid_t g = h5_group_open_or_create(rf->file, group_path);
    h5_attr_write_double(g, name, value);
    H5Gclose(g);
}

void runfile_write_text_attr(runfile *rf, const char *group_path, const char *name,
                             const char *value) {
    if (!rf || rf->file < 0 || rf->failed) return;
    char text[256] = "";
    if (value) snprintf(text, sizeof text, "%s", value);
    agree_root_text(rf->comm, text, (int)sizeof text); /* rank 0's value */
    if (!space_agree(rf, 0, group_path)) return;
    hid_t g = h5_group_open_or_create(rf->file, group_path);
    h5_attr_write_string(g, name, text);
    H5Gclose(g);
}

void runfile_write_nll(runfile *rf, const double *nll, long row_begin, long rows, long total_rows,
                       long cols, double perplexity, long count, int first) {
    if (!rf || rf->file < 0 || rf->failed) return;
    hsize_t dims[2] = {(hsize_t)total_rows, (hsize_t)cols};
    hsize_t start[2] = {(hsize_t)row_begin, 0}, count2[2] = {(hsize_t)rows, (hsize_t)cols};
    CHECK(rows == 0 || (row_begin >= 0 && row_begin + rows <= total_rows),
          "nll rows [%ld, %ld) outside [0, %ld)", row_begin, row_begin + rows, total_rows);
    if (!space_agree(rf, 8.0 * (double)total_rows * (double)cols, "output/nll")) return;
    double values[2] = {perplexity, (double)count};
    agree_root_doubles(rf->comm, values, 2); /* rank 0's */
    hid_t d = dataset_open_or_create(rf->file, "output/nll", H5T_IEEE_F64LE, 2, dims);
    dataset_write_block(rf, d, H5T_NATIVE_DOUBLE, 2, start, count2, nll);
    h5_attr_write_double(d, "perplexity", values[0]);
    h5_attr_write_int(d, "count", (long long)values[1]);
    h5_attr_write_int(d, "first", first);
    H5Dclose(d);
}

/* For the writers of other groups in src/io (runfile_internal.h). */
hid_t runfile_hdf5(const runfile *rf) { return rf->file; }
MPI_Comm runfile_comm(const runfile *rf) { return rf->comm; }
int runfile_room(runfile *rf, double bytes, const char *what) {
    return space_agree(rf, bytes, what);
}

static void runfile_release(runfile *rf) {
    runfile_pad_disarm(); /* closed whole, or renamed: nothing left to pad */
    agree_vote_free(&rf->vote);
    if (rf->dxpl_coll > 0) H5Pclose(rf->dxpl_coll);
    if (rf->dxpl_indep > 0) H5Pclose(rf->dxpl_indep);
    free(rf->rows);
    free(rf->event_rows);
    free(rf->deferred);
    free(rf);
}

/* Closes with complete=0, HDF5's own messages silenced: the caller reports. Closing writes the
 * dirty metadata, which the margin of space_agree leaves room for. */
static void file_close_incomplete(runfile *rf) {
    if (rf->file < 0) return;
    H5E_BEGIN_TRY { H5Fclose(rf->file); }
    H5E_END_TRY;
    rf->file = -1;
}

status runfile_finish(runfile *rf) {
    if (!rf) return STATUS_OK;
    /* the final flush writes metadata only */
    if (!space_agree(rf, 0, "the final flush")) {
        error_set("%s; the file keeps what was written before, with complete=0", rf->error);
        runfile_close_incomplete(rf);
        return STATUS_RUNTIME;
    }
    /* everything else reaches the disk before complete=1 does, so complete=1 implies whole */
    H5_CHECK(H5Fflush(rf->file, H5F_SCOPE_GLOBAL));
    h5_attr_write_int(rf->file, "complete", 1);
    H5_CHECK(H5Fclose(rf->file));
    rf->file = -1;
    /* An atomic replace: with two runs writing one PATH at once, PATH is the whole file of the
     * one that renamed last, and each run's own partial never mixes with the other's. */
    int err = 0;
    if (rf->rank == 0 && rename(rf->partial, rf->path) != 0) err = errno;
    agree_root_int(rf->comm, &err);
    agree_barrier(rf->comm);
    if (err) error_set("cannot rename %s to %s: %s", rf->partial, rf->path, strerror(err));
    runfile_release(rf);
    return err ? STATUS_RUNTIME : STATUS_OK;
}

void runfile_close_incomplete(runfile *rf) {
    if (!rf) return;
    file_close_incomplete(rf);
    runfile_release(rf);
}
