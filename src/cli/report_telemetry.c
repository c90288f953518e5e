/* `tripar report`'s telemetry per phase (report_telemetry.h). A sample counts for a phase when
 * its time lies inside one of that phase's events on the same rank; each sample's CPU use
 * covers the period before it, so phases much shorter than the sample period are averaged
 * over few samples, which the table's sample count shows. */
#include "cli/report_telemetry.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "cli/cli.h"
#include "io/telemetry_read.h"

/* The averaged fields, in table order; offsets into telemetry_sample. */
static const struct {
    const char *name, *head, *fmt;
    size_t offset;
    double scale; /* to the table's unit */
    int gpu;
} FIELDS[] = {
    {"cpu_util", "cpu_cores", "%10.2f", offsetof(telemetry_sample, cpu_util), 1, 0},
    {"rss_bytes", "rss_MiB", "%10.1f", offsetof(telemetry_sample, rss_bytes), 1.0 / 1048576, 0},
    {"mem_bw_gbs", "mem_GB/s", "%10.2f", offsetof(telemetry_sample, mem_bw_gbs), 1, 0},
    {"gpu_sm_util", "sm_%", "%10.1f", offsetof(telemetry_sample, gpu_sm_util), 1, 1},
    {"gpu_mem_util", "mem_%", "%10.1f", offsetof(telemetry_sample, gpu_mem_util), 1, 1},
    {"gpu_mem_used_bytes", "used_GiB", "%10.2f", offsetof(telemetry_sample, gpu_mem_used_bytes),
     1.0 / 1073741824, 1},
    {"gpu_power_w", "power_W", "%10.1f", offsetof(telemetry_sample, gpu_power_w), 1, 1},
    {"gpu_sm_clock_mhz", "sm_MHz", "%10.0f", offsetof(telemetry_sample, gpu_sm_clock_mhz), 1, 1},
    {"gpu_mem_clock_mhz", "mem_MHz", "%10.0f", offsetof(telemetry_sample, gpu_mem_clock_mhz), 1, 1},
};
enum { N_FIELDS = sizeof FIELDS / sizeof FIELDS[0] };

typedef struct {
    long samples[PHASE_COUNT];         /* samples inside the phase, every rank */
    double sum[PHASE_COUNT][N_FIELDS]; /* of the finite values */
    long finite[PHASE_COUNT][N_FIELDS];
    long total;               /* samples in the file */
    int any_finite[N_FIELDS]; /* a column worth printing */
    int measured_only;        /* only events of measured iterations counted */
} phase_telemetry;

static double field_of(const telemetry_sample *s, int f) {
    return *(const double *)((const char *)s + FIELDS[f].offset);
}

typedef struct {
    double t0, t1;
} span;

static int span_cmp(const void *a, const void *b) {
    double x = ((const span *)a)->t0, y = ((const span *)b)->t0;
    return (x > y) - (x < y);
}

/* Adds rank r's samples inside phase p's events (those run_event_counts keeps): the events
 * merged into disjoint spans, then one sweep over the samples (both in time order). */
static void phase_accumulate(phase_telemetry *pt, phase p, const run_data *run, int r,
                             int measured_only, const telemetry_sample *s, long n_s,
                             span *scratch) {
    const timing_event *ev = run->events[r];
    long n = 0;
    for (long i = 0; i < run->n_events[r]; i++)
        if (ev[i].phase == (int)p && run_event_counts(run, r, &ev[i], measured_only) &&
            isfinite(ev[i].t_start) && isfinite(ev[i].t_end))
            scratch[n++] = (span){ev[i].t_start, ev[i].t_end};
    if (!n) return;
    qsort(scratch, (size_t)n, sizeof *scratch, span_cmp);
    long m = 0;
    for (long i = 1; i < n; i++) {
        if (scratch[i].t0 <= scratch[m].t1) {
            if (scratch[i].t1 > scratch[m].t1) scratch[m].t1 = scratch[i].t1;
        } else {
            scratch[++m] = scratch[i];
        }
    }
    n = m + 1;
    long k = 0;
    for (long i = 0; i < n_s; i++) {
        while (k < n && scratch[k].t1 < s[i].t)
            k++;
        if (k == n) break;
        if (s[i].t < scratch[k].t0) continue;
        pt->samples[p]++;
        for (int f = 0; f < N_FIELDS; f++) {
            double v = field_of(&s[i], f);
            if (isfinite(v)) {
                pt->sum[p][f] += v;
                pt->finite[p][f]++;
            }
        }
    }
}

/* 1 and the averages when the file has /telemetry; 0 when it has none; -1 with error_message()
 * set when it is damaged. */
