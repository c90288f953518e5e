/* Benchmark (not a test): what the NVTX phase ranges add to one timed phase with no profiler
 * attached, the case of every production run. It times timer_begin + timer_end on the host
 * clock with no backend, then with a table whose only entries are the cuda backend's range
 * functions (kernels/cuda/nvtx_ranges.c, the code a cuda run calls), so the difference is the
 * ranges' own cost. No GPU is needed: NVTX calls never touch the device. Built with the cuda
 * backend as tools/tripar_nvtx_cost in the build folder; run it with mpirun -n 1. */
#include <mpi.h>
#include <stdio.h>

#include "kernels/cuda/nvtx_ranges.h"
#include "metrics/timing.h"

enum { EVENTS = 1 << 20, ROUNDS = 5 };

/* Best of ROUNDS, nanoseconds per begin+end pair, over a timer on be (NULL: host clock only). */
static double pair_ns(const backend *be) {
    double best = 1e30;
    for (int round = 0; round < ROUNDS; round++) {
        timer t;
        timer_init(&t, TIMINGS_LAYER, be, EVENTS, MPI_COMM_WORLD);
        double t0 = timer_host_seconds();
        for (int i = 0; i < EVENTS; i++)
            timer_end(&t, timer_begin(&t, PHASE_MLP_GEMM, 1, 0, i & 31));
        double seconds = (timer_host_seconds() - t0) / EVENTS;
        if (seconds < best) best = seconds;
        timer_free(&t);
    }
    return best * 1e9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    backend_ops ranges_only = {0};
    ranges_only.name = "nvtx-ranges";
    ranges_only.range_start = cuda_nvtx_range_start;
    ranges_only.range_end = cuda_nvtx_range_end;
    const backend with_ranges = {&ranges_only, NULL};
    double plain = pair_ns(NULL), nvtx = pair_ns(&with_ranges);
    printf("timer_begin+timer_end: %.1f ns/event without ranges, %.1f ns/event with NVTX ranges "
           "(no profiler attached): +%.1f ns per phase\n",
           plain, nvtx, nvtx - plain);
    MPI_Finalize();
    return 0;
}
