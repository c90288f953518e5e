/* How many timing events (and so backend mark slots, CUDA events on a GPU) a run preallocates
 * at each record.timings level: none when off, the events outside layers at `step`, every
 * layer's phases too at `layer`, capped. No MPI is needed: only the job's numbers are read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics/timing.h"

/* A job of 12 layers, 2 micro-batches, 32 new tokens, warm-up 1 + 3 iterations, no stream. */
static job *small_job(timings_level level) {
    static job j;
    memset(&j, 0, sizeof j);
    j.timings = level;
    j.layers = 12;
    j.microbatches = 2;
    j.new_tokens = 32;
    j.warmup = 1;
    j.iterations = 3;
    return &j;
}

static void test_off_preallocates_nothing(void **state) {
    (void)state;
    job *j = small_job(TIMINGS_OFF);
    assert_int_equal(timer_event_capacity(j), 0);
    /* a job so large that `layer` hits the cap still costs nothing when off */
    j->layers = 96;
    j->new_tokens = 4096;
    j->iterations = 100;
    assert_int_equal(timer_event_capacity(j), 0);
}

/* `layer` keeps the formula runs have always used: 16 per layer plus 16 per micro-batch step. */
static void test_layer_counts_every_layer(void **state) {
    (void)state;
    job *j = small_job(TIMINGS_LAYER);
    assert_int_equal(timer_event_capacity(j), 64 + 4L * 32 * 2 * (12 * 16 + 16));
    j->arrival_rate = 2.0f;
    j->duration = 10.0f; /* up to 2 * rate * duration + 64 generations more */
    assert_int_equal(timer_event_capacity(j), 64 + (4L + 40 + 64) * 32 * 2 * (12 * 16 + 16));
}

/* TP overlap at `layer`: 6 events more per further piece of a row-parallel product (its 2
 * GEMMs, 2 all-reduces and 2 waits), and a prefill's layers once per nano-batch. */
static void test_layer_counts_overlap(void **state) {
    (void)state;
    job *j = small_job(TIMINGS_LAYER);
    const long base = 64 + 4L * 32 * 2 * (12 * 16 + 16);
    j->overlap = 1, j->tp = 2, j->dp = 1, j->chunks = 3, j->prompt_len = 40;
    /* 2 prompts in 2 micro-batches of one: the prefill in 2 nano-batches of 20 positions, each
     * product in 3 pieces (16 + 2 x 6 = 28 a nano-batch, 40 more than 16); decode rows of one
     * sequence have one piece */
    j->batch = 2;
    assert_int_equal(timer_event_capacity(j), base + 4L * 2 * 12 * 40);
    /* 8 prompts, micro-batches of 4: the prefill as above in 2 nano-batches of 2 sequences, and
     * each of the 31 decode steps in 3 pieces (2 x 6 more) */
    j->batch = 8;
    assert_int_equal(timer_event_capacity(j), base + 4L * 2 * 12 * (40 + 31 * 12));
    /* overlap off, or one TP rank: the formula of every other run */
    j->overlap = 0;
    assert_int_equal(timer_event_capacity(j), base);
    j->overlap = 1, j->tp = 1;
    assert_int_equal(timer_event_capacity(j), base);
}

static void test_step_counts_steps_only(void **state) {
    (void)state;
    job *j = small_job(TIMINGS_STEP);
    assert_int_equal(timer_event_capacity(j), 64 + 4L * 32 * 2 * 16);
    /* independent of the depth of the model */
    j->layers = 96;
    assert_int_equal(timer_event_capacity(j), 64 + 4L * 32 * 2 * 16);
}

static void test_capped(void **state) {
    (void)state;
    job *j = small_job(TIMINGS_LAYER);
    j->layers = 96;
    j->new_tokens = 4096;
    j->iterations = 100;
    assert_int_equal(timer_event_capacity(j), TIMER_MAX_EVENTS);
    /* the backend gets 2 slots per event: still within an int */
    assert_true(2L * TIMER_MAX_EVENTS < (long)INT32_MAX);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_preallocates_nothing),
        cmocka_unit_test(test_layer_counts_every_layer),
        cmocka_unit_test(test_layer_counts_overlap),
        cmocka_unit_test(test_step_counts_steps_only),
        cmocka_unit_test(test_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
