/* `tripar report`: headline metrics and the per-phase time breakdown of one or more run files,
 * as text, CSV or JSON. Definitions of every number: docs/schema.md, "Derived metrics".
 * Each file is reduced to a run_summary first and printers only format summaries, so a
 * comparison against a baseline (--baseline) slots in as one more printer. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/h5util.h"
#include "io/run_text.h"
#include "io/runread.h"
#include "metrics/score.h"
#include "base/stats.h"
#include "cli/cli.h"
#include "cli/report_moe.h"
#include "cli/report_perplexity.h"
#include "cli/report_roofline.h"
#include "cli/report_telemetry.h"

typedef struct {
    run_data run;
    char label[96];
    int measured_only;   /* 1 when warm-up events (iteration < 0) were left out */
    /* 1 when the phases inside layers were timed (record.timings: layer); at step the compute,
     * communication and exposed shares and the slowest rank are not measured, so NaN */
    int layer_timed;
    double *phase_total; /* (world_size, PHASE_COUNT) seconds per rank */
    int phase_seen[PHASE_COUNT];
    double phase_min[PHASE_COUNT], phase_median[PHASE_COUNT], phase_max[PHASE_COUNT];
    /* sums over ranks, seconds */
    double wall, compute, comm, exposed, bubble;
    double compute_frac, comm_frac, exposed_frac, bubble_frac, other_frac;
    int slowest_rank;
    double slowest_busy, median_busy, slowest_lag;
    long events;
    char model[192]; /* "llama, 4 layers, 4 heads, 2 kv heads, ..."; "" when not recorded */
    /* how the strategy sits on nodes (/mesh); nodes = 0 when the mesh says nothing usable */
    int nodes, per_node_min, per_node_max;
    int tp_groups, tp_crossing, pp_groups, pp_crossing;
    int moe;             /* the file has /moe (a mixture of experts) */
    double moe_ratio[2]; /* its max/mean tokens per expert, prefill and decode */
} run_summary;

static double *phase_row(run_summary *s, int r) { return s->phase_total + (size_t)r * PHASE_COUNT; }

/* Wall time of rank r: its step events, else its iteration events, else its event span. */
static double rank_wall(const run_summary *s, const double *totals, int r) {
    if (totals[PHASE_STEP] > 0) return totals[PHASE_STEP];
    if (totals[PHASE_ITERATION] > 0) return totals[PHASE_ITERATION];
    const timing_event *ev = s->run.events[r];
    double lo = INFINITY, hi = -INFINITY;
    for (long i = 0; i < s->run.n_events[r]; i++) {
        if (!run_event_counts(&s->run, r, &ev[i], s->measured_only)) continue;
        lo = fmin(lo, ev[i].t_start);
        hi = fmax(hi, ev[i].t_end);
    }
    return hi > lo ? hi - lo : 0;
}

/* Seconds per phase per rank, of the events run_event_counts keeps: warm-up events left out
 * when the run has measured iterations, and never an iteration cut before its end. */
static void summary_phase_totals(run_summary *s) {
    const run_data *run = &s->run;
    int P = run->world_size;
    s->phase_total = xcalloc((unsigned long)P * PHASE_COUNT, sizeof(double));
    s->measured_only = run_measured_only(run);
    s->layer_timed = run_layer_timed(run);
    for (int r = 0; r < P; r++) {
        double *row = phase_row(s, r);
        for (long i = 0; i < run->n_events[r]; i++) {
            const timing_event *e = &run->events[r][i];
            if (!run_event_counts(run, r, e, s->measured_only) || e->phase < 0 ||
                e->phase >= PHASE_COUNT)
                continue;
            row[e->phase] += e->t_end - e->t_start;
            s->phase_seen[e->phase] = 1;
            s->events++;
        }
    }
}

/* Min, median and max over ranks of each phase's time. */
static void summary_phase_spread(run_summary *s) {
    int P = s->run.world_size;
    double *column = xcalloc((unsigned long)P, sizeof(double));
    for (int p = 0; p < PHASE_COUNT; p++) {
        for (int r = 0; r < P; r++)
            column[r] = phase_row(s, r)[p];
        stats_sort(column, P);
        s->phase_min[p] = column[0];
        s->phase_median[p] = stats_percentile(column, P, 50);
        s->phase_max[p] = column[P - 1];
    }
    free(column);
}

/* Compute, communication, exposed communication and bubble as sums over ranks and shares of
 * the summed wall time; busy[r] gets rank r's compute seconds. */
