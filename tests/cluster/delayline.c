// A delay line for the emulated cluster's links: holds every packet of an NFQUEUE queue for a
// fixed time, then accepts it, in arrival order. This kernel has no netem, so latency is added
// here (tbf adds the rate). Runs inside one node's network namespace; see docs/cluster.md.
//   delayline --queue Q --delay-us D [--ready FILE]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// Packets in flight: at 100 Gbit/s a 10 ms delay holds ~85 000 full-size packets; the ring is
// larger than the kernel queue (QUEUE_MAXLEN), so it can never overflow before the kernel's.
#define QUEUE_MAXLEN 65536u
#define RING_SIZE (QUEUE_MAXLEN * 2u)
#define RCVBUF_BYTES (16 << 20)

typedef struct {
    uint32_t id;        // the kernel's packet id (ascending within the queue)
    int64_t release_ns; // CLOCK_MONOTONIC time at which it is accepted
} held_packet;

typedef struct {
    held_packet ring[RING_SIZE];
    uint32_t head, tail; // head: oldest held packet; tail: next free slot
    int64_t delay_ns;
    uint64_t held, overflowed;
} delay_line;

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Called once per queued packet: stamp it and hold it; the verdict comes from the main loop.
static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
                     void *data) {
    (void)msg;
    delay_line *line = data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    if (line->tail - line->head == RING_SIZE) {
        // Cannot happen while the kernel queue is shorter than the ring; pass it rather than
        // leave it queued forever.
        line->overflowed++;
        return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL) < 0 ? -1 : 0;
    }
    line->ring[line->tail % RING_SIZE] = (held_packet){id, now_ns() + line->delay_ns};
    line->tail++;
    line->held++;
    return 0;
}

// Accepts every packet whose time has come with one batch verdict: ids ascend, so "every id up
// to the newest due one" is exactly the due packets, and order is kept.
static int release_due(struct nfq_q_handle *qh, delay_line *line, int64_t t) {
    uint32_t last = 0;
    int any = 0;
    while (line->head != line->tail && line->ring[line->head % RING_SIZE].release_ns <= t) {
        last = line->ring[line->head % RING_SIZE].id;
        line->head++;
        any = 1;
    }
    if (any && nfq_set_verdict_batch(qh, last, NF_ACCEPT) < 0) {
        perror("delayline: nfq_set_verdict_batch");
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, int *queue, long *delay_us, const char **ready) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) return -1;
        char *end;
        if (!strcmp(a, "--queue")) {
            *queue = (int)strtol(argv[++i], &end, 10);
            if (*end || *queue < 0 || *queue > 65535) return -1;
        } else if (!strcmp(a, "--delay-us")) {
            *delay_us = strtol(argv[++i], &end, 10);
            if (*end || *delay_us < 0 || *delay_us > 10000000) return -1;
        } else if (!strcmp(a, "--ready")) {
            *ready = argv[++i];
        } else {
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    int queue = 0;
    long delay_us = -1;
    const char *ready = NULL;
    if (parse_args(argc, argv, &queue, &delay_us, &ready) != 0 || delay_us < 0) {
        fprintf(stderr, "usage: delayline --queue Q --delay-us D [--ready FILE]\n");
        return 2;
    }
    static delay_line line; // static: the ring is a few MiB
    line.delay_ns = (int64_t)delay_us * 1000;

    // Timer slack (50 us by default) would be added to every wake-up: the delay is the point.
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) != 0) perror("delayline: PR_SET_TIMERSLACK");
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct nfq_handle *h = nfq_open();
    if (!h) {
        perror("delayline: nfq_open");
        return 1;
    }
    struct nfq_q_handle *qh = nfq_create_queue(h, (uint16_t)queue, on_packet, &line);
    if (!qh) {
        perror("delayline: nfq_create_queue (is another program bound to the queue?)");
        nfq_close(h);
        return 1;
    }
    // Only the metadata (the packet id) comes to user space: the packet stays in the kernel.
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(qh, QUEUE_MAXLEN) < 0) {
        perror("delayline: nfq_set_mode/maxlen");
        return 1;
    }
    // GSO super-packets (up to 64 KiB on a veth) are queued whole: without this flag the kernel
    // cuts each into MTU-sized packets first, and the per-packet cost caps a link near 1 Gbit/s.
    if (nfq_set_queue_flags(qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO) < 0)
        perror("delayline: NFQA_CFG_F_GSO (packets are queued segmented)");
    int fd = nfq_fd(h);
    nfnl_rcvbufsiz(nfq_nfnlh(h), RCVBUF_BYTES);
    int one = 1;
    // A burst larger than the socket buffer loses notifications (those packets are dropped by
    // the kernel's queue later, and TCP resends them); say so instead of failing.
    setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        perror("delayline: fcntl");
        return 1;
    }
    if (ready) {
        FILE *f = fopen(ready, "w");
        if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
            perror("delayline: ready file");
            return 1;
        }
    }

    static char buf[1 << 16];
    int status = 0;
    while (!stop_requested) {
        for (;;) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
                if (errno == ENOBUFS) continue;
                perror("delayline: recv");
                status = 1;
                goto out;
            }
            nfq_handle_packet(h, buf, (int)n);
        }
        int64_t t = now_ns();
        if (release_due(qh, &line, t) != 0) {
            status = 1;
            break;
        }
        struct timespec timeout, *tp = NULL;
        if (line.head != line.tail) {
            int64_t wait = line.ring[line.head % RING_SIZE].release_ns - now_ns();
            if (wait < 0) wait = 0;
            timeout = (struct timespec){wait / 1000000000, wait % 1000000000};
            tp = &timeout;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (ppoll(&pfd, 1, tp, NULL) < 0 && errno != EINTR) {
            perror("delayline: ppoll");
            status = 1;
            break;
        }
    }
out:
    // Whatever is still held goes out now rather than being dropped with the queue.
    release_due(qh, &line, INT64_MAX);
    fprintf(stderr, "delayline: queue %d, %ld us: %llu packets held, %llu passed unheld\n", queue,
            delay_us, (unsigned long long)line.held, (unsigned long long)line.overflowed);
    nfq_destroy_queue(qh);
    nfq_close(h);
    return status;
}
