/* Phase timer and clock alignment under MPI (2-4 ranks): a planted clock skew is recovered
 * within the reported uncertainty, levels filter events, and backend marks resolve in order. */
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

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT(size >= 2, "run with 2-4 ranks");
    test_clock_align_recovers_injected_offset(rank);
    test_levels();
    test_capacity_drops();
    test_backend_marks();
    EXPECT(strcmp(phase_name(PHASE_PP_RECV_WAIT), "pp_recv_wait") == 0 &&
               phase_from_name("iteration") == PHASE_ITERATION && phase_from_name("x") == -1,
           "phase names");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("test_timing: ok (%d ranks)\n", size);
    MPI_Finalize();
    return 0;
}
