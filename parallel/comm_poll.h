/* The decision of a host wait on stream-ordered communication (comm_nccl.c), in plain C so it
 * is tested on machines without a GPU: keep polling, stop, or abort because a communicator
 * failed. comm_nccl.c turns CUDA and NCCL states into these enums and acts on the answer. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    POLL_STREAM_DONE = 0, /* all queued work finished */
    POLL_STREAM_BUSY,     /* still running (cudaErrorNotReady) */
    POLL_STREAM_FAILED,   /* any other CUDA error */
} poll_stream_state;

typedef enum {
    POLL_COMM_OK = 0,      /* ncclSuccess */
    POLL_COMM_IN_PROGRESS, /* ncclInProgress: a non-blocking call has not finished */
    POLL_COMM_FAILED,      /* any other result: this rank or a peer failed */
} poll_comm_state;

typedef enum {
    POLL_ACTION_DONE = 0,  /* stop waiting */
    POLL_ACTION_WAIT,      /* sleep (comm_poll_backoff) and poll again */
    POLL_ACTION_FAIL_COMM, /* abort the communicators, then die naming the NCCL error */
    POLL_ACTION_FAIL_CUDA, /* abort the communicators, then die naming the CUDA error */
} poll_action;

/* What to do after one poll. A failed communicator wins over everything, even a finished
 * stream: its peers are stuck in a collective and only an abort frees them; it also wins over
 * a CUDA error, whose cause it usually is. A stream still running, or a communicator still
 * busy with a non-blocking call, means wait. */
poll_action comm_poll_decide(poll_stream_state stream, poll_comm_state comm);

/* The folded state of several communicators: the worst of the two (FAILED over IN_PROGRESS
 * over OK). */
poll_comm_state comm_poll_worst(poll_comm_state a, poll_comm_state b);

/* The next sleep between polls in nanoseconds: starts at 1 us (prev_ns 0) and doubles up to
 * 1 ms, so a short wait costs microseconds and a long one does not burn a core. */
long comm_poll_backoff(long prev_ns);

#ifdef __cplusplus
}
#endif
