/* The decision of a host wait on stream-ordered communication (comm_poll.h). */
#include "parallel/comm_poll.h"

enum { POLL_SLEEP_MIN_NS = 1000, POLL_SLEEP_MAX_NS = 1000000 };

poll_action comm_poll_decide(poll_stream_state stream, poll_comm_state comm) {
    if (comm == POLL_COMM_FAILED) return POLL_ACTION_FAIL_COMM;
    if (stream == POLL_STREAM_FAILED) return POLL_ACTION_FAIL_CUDA;
    if (stream == POLL_STREAM_BUSY || comm == POLL_COMM_IN_PROGRESS) return POLL_ACTION_WAIT;
    return POLL_ACTION_DONE;
}

poll_comm_state comm_poll_worst(poll_comm_state a, poll_comm_state b) { return a > b ? a : b; }

long comm_poll_backoff(long prev_ns) {
    if (prev_ns < POLL_SLEEP_MIN_NS) return POLL_SLEEP_MIN_NS;
    return prev_ns >= POLL_SLEEP_MAX_NS / 2 ? POLL_SLEEP_MAX_NS : 2 * prev_ns;
}
