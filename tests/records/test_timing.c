/* Phase timer and clock alignment under MPI (2-4 ranks): a planted clock skew is recovered
 * within the reported uncertainty, levels filter events, TIMER_SCOPE ends its phase on every
 * way out, backend marks resolve in order, and profiler ranges open and close with the events. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "metrics/timing.h"

#define EXPECT_ABORTS
#include "../expect.h"

/* A fake backend whose marks are host times stored in slots, like the cpu backend's. */
static double fake_slots[64];
static int fake_marks_taken;
static void fake_mark(void *ctx, int slot) {
    EXPECT(slot >= 0 && slot < 64, "slot %d", slot);
    fake_slots[slot] = timer_host_seconds();
    fake_marks_taken++;
}
static double fake_mark_seconds(void *ctx, int slot) { return fake_slots[slot]; }

static void test_clock_align_recovers_injected_offset(int rank) {
    /* true clocks are shared on one host, so the only offset is the planted one */
    double inject = rank == 0 ? 0.0 : 0.5 * rank;
    double offset = -1, uncertainty = -1;
    clock_align(MPI_COMM_WORLD, inject, &offset, &uncertainty);
    if (rank == 0) {
        EXPECT(offset == 0 && uncertainty == 0, "rank 0 is the reference: %g %g", offset,
               uncertainty);
    } else {
        double error = fabs(offset + inject);
        EXPECT(uncertainty > 0, "uncertainty %g", uncertainty);
        EXPECT(error <= uncertainty + 1e-3, "offset %.6f for inject %.3f: error %.6f > unc %.6f",
               offset, inject, error, uncertainty);
    }
}

static void test_levels(void) {
    timer t;
    timer_init(&t, TIMINGS_OFF, NULL, 16, MPI_COMM_WORLD);
    EXPECT(timer_begin(&t, PHASE_STEP, 0, 0, TIMER_NO_LAYER) == -1, "off records nothing");
    timer_add_host(&t, PHASE_ITERATION, 0, 0, TIMER_NO_LAYER, 0, 1);
    EXPECT(t.count == 0, "count %ld", t.count);
    timer_free(&t);

    timer_init(&t, TIMINGS_STEP, NULL, 16, MPI_COMM_WORLD);
    EXPECT(timer_records(&t, PHASE_STEP, TIMER_NO_LAYER), "step level records steps");
    EXPECT(!timer_records(&t, PHASE_QKV_GEMM, 3), "step level skips layer phases");
    int step = timer_begin(&t, PHASE_STEP, 0, 1, TIMER_NO_LAYER);
    int inner = timer_begin(&t, PHASE_QKV_GEMM, 0, 1, 0);
    timer_end(&t, inner);
    timer_end(&t, step);
    EXPECT(step == 0 && inner == -1 && t.count == 1, "step %d inner %d count %ld", step, inner,
           t.count);
    timer_free(&t);

    timer_init(&t, TIMINGS_LAYER, NULL, 16, MPI_COMM_WORLD);
    t.iteration = 3;
    step = timer_begin(&t, PHASE_STEP, 2, 1, TIMER_NO_LAYER);
    inner = timer_begin(&t, PHASE_MLP_GEMM, 2, 1, 5);
    timer_end(&t, inner);
    timer_end(&t, step);
    timer_resolve(&t);
    EXPECT(t.count == 2 && t.resolved == 2, "count %ld resolved %ld", t.count, t.resolved);
    const timing_event *e = &t.events[1];
    EXPECT(e->step == 2 && e->microbatch == 1 && e->layer == 5 && e->phase == PHASE_MLP_GEMM &&
               e->iteration == 3, "fields of the inner event");
    for (long i = 0; i < t.count; i++)
        EXPECT(t.events[i].t_end >= t.events[i].t_start, "event %ld ends before it starts", i);
    EXPECT(t.events[0].t_start <= t.events[1].t_start && t.events[1].t_end <= t.events[0].t_end,
           "the layer event nests inside its step");
    /* times are seconds since the run's start, so small and positive here (slack for skew) */
    EXPECT(t.events[0].t_start > -0.01 && t.events[0].t_start < 60, "t_start %g",
           t.events[0].t_start);
    timer_free(&t);
}