static void summary_time_shares(run_summary *s, double *busy) {
    const run_data *run = &s->run;
    for (int r = 0; r < run->world_size; r++) {
        const double *row = phase_row(s, r);
        double compute = 0;
        for (int p = 0; p < PHASE_COUNT; p++)
            if (phase_is_compute((phase)p)) compute += row[p];
        busy[r] = compute;
        s->compute += compute;
        /* the sampler's, perplexity's and the stop vote's collectives have only their wait */
        const double other_waits =
            row[PHASE_SAMPLE_WAIT] + row[PHASE_NLL_WAIT] + row[PHASE_STOP_WAIT];
        s->comm += row[PHASE_TP_ALLREDUCE] + row[PHASE_PP_SEND] + row[PHASE_DP_GATHER] +
                   row[PHASE_PP_RECV_WAIT] + row[PHASE_EP_DISPATCH] + row[PHASE_EP_COMBINE] +
                   other_waits;
        s->exposed += row[PHASE_TP_WAIT] + row[PHASE_PP_RECV_WAIT] + row[PHASE_EP_WAIT] +
                      other_waits;
        s->bubble += run->pp > 1 ? row[PHASE_PP_RECV_WAIT] : 0;
        s->wall += rank_wall(s, row, r);
    }
    if (s->wall > 0) {
        s->compute_frac = s->compute / s->wall;
        s->comm_frac = s->comm / s->wall;
        s->exposed_frac = s->exposed / s->wall;
        s->bubble_frac = s->bubble / s->wall;
        s->other_frac = fmax(0, 1 - s->compute_frac - s->exposed_frac);
    }
    /* At step the GEMMs, attention and the TP all-reduces inside layers are not timed: their
     * shares would read as "other". The bubble (pp_recv_wait, outside layers) is measured. */
    if (!s->layer_timed)
        s->compute_frac = s->comm_frac = s->exposed_frac = s->other_frac = NAN;
}

/* The busiest rank and how far it lags the median one (sorts busy). */
static void summary_slowest_rank(run_summary *s, double *busy) {
    int P = s->run.world_size;
    s->slowest_rank = 0;
    for (int r = 1; r < P; r++)
        if (busy[r] > busy[s->slowest_rank]) s->slowest_rank = r;
    s->slowest_busy = busy[s->slowest_rank];
    stats_sort(busy, P);
    s->median_busy = stats_percentile(busy, P, 50);
    s->slowest_lag = s->slowest_busy - s->median_busy;
}

static void summary_compute(run_summary *s) {
    run_data_label(&s->run, s->label, sizeof s->label);
    summary_phase_totals(s);
    summary_phase_spread(s);
    double *busy = xcalloc((unsigned long)s->run.world_size, sizeof(double));
    summary_time_shares(s, busy);
    summary_slowest_rank(s, busy);
    if (!s->layer_timed) /* busy time is compute, most of it inside layers */
        s->slowest_busy = s->median_busy = s->slowest_lag = NAN;
    free(busy);
}

/* The model's shape in one line, from the job the file records. The architecture decides what
 * the numbers mean (Llama's mlp is SwiGLU's intermediate size, its kv heads may be fewer than
 * its heads), so it comes first. A file without the job (hand-made, older) gets no line. */
static void summary_model(run_summary *s) {
    run_model m;
    s->model[0] = '\0';
    if (run_model_read(s->run.file, s->run.path, &m) != STATUS_OK) {
        error_clear();
        return;
    }
    const char *arch = run_model_key(&m, "model.arch"), *preset = run_model_key(&m, "preset");
    const char *heads = run_model_key(&m, "heads"), *kv = run_model_key(&m, "kv_heads");
    if (!arch) arch = m.checkpoint ? "from the checkpoint" : "gpt2";
    /* GPT-2 records no kv_heads: it has one per head. The checkpoint note of files written
     * before Llama gives neither kv heads nor the architecture, so there they go unsaid. */
    if (!kv && (!strcmp(arch, "gpt2") || !m.checkpoint)) kv = heads;
    size_t used = (size_t)snprintf(s->model, sizeof s->model, "%s", arch);
    if (preset && used < sizeof s->model)
        used += (size_t)snprintf(s->model + used, sizeof s->model - used, " (preset %s)", preset);
    /* counts read "4 layers", sizes read "embd 32" */
    const char *layers = run_model_key(&m, "layers"), *embd = run_model_key(&m, "embd");
    const char *mlp = run_model_key(&m, "mlp"), *vocab = run_model_key(&m, "vocab");
    const char *words[][3] = {{layers, "", " layers"}, {heads, "", " heads"},
                              {kv, "", " kv heads"},   {embd, "embd ", ""},
                              {mlp, "mlp ", ""},       {vocab, "vocab ", ""}};
    for (size_t k = 0; k < sizeof words / sizeof words[0] && used < sizeof s->model; k++)
        if (words[k][0])
            used += (size_t)snprintf(s->model + used, sizeof s->model - used, ", %s%s%s",
                                     words[k][1], words[k][0], words[k][2]);
    run_model_free(&m);
}

/* Every rank's node from /mesh's node column; 0 when the file has none (written before it, or
 * hand-made), so the caller falls back to the host names. */
