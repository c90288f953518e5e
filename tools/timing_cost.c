/* Benchmark helper for tools/timing_overhead.sh (not part of the build): the host cost of one
 * timed phase at `record.timings: layer` (timer_begin + timer_end on the cpu backend, which
 * reads the host clock twice) and of one timer_add_host, measured in a tight loop with the
 * real src/timing.c. Prints nanoseconds per event. Build:
 *   mpicc -O2 -std=gnu11 -Isrc -Ikernels -Iparallel tools/timing_cost.c src/timing.c src/check.c */
#include <mpi.h>
#include <stdio.h>

#include "metrics/timing.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    enum { EVENTS = 1 << 20, ROUNDS = 5 };
    timer t;
    double best_pair = 1e9, best_host = 1e9;
    for (int round = 0; round < ROUNDS; round++) {
        timer_init(&t, TIMINGS_LAYER, NULL, EVENTS, MPI_COMM_WORLD);
        double t0 = timer_host_seconds();
        for (int i = 0; i < EVENTS / 2; i++) timer_end(&t, timer_begin(&t, PHASE_QKV_GEMM, 1, 0, 3));
        double t1 = timer_host_seconds();
        for (int i = 0; i < EVENTS / 2; i++)
            timer_add_host(&t, PHASE_TP_WAIT, 1, 0, 3, t1, t1);
        double t2 = timer_host_seconds();
        double pair = (t1 - t0) / (EVENTS / 2), host = (t2 - t1) / (EVENTS / 2);
        if (pair < best_pair) best_pair = pair;
        if (host < best_host) best_host = host;
        timer_free(&t);
    }
    printf("timer_begin+timer_end %.1f ns/event, timer_add_host %.1f ns/event\n", 1e9 * best_pair,
           1e9 * best_host);
    MPI_Finalize();
    return 0;
}
