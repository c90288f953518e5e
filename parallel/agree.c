/* Agreements over a communicator (agree.h): each is one MPI collective, checked, and marked as
 * a wait for the stall watchdog (a peer lost during set-up or recording stops them all). */
#include "parallel/agree.h"
#include "parallel/watchdog.h"

#include "base/check.h"

int agree_comm_rank(MPI_Comm comm) {
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    return rank;
}

int agree_comm_size(MPI_Comm comm) {
    int size = 1;
    MPI_CHECK(MPI_Comm_size(comm, &size));
    return size;
}

int agree_all_ok(MPI_Comm comm, int ok) {
    int all_ok = 0;
    WATCH_WAIT(WATCH_ALLREDUCE, comm, -1,
               MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm)));
    return all_ok;
}

int agree_any_bad(MPI_Comm comm, int bad) {
    int any_bad = 0;
    WATCH_WAIT(WATCH_ALLREDUCE, comm, -1,
               MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm)));
    return any_bad;
}

void agree_root_int(MPI_Comm comm, int *value) {
    WATCH_WAIT(WATCH_BCAST, comm, -1, MPI_CHECK(MPI_Bcast(value, 1, MPI_INT, 0, comm)));
}

void agree_root_long(MPI_Comm comm, long long *value) {
    WATCH_WAIT(WATCH_BCAST, comm, -1, MPI_CHECK(MPI_Bcast(value, 1, MPI_LONG_LONG, 0, comm)));
}

void agree_root_doubles(MPI_Comm comm, double *values, int n) {
    WATCH_WAIT(WATCH_BCAST, comm, -1, MPI_CHECK(MPI_Bcast(values, n, MPI_DOUBLE, 0, comm)));
}

void agree_root_text(MPI_Comm comm, char *text, int size) {
    WATCH_WAIT(WATCH_BCAST, comm, -1, MPI_CHECK(MPI_Bcast(text, size, MPI_CHAR, 0, comm)));
}

long long agree_max_long(MPI_Comm comm, long long mine) {
    long long max = 0;
    WATCH_WAIT(WATCH_ALLREDUCE, comm, -1,
               MPI_CHECK(MPI_Allreduce(&mine, &max, 1, MPI_LONG_LONG, MPI_MAX, comm)));
    return max;
}

long long agree_min_long(MPI_Comm comm, long long mine) {
    long long min = 0;
    WATCH_WAIT(WATCH_ALLREDUCE, comm, -1,
               MPI_CHECK(MPI_Allreduce(&mine, &min, 1, MPI_LONG_LONG, MPI_MIN, comm)));
    return min;
}

void agree_max_floats(MPI_Comm comm, float *values, int n) {
    WATCH_WAIT(WATCH_ALLREDUCE, comm, -1,
               MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_FLOAT, MPI_MAX, comm)));
}

void agree_gather_longs(MPI_Comm comm, const long long *mine, int n, long long *all) {
    WATCH_WAIT(WATCH_ALLGATHER, comm, -1,
               MPI_CHECK(MPI_Allgather(mine, n, MPI_LONG_LONG, all, n, MPI_LONG_LONG, comm)));
}

void agree_gather_doubles(MPI_Comm comm, const double *mine, int n, double *all) {
    WATCH_WAIT(WATCH_ALLGATHER, comm, -1,
               MPI_CHECK(MPI_Allgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, comm)));
}

void agree_gather_bytes(MPI_Comm comm, const void *mine, int bytes, void *all) {
    WATCH_WAIT(WATCH_ALLGATHER, comm, -1,
               MPI_CHECK(MPI_Allgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, comm)));
}

void agree_barrier(MPI_Comm comm) {
    WATCH_WAIT(WATCH_BARRIER, comm, -1, MPI_CHECK(MPI_Barrier(comm)));
}

double agree_wtime(void) { return MPI_Wtime(); }

void agree_vote_init(agree_vote *v, MPI_Comm comm) {
    v->req = MPI_REQUEST_NULL;
    v->verdict = 0;
    MPI_CHECK(MPI_Comm_dup(comm, &v->comm));
    watch_comm_name(v->comm, "flush-vote");
}

void agree_vote_start(agree_vote *v, int verdict) {
    v->verdict = verdict;
    MPI_CHECK(MPI_Ibcast(&v->verdict, 1, MPI_INT, 0, v->comm, &v->req));
}

int agree_vote_wait(agree_vote *v, int *verdict) {
    if (v->req == MPI_REQUEST_NULL) return 0;
    /* at every step of a run (the run file's flush vote): the stall watchdog names it */
    WATCH_WAIT(WATCH_BCAST, v->comm, -1, MPI_CHECK(MPI_Wait(&v->req, MPI_STATUS_IGNORE)));
    *verdict = v->verdict;
    return 1;
}

void agree_vote_free(agree_vote *v) {
    if (v->req != MPI_REQUEST_NULL) MPI_CHECK(MPI_Wait(&v->req, MPI_STATUS_IGNORE));
    if (v->comm != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&v->comm));
}
