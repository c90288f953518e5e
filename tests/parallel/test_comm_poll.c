/* The NCCL comm's host-wait decision (parallel/comm_poll.c), on the CPU: every pair of stream
 * and communicator states, the folding of several communicators, and the back-off bounds. The
 * CUDA/NCCL calls around it (comm_nccl.c) run only on a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "parallel/comm_poll.h"

static void test_decide_table(void **state) {
    (void)state;
    static const struct {
        poll_stream_state stream;
        poll_comm_state comm;
        poll_action want;
    } cases[] = {
        {POLL_STREAM_DONE, POLL_COMM_OK, POLL_ACTION_DONE},
        {POLL_STREAM_BUSY, POLL_COMM_OK, POLL_ACTION_WAIT},
        {POLL_STREAM_DONE, POLL_COMM_IN_PROGRESS, POLL_ACTION_WAIT},
        {POLL_STREAM_BUSY, POLL_COMM_IN_PROGRESS, POLL_ACTION_WAIT},
        // a failed peer: abort even though this rank's stream finished, peers are stuck
        {POLL_STREAM_DONE, POLL_COMM_FAILED, POLL_ACTION_FAIL_COMM},
        // the case the old cudaStreamSynchronize hung in: the stream never finishes
        {POLL_STREAM_BUSY, POLL_COMM_FAILED, POLL_ACTION_FAIL_COMM},
        {POLL_STREAM_FAILED, POLL_COMM_FAILED, POLL_ACTION_FAIL_COMM},
        {POLL_STREAM_FAILED, POLL_COMM_OK, POLL_ACTION_FAIL_CUDA},
        {POLL_STREAM_FAILED, POLL_COMM_IN_PROGRESS, POLL_ACTION_FAIL_CUDA},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(comm_poll_decide(cases[i].stream, cases[i].comm), cases[i].want);
}

static void test_worst(void **state) {
    (void)state;
    assert_int_equal(comm_poll_worst(POLL_COMM_OK, POLL_COMM_OK), POLL_COMM_OK);
    assert_int_equal(comm_poll_worst(POLL_COMM_OK, POLL_COMM_IN_PROGRESS), POLL_COMM_IN_PROGRESS);
    assert_int_equal(comm_poll_worst(POLL_COMM_FAILED, POLL_COMM_IN_PROGRESS), POLL_COMM_FAILED);
    assert_int_equal(comm_poll_worst(POLL_COMM_OK, POLL_COMM_FAILED), POLL_COMM_FAILED);
}

static void test_backoff(void **state) {
    (void)state;
    long ns = comm_poll_backoff(0);
    assert_int_equal(ns, 1000);
    long total = ns;
    int polls = 1;
    while (ns < 1000000) {
        long next = comm_poll_backoff(ns);
        assert_true(next > ns && next <= 1000000);
        ns = next;
        total += ns;
        polls++;
    }
    assert_int_equal(comm_poll_backoff(ns), 1000000); // capped: a long wait polls each ms
    assert_true(polls <= 12 && total < 3000000);      // the ramp to the cap is ~2 ms
    assert_int_equal(comm_poll_backoff(-5), 1000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decide_table),
        cmocka_unit_test(test_worst),
        cmocka_unit_test(test_backoff),
    };
    return cmocka_run_group_tests_name("comm_poll", tests, NULL, NULL);
}
