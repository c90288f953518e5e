/* The agreements of parallel/agree.c under mpirun (1, 2 and 3 ranks): each with inputs that
 * differ by rank, so that the right rank's value (rank 0's, the largest, the smallest, every
 * rank's in rank order) is the only one that passes. Also on a communicator other than the
 * world (the ranks in reverse order), so rank 0 of comm is not world rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "parallel/agree.h"

#include "../expect.h"

static int failures;

static void check_verdicts(MPI_Comm c, int rank, int size, const char *name) {
    EXPECT(agree_all_ok(c, 1) == 1, "%s: all ok", name);
    /* only the last rank says no: the AND sees it whichever rank it is */
    EXPECT(agree_all_ok(c, rank != size - 1) == 0, "%s: the last rank's no", name);
    EXPECT(agree_any_bad(c, 0) == 0, "%s: none bad", name);
    EXPECT(agree_any_bad(c, rank == size - 1) == 1, "%s: the last rank bad", name);
    /* a bad that is not 1 (a status code) stays non-zero */
    EXPECT(agree_any_bad(c, rank == 0 ? 2 : 0) == 2, "%s: a status code of rank 0", name);
}

static void check_root(MPI_Comm c, int rank, const char *name) {
    int i = 10 + rank;
    agree_root_int(c, &i);
    EXPECT(i == 10, "%s: root int %d", name, i);
    long long l = ((long long)1 << 40) + rank;
    agree_root_long(c, &l);
    EXPECT(l == (long long)1 << 40, "%s: root long %lld", name, l);
    double d[3] = {0.5 + rank, -1.0 * rank, 1e300};
    agree_root_doubles(c, d, 3);
    EXPECT(d[0] == 0.5 && d[1] == 0 && d[2] == 1e300, "%s: root doubles %g %g %g", name, d[0], d[1],
           d[2]);
    char text[2][16];
    snprintf(text[0], sizeof text[0], "rank %d", rank);
    snprintf(text[1], sizeof text[1], "second %d", rank);
    agree_root_text(c, &text[0][0], (int)sizeof text);
    EXPECT(!strcmp(text[0], "rank 0") && !strcmp(text[1], "second 0"), "%s: root text '%s' '%s'",
           name, text[0], text[1]);
}

static void check_extremes(MPI_Comm c, int rank, int size, const char *name) {
    EXPECT(agree_max_long(c, 100 - 7LL * rank) == 100, "%s: max long", name);
    EXPECT(agree_max_long(c, ((long long)1 << 50) * (rank + 1)) == ((long long)1 << 50) * size,
           "%s: max long beyond int", name);
    EXPECT(agree_min_long(c, 100 - 7LL * rank) == 100 - 7LL * (size - 1), "%s: min long", name);
    EXPECT(agree_min_long(c, rank == size - 1 ? -5 : 3) == -5, "%s: min long negative", name);
    /* element 0 is largest on the last rank, element 1 on rank 0, element 2 ties */
    float v[3] = {(float)rank, 1.0f - (float)rank, 2.5f};
    agree_max_floats(c, v, 3);
    EXPECT(v[0] == (float)(size - 1) && v[1] == 1.0f && v[2] == 2.5f, "%s: max floats %g %g %g",
           name, v[0], v[1], v[2]);
}

static void check_gathers(MPI_Comm c, int rank, int size, const char *name) {
    long long lm[2] = {rank, 1000LL * rank}, la[6];
    agree_gather_longs(c, lm, 2, la);
    double dm = 0.25 * rank, da[3];
    agree_gather_doubles(c, &dm, 1, da);
    struct {
        int rank;
        char tag[12];
    } bm = {rank, ""}, ba[3];
    snprintf(bm.tag, sizeof bm.tag, "r%d", rank);
    agree_gather_bytes(c, &bm, (int)sizeof bm, ba);
    for (int r = 0; r < size; r++) {
        char want[12];
        snprintf(want, sizeof want, "r%d", r);
        EXPECT(la[2 * r] == r && la[2 * r + 1] == 1000LL * r, "%s: gathered longs of rank %d", name,
               r);
        EXPECT(da[r] == 0.25 * r, "%s: gathered double of rank %d: %g", name, r, da[r]);
        EXPECT(ba[r].rank == r && !strcmp(ba[r].tag, want), "%s: gathered bytes of rank %d", name,
               r);
    }
}

/* Three rounds of rank 0's verdicts in flight, each read at the next call; rank 0's verdict
 * wins over what the others pass. */
static void check_vote(MPI_Comm c, int rank, const char *name) {
    agree_vote none = AGREE_VOTE_NONE;
    agree_vote_free(&none); /* never initialised: nothing to do */
    agree_vote v;
    agree_vote_init(&v, c);
    int got = -1;
    EXPECT(agree_vote_wait(&v, &got) == 0 && got == -1, "%s: no verdict in flight", name);
    for (int round = 0; round < 3; round++) {
        agree_vote_start(&v, rank == 0 ? 7 + round : -100);
        /* a collective on comm meanwhile does not match the vote's broadcast */
        int i = rank;
        agree_root_int(c, &i);
        EXPECT(i == 0, "%s: a broadcast while a vote is in flight", name);
        got = -1;
        EXPECT(agree_vote_wait(&v, &got) == 1 && got == 7 + round, "%s: round %d verdict %d", name,
               round, got);
    }
    agree_vote_start(&v, rank == 0 ? 1 : 0); /* left in flight: free waits for it */
    agree_vote_free(&v);
}

static void check_all(MPI_Comm c, const char *name) {
    const int rank = agree_comm_rank(c), size = agree_comm_size(c);
    check_verdicts(c, rank, size, name);
    check_root(c, rank, name);
    check_extremes(c, rank, size, name);
    check_gathers(c, rank, size, name);
    check_vote(c, rank, name);
    agree_barrier(c);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const int rank = agree_comm_rank(MPI_COMM_WORLD), size = agree_comm_size(MPI_COMM_WORLD);
    EXPECT(size <= 3, "the test's buffers hold 3 ranks, not %d", size);
    const double t0 = agree_wtime();
    check_all(MPI_COMM_WORLD, "world");
    MPI_Comm reversed;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &reversed);
    EXPECT(agree_comm_rank(reversed) == size - 1 - rank, "reversed rank %d",
           agree_comm_rank(reversed));
    check_all(reversed, "reversed");
    MPI_Comm_free(&reversed);
    EXPECT(agree_wtime() >= t0, "the wall clock went back");
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_agree: %d failure(s) over %d ranks\n", all, size);
    MPI_Finalize();
    return all ? 1 : 0;
}