/* Leaves a TIMER_SCOPE by return, as a later edit of a timed body might. */
static int scope_returning(timer *t) {
    TIMER_SCOPE(t, PHASE_HEAD, 0, 0, TIMER_NO_LAYER)
        return 7;
    return 0;
}

static void test_scope(void) {
    timer t;
    timer_init(&t, TIMINGS_LAYER, NULL, 16, MPI_COMM_WORLD);
    int runs = 0;
    TIMER_SCOPE(&t, PHASE_STEP, 1, 2, TIMER_NO_LAYER) {
        TIMER_SCOPE(&t, PHASE_NORM, 1, 2, 4)
            runs++;
        EXPECT(timer_event_open(&t, 0) && !timer_event_open(&t, 1), "the inner scope ended");
    }
    EXPECT(runs == 1 && t.count == 2 && !timer_event_open(&t, 0), "runs %d count %ld", runs,
           t.count);
    EXPECT(t.events[1].phase == PHASE_NORM && t.events[1].layer == 4 && t.events[1].step == 1 &&
               t.events[1].microbatch == 2,
           "fields of the inner event");
    EXPECT(t.events[0].t_start <= t.events[1].t_start && t.events[1].t_end <= t.events[0].t_end,
           "the inner scope nests inside the outer");
    EXPECT(scope_returning(&t) == 7 && t.count == 3 && !timer_event_open(&t, 2),
           "a return ends the phase");
    for (int i = 0; i < 2; i++)
        TIMER_SCOPE(&t, PHASE_SAMPLE, 0, 0, TIMER_NO_LAYER)
            break;
    EXPECT(t.count == 5 && !timer_event_open(&t, 3) && !timer_event_open(&t, 4),
           "a break leaves only the scope, and ends its phase");
    timer_free(&t);

    timer_init(&t, TIMINGS_OFF, NULL, 16, MPI_COMM_WORLD);
    runs = 0;
    TIMER_SCOPE(&t, PHASE_STEP, 0, 0, TIMER_NO_LAYER)
        runs++;
    EXPECT(runs == 1 && t.count == 0, "off still runs the body once (runs %d)", runs);
    timer_free(&t);
}

static void test_capacity_drops(void) {
    timer t;
    timer_init(&t, TIMINGS_LAYER, NULL, 4, MPI_COMM_WORLD);
    for (int i = 0; i < 6; i++) timer_end(&t, timer_begin(&t, PHASE_NORM, 0, 0, i));
    EXPECT(t.count == 4 && t.dropped == 2, "count %ld dropped %ld", t.count, t.dropped);
    timer_free(&t);
}

static void test_backend_marks(void) {
    backend_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.name = "fake";
    ops.mark = fake_mark;
    ops.mark_seconds = fake_mark_seconds;
    backend be = {&ops, NULL};
    timer t;
    timer_init(&t, TIMINGS_LAYER, &be, 8, MPI_COMM_WORLD);
    t.max_marks = 4; /* events 0 and 1 use marks, later ones the host clock */
    fake_marks_taken = 0;
    int outer = timer_begin(&t, PHASE_ITERATION, 0, 0, TIMER_NO_LAYER);
    int a = timer_begin(&t, PHASE_EMBED, 0, 0, TIMER_NO_LAYER);
    timer_end(&t, a);
    int b = timer_begin(&t, PHASE_HEAD, 0, 0, TIMER_NO_LAYER);
    timer_end(&t, b);
    EXPECT(fake_marks_taken == 3, "marks %d", fake_marks_taken);
    EXPECT(isnan(t.events[a].t_start), "a mark is pending until resolved");
    timer_resolve(&t);
    /* the open outer event holds back the resolved prefix so a flush never writes it */
    EXPECT(t.resolved == 0, "resolved %ld", t.resolved);
    EXPECT(!isnan(t.events[a].t_start) && t.events[a].t_end >= t.events[a].t_start,
           "resolved mark times");
    timer_end(&t, outer);
    timer_resolve(&t);
    EXPECT(t.resolved == 3, "resolved %ld", t.resolved);
    EXPECT(t.events[outer].t_end >= t.events[b].t_end, "outer ends last");
    double now = timer_now(&t);
    EXPECT(fabs(fake_slots[2 * a + 1] + t.clock_offset - t.run_start - t.events[a].t_end) < 1e-12 &&
               t.events[a].t_end <= now, "mark time conversion");
    timer_free(&t);
}

