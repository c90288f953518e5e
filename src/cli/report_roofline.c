/* `tripar report --roofline`: the per-phase roofline table (analysis/run_roofline.h) of each
 * run file's slowest rank, as text, CSV or JSON; the columns are docs/cli.md's and the label
 * rule docs/benchmarks.md "Per-phase rooflines". */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "analysis/run_roofline.h"
#include "cli/cli.h"
#include "cli/report_roofline.h"

static const char *const period_names[ROOF_PERIOD_COUNT] = {"prefill", "decode"};

/* The phases a table shows: the ones with a step, whose time a period holds. */
static int roof_row_shown(const roof_phase *ph, phase p) {
    return ph->events > 0 && p != PHASE_ITERATION && p != PHASE_WEIGHT_INIT;
}

/* "compute-bound, 81% of sgemm ceiling", "memory-bound, 40% of stream bandwidth",
 * "overhead-bound, 3.4% of stream bandwidth at 19.6 us per event", "communication-bound",
 * "-". */
static void roof_label_text(char *out, size_t len, const roof_phase *ph, const run_roofline *t) {
    /* an overhead-bound phase's efficiency is against the ceiling its intensity points at */
    const int compute_side =
        ph->bytes > 0 && t->has_ceilings && ph->flops / ph->bytes > t->peak_gflops / t->peak_gbs;
    const char *ceiling = compute_side ? "sgemm ceiling" : "stream bandwidth";
    switch (ph->bound) {
    case ROOF_COMPUTE:
        snprintf(out, len, "compute-bound, %.0f%% of sgemm ceiling", 100 * ph->efficiency);
        break;
    case ROOF_MEMORY:
        snprintf(out, len, "memory-bound, %.0f%% of stream bandwidth", 100 * ph->efficiency);
        break;
    case ROOF_OVERHEAD:
        snprintf(out, len, "overhead-bound, %.1f%% of %s at %.1f us per event",
                 100 * ph->efficiency, ceiling, 1e6 * ph->seconds / (double)ph->events);
        break;
    case ROOF_COMMUNICATION: snprintf(out, len, "communication-bound"); break;
    case ROOF_NONE: snprintf(out, len, "-"); break;
    }
}

static void print_roofline(FILE *out, const run_data *run, const run_roofline *t) {
    char label[96];
    run_data_label(run, label, sizeof label);
    fprintf(out, "%s  (%s)\n", run->path, label);
    fprintf(out,
            "  rooflines of rank %d, the slowest (most compute time in measured "
            "iterations); weights %s, KV cache %s\n",
            t->rank, t->weight_dtype, t->kv_cache);
    if (t->has_ceilings)
        fprintf(out,
                "  ceilings: %.2f GFLOP/s (%s, the better of before and after the run), "
                "%.2f GB/s (%s); ridge %.2f FLOP/B\n",
                t->peak_gflops, t->gflops_probe[0] ? t->gflops_probe : "sgemm", t->peak_gbs,
                t->gbs_probe[0] ? t->gbs_probe : "stream", t->peak_gflops / t->peak_gbs);
    else
        fprintf(out, "  no ceilings in the file (run with bench.roofline: true): achieved "
                     "rates only, no compute/memory labels\n");
    fprintf(out, "  %-8s %-14s %10s %7s %10s %10s %8s %9s %8s  %s\n", "period", "phase", "time ms",
            "events", "GFLOP", "GB", "FLOP/B", "GFLOP/s", "GB/s", "label");
    for (int period = 0; period < ROOF_PERIOD_COUNT; period++)
        for (int p = 0; p < PHASE_COUNT; p++) {
            const roof_phase *ph = &t->phase[period][p];
            if (!roof_row_shown(ph, (phase)p)) continue;
            char text[128];
            roof_label_text(text, sizeof text, ph, t);
            const double intensity = ph->bytes > 0 ? ph->flops / ph->bytes : NAN;
            fprintf(out, "  %-8s %-14s %10.3f %7ld %10.4g %10.4g %8.3g %9.3g %8.3g  %s%s%s\n",
                    period_names[period], phase_name((phase)p), ph->seconds * 1e3, ph->events,
                    ph->flops / 1e9, ph->bytes / 1e9, intensity, ph->gflops, ph->gbs,
                    ph->bound == ROOF_NONE ? "" : phase_name((phase)p),
                    ph->bound == ROOF_NONE ? "" : ": ", text);
        }
}

static void csv_number(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, ",%.9g", v);
    else
        fprintf(f, ",");
}

