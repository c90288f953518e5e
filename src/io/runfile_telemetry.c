/* /telemetry in the run file: each rank's samples appended to its own chunked table
 * /telemetry/rank_NNNNN at every timing flush and at the end, the way /timings is, so a
 * partial file keeps the samples so far. Layout: docs/schema.md "/telemetry". */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/h5util.h"
#include "io/runfile.h"
#include "io/runfile_internal.h"
#include "io/telemetry_read.h"
#include "parallel/agree.h"

enum { TELEMETRY_CHUNK_ROWS = 512 };

/* What each field is and where it comes from, stored as the group's "sources" attribute. */
static const char TELEMETRY_SOURCES[] =
    "t: s since run start on rank 0's clock (as /timings); cpu_util: cores busy, getrusage "
    "user+system over wall since the previous sample; rss_bytes: /proc/self/statm; mem_bw_gbs: "
    "node DRAM read+write GB/s (see memory_bandwidth); gpu_*: NVML (see nvml): sm_util and "
    "mem_util percent, mem_used_bytes, power_w, sm_clock_mhz, mem_clock_mhz";

static hid_t telemetry_sample_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(telemetry_sample));
    H5_CHECK(t);
    static const struct {
        const char *name;
        size_t offset;
    } fields[] = {
        {"t", HOFFSET(telemetry_sample, t)},
        {"cpu_util", HOFFSET(telemetry_sample, cpu_util)},
        {"rss_bytes", HOFFSET(telemetry_sample, rss_bytes)},
        {"mem_bw_gbs", HOFFSET(telemetry_sample, mem_bw_gbs)},
        {"gpu_sm_util", HOFFSET(telemetry_sample, gpu_sm_util)},
        {"gpu_mem_util", HOFFSET(telemetry_sample, gpu_mem_util)},
        {"gpu_mem_used_bytes", HOFFSET(telemetry_sample, gpu_mem_used_bytes)},
        {"gpu_power_w", HOFFSET(telemetry_sample, gpu_power_w)},
        {"gpu_sm_clock_mhz", HOFFSET(telemetry_sample, gpu_sm_clock_mhz)},
        {"gpu_mem_clock_mhz", HOFFSET(telemetry_sample, gpu_mem_clock_mhz)},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        H5_CHECK(H5Tinsert(t, fields[i].name, fields[i].offset, H5T_NATIVE_DOUBLE));
    return t;
}

/* The group's attributes; the strings are rank 0's so every rank writes identical metadata. */
static void attrs_write(hid_t file, MPI_Comm comm, int size, const telemetry *t, int rate) {
    char text[2][256] = {"", ""};
    if (t) {
        snprintf(text[0], sizeof text[0], "%s", t->nvml.status);
        snprintf(text[1], sizeof text[1], "%s", t->mem_bw_status);
    }
    agree_root_text(comm, &text[0][0], (int)sizeof text);
    long long mine[2] = {t ? __atomic_load_n(&t->dropped, __ATOMIC_RELAXED) : 0,
                         t ? t->capacity : 0};
    long long *all = xcalloc((unsigned long)size * 2, sizeof(long long));
    agree_gather_longs(comm, mine, 2, all);
    long long *dropped = xcalloc((unsigned long)size, sizeof(long long));
    for (int r = 0; r < size; r++)
        dropped[r] = all[2 * r];
    hid_t g = h5_group_open_or_create(file, "telemetry");
    h5_attr_write_int(g, "rate_hz", rate);
    h5_attr_write_string(g, "sources", TELEMETRY_SOURCES);
    h5_attr_write_string(g, "nvml", text[0]);
    h5_attr_write_string(g, "memory_bandwidth", text[1]);
    h5_attr_write_int(g, "capacity", all[1]);
    h5_attr_write_longs(g, "dropped", dropped, size);
    H5Gclose(g);
    free(dropped);
    free(all);
}

void runfile_write_telemetry(runfile *rf, telemetry *t) {
    if (!rf || runfile_failed(rf) || runfile_hdf5(rf) < 0) return;
    const MPI_Comm comm = runfile_comm(rf);
    const hid_t file = runfile_hdf5(rf);
    const int size = agree_comm_size(comm);
    int rate = t ? t->rate_hz : 0;
    agree_root_int(comm, &rate); /* the job's, the same on every rank */
    if (rate <= 0) return;

    long long fresh = t ? telemetry_count(t) - t->flushed : 0;
    long long *counts = xcalloc((unsigned long)size, sizeof(long long));
    agree_gather_longs(comm, &fresh, 1, counts);
    double bytes = 0;
    for (int r = 0; r < size; r++)
        bytes += (double)counts[r] * (double)sizeof(telemetry_sample);
    if (!runfile_room(rf, bytes + (double)TELEMETRY_CHUNK_ROWS * sizeof(telemetry_sample) * size,
                      "the telemetry samples")) {
        free(counts);
        return;
    }
    hid_t mtype = telemetry_sample_type();
    runfile_tables_append(rf, "telemetry", mtype, TELEMETRY_CHUNK_ROWS, counts,
                          t ? t->samples + t->flushed : NULL);
    if (t) t->flushed += fresh;
    H5Tclose(mtype);
    free(counts);
    attrs_write(file, comm, size, t, rate);
    H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL)); /* a killed job keeps the samples so far */
}

/* ---- reading, for the tools ------------------------------------------------------------ */

int run_telemetry_read(hid_t file, int world_size, run_telemetry *out) {
    memset(out, 0, sizeof *out);
    out->world_size = world_size;
    if (!h5_exists(file, "telemetry")) return 0;
    hid_t g = H5Gopen2(file, "telemetry", H5P_DEFAULT);
    if (g < 0) {
        error_set("/telemetry is not a group");
        return -1;
    }
    long long rate = 0;
    h5_attr_read_long(g, "rate_hz", &rate);
    out->rate_hz = (int)rate;
    h5_attr_read_string(g, "nvml", out->nvml, sizeof out->nvml);
    h5_attr_read_string(g, "memory_bandwidth", out->memory_bandwidth, sizeof out->memory_bandwidth);
    H5Gclose(g);
    out->present = 1;
    out->n = xcalloc((unsigned long)(world_size > 0 ? world_size : 1), sizeof(long));
    out->samples = xcalloc((unsigned long)(world_size > 0 ? world_size : 1), sizeof(void *));
    hid_t mtype = telemetry_sample_type();
    int rc = 0;
    for (int r = 0; r < world_size && rc == 0; r++) {
        char path[64];
        snprintf(path, sizeof path, "telemetry/rank_%05d", r);
        if (!h5_exists(file, path)) continue; /* a rank that never flushed */
        int ndims = 0;
        hsize_t dims[8];
        long count = 0;
        out->samples[r] = h5_dataset_read_all(file, path, mtype, &ndims, dims, &count);
        if (!out->samples[r] && count != 0) {
            error_set("/%s is not a table of telemetry samples", path);
            rc = -1;
        }
        out->n[r] = out->samples[r] ? count : 0;
    }
    H5Tclose(mtype);
    if (rc) run_telemetry_free(out);
    return rc;
}

void run_telemetry_free(run_telemetry *t) {
    for (int r = 0; r < t->world_size && t->samples; r++)
        free(t->samples[r]);
    free(t->samples);
    free(t->n);
    memset(t, 0, sizeof *t);
}
