// The emulated cluster's own MPI probe: each rank's host name, and the one-way latency of an
// 8-byte ping-pong between rank 0 and a rank on its node (intra) and on another node (inter).
// Prints, from rank 0: "rank R host H" per rank, then "oneway TIER US us (ranks 0 and P)", and
// with BYTES, "bandwidth inter MBPS MB/s (BYTES bytes)": BYTES sent across, one byte back.
//   pingpong [ITERATIONS [BYTES]]
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_LEN 64
#define WARMUP 10

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Rank 0 and `peer` bounce 8 bytes; rank 0 returns the median one-way time in seconds (the
// median, because one scheduling hiccup on a 2-core machine must not move the figure). Every
// reply is checked to carry what was sent, so a figure never comes from a broken exchange.
static double pingpong_oneway(int rank, int peer, int iterations, double *round_trips) {
    unsigned char buf[8];
    for (int i = -WARMUP; i < iterations; i++) {
        if (rank == 0) {
            memset(buf, (unsigned char)(i + WARMUP), sizeof buf);
            double t0 = MPI_Wtime();
            MPI_Send(buf, sizeof buf, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, sizeof buf, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t = MPI_Wtime() - t0;
            for (size_t b = 0; b < sizeof buf; b++)
                if (buf[b] != (unsigned char)(i + WARMUP + 1)) {
                    fprintf(stderr, "pingpong: reply %d from rank %d is corrupt\n", i, peer);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            if (i >= 0) round_trips[i] = t;
        } else if (rank == peer) {
            MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t b = 0; b < sizeof buf; b++)
                buf[b]++;
            MPI_Send(buf, sizeof buf, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    if (rank != 0) return 0;
    qsort(round_trips, (size_t)iterations, sizeof *round_trips, compare_double);
    return round_trips[iterations / 2] / 2;
}

// Rank 0 sends `bytes` to `peer`, which answers with one byte once all has arrived; rank 0
// returns bytes per second (best of 3, after one untimed round that opens the TCP window).
static double stream_rate(int rank, int peer, size_t bytes) {
    unsigned char *buf = malloc(bytes);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(buf, 0x5a, bytes);
    double best = 0;
    for (int i = 0; i < 4; i++) {
        if (rank == 0) {
            double t0 = MPI_Wtime();
            MPI_Send(buf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, 1, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double rate = (double)bytes / (MPI_Wtime() - t0);
            if (i > 0 && rate > best) best = rate;
        } else if (rank == peer) {
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t b = 0; b < bytes; b++)
                if (buf[b] != 0x5a) {
                    fprintf(stderr, "pingpong: byte %zu of the stream is corrupt\n", b);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            MPI_Send(buf, 1, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    free(buf);
    return best;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int iterations = argc > 1 ? atoi(argv[1]) : 100;
    long stream_bytes = argc > 2 ? atol(argv[2]) : 0;
    if (iterations < 1 || stream_bytes < 0 || stream_bytes > (1L << 30) || world < 2) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: pingpong [ITERATIONS >= 1 [BYTES <= 1 GiB]] on 2 or more ranks\n");
        MPI_Finalize();
        return 2;
    }
    char host[HOST_LEN] = {0};
    if (gethostname(host, sizeof host - 1) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    char *hosts = malloc((size_t)world * HOST_LEN);
    double *round_trips = malloc((size_t)iterations * sizeof *round_trips);
    if (!hosts || !round_trips) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Allgather(host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, MPI_COMM_WORLD);
    int intra = -1, inter = -1;
    for (int r = 1; r < world; r++) {
        int same = strcmp(hosts + (size_t)r * HOST_LEN, hosts) == 0;
        if (same && intra < 0) intra = r;
        if (!same && inter < 0) inter = r;
    }
    if (rank == 0)
        for (int r = 0; r < world; r++)
            printf("rank %d host %s\n", r, hosts + (size_t)r * HOST_LEN);
    const struct {
        const char *name;
        int peer;
    } tiers[] = {{"intra", intra}, {"inter", inter}};
    for (int t = 0; t < 2; t++) {
        if (tiers[t].peer < 0) {
            if (rank == 0) printf("oneway %s none\n", tiers[t].name);
            continue;
        }
        double s = pingpong_oneway(rank, tiers[t].peer, iterations, round_trips);
        if (rank == 0)
            printf("oneway %s %.1f us (ranks 0 and %d)\n", tiers[t].name, s * 1e6, tiers[t].peer);
    }
    if (stream_bytes > 0 && inter > 0) {
        double rate = stream_rate(rank, inter, (size_t)stream_bytes);
        if (rank == 0) printf("bandwidth inter %.2f MB/s (%ld bytes)\n", rate / 1e6, stream_bytes);
    }
    fflush(stdout);
    free(round_trips);
    free(hosts);
    MPI_Finalize();
    return 0;
}