static int mesh_nodes_read(const run_data *run, int *node) {
    if (!h5_exists(run->file, "mesh")) return 0;
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(int));
    H5Tinsert(t, "node", 0, H5T_NATIVE_INT);
    hid_t d, space = -1;
    herr_t err = -1;
    H5E_BEGIN_TRY {
        d = H5Dopen2(run->file, "mesh", H5P_DEFAULT);
        if (d >= 0) space = H5Dget_space(d);
        /* HDF5 reads a compound by member names and leaves a member the file lacks as it was,
         * so the column's presence is asked first */
        hid_t file_type = d >= 0 ? H5Dget_type(d) : -1;
        int has_node = file_type >= 0 && H5Tget_class(file_type) == H5T_COMPOUND &&
                       H5Tget_member_index(file_type, "node") >= 0;
        if (file_type >= 0) H5Tclose(file_type);
        if (has_node && space >= 0 && H5Sget_simple_extent_npoints(space) == run->world_size)
            err = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, node);
    }
    H5E_END_TRY;
    if (space >= 0) H5Sclose(space);
    if (d >= 0) H5Dclose(d);
    H5Tclose(t);
    return err >= 0;
}

/* Of the groups along axis (ranks equal in the other two coordinates), how many hold ranks of
 * more than one node; *groups gets how many groups there are. -1 when a coordinate is out of
 * the mesh's sizes (a damaged /mesh), so nothing is claimed. */
static int groups_crossing(const run_data *run, const int *node, int axis, int *groups) {
    const int sizes[3] = {run->tp, run->pp, run->dp}; /* AXIS_TP, AXIS_PP, AXIS_DP order */
    const int other = axis == 0 ? 1 : 0; /* with DP the third: a group is (other, dp) */
    *groups = sizes[other] * run->dp;
    int *first = xcalloc((size_t)*groups, sizeof *first), crossing = 0;
    char *crosses = xcalloc((size_t)*groups, 1);
    for (int g = 0; g < *groups; g++)
        first[g] = -1;
    for (int r = 0; r < run->world_size; r++) {
        const run_rank *k = &run->ranks[r];
        const int c[3] = {k->tp_rank, k->pp_rank, k->dp_rank};
        int ok = 1;
        for (int a = 0; a < 3; a++)
            ok = ok && c[a] >= 0 && c[a] < sizes[a];
        if (!ok) {
            crossing = -1;
            break;
        }
        int g = c[2] * sizes[other] + c[other];
        if (first[g] < 0)
            first[g] = node[r];
        else if (first[g] != node[r] && !crosses[g])
            crosses[g] = 1, crossing++;
    }
    free(first);
    free(crosses);
    return crossing;
}

/* Nodes, ranks per node, and the TP and PP groups crossing nodes, from /mesh: the node column,
 * or the distinct host names in a file without it. */
static void summary_nodes(run_summary *s) {
    const run_data *run = &s->run;
    const int world = run->world_size;
    s->nodes = 0;
    if (world < 1 || (long)run->dp * run->tp * run->pp != world) return;
    int *node = xcalloc((size_t)world, sizeof *node);
    if (!mesh_nodes_read(run, node))
        for (int r = 0; r < world; r++) { /* a host's index among the hosts seen before it */
            node[r] = r;
            for (int q = 0; q < r; q++)
                if (!strcmp(run->ranks[q].host, run->ranks[r].host)) {
                    node[r] = node[q];
                    break;
                }
        }
    int *count = xcalloc((size_t)world, sizeof *count), ok = 1;
    for (int r = 0; r < world; r++) {
        if (node[r] < 0 || node[r] >= world)
            ok = 0;
        else
            count[node[r]]++;
    }
    s->per_node_min = world, s->per_node_max = 0;
    for (int n = 0; n < world && ok; n++) {
        if (!count[n]) continue;
        s->nodes++;
        if (count[n] < s->per_node_min) s->per_node_min = count[n];
        if (count[n] > s->per_node_max) s->per_node_max = count[n];
    }
    s->tp_crossing = ok ? groups_crossing(run, node, 0, &s->tp_groups) : -1;
    s->pp_crossing = ok ? groups_crossing(run, node, 1, &s->pp_groups) : -1;
    if (s->tp_crossing < 0 || s->pp_crossing < 0) s->nodes = 0;
    free(count);
    free(node);
}

/* Loads and summarises one run file, warning once (stderr) when it is incomplete. */
static int summary_load(run_summary *s, const char *path) {
    memset(s, 0, sizeof *s);
    int rc = run_data_load(&s->run, path);
    if (rc != STATUS_OK) return rc;
    if (!s->run.complete) run_file_warn_incomplete("report", path);
    summary_compute(s);
    summary_model(s);
    summary_nodes(s);
    s->moe = report_moe_ratios(&s->run, s->moe_ratio);
    return STATUS_OK;
}

static void summary_free(run_summary *s) {
    free(s->phase_total);
    run_data_free(&s->run);
}

