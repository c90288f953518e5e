/* Serial reader of run files for the tools (see runread.h). */
#include "io/runread.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/h5util.h"

static int attr_int(hid_t obj, const char *name, int fallback) {
    long long v;
    return h5_attr_read_long(obj, name, &v) == 0 ? (int)v : fallback;
}

static double attr_num(hid_t obj, const char *name) {
    double v;
    return h5_attr_read_double(obj, name, &v) == 0 ? v : NAN;
}

static void mesh_read(run_data *run) {
    run->ranks = xcalloc((unsigned long)run->world_size, sizeof(run_rank));
    for (int r = 0; r < run->world_size; r++) run->ranks[r].rank = r;
    if (!h5_exists(run->file, "mesh")) return;
    hid_t host = h5_string_type(64);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(run_rank));
    H5Tinsert(t, "rank", HOFFSET(run_rank, rank), H5T_NATIVE_INT);
    H5Tinsert(t, "dp_rank", HOFFSET(run_rank, dp_rank), H5T_NATIVE_INT);
    H5Tinsert(t, "pp_rank", HOFFSET(run_rank, pp_rank), H5T_NATIVE_INT);
    H5Tinsert(t, "tp_rank", HOFFSET(run_rank, tp_rank), H5T_NATIVE_INT);
    H5Tinsert(t, "device", HOFFSET(run_rank, device), H5T_NATIVE_INT);
    H5Tinsert(t, "host", HOFFSET(run_rank, host), host);
    H5Tinsert(t, "clock_offset", HOFFSET(run_rank, clock_offset), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "clock_uncertainty", HOFFSET(run_rank, clock_uncertainty), H5T_NATIVE_DOUBLE);
    hid_t d = H5Dopen2(run->file, "mesh", H5P_DEFAULT);
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    if (space >= 0 && H5Sget_simple_extent_npoints(space) == run->world_size) {
        herr_t err;
        H5E_BEGIN_TRY {
            err = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, run->ranks);
        } H5E_END_TRY;
        if (err < 0) memset(run->ranks, 0, (size_t)run->world_size * sizeof(run_rank));
    }
    if (space >= 0) H5Sclose(space);
    if (d >= 0) H5Dclose(d);
    H5Tclose(t);
    H5Tclose(host);
}

static void events_read(run_data *run) {
    run->n_events = xcalloc((unsigned long)run->world_size, sizeof(long));
    run->events = xcalloc((unsigned long)run->world_size, sizeof(timing_event *));
    hid_t t = h5_timing_event_type();
    for (int r = 0; r < run->world_size; r++) {
        char path[64];
        snprintf(path, sizeof path, "timings/rank_%05d/events", r);
        if (!h5_exists(run->file, path)) continue;
        hid_t d = H5Dopen2(run->file, path, H5P_DEFAULT);
        hid_t space = H5Dget_space(d);
        hssize_t n = H5Sget_simple_extent_npoints(space);
        if (n > 0) {
            run->events[r] = xcalloc((unsigned long)n, sizeof(timing_event));
            herr_t err;
            H5E_BEGIN_TRY {
                err = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, run->events[r]);
            } H5E_END_TRY;
            run->n_events[r] = err < 0 ? 0 : (long)n;
        }
        H5Sclose(space);
        H5Dclose(d);
    }
    H5Tclose(t);
}

