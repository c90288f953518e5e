/* Accuracy against a baseline and the composite score (see score.h). */
#include "metrics/score.h"

#include <math.h>

double score_composite(const score_inputs *base, const score_inputs *run) {
    const double v[6] = {base->latency, base->throughput, base->accuracy,
                         run->latency,  run->throughput,  run->accuracy};
    for (int i = 0; i < 6; i++)
        if (!isfinite(v[i])) return NAN;
    if (!(run->latency > 0) || !(base->throughput > 0) || !(base->accuracy > 0)) return NAN;
    return SCORE_W_LATENCY * base->latency / run->latency +
           SCORE_W_THROUGHPUT * run->throughput / base->throughput +
           SCORE_W_ACCURACY * run->accuracy / base->accuracy;
}

double score_token_agreement(const int32_t *a, const int32_t *b, long rows, long cols,
                             long prompt_len) {
    long same = 0, total = 0;
    for (long r = 0; r < rows; r++)
        for (long c = prompt_len; c < cols; c++) {
            same += a[r * cols + c] == b[r * cols + c];
            total++;
        }
    return total > 0 ? (double)same / (double)total : NAN;
}

/* log(sum(exp(x))) of one row, in double. */
static double log_sum_exp(const float *x, long n) {
    double m = -INFINITY, s = 0;
    for (long i = 0; i < n; i++) m = fmax(m, (double)x[i]);
    for (long i = 0; i < n; i++) s += exp((double)x[i] - m);
    return m + log(s);
}

void score_logit_error(const float *base, const float *run, long rows, long vocab,
                       double *max_rel, double *mean_kl) {
    double max_abs = 0, max_base = 0, kl_sum = 0;
    for (long r = 0; r < rows; r++) {
        const float *b = base + r * vocab, *x = run + r * vocab;
        double lb = log_sum_exp(b, vocab), lx = log_sum_exp(x, vocab), kl = 0;
        for (long i = 0; i < vocab; i++) {
            double d = fabs((double)x[i] - (double)b[i]);
            if (d > max_abs || isnan(d)) max_abs = d;
            max_base = fmax(max_base, fabs((double)b[i]));
            double log_pb = (double)b[i] - lb, log_px = (double)x[i] - lx;
            kl += exp(log_pb) * (log_pb - log_px);
        }
        kl_sum += kl;
    }
    *max_rel = max_base > 0 ? max_abs / max_base : max_abs;
    *mean_kl = rows > 0 ? kl_sum / (double)rows : NAN;
}