/* The headline numbers: times in milliseconds (the file keeps seconds), the mean beside the
 * percentiles, and a warning when too few iterations make p90 and p99 no tail. */
static void print_headline(FILE *out, const run_headline *m) {
    const struct {
        const char *name;
        double mean, p50, p90, p99;
    } rows[] = {
        {"latency", m->latency_mean, m->latency_p50, m->latency_p90, m->latency_p99},
        {"TTFT", m->ttft_mean, m->ttft_p50, m->ttft_p90, m->ttft_p99},
        {"TPOT", m->tpot_mean, m->tpot_p50, m->tpot_p90, m->tpot_p99},
        {"ITL", m->itl_mean, m->itl_p50, m->itl_p90, m->itl_p99},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        if (isnan(rows[k].mean) && isnan(rows[k].p50)) continue; /* ITL: files before it */
        fprintf(out, "  %-8s mean %10.3f  p50 %10.3f  p90 %10.3f  p99 %10.3f ms\n", rows[k].name,
                1e3 * rows[k].mean, 1e3 * rows[k].p50, 1e3 * rows[k].p90, 1e3 * rows[k].p99);
    }
    fprintf(out, "  %d measured iteration%s | %.1f tokens/s | %.3f requests/s\n", m->iterations,
            m->iterations == 1 ? "" : "s", m->tokens_per_s, m->requests_per_s);
    if (m->iterations < STATS_TAIL_MIN_SAMPLES)
        fprintf(out,
                "  warning: percentiles of %d measured iteration%s: p90 and p99 need %d or more "
                "(bench.iterations)\n",
                m->iterations, m->iterations == 1 ? "" : "s", STATS_TAIL_MIN_SAMPLES);
}

static void print_single(FILE *out, const run_summary *s) {
    const run_data *run = &s->run;
    const run_headline *m = &run->metrics;
    /* an incomplete file is marked here and warned about once, on stderr, by summary_load */
    fprintf(out, "%s: %s, %s %s, %d ranks on %d host%s, tripar %s, %s%s\n", run->path, s->label,
            run->backend, run->precision, run->world_size, run->n_hosts,
            run->n_hosts == 1 ? "" : "s", run->version, run->created,
            run->complete ? "" : " (incomplete)");
    if (s->model[0]) fprintf(out, "  model: %s\n", s->model);
    report_perplexity_print(out, run); /* nothing for a generation run */
    if (s->nodes > 0) {
        char per_node[64];
        if (s->per_node_min == s->per_node_max)
            snprintf(per_node, sizeof per_node, "%d rank%s%s", s->per_node_min,
                     s->per_node_min == 1 ? "" : "s", s->nodes > 1 ? " each" : "");
        else
            snprintf(per_node, sizeof per_node, "%d to %d ranks", s->per_node_min, s->per_node_max);
        fprintf(out,
                "  nodes %d (%s); TP groups crossing nodes %d/%d, PP groups crossing nodes "
                "%d/%d\n",
                s->nodes, per_node, s->tp_crossing, s->tp_groups, s->pp_crossing, s->pp_groups);
    }
    if (run->overlap && run->tp > 1) { /* what MPI ran the overlapped all-reduces with */
        char *mpi = h5_attr_read_string_alloc(run->file, "mpi_settings");
        if (mpi) fprintf(out, "  MPI for TP overlap: %s\n", mpi);
        free(mpi);
    }
    if (m->present)
        print_headline(out, m);
    else
        fprintf(out, "  no /metrics in this file\n");
    run_text_print(out, run->file); /* the generated text, when the run had a tokenizer */
    report_moe_print(out, run);     /* nothing for a dense model */
    if (s->events == 0) {
        fprintf(out, "  no timing events (record.timings: off?)\n");
        return;
    }
    fprintf(out, "  per-phase time per rank, seconds%s:\n",
            s->measured_only ? " (measured iterations only)" : "");
    fprintf(out, "    %-14s %11s %11s %11s\n", "phase", "min", "median", "max");
    for (int p = 0; p < PHASE_COUNT; p++)
        if (s->phase_seen[p])
            fprintf(out, "    %-14s %11.6f %11.6f %11.6f\n", phase_name((phase)p), s->phase_min[p],
                    s->phase_median[p], s->phase_max[p]);
    if (!s->layer_timed) {
        /* the shares and the slowest rank need the phases inside layers */
        fprintf(out,
                "  of wall time: pipeline bubble %.1f%%; compute, communication, exposed "
                "communication and other: not measured at this timing level (record.timings: "
                "%s times whole steps; record.timings: layer times the phases inside layers)\n"
                "  slowest rank: not measured at this timing level (record.timings: layer)\n",
                100 * s->bubble_frac, run->timings_level[0] ? run->timings_level : "step");
        report_telemetry_print(out, run);
        return;
    }
    fprintf(out,
            "  of wall time: compute %.1f%%  communication %.1f%%  exposed communication "
            "%.1f%%  pipeline bubble %.1f%%  other %.1f%%\n",
            100 * s->compute_frac, 100 * s->comm_frac, 100 * s->exposed_frac, 100 * s->bubble_frac,
            100 * s->other_frac);
    const run_rank *sr = &run->ranks[s->slowest_rank];
    fprintf(out,
            "  slowest rank %d (dp%d tp%d pp%d, %s): busy %.6f s, lag %+.6f s over the "
            "median rank\n",
            s->slowest_rank, sr->dp_rank, sr->tp_rank, sr->pp_rank, sr->host, s->slowest_busy,
            s->slowest_lag);
    report_telemetry_print(out, run); /* nothing without /telemetry */
}

