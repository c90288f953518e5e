/* Token selection from full-vocabulary logits: greedy or temperature/top-k sampling driven by
 * a counter-based generator, so a token depends only on (seed, sequence, position) and not on
 * how the batch was split across ranks or micro-batches. */
#pragma once
#include <stdint.h>

/* A uniform double in [0, 1) that is a pure function of its arguments. */
double sample_uniform(uint64_t seed, long sequence, long position);

/* Greedy: first index of the maximum. */
int32_t sample_argmax(const float *logits, int vocab);

/* Softmax(logits / temperature) restricted to the top_k largest (0 = all); scratch holds
 * vocab floats. Returns the token whose cumulative probability first reaches u. */
int32_t sample_top_k(const float *logits, int vocab, float temperature, int top_k, double u,
                     float *scratch);