static int phase_telemetry_compute(const run_data *run, run_telemetry *tel, phase_telemetry *pt) {
    memset(pt, 0, sizeof *pt);
    if (run_telemetry_read(run->file, run->world_size, tel) != 0) return -1;
    if (!tel->present) return 0;
    /* the per-phase table's rule (docs/schema.md, Derived metrics): measured iterations only,
     * when the file has any */
    int measured_only = run_measured_only(run);
    pt->measured_only = measured_only;
    for (int r = 0; r < run->world_size; r++) {
        pt->total += tel->n[r];
        if (!tel->n[r] || !run->n_events[r]) continue;
        span *scratch = xmalloc((size_t)run->n_events[r] * sizeof(span));
        for (int p = 0; p < PHASE_COUNT; p++)
            phase_accumulate(pt, (phase)p, run, r, measured_only, tel->samples[r], tel->n[r],
                             scratch);
        free(scratch);
        for (long i = 0; i < tel->n[r]; i++)
            for (int f = 0; f < N_FIELDS; f++)
                if (isfinite(field_of(&tel->samples[r][i], f))) pt->any_finite[f] = 1;
    }
    return 1;
}

static double phase_mean(const phase_telemetry *pt, int p, int f) {
    return pt->finite[p][f] ? pt->sum[p][f] / (double)pt->finite[p][f] : NAN;
}

void report_telemetry_print(FILE *out, const run_data *run) {
    run_telemetry tel;
    phase_telemetry pt;
    int have = phase_telemetry_compute(run, &tel, &pt);
    if (have < 0) fprintf(out, "  telemetry: unreadable: %s\n", error_message());
    if (have <= 0) return;
    long inside = 0;
    for (int p = 0; p < PHASE_COUNT; p++)
        inside += pt.samples[p];
    if (!inside) { /* one line, not a table of headers with no rows */
        fprintf(out,
                "  telemetry: %ld sample%s at %d Hz on %d rank%s, none inside a phase's events%s "
                "(a run shorter than the sample period takes none; record.telemetry sets the "
                "rate)\n",
                pt.total, pt.total == 1 ? "" : "s", tel.rate_hz, run->world_size,
                run->world_size == 1 ? "" : "s", pt.measured_only ? " of measured iterations" : "");
        run_telemetry_free(&tel);
        return;
    }
    fprintf(out,
            "  telemetry per phase (%d Hz, %ld samples on %d ranks; mean over the samples "
            "inside the phase's events%s):\n",
            tel.rate_hz, pt.total, run->world_size,
            pt.measured_only ? " of measured iterations" : "");
    fprintf(out, "    %-14s %8s", "phase", "samples");
    for (int f = 0; f < N_FIELDS; f++)
        if (pt.any_finite[f]) fprintf(out, " %10s", FIELDS[f].head);
    fprintf(out, "\n");
    for (int p = 0; p < PHASE_COUNT; p++) {
        if (!pt.samples[p]) continue;
        fprintf(out, "    %-14s %8ld", phase_name((phase)p), pt.samples[p]);
        for (int f = 0; f < N_FIELDS; f++) {
            if (!pt.any_finite[f]) continue;
            double v = phase_mean(&pt, p, f);
            if (isfinite(v)) {
                fputc(' ', out);
                fprintf(out, FIELDS[f].fmt, v * FIELDS[f].scale);
            } else {
                fprintf(out, " %10s", "-");
            }
        }
        fprintf(out, "\n");
    }
    if (!pt.any_finite[2]) fprintf(out, "  telemetry memory bandwidth: %s\n", tel.memory_bandwidth);
    int gpu = 0;
    for (int f = 0; f < N_FIELDS; f++)
        gpu |= FIELDS[f].gpu && pt.any_finite[f];
    if (!gpu) fprintf(out, "  telemetry GPU fields: nvml %s\n", tel.nvml);
    run_telemetry_free(&tel);
}

void report_telemetry_json(json_t *run_object, const run_data *run) {
    run_telemetry tel;
    phase_telemetry pt;
    if (phase_telemetry_compute(run, &tel, &pt) <= 0) return; /* the text said why */
    json_t *o = json_object();
    json_object_set_new(o, "rate_hz", json_integer(tel.rate_hz));
    json_object_set_new(o, "samples", json_integer(pt.total));
    json_object_set_new(o, "nvml", json_string(tel.nvml));
    json_object_set_new(o, "memory_bandwidth", json_string(tel.memory_bandwidth));
    json_t *phases = json_object();
    for (int p = 0; p < PHASE_COUNT; p++) {
        if (!pt.samples[p]) continue;
        json_t *row = json_object();
        json_object_set_new(row, "samples", json_integer(pt.samples[p]));
        for (int f = 0; f < N_FIELDS; f++)
            json_object_set_new(row, FIELDS[f].name, cli_json_number(phase_mean(&pt, p, f)));
        json_object_set_new(phases, phase_name((phase)p), row);
    }
    json_object_set_new(o, "phases", phases);
    json_object_set_new(run_object, "telemetry", o);
    run_telemetry_free(&tel);
}
