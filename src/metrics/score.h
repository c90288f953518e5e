/* Accuracy of a run against a baseline run and the composite benchmark score
 * (docs/benchmarks.md, "Accuracy and the composite score"). Pure functions of arrays. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the composite score weighs: latency (seconds, lower is better), throughput
 * (tokens/s) and accuracy (token agreement with the baseline, 1 for the baseline itself). */
typedef struct {
    double latency, throughput, accuracy;
} score_inputs;

#define SCORE_W_LATENCY 0.4
#define SCORE_W_THROUGHPUT 0.3
#define SCORE_W_ACCURACY 0.3

/* score = 0.4 * base.latency / run.latency + 0.3 * run.throughput / base.throughput
 *       + 0.3 * run.accuracy / base.accuracy, so the baseline scores exactly 1.
 * NAN when a value it divides by is not positive or any input is not finite. */
double score_composite(const score_inputs *base, const score_inputs *run);

/* Fraction of generated tokens (columns prompt_len..cols-1 of rows x cols) equal in a and b;
 * NAN when there are none. */
double score_token_agreement(const int32_t *a, const int32_t *b, long rows, long cols,
                             long prompt_len);

/* Logits of rows positions (rows, vocab), baseline first: max_rel = max|run - base| / max|base|
 * (as tripar diff), mean_kl = mean over rows of KL(softmax(base) || softmax(run)) in nats,
 * computed in double with log-sum-exp. */
void score_logit_error(const float *base, const float *run, long rows, long vocab,
                       double *max_rel, double *mean_kl);

#ifdef __cplusplus
}
#endif
