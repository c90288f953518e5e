/* EXPECT for the tests that are plain programs run under mpirun rather than cmocka. A failure
 * prints "[rank R] file:line: expected COND: message". By default it is counted in the test's
 * own `static int failures` and the test goes on; a test that defines EXPECT_ABORTS before
 * including this stops every rank at the first failure instead. */
#pragma once
#include <mpi.h>
#include <stdio.h>

#include "base/check.h"

#ifdef EXPECT_ABORTS
#define EXPECT_FAILED() MPI_Abort(MPI_COMM_WORLD, 1)
#else
#define EXPECT_FAILED() failures++
#endif

#define EXPECT(cond, ...)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "[rank %d] %s:%d: expected %s: ", tripar_world_rank(), __FILE__,   \
                    __LINE__, #cond);                                                          \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            EXPECT_FAILED();                                                                   \
        }                                                                                      \
    } while (0)
