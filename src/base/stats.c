/* Summary statistics over samples, matching numpy's defaults (see stats.h). */
#include "base/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"

double stats_percentile(const double *sorted, long n, double q) {
    if (n <= 0) return NAN;
    if (q <= 0) return sorted[0];
    if (q >= 100) return sorted[n - 1];
    double pos = q / 100.0 * (double)(n - 1);
    long lo = (long)floor(pos);
    long hi = lo + 1 < n ? lo + 1 : lo;
    double frac = pos - (double)lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void stats_sort(double *values, long n) {
    if (n > 1) qsort(values, (size_t)n, sizeof(double), compare_double);
}

double stats_percentile_of(const double *values, long n, double q) {
    if (n <= 0) return NAN;
    double *sorted = xmalloc((size_t)n * sizeof(double));
    memcpy(sorted, values, (size_t)n * sizeof(double));
    stats_sort(sorted, n);
    double v = stats_percentile(sorted, n, q);
    free(sorted);
    return v;
}

double stats_mean(const double *values, long n) {
    if (n <= 0) return NAN;
    double sum = 0;
    for (long i = 0; i < n; i++) sum += values[i];
    return sum / (double)n;
}