/* "crossing/groups" of one axis for the comparison table (TP-xnode, PP-xnode: the groups of
 * that axis holding ranks of more than one node); "-" when /mesh could not tell. */
static void crossing_cell(char *cell, size_t len, const run_summary *s, int crossing, int groups) {
    if (s->nodes > 0)
        snprintf(cell, len, "%d/%d", crossing, groups);
    else
        snprintf(cell, len, "-");
}

/* A share as "12.3%", or "-" when not measured at the run's timing level. */
static void share_cell(char *cell, size_t len, double frac) {
    if (isnan(frac))
        snprintf(cell, len, "-");
    else
        snprintf(cell, len, "%.1f%%", 100 * frac);
}

/* The notes go above the table, so its rows run to the end of the text. */
static void print_comparison(FILE *out, const run_summary *s, int n) {
    int step_timed = 0; /* a run timed per step has no compute or communication shares */
    for (int i = 0; i < n; i++)
        step_timed |= !s[i].layer_timed && s[i].events > 0;
    fprintf(out, "(TTFT, TPOT, ITL: means; p50/p90/p99: end-to-end latency)\n");
    if (step_timed)
        fprintf(out, "(compute, comm, exposed \"-\": not measured at this timing level; "
                     "record.timings: layer times them)\n");
    fprintf(out, "%-28s %5s %9s %9s %9s %11s %10s %10s %10s %8s %7s %8s %7s %5s %9s %9s\n",
            "strategy", "ranks", "TTFT(ms)", "TPOT(ms)", "ITL(ms)", "tokens/s", "p50(ms)",
            "p90(ms)", "p99(ms)", "compute", "comm", "exposed", "bubble", "nodes", "TP-xnode",
            "PP-xnode");
    for (int i = 0; i < n; i++) {
        const run_headline *m = &s[i].run.metrics;
        char nodes[16] = "-", tp[32], pp[32], share[4][16];
        if (s[i].nodes > 0) snprintf(nodes, sizeof nodes, "%d", s[i].nodes);
        crossing_cell(tp, sizeof tp, &s[i], s[i].tp_crossing, s[i].tp_groups);
        crossing_cell(pp, sizeof pp, &s[i], s[i].pp_crossing, s[i].pp_groups);
        const double fracs[4] = {s[i].compute_frac, s[i].comm_frac, s[i].exposed_frac,
                                 s[i].bubble_frac};
        for (int k = 0; k < 4; k++)
            share_cell(share[k], sizeof share[k], fracs[k]);
        fprintf(out,
                "%-28s %5d %9.3f %9.3f %9.3f %11.1f %10.3f %10.3f %10.3f %8s %7s %8s %7s %5s "
                "%9s %9s%s\n",
                s[i].label, s[i].run.world_size, 1e3 * m->ttft_mean, 1e3 * m->tpot_mean,
                1e3 * m->itl_mean, m->tokens_per_s, 1e3 * m->latency_p50, 1e3 * m->latency_p90,
                1e3 * m->latency_p99, share[0], share[1], share[2], share[3], nodes, tp, pp,
                s[i].run.complete ? "" : "  (incomplete)");
    }
}

/* The numbers of one run as named values, shared by the CSV and JSON writers. */
typedef struct {
    const char *name;
    double value;
} named_value;

