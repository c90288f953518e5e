/* Benchmark (not a test) behind the choice of how TP all-reduces make progress on the CPU
 * backend (docs/design.md, "Overlap"). Every rank starts an MPI_Iallreduce, computes for a
 * while (sgemm pieces of about the size of a prefill product), then waits. It reports the time
 * blocked in MPI_Wait (exposed communication) and the compute slowdown for three ways of
 * driving progress:
 *   none    no MPI call until the wait
 *   test    MPI_Test between compute pieces (what tripar does)
 *   thread  a progress thread that polls MPI_Iprobe on a private communicator (needs
 *           MPI_THREAD_MULTIPLE)
 * usage: mpirun -n 2 tripar_progress_probe [floats=393216] [pieces=4] [rows=128] */
#include <cblas.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct {
    MPI_Comm probe_comm;
    volatile int stop;
} poller;

/* Any call into the MPI library runs its progress engine for every pending operation, so the
 * thread probes a private communicator and never touches the main thread's requests. */
static void *poll_loop(void *arg) {
    poller *p = arg;
    int flag;
    while (!p->stop) {
        MPI_Iprobe(MPI_ANY_SOURCE, 0, p->probe_comm, &flag, MPI_STATUS_IGNORE);
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = argc > 1 ? atol(argv[1]) : 393216; /* 512 rows x 768: a prefill product's output */
    int pieces = argc > 2 ? atoi(argv[2]) : 4;
    int rows = argc > 3 ? atoi(argv[3]) : 128;
    const int C = 768, M = 3072, reps = 10;
    float *buf = calloc((size_t)n, sizeof(float));
    float *a = calloc((size_t)rows * M, sizeof(float)), *w = calloc((size_t)C * M, sizeof(float));
    float *c = calloc((size_t)rows * C, sizeof(float));
    const char *modes[3] = {"none", "test", "thread"};
    MPI_Comm probe_comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &probe_comm);
    if (rank == 0)
        printf("%d ranks, %ld floats per all-reduce, %d compute pieces of %dx%dx%d sgemm, "
               "thread level %s\n%-8s %12s %12s %12s\n",
               size, n, pieces, rows, M, C,
               provided == MPI_THREAD_MULTIPLE ? "multiple" : "lower (thread mode skipped)", "mode",
               "compute ms", "exposed ms", "total ms");
    for (int mode = 0; mode < 3; mode++) {
        if (mode == 2 && provided != MPI_THREAD_MULTIPLE) break;
        double compute = 0, exposed = 0, total = 0;
        for (int r = 0; r < reps + 1; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Request req;
            double t0 = now();
            MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            poller p = {probe_comm, 0};
            pthread_t th;
            if (mode == 2) pthread_create(&th, NULL, poll_loop, &p);
            double c0 = now();
            for (int k = 0; k < pieces; k++) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, C, M, 1.0f, a, M, w, M,
                            0.0f, c, C);
                if (mode == 1) {
                    int done;
                    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
                }
            }
            double c1 = now();
            if (mode == 2) {
                p.stop = 1;
                pthread_join(th, NULL);
            }
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            double t1 = now();
            if (r == 0) continue; /* warm-up */
            compute += c1 - c0;
            exposed += t1 - c1;
            total += t1 - t0;
        }
        double v[3] = {compute / reps, exposed / reps, total / reps}, mx[3];
        MPI_Reduce(v, mx, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%-8s %12.3f %12.3f %12.3f\n", modes[mode], 1e3 * mx[0], 1e3 * mx[1], 1e3 * mx[2]);
    }
    MPI_Comm_free(&probe_comm);
    free(buf);
    free(a);
    free(w);
    free(c);
    MPI_Finalize();
    return 0;
}
