/* The telemetry sampler in-process (metrics/telemetry.h), one rank: samples on the timer's
 * clock at the asked rate, a full table counts drops instead of growing, stop is prompt even
 * at a low rate, and rate 0 starts no thread. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "metrics/telemetry.h"

static int failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Keeps one core busy for about `seconds`, so cpu_util has something to see. */
static void spin(double seconds) {
    volatile double x = 0;
    const double end = timer_host_seconds() + seconds;
    while (timer_host_seconds() < end)
        for (int i = 0; i < 10000; i++)
            x += 1e-9 * i;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    timer tm;
    timer_init(&tm, TIMINGS_STEP, NULL, 16, MPI_COMM_WORLD);

    /* 200 Hz for 0.3 s of work: samples in time order, on the timer's clock */
    telemetry t;
    telemetry_init(&t, 200, &tm, 0, "", -1);
    EXPECT(t.capacity == 200L * TELEMETRY_SECONDS_HELD, "capacity %ld", t.capacity);
    const double t0 = timer_now(&tm);
    telemetry_start(&t);
    spin(0.3);
    telemetry_stop(&t);
    const double t1 = timer_now(&tm);
    long n = telemetry_count(&t);
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    EXPECT(n >= 5, "only %ld samples in 0.3 s at 200 Hz", n);
    double busy = 0, span = 0; /* cpu_util weighted by the interval it covers */
    for (long i = 0; i < n; i++) {
        const telemetry_sample *s = &t.samples[i];
        if (i) {
            busy += s->cpu_util * (s->t - t.samples[i - 1].t);
            span += s->t - t.samples[i - 1].t;
        }
        EXPECT(s->t >= t0 && s->t <= t1, "sample %ld at %g outside [%g, %g]", i, s->t, t0, t1);
        if (i) EXPECT(s->t > t.samples[i - 1].t, "sample %ld not after the one before", i);
        EXPECT(s->rss_bytes > 0, "sample %ld rss %g", i, s->rss_bytes);
        /* One 5 ms interval may show more than the cores: CPU time accounted at scheduler
         * ticks, and a sampler preempted between its clock and getrusage on a busy machine
         * (2.35 of 2 cores seen). 4x the cores still catches a unit slip (percent: 100x). */
        EXPECT(s->cpu_util >= 0 && s->cpu_util <= 4.0 * cores, "sample %ld cpu %g of %ld cores", i,
               s->cpu_util, cores);
        EXPECT(isnan(s->gpu_sm_util) && isnan(s->gpu_power_w), "GPU fields without NVML");
    }
    /* over the whole run those errors cancel (the CPU deltas add up to the run's own): no
     * more than the cores, with a quarter for the two ends of a 0.3 s span */
    EXPECT(span <= 0 || busy / span <= 1.25 * cores, "mean cpu %g of %ld cores", busy / span,
           cores);
    EXPECT(t.dropped == 0, "%ld dropped", t.dropped);
    telemetry_free(&t);

    /* a full table: the samples past capacity are counted, never stored */
    telemetry_init(&t, 1000, &tm, 0, "", -1);
    t.capacity = 3; /* as if an hour had passed */
    telemetry_start(&t);
    spin(0.2);
    telemetry_stop(&t);
    EXPECT(telemetry_count(&t) == 3, "%ld samples kept in a table of 3", telemetry_count(&t));
    EXPECT(t.dropped > 0, "no drop counted past capacity");
    telemetry_free(&t);

    /* 1 Hz: stop does not wait out the period */
    telemetry_init(&t, 1, &tm, 0, "", -1);
    telemetry_start(&t);
    spin(0.05);
    double s0 = timer_host_seconds();
    telemetry_stop(&t);
    double took = timer_host_seconds() - s0;
    EXPECT(took < 0.5, "stop took %.3f s at 1 Hz", took);
    telemetry_free(&t);

    /* rate 0: off, no table, no thread */
    telemetry_init(&t, 0, &tm, 1, "", 0);
    telemetry_start(&t);
    EXPECT(!t.running && t.capacity == 0 && telemetry_count(&t) == 0, "rate 0 sampled");
    EXPECT(t.nvml.lib == NULL, "rate 0 loaded NVML");
    telemetry_free(&t);

    timer_free(&tm);
    MPI_Finalize();
    if (failures)
        fprintf(stderr, "test_telemetry_sampler: %d failure(s)\n", failures);
    else
        printf("test_telemetry_sampler: ok\n");
    return failures ? 1 : 0;
}
