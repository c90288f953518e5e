/* The host sampler (src/engine/sample.c): temperatures below SAMPLE_GREEDY_TEMPERATURE pick
 * exactly the greedy token, ties included, where a float temperature of 1e-300 (0) used to
 * pick vocab-1; above it sampling still samples; the argmax follows the backends' NaN order. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine/sample.h"

enum { V = 97, FIRST_MAX = 10, SECOND_MAX = 60 };

/* Spread logits with the maximum reached twice: greedy takes the first. */
static void tied_logits(float *logits) {
    for (int i = 0; i < V; i++)
        logits[i] = (float)((i * 37) % V) / V * 4.0f - 2.0f;
    logits[FIRST_MAX] = logits[SECOND_MAX] = 3.0f;
}

static void test_tiny_temperature_is_greedy(void **state) {
    (void)state;
    float logits[V], scratch[V];
    tied_logits(logits);
    assert_int_equal(sample_argmax(logits, V), FIRST_MAX);
    /* 1e-300 reaches the engine as a float 0; the others are tiny but representable */
    const float temps[] = {(float)1e-300, 1e-30f, 1e-7f, 0.99f * SAMPLE_GREEDY_TEMPERATURE};
    const int top_ks[] = {0, 5};
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++)
        for (size_t k = 0; k < 2; k++)
            for (int i = 0; i < 100; i++) {
                double u = i / 100.0;
                assert_int_equal(sample_top_k(logits, V, temps[t], top_ks[k], u, scratch),
                                 FIRST_MAX);
            }
}

/* At the threshold and above, sampling is still softmax sampling: the tie splits the mass. */
static void test_threshold_still_samples(void **state) {
    (void)state;
    float logits[V], scratch[V];
    tied_logits(logits);
    assert_false(sample_is_greedy(SAMPLE_GREEDY_TEMPERATURE));
    assert_int_equal(sample_top_k(logits, V, SAMPLE_GREEDY_TEMPERATURE, 0, 0.25, scratch),
                     FIRST_MAX);
    assert_int_equal(sample_top_k(logits, V, SAMPLE_GREEDY_TEMPERATURE, 0, 0.75, scratch),
                     SECOND_MAX);
    int others = 0;
    for (int i = 0; i < 100; i++) {
        int32_t tok = sample_top_k(logits, V, 1.0f, 0, i / 100.0, scratch);
        others += tok != FIRST_MAX && tok != SECOND_MAX;
    }
    assert_true(others > 10);
}

/* NaN beats every number and the first NaN wins, as in the backends' argmax. */
static void test_argmax_nan_order(void **state) {
    (void)state;
    float logits[V];
    tied_logits(logits);
    logits[30] = NAN;
    logits[80] = NAN;
    assert_int_equal(sample_argmax(logits, V), 30);
    logits[0] = NAN;
    assert_int_equal(sample_argmax(logits, V), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_temperature_is_greedy),
        cmocka_unit_test(test_threshold_still_samples),
        cmocka_unit_test(test_argmax_nan_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
