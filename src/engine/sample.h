/* Token selection from full-vocabulary logits: greedy or temperature/top-k sampling driven by
 * a counter-based generator, so a token depends only on (seed, sequence, position) and not on
 * how the batch was split across ranks or micro-batches. */
#pragma once
#include <stdint.h>

/* A uniform double in [0, 1) that is a pure function of its arguments. */
double sample_uniform(uint64_t seed, long sequence, long position);

/* Temperatures below this sample greedily (docs/jobs.md). As the temperature falls, softmax
 * sampling tends to the argmax, but a tiny one rounds to 0 in float and the division gives
 * NaN (every token came out vocab-1). At 1e-6 a logit gap of 1e-5, a few float ulps at usual
 * logit sizes, already weighs e^-10 against the maximum: what is left is the argmax up to
 * near-ties, so below it the run takes the greedy argmax (first maximum) exactly. */
#define SAMPLE_GREEDY_TEMPERATURE 1e-6f
static inline int sample_is_greedy(float temperature) {
    return !(temperature >= SAMPLE_GREEDY_TEMPERATURE);
}

/* Greedy: first index of the maximum; a NaN beats any number (the first NaN wins), as in the
 * backends' argmax (kernels/backend.h). */
int32_t sample_argmax(const float *logits, int vocab);

/* Softmax(logits / temperature) restricted to the top_k largest (0 = all); scratch holds
 * vocab floats. Returns the token whose cumulative probability first reaches u; a
 * temperature below SAMPLE_GREEDY_TEMPERATURE returns sample_argmax. */
int32_t sample_top_k(const float *logits, int vocab, float temperature, int top_k, double u,
                     float *scratch);
