/* Summary statistics over samples, matching numpy's defaults so reports agree with scripts. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* q-th percentile (q in [0, 100]) of n ascending samples, by linear interpolation between the
 * closest ranks (numpy.percentile's default "linear" method). NAN when n == 0. */
double stats_percentile(const double *sorted, long n, double q);

/* The same of n samples in any order (copied, not modified). */
double stats_percentile_of(const double *values, long n, double q);

/* Fewer samples than this make p90 and p99 no tail: with one sample every percentile is it,
 * with two p90 and p99 interpolate towards the larger. The run table and report warn below it. */
#define STATS_TAIL_MIN_SAMPLES 3

/* Sorts values ascending in place. */
void stats_sort(double *values, long n);

/* Arithmetic mean; NAN when n == 0. */
double stats_mean(const double *values, long n);

#ifdef __cplusplus
}
#endif