static int summary_values(const run_summary *s, named_value *v) {
    const run_headline *m = &s->run.metrics;
    int n = 0;
#define PUT(key, val) v[n++] = (named_value){key, (double)(val)}
    PUT("world_size", s->run.world_size);
    PUT("dp", s->run.dp);
    PUT("tp", s->run.tp);
    PUT("pp", s->run.pp);
    PUT("microbatches", s->run.microbatches);
    PUT("overlap", s->run.overlap);
    PUT("complete", s->run.complete);
    PUT("iterations", m->iterations);
    PUT("ttft_s", m->ttft_mean);
    PUT("tpot_s", m->tpot_mean);
    PUT("itl_s", m->itl_mean);
    PUT("itl_p50_s", m->itl_p50);
    PUT("itl_p90_s", m->itl_p90);
    PUT("itl_p99_s", m->itl_p99);
    PUT("tokens_per_s", m->tokens_per_s);
    PUT("requests_per_s", m->requests_per_s);
    PUT("latency_mean_s", m->latency_mean);
    PUT("latency_p50_s", m->latency_p50);
    PUT("latency_p90_s", m->latency_p90);
    PUT("latency_p99_s", m->latency_p99);
    PUT("peak_memory_bytes_max", m->peak_memory_bytes_max);
    PUT("compute_frac", s->compute_frac);
    PUT("comm_frac", s->comm_frac);
    PUT("exposed_comm_frac", s->exposed_frac);
    PUT("bubble_frac", s->bubble_frac);
    PUT("slowest_rank", s->layer_timed ? s->slowest_rank : NAN);
    PUT("slowest_busy_s", s->slowest_busy);
    PUT("slowest_lag_s", s->slowest_lag);
    /* NaN (null in JSON) when /mesh could not tell */
    const double unknown = NAN;
    PUT("nodes", s->nodes > 0 ? s->nodes : unknown);
    PUT("tp_groups_crossing_nodes", s->nodes > 0 ? s->tp_crossing : unknown);
    PUT("pp_groups_crossing_nodes", s->nodes > 0 ? s->pp_crossing : unknown);
#undef PUT
    return n;
}
enum { SUMMARY_VALUES_MAX = 40 };

static int write_csv(const char *path, const run_summary *s, int n) {
    FILE *f = fopen(path, "w");
    if (!f) {
        error_set("%s: cannot write", path);
        return STATUS_BAD_INPUT;
    }
    named_value v[SUMMARY_VALUES_MAX];
    int nv = summary_values(&s[0], v);
    fprintf(f, "file,strategy");
    for (int k = 0; k < nv; k++)
        fprintf(f, ",%s", v[k].name);
    for (int p = 0; p < PHASE_COUNT; p++)
        fprintf(f, ",%s_min_s,%s_median_s,%s_max_s", phase_name((phase)p), phase_name((phase)p),
                phase_name((phase)p));
    /* the expert load's columns only when some run has one (empty for a dense run beside it) */
    int moe = 0;
    for (int i = 0; i < n; i++)
        moe |= s[i].moe;
    if (moe) fprintf(f, ",moe_prefill_imbalance,moe_decode_imbalance");
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        summary_values(&s[i], v);
        fprintf(f, "\"%s\",\"%s\"", s[i].run.path, s[i].label);
        for (int k = 0; k < nv; k++)
            fprintf(f, ",%.9g", v[k].value);
        for (int p = 0; p < PHASE_COUNT; p++)
            fprintf(f, ",%.9g,%.9g,%.9g", s[i].phase_min[p], s[i].phase_median[p],
                    s[i].phase_max[p]);
        if (moe && s[i].moe) fprintf(f, ",%.9g,%.9g", s[i].moe_ratio[0], s[i].moe_ratio[1]);
        if (moe && !s[i].moe) fprintf(f, ",,");
        fprintf(f, "\n");
    }
    fclose(f);
    return STATUS_OK;
}

static int write_json(const char *path, const run_summary *s, int n) {
    json_t *runs = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(s[i].run.path));
        json_object_set_new(o, "strategy", json_string(s[i].label));
        if (s[i].model[0]) json_object_set_new(o, "model", json_string(s[i].model));
        named_value v[SUMMARY_VALUES_MAX];
        int nv = summary_values(&s[i], v);
        for (int k = 0; k < nv; k++)
            json_object_set_new(o, v[k].name, cli_json_number(v[k].value));
        json_t *phases = json_object();
        for (int p = 0; p < PHASE_COUNT; p++) {
            if (!s[i].phase_seen[p]) continue;
            json_t *ph = json_object();
            json_object_set_new(ph, "min_s", cli_json_number(s[i].phase_min[p]));
            json_object_set_new(ph, "median_s", cli_json_number(s[i].phase_median[p]));
            json_object_set_new(ph, "max_s", cli_json_number(s[i].phase_max[p]));
            json_t *per_rank = json_array();
            for (int r = 0; r < s[i].run.world_size; r++)
                json_array_append_new(per_rank, cli_json_number(phase_row((run_summary *)&s[i], r)[p]));
            json_object_set_new(ph, "per_rank_s", per_rank);
            json_object_set_new(phases, phase_name((phase)p), ph);
        }
        json_object_set_new(o, "phases", phases);
        report_telemetry_json(o, &s[i].run);
        report_moe_json(o, &s[i].run);
        json_array_append_new(runs, o);
    }
    json_t *root = json_object();
    json_object_set_new(root, "runs", runs);
    return cli_json_write(root, path, NULL, JSON_INDENT(2));
}

/* The prompt length of a run: input.synthetic.length or the tokens in the resolved job; we
 * read it back as the columns minus generate.new_tokens, both in the job text. */
