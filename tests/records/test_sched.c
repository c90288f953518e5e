/* The preemption sampler (metrics/sched.h) without MPI: it finds the process's threads, one row
 * per step with finite, non-negative counters, a thread started later is picked up by a
 * refresh, an exited one keeps its run delay, and a full table counts drops. It also prints
 * what one step's two samples cost (docs/benchmarks.md, "record.sched"): a report, never a
 * bound. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics/sched.h"
#include "metrics/timing.h"

static int have_schedstat(void) { return access("/proc/self/schedstat", R_OK) == 0; }

static volatile long sleeper_tid;

static void *sleeper(void *arg) {
    volatile int *stop = arg;
    sleeper_tid = (long)syscall(SYS_gettid);
    while (!*stop)
        usleep(1000);
    return NULL;
}

/* pthread_join returns when the thread has cleared its tid, which the kernel does before it
 * has reaped the task: its /proc entry (and the sampler's open schedstat file) can answer a
 * moment longer, most on a loaded machine. Waits for the entry to go (at most 2 s). */
static void wait_task_gone(long tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld", tid);
    for (int i = 0; i < 2000 && access(path, F_OK) == 0; i++)
        usleep(1000);
}

static void test_off_opens_nothing(void **state) {
    (void)state;
    sched_sampler s;
    sched_init(&s, 0, 100);
    assert_int_equal(s.on, 0);
    assert_int_equal(s.n_threads, 0);
    sched_step_begin(&s, 0);
    sched_step_end(&s, 0);
    assert_int_equal(s.count, 0);
    sched_free(&s);
}

static void test_rows_and_threads(void **state) {
    (void)state;
    if (!have_schedstat()) skip();
    sched_sampler s;
    sched_init(&s, 1, 3);
    assert_int_equal(s.schedstat, 1);
    const int before = s.live;
    assert_true(before >= 1);
    volatile int stop = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sleeper, (void *)&stop), 0);
    sched_threads_refresh(&s);
    assert_int_equal(s.live, before + 1);
    for (long ev = 0; ev < 2; ev++) {
        sched_step_begin(&s, ev);
        usleep(2000);
        sched_step_end(&s, ev);
    }
    stop = 1;
    pthread_join(th, NULL);
    wait_task_gone(sleeper_tid);
    sched_step_begin(&s, 2);
    sched_step_end(&s, 2); /* the exited thread is found gone here */
    assert_int_equal(s.live, before);
    sched_step_begin(&s, 3);
    sched_step_end(&s, 3); /* past the capacity of 3 */
    assert_int_equal(s.count, 3);
    assert_int_equal(s.dropped, 1);
    for (long i = 0; i < s.count; i++) {
        assert_int_equal(s.rows[i].event, i);
        assert_true(isfinite(s.rows[i].run_delay) && s.rows[i].run_delay >= 0);
        assert_true(s.rows[i].nivcsw >= 0 && s.rows[i].nvcsw >= 0);
    }
    assert_true(s.rows[0].nvcsw >= 1); /* the step slept: at least one voluntary switch */
    sched_free(&s);
}

/* Only PHASE_STEP events are sampled, in the same order as the timer's table. */
static void test_timer_samples_steps(void **state) {
    (void)state;
    sched_sampler s;
    sched_init(&s, 1, 8);
    timer t;
    memset(&t, 0, sizeof t);
    t.level = TIMINGS_STEP;
    t.capacity = 8;
    timing_event events[8];
    int slots[18];
    t.events = events;
    t.mark_slots = slots;
    t.sched = &s;
    int a = timer_begin(&t, PHASE_STEP, 0, 0, TIMER_NO_LAYER);
    int b = timer_begin(&t, PHASE_HEAD, 0, 0, TIMER_NO_LAYER);
    timer_end(&t, b);
    timer_end(&t, a);
    int c = timer_begin(&t, PHASE_STEP, 1, 0, TIMER_NO_LAYER);
    timer_end(&t, c);
    assert_int_equal(s.count, 2);
    assert_int_equal(s.rows[0].event, a);
    assert_int_equal(s.rows[1].event, c);
    sched_free(&s);
}

/* What record.sched adds to a step: two samples (begin and end). */
static void test_cost_per_step(void **state) {
    (void)state;
    if (!have_schedstat()) skip();
    enum { STEPS = 20000, EXTRA = 4 };
    sched_sampler s;
    sched_init(&s, 1, STEPS);
    volatile int stop = 0;
    pthread_t th[EXTRA];
    for (int i = 0; i < EXTRA; i++)
        assert_int_equal(pthread_create(&th[i], NULL, sleeper, (void *)&stop), 0);
    sched_threads_refresh(&s);
    double t0 = timer_host_seconds();
    for (long i = 0; i < STEPS; i++) {
        sched_step_begin(&s, i);
        sched_step_end(&s, i);
    }
    double per_step = (timer_host_seconds() - t0) / STEPS;
    stop = 1;
    for (int i = 0; i < EXTRA; i++)
        pthread_join(th[i], NULL);
    printf("record.sched: %.2f us per step (2 samples, %d threads)\n", per_step * 1e6,
           s.n_threads);
    assert_int_equal(s.count, STEPS);
    sched_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_opens_nothing),
        cmocka_unit_test(test_rows_and_threads),
        cmocka_unit_test(test_timer_samples_steps),
        cmocka_unit_test(test_cost_per_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