/* A backend with profiler ranges records what the timer opens and closes: one range per
 * recorded event, named as the phase with the layer as payload, closed by its own id, even
 * when ranges do not nest; none for events a level filters out. */
enum { RANGES_MAX = 8 };
static struct {
    int opened, closed;
    const char *name[RANGES_MAX];
    int payload[RANGES_MAX];
    uint64_t closed_id[RANGES_MAX];
} ranges;
static uint64_t fake_range_start(void *ctx, const char *name, int payload) {
    EXPECT(ranges.opened < RANGES_MAX, "ranges %d", ranges.opened);
    ranges.name[ranges.opened] = name;
    ranges.payload[ranges.opened] = payload;
    return 100 + (uint64_t)ranges.opened++;
}
static void fake_range_end(void *ctx, uint64_t id) {
    EXPECT(ranges.closed < RANGES_MAX, "ranges closed %d", ranges.closed);
    ranges.closed_id[ranges.closed++] = id;
}

static void test_backend_ranges(void) {
    backend_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.name = "fake-ranges";
    ops.range_start = fake_range_start;
    ops.range_end = fake_range_end;
    backend be = {&ops, NULL};
    timer t;
    timer_init(&t, TIMINGS_STEP, &be, 8, MPI_COMM_WORLD);
    memset(&ranges, 0, sizeof ranges);
    int allreduce = timer_begin(&t, PHASE_TP_ALLREDUCE, 1, 0, TIMER_NO_LAYER);
    int filtered = timer_begin(&t, PHASE_MLP_GEMM, 1, 0, 3); /* a layer event at `step` */
    int head = timer_begin(&t, PHASE_HEAD, 1, 0, TIMER_NO_LAYER);
    timer_end(&t, allreduce); /* closes before head: ranges need not nest */
    timer_end(&t, filtered);
    timer_end(&t, head);
    EXPECT(filtered < 0 && ranges.opened == 2 && ranges.closed == 2, "opened %d closed %d",
           ranges.opened, ranges.closed);
    EXPECT(strcmp(ranges.name[0], "tp_allreduce") == 0 && strcmp(ranges.name[1], "head") == 0 &&
               ranges.payload[0] == TIMER_NO_LAYER,
           "range names %s %s", ranges.name[0], ranges.name[1]);
    EXPECT(ranges.closed_id[0] == 100 && ranges.closed_id[1] == 101, "closed ids %lu %lu",
           (unsigned long)ranges.closed_id[0], (unsigned long)ranges.closed_id[1]);
    timer_free(&t);
    timer_init(&t, TIMINGS_LAYER, &be, 8, MPI_COMM_WORLD);
    memset(&ranges, 0, sizeof ranges);
    timer_end(&t, timer_begin(&t, PHASE_MLP_GEMM, 1, 0, 3));
    EXPECT(ranges.opened == 1 && ranges.closed == 1 && ranges.payload[0] == 3 &&
               strcmp(ranges.name[0], "mlp_gemm") == 0,
           "layer range: opened %d payload %d", ranges.opened, ranges.payload[0]);
    timer_free(&t);
    timer_init(&t, TIMINGS_OFF, &be, 8, MPI_COMM_WORLD);
    memset(&ranges, 0, sizeof ranges);
    timer_end(&t, timer_begin(&t, PHASE_STEP, 1, 0, TIMER_NO_LAYER));
    EXPECT(ranges.opened == 0 && t.range_ids == NULL, "no ranges at timings off");
    timer_free(&t);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT(size >= 2, "run with 2-4 ranks");
    test_clock_align_recovers_injected_offset(rank);
    test_levels();
    test_scope();
    test_capacity_drops();
    test_backend_marks();
    test_backend_ranges();
    EXPECT(strcmp(phase_name(PHASE_PP_RECV_WAIT), "pp_recv_wait") == 0 &&
               phase_from_name("iteration") == PHASE_ITERATION && phase_from_name("x") == -1,
           "phase names");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("test_timing: ok (%d ranks)\n", size);
    MPI_Finalize();
    return 0;
}