static long run_prompt_len(hid_t file, long cols) {
    char *yaml = h5_attr_read_string_alloc(file, "job");
    long new_tokens = -1;
    const char *p = yaml ? strstr(yaml, "\ngenerate:\n  new_tokens: ") : NULL;
    if (p) new_tokens = strtol(p + strlen("\ngenerate:\n  new_tokens: "), NULL, 10);
    free(yaml);
    return new_tokens >= 0 && new_tokens <= cols ? cols - new_tokens : 0;
}

/* Accuracy of each run against the baseline, and the composite score (score.h). */
static int print_baseline(FILE *out, const run_summary *base, const run_summary *s, int n) {
    int ndb = 0, ndl = 0;
    hsize_t tdb[8] = {0}, ldb[8] = {0};
    int32_t *tok_b =
        h5_dataset_read_all(base->run.file, "output/tokens", H5T_NATIVE_INT32, &ndb, tdb, NULL);
    float *log_b = h5_dataset_read_all(base->run.file, "activations/logits", H5T_NATIVE_FLOAT, &ndl,
                                       ldb, NULL);
    if (!tok_b) {
        error_set("%s: no /output/tokens to compare against", base->run.path);
        free(log_b);
        return STATUS_BAD_INPUT;
    }
    long prompt_len = run_prompt_len(base->run.file, (long)tdb[1]);
    const run_headline *bm = &base->run.metrics;
    score_inputs bi = {bm->latency_p50, bm->tokens_per_s, 1.0};
    fprintf(out,
            "\nagainst baseline %s (%s): score = 0.4*lat_base/lat + 0.3*thr/thr_base + "
            "0.3*agree/agree_base (latency p50, tokens/s; baseline = 1)\n",
            base->run.path, base->label);
    fprintf(out, "%-40s %9s %12s %12s %11s %11s %7s\n", "file", "tok_agree", "logit_maxrel",
            "logit_KL", "p50(ms)", "tokens/s", "score");
    for (int i = 0; i < n; i++) {
        int ndt = 0, nd2 = 0;
        hsize_t tdr[8] = {0}, ldr[8] = {0};
        int32_t *tok =
            h5_dataset_read_all(s[i].run.file, "output/tokens", H5T_NATIVE_INT32, &ndt, tdr, NULL);
        float *lg = h5_dataset_read_all(s[i].run.file, "activations/logits", H5T_NATIVE_FLOAT, &nd2,
                                        ldr, NULL);
        double agree = NAN, max_rel = NAN, kl = NAN;
        if (tok && ndt == 2 && tdr[0] == tdb[0] && tdr[1] == tdb[1])
            agree = score_token_agreement(tok_b, tok, (long)tdb[0], (long)tdb[1], prompt_len);
        if (log_b && lg && nd2 == 3 && ndl == 3 && !memcmp(ldr, ldb, 3 * sizeof(hsize_t)))
            score_logit_error(log_b, lg, (long)(ldb[0] * ldb[1]), (long)ldb[2], &max_rel, &kl);
        const run_headline *m = &s[i].run.metrics;
        score_inputs ri = {m->latency_p50, m->tokens_per_s, agree};
        fprintf(out, "%-40s %9.4f %12.3e %12.3e %11.3f %11.1f %7.3f\n", s[i].run.path, agree,
                max_rel, kl, 1e3 * m->latency_p50, m->tokens_per_s, score_composite(&bi, &ri));
        if (!tok || isnan(agree))
            fprintf(out, "  (tokens: %s)\n",
                    tok ? "shape differs from the baseline's" : "no /output/tokens in this file");
        if (isnan(kl))
            fprintf(out, "  (logits: %s; record them with record.activations: [logits])\n",
                    !log_b ? "absent in the baseline"
                    : !lg  ? "absent in this run"
                           : "shapes differ from the baseline's");
        free(tok);
        free(lg);
    }
    free(tok_b);
    free(log_b);
    return STATUS_OK;
}

static void report_usage(FILE *out) {
    fprintf(out, "usage: tripar report RUN.h5 [RUN2.h5 ...] [--csv FILE] [--json FILE]\n"
                 "                     [--baseline BASE.h5]\n"
                 "       tripar report --roofline RUN.h5 [...] [--csv FILE] [--json FILE]\n"
                 "  Headline metrics and per-phase breakdown; several files give a comparison "
                 "table.\n"
                 "  --baseline BASE.h5: token agreement, logit error (max relative, mean KL) and\n"
                 "  the composite score of each run against BASE (docs/benchmarks.md); every run\n"
                 "  must be of BASE's model.\n"
                 "  --roofline: per-phase FLOPs, bytes, achieved GFLOP/s and GB/s and the\n"
                 "  compute/memory/communication/overhead label of the slowest rank, against the\n"
                 "  ceilings the run measured (bench.roofline: true).\n"
                 "  Exit 2 for a file that is not a tripar run file this tripar reads; an\n"
                 "  incomplete run file (complete=0) is reported with a warning.\n");
}

