/* What the kernel benchmarks in tools/ share: a monotonic clock and weights placed as the CPU
 * backend places them (2 MiB-aligned, on transparent huge pages where the kernel allows), so a
 * benchmark streams memory the way a decode step does. */
#pragma once
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* bytes of zeroed memory on huge pages; exits with `who` named when it cannot allocate. */
static inline void *bench_huge_alloc(size_t bytes, const char *who) {
    const size_t align = 2u << 20, rounded = (bytes + align - 1) / align * align;
    void *p = NULL;
    if (posix_memalign(&p, align, rounded)) {
        fprintf(stderr, "%s: cannot allocate %zu bytes\n", who, bytes);
        exit(1);
    }
    (void)madvise(p, rounded, MADV_HUGEPAGE);
    memset(p, 0, rounded);
    return p;
}

/* The norm-wise relative error ||got - want|| / ||want|| of n values, in double. */
static inline double bench_rel_error(const float *got, const float *want, long n) {
    double num = 0.0, den = 0.0;
    for (long i = 0; i < n; i++) {
        const double e = (double)got[i] - (double)want[i];
        num += e * e;
        den += (double)want[i] * (double)want[i];
    }
    return sqrt(num / (den > 0.0 ? den : 1.0));
}