static void metrics_read(run_data *run) {
    run_headline *m = &run->metrics;
    if (!h5_exists(run->file, "metrics")) return;
    hid_t g = H5Gopen2(run->file, "metrics", H5P_DEFAULT);
    m->present = 1;
    m->iterations = attr_int(g, "iterations", 0);
    m->latency_mean = attr_num(g, "latency_mean");
    m->latency_p50 = attr_num(g, "latency_p50");
    m->latency_p90 = attr_num(g, "latency_p90");
    m->latency_p99 = attr_num(g, "latency_p99");
    m->ttft_mean = attr_num(g, "ttft_mean");
    m->ttft_p50 = attr_num(g, "ttft_p50");
    m->tpot_mean = attr_num(g, "tpot_mean");
    m->tpot_p50 = attr_num(g, "tpot_p50");
    m->tokens_per_s = attr_num(g, "tokens_per_s");
    m->requests_per_s = attr_num(g, "requests_per_s");
    m->peak_memory_bytes_max = attr_num(g, "peak_memory_bytes_max");
    m->prefill_seconds = attr_num(g, "prefill_seconds");
    m->decode_seconds = attr_num(g, "decode_seconds");
    m->cold_start_seconds = attr_num(g, "cold_start_seconds");
    long long v;
    m->generated_tokens = h5_attr_read_long(g, "generated_tokens", &v) == 0 ? v : 0;
    m->requests = h5_attr_read_long(g, "requests", &v) == 0 ? v : 0;
    H5Gclose(g);
}

/* The root attributes: the format check, the mesh shape and the run's labels. Returns
 * STATUS_BAD_INPUT with error_message() set when the file is not a usable tripar run. */
static int root_read(run_data *run, const char *path) {
    char format[32] = "";
    if (h5_attr_read_string(run->file, "format", format, sizeof format) != 0 ||
        strcmp(format, "tripar-run") != 0) {
        error_set("%s: not a tripar run file (root attribute format is \"%s\", want "
                  "\"tripar-run\")", path, format);
        return STATUS_BAD_INPUT;
    }
    run->complete = attr_int(run->file, "complete", 0);
    run->world_size = attr_int(run->file, "world_size", 0);
    if (run->world_size <= 0 || run->world_size > (1 << 24)) {
        error_set("%s: bad world_size attribute", path);
        return STATUS_BAD_INPUT;
    }
    run->dp = attr_int(run->file, "dp", 1);
    run->tp = attr_int(run->file, "tp", 1);
    run->pp = attr_int(run->file, "pp", 1);
    run->microbatches = attr_int(run->file, "microbatches", 1);
    run->overlap = attr_int(run->file, "overlap", 0);
    h5_attr_read_string(run->file, "order", run->order, sizeof run->order);
    h5_attr_read_string(run->file, "backend", run->backend, sizeof run->backend);
    h5_attr_read_string(run->file, "precision", run->precision, sizeof run->precision);
    h5_attr_read_string(run->file, "created", run->created, sizeof run->created);
    h5_attr_read_string(run->file, "tripar_version", run->version, sizeof run->version);
    return STATUS_OK;
}

/* Entries of the root attribute hosts, or 0 when it is absent. */
static int hosts_count(hid_t file) {
    hid_t hosts = -1;
    H5E_BEGIN_TRY { hosts = H5Aopen(file, "hosts", H5P_DEFAULT); } H5E_END_TRY;
    if (hosts < 0) return 0;
    hid_t space = H5Aget_space(hosts);
    int n = (int)H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    H5Aclose(hosts);
    return n;
}

int run_data_load(run_data *run, const char *path) {
    memset(run, 0, sizeof *run);
    snprintf(run->path, sizeof run->path, "%s", path);
    run->file = h5_open_read(path);
    if (run->file < 0) return STATUS_BAD_INPUT;
    if (root_read(run, path) != STATUS_OK) {
        H5Fclose(run->file);
        run->file = -1;
        return STATUS_BAD_INPUT;
    }
    run->n_hosts = hosts_count(run->file);
    mesh_read(run);
    events_read(run);
    metrics_read(run);
    return STATUS_OK;
}

void run_data_free(run_data *run) {
    if (run->events)
        for (int r = 0; r < run->world_size; r++) free(run->events[r]);
    free(run->events);
    free(run->n_events);
    free(run->ranks);
    if (run->file > 0) H5Fclose(run->file);
    memset(run, 0, sizeof *run);
    run->file = -1;
}

void run_data_label(const run_data *run, char *out, size_t len) {
    snprintf(out, len, "dp%d-tp%d-pp%d m%d%s", run->dp, run->tp, run->pp, run->microbatches,
             run->overlap ? " overlap" : "");
}