typedef struct {
    const char *csv, *json, *baseline;
    int roofline; /* --roofline: the per-phase roofline table (report_roofline.c) */
    const char **files; /* (argc), caller frees */
    int n;
} report_args;

/* Returns 0 to go on, 1 after --help, or -1 on bad usage (already reported). */
static int report_parse_args(report_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->files = xcalloc((unsigned long)argc, sizeof(char *));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            report_usage(stdout);
            return 1;
        } else if ((!strcmp(argv[i], "--csv") || !strcmp(argv[i], "--json")) && i + 1 < argc) {
            *(argv[i][2] == 'c' ? &a->csv : &a->json) = argv[i + 1];
            i++;
        } else if (!strcmp(argv[i], "--baseline") && i + 1 < argc) {
            a->baseline = argv[++i];
        } else if (!strcmp(argv[i], "--roofline")) {
            a->roofline = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "tripar report: unknown or incomplete option %s\n", argv[i]);
            report_usage(stderr);
            return -1;
        } else {
            a->files[a->n++] = argv[i];
        }
    }
    if (a->n == 0) {
        report_usage(stderr);
        return -1;
    }
    return 0;
}

/* Loads files in order up to the first that fails; returns how many loaded. */
static int summaries_load(run_summary *s, const char *const *files, int n) {
    int loaded = 0;
    while (loaded < n && summary_load(&s[loaded], files[loaded]) == STATUS_OK)
        loaded++;
    return loaded;
}

/* Each run, then a comparison table when there are several. */
static void summaries_print(FILE *out, const run_summary *s, int n) {
    for (int i = 0; i < n; i++) {
        print_single(out, &s[i]);
        if (i + 1 < n) fprintf(out, "\n");
    }
    if (n > 1) {
        fprintf(out, "\n");
        print_comparison(out, s, n);
    }
}

/* A baseline scores runs of its own model only (same weights, same shape): a run of any other
 * model is refused, before anything is printed. */
static int baseline_models_check(const run_summary *base, const run_summary *s, int n) {
    run_model mb;
    if (run_model_read(base->run.file, base->run.path, &mb) != STATUS_OK) return STATUS_BAD_INPUT;
    int rc = STATUS_OK;
    for (int i = 0; i < n && rc == STATUS_OK; i++) {
        run_model m;
        rc = run_model_read(s[i].run.file, s[i].run.path, &m);
        if (rc != STATUS_OK) break;
        char why[1200];
        if (!run_model_same(&mb, &m, why, sizeof why)) {
            error_set("%s ran another model than the baseline %s (baseline vs run: %s); "
                      "--baseline scores runs of the same model", s[i].run.path, base->run.path,
                      why);
            rc = STATUS_BAD_INPUT;
        }
        run_model_free(&m);
    }
    run_model_free(&mb);
    return rc;
}

/* Text, then the baseline section (base, when given), --csv and --json; every step runs even
 * after one fails. Returns STATUS_BAD_INPUT when any failed (error_message() tells the last). */
static int report_emit(const report_args *a, const run_summary *s, int n,
                       const run_summary *base) {
    summaries_print(stdout, s, n);
    int rc = STATUS_OK;
    if (base && print_baseline(stdout, base, s, n) != STATUS_OK) rc = STATUS_BAD_INPUT;
    if (a->csv && write_csv(a->csv, s, n) != STATUS_OK) rc = STATUS_BAD_INPUT;
    if (a->json && write_json(a->json, s, n) != STATUS_OK) rc = STATUS_BAD_INPUT;
    return rc;
}

int report_main(int argc, char **argv) {
    report_args a;
    int rc = report_parse_args(&a, argc, argv);
    if (rc != 0) {
        free(a.files);
        return rc > 0 ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
    }
    if (a.roofline) {
        rc = report_roofline(a.files, a.n, a.csv, a.json);
        free(a.files);
        return rc;
    }
    run_summary *s = xcalloc((unsigned long)a.n, sizeof(run_summary));
    int loaded = summaries_load(s, a.files, a.n);
    rc = loaded == a.n ? STATUS_OK : STATUS_BAD_INPUT;
    /* the baseline is loaded and checked before anything is printed */
    run_summary base;
    int have_base = 0;
    if (rc == STATUS_OK && a.baseline) {
        rc = summary_load(&base, a.baseline);
        have_base = rc == STATUS_OK;
        if (have_base) rc = baseline_models_check(&base, s, a.n);
    }
    if (rc == STATUS_OK) rc = report_emit(&a, s, a.n, have_base ? &base : NULL);
    if (rc != STATUS_OK) fprintf(stderr, "tripar report: %s\n", error_message());
    if (have_base) summary_free(&base);
    for (int i = 0; i < loaded; i++)
        summary_free(&s[i]);
    free(s);
    free(a.files);
    return rc == STATUS_OK ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
}