static int write_roofline_csv(const char *path, const run_data *runs, const run_roofline *t,
                              int n) {
    FILE *f = fopen(path, "w");
    if (!f) {
        error_set("%s: cannot write", path);
        return STATUS_BAD_INPUT;
    }
    fprintf(f, "file,rank,period,phase,seconds,events,flops,bytes,weight_bytes,kv_bytes,"
               "act_bytes,intensity,gflops,gbs,bound,efficiency,peak_gflops,peak_gbs\n");
    for (int i = 0; i < n; i++)
        for (int period = 0; period < ROOF_PERIOD_COUNT; period++)
            for (int p = 0; p < PHASE_COUNT; p++) {
                const roof_phase *ph = &t[i].phase[period][p];
                if (!roof_row_shown(ph, (phase)p)) continue;
                fprintf(f, "\"%s\",%d,%s,%s", runs[i].path, t[i].rank, period_names[period],
                        phase_name((phase)p));
                csv_number(f, ph->seconds);
                fprintf(f, ",%ld", ph->events);
                csv_number(f, ph->flops);
                csv_number(f, ph->bytes);
                csv_number(f, ph->weight_bytes);
                csv_number(f, ph->kv_bytes);
                csv_number(f, ph->act_bytes);
                csv_number(f, ph->bytes > 0 ? ph->flops / ph->bytes : NAN);
                csv_number(f, ph->gflops);
                csv_number(f, ph->gbs);
                fprintf(f, ",%s", roof_bound_name(ph->bound));
                csv_number(f, ph->efficiency);
                csv_number(f, t[i].peak_gflops);
                csv_number(f, t[i].peak_gbs);
                fprintf(f, "\n");
            }
    fclose(f);
    return STATUS_OK;
}

static int write_roofline_json(const char *path, const run_data *runs, const run_roofline *t,
                               int n) {
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(runs[i].path));
        json_object_set_new(o, "rank", json_integer(t[i].rank));
        json_object_set_new(o, "weight_dtype", json_string(t[i].weight_dtype));
        json_object_set_new(o, "kv_cache", json_string(t[i].kv_cache));
        json_object_set_new(o, "has_ceilings", json_boolean(t[i].has_ceilings));
        json_object_set_new(o, "peak_gflops", cli_json_number(t[i].peak_gflops));
        json_object_set_new(o, "peak_gbs", cli_json_number(t[i].peak_gbs));
        json_object_set_new(o, "gflops_probe", json_string(t[i].gflops_probe));
        json_object_set_new(o, "gbs_probe", json_string(t[i].gbs_probe));
        json_t *rows = json_array();
        for (int period = 0; period < ROOF_PERIOD_COUNT; period++)
            for (int p = 0; p < PHASE_COUNT; p++) {
                const roof_phase *ph = &t[i].phase[period][p];
                if (!roof_row_shown(ph, (phase)p)) continue;
                json_t *r = json_object();
                json_object_set_new(r, "period", json_string(period_names[period]));
                json_object_set_new(r, "phase", json_string(phase_name((phase)p)));
                json_object_set_new(r, "seconds", cli_json_number(ph->seconds));
                json_object_set_new(r, "events", json_integer(ph->events));
                json_object_set_new(r, "flops", cli_json_number(ph->flops));
                json_object_set_new(r, "bytes", cli_json_number(ph->bytes));
                json_object_set_new(r, "weight_bytes", cli_json_number(ph->weight_bytes));
                json_object_set_new(r, "kv_bytes", cli_json_number(ph->kv_bytes));
                json_object_set_new(r, "act_bytes", cli_json_number(ph->act_bytes));
                json_object_set_new(r, "gflops", cli_json_number(ph->gflops));
                json_object_set_new(r, "gbs", cli_json_number(ph->gbs));
                json_object_set_new(r, "bound", json_string(roof_bound_name(ph->bound)));
                json_object_set_new(r, "efficiency", cli_json_number(ph->efficiency));
                json_array_append_new(rows, r);
            }
        json_object_set_new(o, "phases", rows);
        json_array_append_new(list, o);
    }
    json_t *root = json_object();
    json_object_set_new(root, "rooflines", list);
    return cli_json_write(root, path, NULL, JSON_INDENT(2));
}

int report_roofline(const char *const *files, int n, const char *csv, const char *json) {
    run_data *runs = xcalloc((size_t)n, sizeof(run_data));
    run_roofline *tables = xcalloc((size_t)n, sizeof(run_roofline));
    int loaded = 0, rc = STATUS_OK;
    /* every file is read and priced before anything is printed */
    for (; loaded < n && rc == STATUS_OK; loaded++) {
        rc = run_data_load(&runs[loaded], files[loaded]);
        if (rc != STATUS_OK) break;
        if (!runs[loaded].complete) run_file_warn_incomplete("report", files[loaded]);
        rc = run_roofline_compute(&runs[loaded], run_roofline_slowest_rank(&runs[loaded]),
                                  &tables[loaded]);
    }
    if (rc == STATUS_OK) {
        for (int i = 0; i < n; i++) {
            if (i > 0) printf("\n");
            print_roofline(stdout, &runs[i], &tables[i]);
        }
        if (csv && write_roofline_csv(csv, runs, tables, n) != STATUS_OK) rc = STATUS_BAD_INPUT;
        if (json && write_roofline_json(json, runs, tables, n) != STATUS_OK) rc = STATUS_BAD_INPUT;
    }
    if (rc != STATUS_OK) fprintf(stderr, "tripar report: %s\n", error_message());
    for (int i = 0; i < loaded; i++)
        run_data_free(&runs[i]);
    free(runs);
    free(tables);
    return rc == STATUS_OK ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
}
