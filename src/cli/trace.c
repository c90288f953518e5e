/* `tripar trace RUN.h5 -o trace.json`: the run's timing events as Chrome trace-event JSON
 * (open in Perfetto or chrome://tracing). One process per rank, one thread per category. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/runread.h"
#include "cli/cli.h"

/* Threads within a rank: enclosing spans, compute, communication in flight, blocked waits.
 * Separate threads keep each one's spans properly nested, as the trace format requires. */
enum { TID_STEP = 0, TID_COMPUTE = 1, TID_COMM = 2, TID_WAIT = 3, TID_COUNT = 4 };
static const char *const tid_names[TID_COUNT] = {"step", "compute", "comm", "wait"};

static int phase_tid(int p) {
    switch (p) {
    case PHASE_STEP: case PHASE_ITERATION: case PHASE_WEIGHT_INIT: return TID_STEP;
    case PHASE_TP_ALLREDUCE: case PHASE_PP_SEND: case PHASE_DP_GATHER:
    case PHASE_EP_DISPATCH: case PHASE_EP_COMBINE: return TID_COMM;
    case PHASE_TP_WAIT: case PHASE_PP_RECV_WAIT: case PHASE_SAMPLE_WAIT: case PHASE_NLL_WAIT:
    case PHASE_STOP_WAIT: case PHASE_EP_WAIT:
        return TID_WAIT;
    default: return TID_COMPUTE;
    }
}

static json_t *metadata(const char *name, int pid, int tid, json_t *args) {
    json_t *m = json_object();
    json_object_set_new(m, "name", json_string(name));
    json_object_set_new(m, "ph", json_string("M"));
    json_object_set_new(m, "pid", json_integer(pid));
    json_object_set_new(m, "tid", json_integer(tid));
    json_object_set_new(m, "args", args);
    return m;
}

static void trace_usage(FILE *out) {
    fprintf(out, "usage: tripar trace RUN.h5 -o trace.json\n"
                 "  Writes the timing events as Chrome trace-event JSON (Perfetto, "
                 "chrome://tracing).\n");
}

/* Returns 0 to go on, 1 after --help, or -1 on bad usage (already reported). */
static int trace_parse_args(int argc, char **argv, const char **in, const char **out) {
    *in = *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            trace_usage(stdout);
            return 1;
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) {
            *out = argv[++i];
        } else if (argv[i][0] != '-' && !*in) {
            *in = argv[i];
        } else {
            fprintf(stderr, "tripar trace: unexpected argument %s\n", argv[i]);
            trace_usage(stderr);
            return -1;
        }
    }
    if (!*in || !*out) {
        trace_usage(stderr);
        return -1;
    }
    return 0;
}

/* The process and thread names of rank r. */
static void rank_metadata_append(json_t *events, const run_data *run, int r) {
    const run_rank *rr = &run->ranks[r];
    char name[160];
    snprintf(name, sizeof name, "rank %d (dp%d tp%d pp%d) %s", r, rr->dp_rank, rr->tp_rank,
             rr->pp_rank, rr->host);
    json_array_append_new(events, metadata("process_name", r, 0, json_pack("{s:s}", "name", name)));
    json_array_append_new(
        events, metadata("process_sort_index", r, 0, json_pack("{s:i}", "sort_index", r)));
    for (int t = 0; t < TID_COUNT; t++)
        json_array_append_new(
            events, metadata("thread_name", r, t, json_pack("{s:s}", "name", tid_names[t])));
}

/* One complete ("X") event: a span of rank pid, in microseconds. */
static json_t *span_event(const timing_event *e, int pid) {
    json_t *x = json_object();
    json_object_set_new(x, "name", json_string(phase_name((phase)e->phase)));
    json_object_set_new(x, "cat", json_string(tid_names[phase_tid(e->phase)]));
    json_object_set_new(x, "ph", json_string("X"));
    json_object_set_new(x, "ts", json_real(e->t_start * 1e6));
    json_object_set_new(x, "dur", json_real((e->t_end - e->t_start) * 1e6));
    json_object_set_new(x, "pid", json_integer(pid));
    json_object_set_new(x, "tid", json_integer(phase_tid(e->phase)));
    json_object_set_new(x, "args",
                        json_pack("{s:i,s:i,s:i,s:i}", "step", e->step, "microbatch", e->microbatch,
                                  "layer", e->layer, "iteration", e->iteration));
    return x;
}

/* The trace document: every rank's names and spans, and the run it came from. */
static json_t *trace_build(const run_data *run, const char *in) {
    json_t *events = json_array();
    for (int r = 0; r < run->world_size; r++) {
        rank_metadata_append(events, run, r);
        for (long i = 0; i < run->n_events[r]; i++)
            json_array_append_new(events, span_event(&run->events[r][i], r));
    }
    json_t *root = json_object();
    json_object_set_new(root, "traceEvents", events);
    json_object_set_new(root, "displayTimeUnit", json_string("ms"));
    char label[96];
    run_data_label(run, label, sizeof label);
    json_object_set_new(root, "otherData", json_pack("{s:s,s:s}", "run", in, "strategy", label));
    return root;
}

static long run_event_count(const run_data *run) {
    long total = 0;
    for (int r = 0; r < run->world_size; r++)
        total += run->n_events[r];
    return total;
}

int trace_main(int argc, char **argv) {
    const char *in, *out;
    int rc = trace_parse_args(argc, argv, &in, &out);
    if (rc != 0) return rc > 0 ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
    run_data run;
    if (run_data_load(&run, in) != STATUS_OK) {
        fprintf(stderr, "tripar trace: %s\n", error_message());
        return TRIPAR_EXIT_USAGE;
    }
    if (!run.complete) run_file_warn_incomplete("trace", in);
    json_t *root = trace_build(&run, in);
    rc = TRIPAR_EXIT_OK;
    if (cli_json_write(root, out, NULL, JSON_COMPACT) != STATUS_OK) {
        fprintf(stderr, "tripar trace: %s\n", error_message());
        rc = TRIPAR_EXIT_USAGE;
    } else {
        printf("%s: %ld events from %d ranks\n", out, run_event_count(&run), run.world_size);
    }
    run_data_free(&run);
    return rc;
}
